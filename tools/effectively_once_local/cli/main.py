"""``python -m effectively_once_local``: the local AWS demo and its tools. ``--help`` per subcommand.

Every argument is checked before anything starts (no local AWS, no deploy, no AWS call): numbers against their
ranges, the payments file read and parsed whole (and it must hold at least one valid payment by the handler's own
rules), folders that must be folders, output paths that must not be, and no option another one would silently
ignore. Every expected error ends in one line on stderr and exit code 2, never a traceback; queues not drained within
the limit end in one line and exit code 4 (``base/exit_codes.py``). Ctrl-C at any step (the checks and the CDK
CLI's commands included), and a SIGTERM once the run has started, end in ``interrupted`` and exit code 130.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..any_stack.inert_faults import InertFlagError
from ..aws.deploy import DeployError
from ..aws.readback import DlqReadError
from ..aws.server import LocalAwsError
from ..base.exit_codes import EXIT_NOT_DRAINED, EXIT_USAGE
from ..engine.drain_limit import DrainTimeout
from ..payments.payments_input import PaymentsFileError
from ..proof.stores import EffectStoreError
from ..redrive.dlq_redrive import RedriveError
from ..traffic.chaos_input import InputFileError
from ..traffic.producer import SendError
from . import chaos_command, demo_command, redrive_command, remote_commands, sample_command
from .arguments import Parser, one_line
from .chaos_command import options as chaos_options
from .demo_command import options as demo_options

__all__ = ["chaos_options", "demo_options", "main"]

# Errors that end in one line on stderr and exit code 2, never a traceback. OSError: a file the run writes
# (report, run folder, sample) that cannot be written after all, e.g. a full disk.
_ONE_LINE_ERRORS: tuple[type[Exception], ...] = (
    PaymentsFileError,
    InputFileError,
    LocalAwsError,
    DeployError,
    SendError,
    DlqReadError,
    BotoCoreError,
    ClientError,
    OSError,
    RedriveError,
    InertFlagError,
    EffectStoreError,
)

#: One module per subcommand (``produce`` and ``report`` share one), in ``--help``'s order; each has ``NAMES`` (its
#: subcommands), ``add(sub)`` (their parsers), ``check(parser, args)`` (the checks across arguments, before anything
#: starts) and ``run(args)`` (the exit code).
_COMMANDS: tuple[ModuleType, ...] = (demo_command, chaos_command, sample_command, remote_commands, redrive_command)
_BY_NAME: dict[str, ModuleType] = {name: module for module in _COMMANDS for name in module.NAMES}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _parser() -> tuple[Parser, dict[str, Parser]]:
    """The parser and its subcommands' parsers (checks across arguments report through the subcommand's)."""
    parser = Parser(prog="python -m effectively_once_local", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in _COMMANDS:
        module.add(sub)
    return parser, {name: p for name, p in sub.choices.items()}


def _check(parser: Parser, args: argparse.Namespace) -> None:
    check: Callable[[Parser, argparse.Namespace], None] = _BY_NAME[args.command].check
    check(parser, args)


def _run(args: argparse.Namespace) -> int:
    run: Callable[[argparse.Namespace], int] = _BY_NAME[args.command].run
    return run(args)


def main(argv: list[str] | None = None) -> int:
    parser, commands = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the subcommand's parser: its usage and its --help are the ones that list the flags
        commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        _check(commands[args.command], args)  # runs the app's CDK CLI (`--version`): Ctrl-C may come there too
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    # A SIGTERM (a CI timeout, `kill`) stops the run like Ctrl-C does (the demo stops its local AWS).
    previous: Any = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args)
    except DrainTimeout as exc:  # a LocalAwsError with its own code: the run ran out of time, it did not fail
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_NOT_DRAINED
    except _ONE_LINE_ERRORS as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        stopped = args.command in ("demo", "chaos")
        print("interrupted: local AWS stopped" if stopped else "interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
