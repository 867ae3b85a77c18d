"""Ctrl-C or SIGTERM during `make demo` stops the local AWS: no server left listening, exit code 130."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_the_local_aws(tmp_path: Path, sig: signal.Signals) -> None:
    # A terminal's Ctrl-C is SIGINT to the whole foreground process group: start the demo in its own group.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-m",
            "effectively_once_local",
            "demo",
            "--quiet",
            "--run-dir",
            str(tmp_path / "run"),
            "--report",
            str(tmp_path / "report.json"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    match = re.search(r"local AWS \(moto\) on http://localhost:(\d+)", first)
    assert match, first
    port = int(match.group(1))
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    time.sleep(3)  # the deploy is under way

    # Ctrl-C reaches the whole group; a SIGTERM (a CI timeout, `kill PID`) only the demo process.
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)
    rest = proc.communicate(timeout=60)[0]

    assert proc.returncode == 130, first + rest
    assert "interrupted: local AWS stopped" in rest
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
