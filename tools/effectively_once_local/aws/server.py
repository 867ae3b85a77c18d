"""A local AWS: moto's server on loopback, started and stopped by this process.

Bound to 127.0.0.1 only (never 0.0.0.0) on a free port, and addressed as ``http://localhost:PORT``: moto reads a
CloudFormation ``TemplateURL`` host of ``127.0.0.1`` as a bucket named "127" (shared/LOCAL_AWS.md).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from .moto_patches import MotoVersionError, check_moto_version

ACCOUNT = "123456789012"
REGION = "us-east-1"
LOOPBACK = "127.0.0.1"


class LocalAwsError(RuntimeError):
    """The local AWS could not be started or reached; the message is one line for the terminal."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def aws_env(endpoint: str) -> dict[str, str]:
    """Environment that points SDKs and the CDK CLI at the local AWS with dummy credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "CDK_DEFAULT_ACCOUNT": ACCOUNT,
        "CDK_DEFAULT_REGION": REGION,
        # moto answers every account id; the CDK CLI asks STS which one it is.
        "MOTO_ACCOUNT_ID": ACCOUNT,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


class MotoServer:
    """``with MotoServer() as aws: aws.endpoint`` — a moto server subprocess on loopback, killed on exit."""

    def __init__(self, port: int | None = None, log_path: Path | None = None, start_timeout: float = 30.0) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://localhost:{self.port}"
        self.log_path = log_path
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None

    def start(self) -> MotoServer:
        """Start the server and wait until it answers.

        :raises LocalAwsError: the installed moto is not the one the patches are written for, or the server exited
            or did not answer within ``start_timeout``.
        """
        try:
            check_moto_version()
        except MotoVersionError as exc:
            raise LocalAwsError(str(exc)) from None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")
        env = {**os.environ, "MOTO_ACCOUNT_ID": ACCOUNT}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "effectively_once_local.aws.moto_patches", "-H", LOOPBACK, "-p", str(self.port)],
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # Ctrl-C reaches us; we stop the server ourselves, every time
        )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise LocalAwsError(f"moto server exited with code {self._proc.returncode} on port {self.port}")
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{self.port}/moto-api/data.json", timeout=1):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise LocalAwsError(f"moto server did not answer on {self.endpoint} within {self.start_timeout:.0f}s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def local_session(endpoint: str) -> Any:
    """A boto3 session with the local AWS's dummy credentials and region (clients still need ``endpoint``, e.g.
    through ``AWS_ENDPOINT_URL``)."""
    import boto3

    env = aws_env(endpoint)
    return boto3.session.Session(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=env["AWS_SESSION_TOKEN"],
        region_name=env["AWS_REGION"],
    )


@contextmanager
def local_endpoint(endpoint: str) -> Iterator[None]:
    """``AWS_ENDPOINT_URL=endpoint`` in this process while the block runs (every client made in it talks to the
    local AWS only), then the previous value again: a run called from a test leaves the environment as it was."""
    previous = os.environ.get("AWS_ENDPOINT_URL")
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = previous
