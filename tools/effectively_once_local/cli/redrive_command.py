"""``redrive``: a deployed stack's DLQs back to their sources, or its on-failure records invoked again
(``redrive.dlq_redrive``): its arguments and its options object."""

from __future__ import annotations

import argparse
from typing import Any

from ..redrive.dlq_redrive import MAX_MESSAGES_PER_SECOND, RedriveOptions
from .arguments import Parser, folder, integer, stack_name

#: The subcommands this module adds.
NAMES = ("redrive",)


def add(sub: argparse._SubParsersAction[Any]) -> None:
    """``redrive``: a deployed stack's DLQs back to their sources, or its on-failure records invoked again."""
    redrive = sub.add_parser(
        "redrive",
        help="move a deployed stack's dead-letter queues back to their source queues (AWS: SQS's message move "
        "task; a local AWS on loopback: receive, send, then delete), or with --on-failure re-invoke the events in "
        "its on-failure queues; see effectively_once_local.redrive.dlq_redrive",
        description="Move every dead-letter queue of --stack (or only --queue's) back to its source queue. Against "
        "AWS: StartMessageMoveTask with an explicit destination, waited for; against a local AWS on loopback "
        "(AWS_ENDPOINT_URL): receive, send, then delete, keeping bodies, attributes, group ids, order and "
        "deduplication ids. With --on-failure: each on-failure queue of the stack's functions (an SQS OnFailure "
        "destination of an EventInvokeConfig) instead; each Lambda destination record's requestPayload is invoked "
        "again asynchronously as the function the record names (AWS: Invoke with InvocationType Event, 202 "
        "expected; a local AWS: the function's inbox, which the local runner invokes), then the record is deleted. "
        "A body that is not a destination record, or whose invoke failed, is left in the queue and counted; a "
        "record of an event the app refused for good (condition PermanentError) is kept unless --include-refused. Safe "
        "to repeat: the consumer is idempotent. Exit code 0: all moved or re-invoked; 1: some left. "
        "README: 'Dead letters: runbook'.",
    )
    redrive.add_argument(
        "--stack", type=stack_name, default="PaymentsSandbox", help="the deployed stack (default: %(default)s)"
    )
    which = redrive.add_mutually_exclusive_group()
    which.add_argument(
        "--queue", choices=("standard", "fifo"), default=None, help="only this queue's DLQ (default: all)"
    )
    which.add_argument(
        "--on-failure",
        action="store_true",
        help="re-invoke the records of the stack's on-failure queues instead of moving its DLQs (per function: "
        "ListFunctionEventInvokeConfigs, or the template in --cdk-out)",
    )
    redrive.add_argument(
        "--cdk-out",
        type=folder,
        default=None,
        help="with --on-failure: the cdk.out the stack was deployed from (a run's: RUN_DIR/cdk.out), whose "
        "AWS::Lambda::EventInvokeConfig resources name the on-failure queues; needed on a local AWS, which keeps "
        "no EventInvokeConfig (default: ask Lambda)",
    )
    redrive.add_argument(
        "--include-refused",
        action="store_true",
        help="with --on-failure: re-invoke the records the runtime wrote for events the app refused for good "
        "(condition PermanentError) too; they would be refused again (default: left in the queue, counted as kept)",
    )
    redrive.add_argument(
        "--max-per-second",
        type=integer(1, MAX_MESSAGES_PER_SECOND),
        default=None,
        help="messages moved (with --on-failure: records re-invoked) per second (default: SQS picks the rate; "
        "locally and with --on-failure, as fast as it goes)",
    )


def check(parser: Parser, args: argparse.Namespace) -> None:
    """Nothing across ``redrive``'s arguments to check here: ``--queue`` and ``--on-failure`` exclude each other in
    the parser, and ``redrive.dlq_redrive.redrive`` refuses ``--cdk-out`` and ``--include-refused`` without
    ``--on-failure``."""


def options(args: argparse.Namespace) -> RedriveOptions:
    """``redrive``'s options object, built from its parsed arguments (the one place they are read)."""
    return RedriveOptions(
        stack=args.stack,
        queue=args.queue,
        max_per_second=args.max_per_second,
        on_failure=args.on_failure,
        cdk_out=args.cdk_out,
        include_refused=args.include_refused,
    )


def run(args: argparse.Namespace) -> int:
    from ..redrive.dlq_redrive import run_redrive

    return run_redrive(options(args))
