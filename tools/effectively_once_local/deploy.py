"""Deploy the CDK app with the real CDK CLI into the local AWS (``stack.py`` reads back what was deployed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .server import ACCOUNT, REGION, aws_env


class DeployError(RuntimeError):
    """``cdk bootstrap`` or ``cdk deploy`` failed; the message is one line, the full output is in the log."""


def cdk_command(app_dir: Path) -> list[str]:
    """The CDK CLI of the app's project: ``node_modules/.bin/cdk`` in ``app_dir`` or a folder above it (an app in
    a subfolder of its repository, like ``examples/orders``), else ``cdk`` on the PATH."""
    for folder in (app_dir, *app_dir.resolve().parents):
        local = folder / "node_modules" / ".bin" / "cdk"
        if local.exists():
            return [str(local)]
    if shutil.which("cdk"):
        return ["cdk"]
    raise DeployError(f"the CDK CLI is not installed in {app_dir}/node_modules (run `npm ci` there, or `make setup`)")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path, what: str) -> None:
    with open(log_path, "ab") as log:
        log.write(f"\n$ {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        reason = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith(("❌", "‣"))), "")
        reason = reason or next((ln.strip() for ln in reversed(lines) if ln.strip()), "no output")
        raise DeployError(f"{what} failed (exit {proc.returncode}): {reason[:300]} — full output in {log_path}")


def deploy(endpoint: str, app_dir: Path, stack: str | Sequence[str], context: dict[str, str], log_path: Path) -> None:
    """``cdk bootstrap`` then ``cdk deploy STACK...`` against ``endpoint``, with ``-c key=value`` context values
    (several stacks: one synth, one command).

    :raises DeployError: either command failed.
    """
    stacks = [stack] if isinstance(stack, str) else list(stack)
    env = {**os.environ, **aws_env(endpoint), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    # cdk.json runs `python3 app.py`: use this interpreter's environment (the project's .venv).
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cdk = cdk_command(app_dir)
    ctx = [arg for key, value in context.items() for arg in ("-c", f"{key}={value}")]
    # Synthesize into the run's own folder: the app's cdk.out stays free for a `cdk synth` at the same time. The CLI
    # runs in app_dir and reads a relative --output from there: pass it absolute, where the caller looks for it.
    ctx += ["--output", str((log_path.parent / "cdk.out").resolve())]
    _run([*cdk, "bootstrap", f"aws://{ACCOUNT}/{REGION}", *ctx], app_dir, env, log_path, "cdk bootstrap")
    _run(
        [*cdk, "deploy", *stacks, "--require-approval", "never", "--progress", "events", *ctx],
        app_dir,
        env,
        log_path,
        f"cdk deploy {' '.join(stacks)}",
    )


def aws_session() -> Any:
    """A boto3 session on the standard credential chain, for the commands that run against a real account. The
    region comes from ``AWS_DEFAULT_REGION``, else ``AWS_REGION`` (what the CDK CLI also reads; botocore alone
    reads only the first), else the profile."""
    import boto3

    region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or None
    return boto3.session.Session(region_name=region)
