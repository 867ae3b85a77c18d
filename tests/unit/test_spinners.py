"""``make soak SOAK_LOAD=N`` (issue 31): benchmarks/spinners.py runs the demo with N busy spinners beside it, exits
with the demo's exit code, and leaves no spinner behind: not after the command ends, not after Ctrl-C, not even after
the wrapper itself is killed. The spinners are found through ``/proc`` (Linux), by their program."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import REPO, load_benchmark

spinners = load_benchmark("spinners")
SCRIPT = REPO / "benchmarks" / "spinners.py"
#: A command that prints, as JSON, the pid, niceness and whether it runs the spinner's program of every other child
#: of its parent (the wrapper), with the parent's niceness, then exits 3.
SEE_SIBLINGS = """
import json, os, sys
from pathlib import Path
parent = os.getppid()
def stat(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[16])
siblings = []
for entry in Path("/proc").iterdir():
    if entry.name.isdigit() and int(entry.name) != os.getpid():
        try:
            ppid, nice = stat(entry.name)
            spins = b"getppid" in (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if ppid == parent:
            siblings.append([int(entry.name), nice, spins])
print(json.dumps({"parent_nice": stat(parent)[1], "siblings": sorted(siblings)}))
sys.exit(3)
"""
SLEEP = "import time; print('ready', flush=True); time.sleep(30)"


def _spinning(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process running the spinner's program."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z" and b"getppid" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _announced(stderr: str) -> list[int]:
    (line,) = [line for line in stderr.splitlines() if line.startswith("spinners: ")]
    return [int(pid) for pid in re.findall(r"\d+", line.split("(pids", 1)[1])]


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_spinning(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def session() -> Iterator[list[subprocess.Popen[str]]]:
    """Wrappers started in a session of their own; whatever of that session is left is killed afterwards."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def _start(session: list[subprocess.Popen[str]], count: int, code: str) -> tuple[subprocess.Popen[str], list[int]]:
    """The wrapper running ``python -c code`` beside ``count`` spinners, once the command printed its first line; and
    the spinners' pids it announced."""
    command = [sys.executable, str(SCRIPT), f"--count={count}", "--", sys.executable, "-c", code]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    session.append(process)
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline() == "ready\n"
    return process, _announced(process.stderr.readline())


def test_the_command_runs_beside_the_spinners_and_its_exit_code_is_the_wrappers() -> None:
    command = [sys.executable, str(SCRIPT), "--count=2", "--", sys.executable, "-c", SEE_SIBLINGS]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)

    assert done.returncode == 3, done.stderr
    seen = json.loads(done.stdout)
    pids = _announced(done.stderr)
    assert [[pid, seen["parent_nice"], True] for pid in pids] == seen["siblings"]
    assert len(pids) == 2 and f"at nice {seen['parent_nice']} " in done.stderr
    assert not any(_spinning(pid) for pid in pids)  # reaped before the wrapper exited


def test_count_0_starts_no_spinner() -> None:
    command = [sys.executable, str(SCRIPT), "--", sys.executable, "-c", SEE_SIBLINGS]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)

    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["siblings"] == []
    assert "spinners:" not in done.stderr


@pytest.mark.parametrize("value", ["two", "-1", "", "1.5"])
def test_a_count_that_is_not_a_non_negative_integer_exits_2_naming_soak_load(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"

    with pytest.raises(SystemExit) as exited:
        spinners.main([f"--count={value}", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"])

    assert exited.value.code == 2
    assert f"SOAK_LOAD must be a non-negative integer (spinners), got {value!r}" in capsys.readouterr().err
    assert not marker.exists()


def test_ctrl_c_stops_the_spinners_and_the_exit_code_is_the_commands(session: list[subprocess.Popen[str]]) -> None:
    wrapper, pids = _start(session, 2, SLEEP)
    assert len(pids) == 2 and all(_spinning(pid) for pid in pids)

    os.killpg(wrapper.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the whole foreground group

    # the command (Python, KeyboardInterrupt unhandled) ends by SIGINT, which the wrapper reports as a shell does
    assert wrapper.wait(timeout=20) == 128 + signal.SIGINT
    assert not any(_spinning(pid) for pid in pids)


def test_sigterm_is_passed_on_to_the_command(session: list[subprocess.Popen[str]]) -> None:
    wrapper, pids = _start(session, 1, SLEEP)

    wrapper.terminate()

    assert wrapper.wait(timeout=20) == 128 + signal.SIGTERM
    assert not any(_spinning(pid) for pid in pids)


def test_the_spinners_end_by_themselves_when_the_wrapper_is_killed(session: list[subprocess.Popen[str]]) -> None:
    wrapper, pids = _start(session, 2, SLEEP)

    wrapper.kill()  # no finally runs: the spinners see their parent gone

    assert wrapper.wait(timeout=20) == -signal.SIGKILL
    assert _gone_within(pids, 10), [pid for pid in pids if _spinning(pid)]
