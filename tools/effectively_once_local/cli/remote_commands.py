"""``produce`` and ``report``: the payments against a deployed stack, a real AWS account after ``cdk deploy``
(``payments.remote``): their arguments, their checks and their options objects."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..chaos.fault_model import ChaosConfig
from ..payments.remote import SETTLE_SECONDS, WAIT_MARGIN_SECONDS, ProduceOptions, ReportOptions
from .arguments import (
    Parser,
    check_payments_run,
    default_handler_root,
    folder,
    fraction,
    handler_root_help,
    integer,
    output_file,
    stack_name,
)

#: The subcommands this module adds.
NAMES = ("produce", "report")


def add(sub: argparse._SubParsersAction[Any]) -> None:
    """``produce`` and ``report``: the payments against a deployed stack (a real AWS account)."""
    for name, text in (
        ("produce", "send the payments file to a deployed stack (a real AWS account after `cdk deploy`)"),
        ("report", "wait for a deployed stack's queues to drain, then report from its ledgers and DLQs"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument(
            "--stack", type=stack_name, default="PaymentsSandbox", help="the deployed stack (default: %(default)s)"
        )
        cmd.add_argument("--payments", type=Path, default=Path("samples/payments.jsonl"), help="JSON Lines input")
        cmd.add_argument("--handler-root", type=folder, default=None, help=handler_root_help("the working folder"))
        if name == "produce":
            cmd.add_argument("--resend", type=fraction, default=0.10, help="fraction of payments resent")
            cmd.add_argument("--concurrent-duplicates", type=fraction, default=0.05, help="fraction sent twice at once")
            cmd.add_argument("--seed", type=integer(), default=7, help="the duplicates' random seed")
        else:
            cmd.add_argument(
                "--wait",
                type=integer(0),
                default=None,
                help="seconds to wait for the queues to drain "
                "(default: (maxReceiveCount + 1) x visibility timeout of the deployed queues, "
                f"plus the settle time and {WAIT_MARGIN_SECONDS}s)",
            )
            cmd.add_argument(
                "--settle",
                type=integer(0),
                default=SETTLE_SECONDS,
                help="seconds the queues must stay empty (SQS counts are approximate)",
            )
            cmd.add_argument(
                "--report",
                type=output_file,
                default="reports/aws-report.json",
                help="the JSON report (default: %(default)s)",
            )


def check(parser: Parser, args: argparse.Namespace) -> None:
    """The handler package (its ``payments.model``, default: ``lambda_src`` in the working folder if there) and the
    payments file; a report must not overwrite it."""
    root = args.handler_root or default_handler_root(Path(".").resolve())
    check_payments_run(parser, args, root, ("model",))


def produce_options(args: argparse.Namespace) -> ProduceOptions:
    """``produce``'s options object, built from its parsed arguments (the one place they are read)."""
    chaos = ChaosConfig(resend=args.resend, concurrent_duplicates=args.concurrent_duplicates, seed=args.seed)
    return ProduceOptions(stack=args.stack, payments=args.payments, chaos=chaos)


def report_options(args: argparse.Namespace) -> ReportOptions:
    """``report``'s options object, built from its parsed arguments (the one place they are read)."""
    return ReportOptions(
        stack=args.stack,
        payments=args.payments,
        handler_root=args.handler_root,
        wait_seconds=args.wait,
        report_path=args.report,
        settle_seconds=args.settle,
    )


def options(args: argparse.Namespace) -> ProduceOptions | ReportOptions:
    """The options object of the subcommand given (``produce`` or ``report``)."""
    return produce_options(args) if args.command == "produce" else report_options(args)


def run(args: argparse.Namespace) -> int:
    from ..payments.remote import produce, report

    if args.command == "produce":
        return produce(produce_options(args))
    return report(report_options(args))
