"""``demo``: the payments sample's main job on a local AWS (``payments.demo``): its arguments, their checks and
its options object."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from effectively_once.limits import (
    LAMBDA_MAX_TIMEOUT_SECONDS,
    LAMBDA_MIN_TIMEOUT_SECONDS,
    SQS_MAX_MAX_RECEIVE_COUNT,
    SQS_MIN_MAX_RECEIVE_COUNT,
)

from ..chaos.fault_model import ChaosConfig
from ..payments.backlog import DEFAULT_BACKLOG
from . import fault_flags
from .arguments import (
    Given,
    Parser,
    add_run_outputs,
    check_app_dir,
    check_payments_run,
    default_handler_root,
    folder,
    handler_root_help,
    integer,
    stack_name,
)

if TYPE_CHECKING:
    from ..payments.demo import DemoOptions

#: The subcommands this module adds.
NAMES = ("demo",)


def add(sub: argparse._SubParsersAction[Any]) -> None:
    """``demo``: the payments sample's main job on a local AWS."""
    demo = sub.add_parser("demo", help="deploy to a local AWS (moto), send payments with chaos, report")
    demo.add_argument("--payments", type=Path, default=Path("samples/payments.jsonl"), help="JSON Lines input")
    demo.add_argument("--app-dir", type=folder, default=".", help="folder with cdk.json and node_modules")
    demo.add_argument("--handler-root", type=folder, default=None, help=handler_root_help("--app-dir"))
    demo.add_argument(
        "--stack", type=stack_name, default="PaymentsSandbox", help="the deployed stack (default: %(default)s)"
    )
    demo.add_argument(
        "--function-timeout",
        type=integer(LAMBDA_MIN_TIMEOUT_SECONDS, LAMBDA_MAX_TIMEOUT_SECONDS),
        default=2,
        help="seconds (context function_timeout_seconds)",
    )
    demo.add_argument(
        "--max-receive-count",
        type=integer(SQS_MIN_MAX_RECEIVE_COUNT, SQS_MAX_MAX_RECEIVE_COUNT),
        default=5,
        help="receives before SQS moves a message to its DLQ (context max_receive_count)",
    )
    demo.add_argument("--concurrency", type=integer(1), default=2, help="poller processes per queue")
    fault_flags.add(demo, "demo")
    demo.add_argument("--no-chaos", action="store_true", help="no duplicates, no crashes (no chaos flag with it)")
    demo.add_argument("--seed", type=integer(), action=Given, default=7, help="the chaos's random seed")
    demo.add_argument(
        "--unsafe", action="store_true", help="control: idempotency layer off and no provider key; no outage backlog"
    )
    add_run_outputs(demo, report="reports/demo-report.json", run_dir=".local-aws/run")
    demo.add_argument(
        "--redrive-backlog",
        type=integer(0),
        action=Given,
        default=DEFAULT_BACKLOG,
        metavar="K",
        help="after the run, K charged and K new payments into each DLQ, redrive, check (0: off)",
    )


def check(parser: Parser, args: argparse.Namespace) -> None:
    """The checks across ``demo``'s arguments: the chaos fractions' sum, options another one would ignore, the app
    folder, the handler package and the payments file."""
    fault_flags.check_draw(parser, args, "demo")
    _check_ignored(parser, args)
    check_app_dir(parser, args.app_dir)
    root = args.handler_root or default_handler_root(args.app_dir.resolve())
    check_payments_run(parser, args, root, ("model", "gateway"))  # the report's rules; the runner's chaos seam


def _check_ignored(parser: Parser, args: argparse.Namespace) -> None:
    """A demo option another one would silently ignore is an error: ``--no-chaos`` runs with every chaos fraction
    0 and no seed to draw with (``_run``); ``--unsafe`` runs no outage backlog (``demo.run_demo``)."""
    given: set[str] = getattr(args, "given", set())
    if args.no_chaos:
        fault_flags.refuse_under_no_chaos(parser, args, "demo")
        if "seed" in given:
            parser.error("arguments --no-chaos, --seed: --no-chaos draws nothing at random; --seed would be ignored")
    if args.unsafe and "redrive_backlog" in given and args.redrive_backlog > 0:
        parser.error(
            "arguments --unsafe, --redrive-backlog: the control run has no outage backlog (its checks assume the"
            " guards); leave --redrive-backlog out or give 0"
        )


def options(args: argparse.Namespace) -> DemoOptions:
    """``demo``'s options object, built from its parsed arguments (the one place they are read)."""
    from ..payments.demo import DemoOptions

    chaos = ChaosConfig(seed=args.seed) if args.no_chaos else fault_flags.chaos_config(args, "demo")
    return DemoOptions(
        payments=args.payments,
        app_dir=args.app_dir.resolve(),
        handler_root=args.handler_root,
        stack=args.stack,
        function_timeout_seconds=args.function_timeout,
        max_receive_count=args.max_receive_count,
        concurrency=args.concurrency,
        chaos=chaos,
        unsafe=args.unsafe,
        report_path=args.report,
        run_dir=args.run_dir,
        drain_timeout_seconds=args.drain_timeout,
        quiet=args.quiet,
        redrive_backlog=args.redrive_backlog,
    )


def run(args: argparse.Namespace) -> int:
    from ..payments.demo import run_demo

    code, _ = run_demo(options(args))
    return code
