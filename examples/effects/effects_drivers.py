"""The effects function's drivers layer: psycopg 3 for the function's Python and architecture (docs/effects.md,
"Shipping a driver").

On Lambda the function has the standard library and boto3 (the runtime), ``effectively_once_runtime`` (its
``RuntimeLayer``) and Powertools (the public layer), and nothing else: ``import psycopg`` fails there unless the
function ships it. :func:`stage_drivers` runs ``pip install --target <folder>/python`` of ``drivers.txt`` with
``--only-binary=:all:`` for the function's platform (``manylinux`` wheels of CPython ``3.<minor>`` for x86_64 or
arm64), whatever the host is, into a temp folder named by the digest of the inputs: the same inputs give the same
folder (reused once complete) and the same asset hash. The layer is that folder (``python/`` is on ``sys.path`` on
Lambda). Docker is not needed: the wheels are manylinux wheels, not built here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

REQUIREMENTS = Path(__file__).resolve().parent / "drivers.txt"
#: The wheel platforms pip may pick for each architecture (Lambda's Amazon Linux 2023 has glibc 2.34).
PLATFORMS = {
    "x86_64": ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"),
    "arm64": ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"),
}
_DONE = ".staged"


def stage_drivers(
    runtime: lambda_.Runtime, architecture: lambda_.Architecture, requirements: Path = REQUIREMENTS
) -> Path:
    """A folder holding ``python/<packages>``: ``requirements`` installed for ``runtime`` and ``architecture``.

    :raises subprocess.CalledProcessError: pip failed (no wheel for that platform, no package index).
    """
    version = runtime.name.removeprefix("python")
    platforms = PLATFORMS[architecture.name]
    digest = hashlib.sha256(
        "\n".join([requirements.read_text(encoding="utf-8"), version, *platforms]).encode()
    ).hexdigest()
    root = Path(tempfile.gettempdir()) / f"effectively-once-effects-drivers-{digest[:32]}"
    if (root / _DONE).is_file():
        return root
    staging = Path(tempfile.mkdtemp(prefix="effectively-once-effects-drivers-"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    command += ["--only-binary=:all:", "--implementation", "cp", "--python-version", version]
    for platform in platforms:
        command += ["--platform", platform]
    subprocess.run([*command, "--target", str(staging / "python"), "-r", str(requirements)], check=True)
    for cache in (staging / "python").rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    (staging / _DONE).write_text(digest)
    try:
        if (root / _DONE).is_file():  # another process staged it meanwhile
            shutil.rmtree(staging)
            return root
        if root.exists():
            shutil.rmtree(root)
        os.replace(staging, root)
    except OSError:
        return staging
    return root
