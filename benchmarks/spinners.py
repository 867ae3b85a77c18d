"""``make soak SOAK_LOAD=N``: run a command with N busy spinners beside it, to reproduce a loaded machine cheaply.

``python benchmarks/spinners.py --count N -- COMMAND [ARG ...]`` starts N spinners (each a fresh Python process
spinning in a pure-CPU loop, at the wrapper's own priority: nice 0 unless the wrapper itself was niced; no I/O, about
10 MB of memory each), runs ``COMMAND`` with the wrapper's stdin, stdout, stderr and environment, stops the
spinners when it ends and exits with its exit code (``128 + signal`` when a signal killed it, 127 when it could not
be started). ``--count 0`` (the default) starts none: the command runs as it would alone. On stderr, one line names
the spinners: ``spinners: N busy spinners at nice K beside the command (pids P1, P2)``.

No spinner outlives the run:

- the wrapper kills them (SIGKILL, then reaps them) in a ``finally``, whatever the command's exit code or an error;
- SIGINT (Ctrl-C: the terminal sends it to the command too) and SIGTERM stop the spinners at once; SIGTERM, which
  nothing else delivers to the command, is also passed on to it; the wrapper then waits for the command to end (a
  signal that comes while the spinners start stops them, and the command is not started: exit ``128 + signal``);
- the spinners ignore SIGINT (no traceback of theirs on Ctrl-C) and each exits by itself within about 0.1 s of CPU
  once its parent is gone (its parent pid changes), so even a wrapper killed by SIGKILL leaves none behind.

Errors (exit 2, before anything starts): a count that is not a non-negative integer (``SOAK_LOAD=two``, ``-1``,
empty), with a message naming ``SOAK_LOAD`` and the value; no command after ``--``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType

#: A spinner's program (``python -c SPIN PARENT_PID``): Ctrl-C ignored (the wrapper stops it), a busy loop of pure
#: bytecode that checks every million turns that its parent is still the wrapper, and ends when it is not.
SPIN = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


def spinner_count(value: str) -> int:
    """``value`` (the ``--count`` argument, ``make soak``'s ``SOAK_LOAD``) as a number of spinners, 0 or more.
    Raises ``argparse.ArgumentTypeError`` (argparse exits 2 with it) naming ``SOAK_LOAD`` and the value when it is
    not a non-negative integer."""
    try:
        count = int(value.strip())
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"SOAK_LOAD must be a non-negative integer (spinners), got {value!r}")
    return count


def start_spinners(count: int, spinners: list[subprocess.Popen[bytes]]) -> None:
    """Append ``count`` spinner processes (:data:`SPIN`), children of this process with stdin and stdout on
    ``/dev/null``, to ``spinners`` one by one (so a signal handler sees each as soon as it runs); their niceness is
    this process's (not changed). Raises ``OSError`` when one cannot start (those started stay in ``spinners``)."""
    for _ in range(count):
        spinners.append(
            subprocess.Popen(
                [sys.executable, "-c", SPIN, str(os.getpid())], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
            )
        )


def kill_spinners(spinners: Sequence[subprocess.Popen[bytes]]) -> None:
    """Send SIGKILL to every spinner still running, without waiting: safe in a signal handler (``Popen.wait``'s lock
    may be held by the code the handler interrupted)."""
    for spinner in spinners:
        if spinner.poll() is None:
            spinner.kill()


def stop_spinners(spinners: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill (SIGKILL) every spinner still running, then reap them all; safe to call more than once."""
    kill_spinners(spinners)
    for spinner in spinners:
        spinner.wait()


def exit_code(returncode: int) -> int:
    """A child's ``returncode`` as a shell reports it: as is when it exited, ``128 + N`` when signal N killed it."""
    return 128 - returncode if returncode < 0 else returncode


def run_beside(command: Sequence[str], count: int) -> int:
    """Run ``command`` with ``count`` spinners beside it (see the module's docstring) and return its exit code
    (:func:`exit_code`; 127 when it cannot be started; ``128 + N`` without starting it when signal N came while the
    spinners started). The spinners are stopped before this returns or raises."""
    spinners: list[subprocess.Popen[bytes]] = []
    received: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        kill_spinners(spinners)
        if signum == signal.SIGTERM and child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        start_spinners(count, spinners)
        if received:
            return 128 + received[0]
        if spinners:
            pids = ", ".join(str(spinner.pid) for spinner in spinners)
            nice = os.getpriority(os.PRIO_PROCESS, 0)
            print(f"spinners: {count} busy spinners at nice {nice} beside the command (pids {pids})", file=sys.stderr)
        try:
            child = subprocess.Popen(list(command))
        except OSError as error:
            print(f"spinners: cannot run {command[0]!r}: {error}", file=sys.stderr)
            return 127
        return exit_code(child.wait())
    finally:
        stop_spinners(spinners)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``--count N`` (default 0), then ``--`` and the command. Returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    own, command = (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, [])
    parser = argparse.ArgumentParser(
        description="run a command with N busy spinners (nice 0, pure CPU) beside it; exit with its exit code",
        usage="%(prog)s [--count N] -- COMMAND [ARG ...]",
    )
    parser.add_argument(
        "--count", type=spinner_count, default=0, help="spinners to start (make soak's SOAK_LOAD; default: 0)"
    )
    parsed = parser.parse_args(own)
    if not command:
        parser.error("no command: give it after `--`")
    return run_beside(command, parsed.count)


if __name__ == "__main__":
    raise SystemExit(main())
