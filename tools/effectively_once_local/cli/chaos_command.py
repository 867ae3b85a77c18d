"""``chaos``: any CDK app's stack under chaos, reported per business key (``any_stack.chaos_run``): its arguments,
their checks and its options object."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from effectively_once_runtime.identity import NORMALIZATIONS

from ..proof.store_kinds import kind_of, kinds_help
from ..traffic.chaos_input import InputFileError, compile_key
from . import fault_flags
from .arguments import (
    Given,
    Parser,
    add_run_outputs,
    check_app_dir,
    effect,
    folder,
    integer,
    key_value,
    stack_name,
)

if TYPE_CHECKING:
    from ..any_stack.chaos_context import ChaosOptions

#: The subcommands this module adds.
NAMES = ("chaos",)


def add(sub: argparse._SubParsersAction[Any]) -> None:
    """``chaos``: any CDK app's stack under chaos, reported per business key."""
    chaos = sub.add_parser(
        "chaos",
        help="deploy any CDK app to a local AWS, run every SQS mapping and asynchronous target of a stack under"
        " chaos, report per key",
        description="Deploy --app-dir's CDK app to a local AWS (moto, loopback), run every SQS event source mapping"
        " of --stack, and every function with an EventInvokeConfig (through the EventBridge rules and SNS"
        " subscriptions that invoke it, else by direct asynchronous Invoke; either kind alone is enough), with the"
        " local runner under chaos, and report per business key:"
        " lost, duplicated, unexpected, replayed after a kill, and which faults struck. Exit 1 on anything lost,"
        " duplicated or unexpected; 2 on a usage or deploy error; 3 under --require-faults when a fault class asked"
        " for never struck; 4 when the queues did not drain within --drain-timeout.",
    )
    chaos.add_argument("--app-dir", type=folder, required=True, help="folder with the app's cdk.json")
    chaos.add_argument("--stack", type=stack_name, required=True, help="the stack of --app-dir to deploy and run")
    chaos.add_argument(
        "--input",
        type=Path,
        required=True,
        help="JSON Lines: a body per line, or {body, queue, group}: queue names the target (an SQS mapping's"
        " queue, or async for an asynchronous target; not needed with one target), group a FIFO message group. Per"
        " trigger: an SQS queue takes any body (a string verbatim); an EventBridge rule a JSON object, sent as the"
        " event's detail with the rule's source and detail-type; an SNS topic any body, as the Message; a function"
        " nothing in the stack invokes JSON, as the payload of an Invoke with InvocationType Event",
    )
    chaos.add_argument("--key", required=True, help="JMESPath over each body: the business key (e.g. order_id)")
    chaos.add_argument(
        "--normalize",
        choices=NORMALIZATIONS,
        action="append",
        default=None,
        help="business identity: a step applied to every key, in the order given (repeatable; default: none), as"
        " the runtime's Consumer(normalize=...) applies it",
    )
    _add_chaos_stores(chaos)
    _add_import_check(chaos)
    chaos.add_argument(
        "--context",
        type=key_value,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="cdk deploy -c values the app reads (repeatable; default: none), e.g. stage=chaos",
    )
    chaos.add_argument(
        "--function-env",
        type=key_value,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="an environment variable for every function of the run, over its deployed one (repeatable; default:"
        " none), e.g. a switch the app reads",
    )
    chaos.add_argument("--concurrency", type=integer(1), default=2, help="poller processes per mapping")
    _add_chaos_faults(chaos)
    add_run_outputs(chaos, report="reports/chaos-report.json", run_dir=".local-aws/chaos", drain_timeout=None)


def _add_chaos_stores(chaos: argparse.ArgumentParser) -> None:
    """``chaos``'s effect stores and redrive: where the effects are counted, and what a DLQ's valid keys get."""
    chaos.add_argument(
        "--effect-table", default=None, help="the effect's own store: a DynamoDB table of the stack (default: none)"
    )
    chaos.add_argument("--effect-key", default=None, help="the attribute of --effect-table holding the business key")
    chaos.add_argument(
        "--effect",
        type=effect,
        action="append",
        default=None,
        metavar="KIND:NAME:KEYPATH",
        help=f"a store the effects are counted in (repeatable; default: none): {kinds_help()}",
    )
    chaos.add_argument(
        "--provider",
        action="store_true",
        help="start the HTTP provider stand-in on 127.0.0.1 for the run, its URL in EFFECTIVELY_ONCE_PROVIDER_URL"
        " (on by itself with --effect provider::...)",
    )
    chaos.add_argument(
        "--redrive",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the queues drained, redrive the DLQs while they hold valid keys; a key still only in a DLQ then"
        " is stranded and fails the run, a key that finished through it is listed with its rounds (passing);"
        " --no-redrive shows what production would hold in its DLQs",
    )
    chaos.add_argument("--redrive-rounds", type=integer(1), action=Given, default=3, help="the most redrive rounds")
    chaos.add_argument(
        "--effect-takes-key",
        action="store_true",
        help="without a store: the effect passes the idempotency key on (a replay is answered)",
    )


def _add_chaos_faults(chaos: argparse.ArgumentParser) -> None:
    """``chaos``'s fault flags (one per fault class: ``chaos/fault_classes.py``), its seed and ``--require-faults``."""
    fault_flags.add(chaos, "chaos")
    chaos.add_argument("--seed", type=integer(), action=Given, default=7, help="the chaos's random seed")
    chaos.add_argument(
        "--require-faults",
        action="store_true",
        help="exit 3 when a fault class asked for could strike and never did (default: such classes are listed in"
        " the report, and the exit code does not depend on what struck)",
    )


def check(parser: Parser, args: argparse.Namespace) -> None:
    from ..traffic.chaos_input import load_input

    fault_flags.check_draw(parser, args, "chaos")
    if args.effect_takes_key and (args.effect_table is not None or args.effect):
        # effects.build: with a store, its item count decides; --effect-takes-key would be ignored.
        parser.error(
            "arguments --effect-table, --effect-takes-key: with a store its items count the effects;"
            " --effect-takes-key is for a run without one"
        )
    _check_ignored(parser, args)
    check_app_dir(parser, args.app_dir)
    if (args.effect_table is None) != (args.effect_key is None):
        parser.error("arguments --effect-table, --effect-key: give both (the table and its key attribute) or neither")
    if args.report.resolve() == args.input.resolve():
        parser.error(f"argument --report: {args.report} is the input file; the report would overwrite it")
    try:
        compile_key(args.key)
    except InputFileError as exc:
        parser.error(f"argument --key: {exc}")
    try:
        lines = load_input(args.input, args.key, tuple(args.normalize or ()))
    except InputFileError as exc:
        parser.error(f"argument --input: {exc}")
    if not any(ln.key is not None for ln in lines):
        parser.error(f"argument --key: {args.key!r} finds no key in any line of {args.input}; nothing was sent")
    for store in args.effect or ():
        try:
            kind_of(store).check(store, {ln.key for ln in lines if ln.key is not None})
        except ValueError as exc:  # StoreKind.check: a bucket's template is a TemplateError
            parser.error(f"argument --effect: {exc}")


def _check_ignored(parser: Parser, args: argparse.Namespace) -> None:
    """A flag another one makes pointless is an error when given (``args.given``): ``--redrive-rounds`` under
    ``--no-redrive``, ``--seed`` when every chaos fraction is 0 (nothing is drawn). The fault flags that cannot strike
    on the stack are known once it is synthesized (``any_stack/inert_faults.py``)."""
    given: set[str] = getattr(args, "given", set())
    if not args.redrive and "redrive_rounds" in given:
        parser.error(
            "arguments --no-redrive, --redrive-rounds: --no-redrive runs no redrive round; --redrive-rounds would be"
            " ignored (leave --no-redrive out to redrive the DLQs)"
        )
    if "seed" in given and not fault_flags.any_asked(args, "chaos"):
        parser.error(
            "argument --seed: every chaos fraction is 0, so nothing is drawn; --seed would be ignored (give a"
            " fraction, e.g. --crash-after-write 0.2)"
        )


def _add_import_check(chaos: argparse.ArgumentParser) -> None:
    """``--allow-import``: the run's own names for the import check (``aws/lambda_imports.py``)."""
    chaos.add_argument(
        "--allow-import",
        metavar="MODULE",
        action="append",
        default=None,
        help="a top-level module the functions may import without shipping it (repeatable): one a layer this run"
        " cannot read provides. Every other import must resolve in the function's asset, its layers, the Lambda"
        " runtime (standard library, boto3) or the Powertools layer, or the run stops before the deploy",
    )


def options(args: argparse.Namespace) -> ChaosOptions:
    """``chaos``'s options object, built from its parsed arguments (the one place they are read)."""
    from ..any_stack.chaos_context import ChaosOptions

    return ChaosOptions(
        app_dir=args.app_dir.resolve(),
        stack=args.stack,
        input=args.input,
        key=args.key,
        normalize=tuple(args.normalize or ()),
        allowed_imports=tuple(args.allow_import or ()),
        effect_table=args.effect_table,
        effect_key=args.effect_key,
        effect_takes_key=args.effect_takes_key,
        effects=tuple(args.effect or ()),
        function_env=dict(args.function_env or ()),
        provider=args.provider,
        redrive=args.redrive,
        redrive_rounds=args.redrive_rounds,
        concurrency=args.concurrency,
        chaos=fault_flags.chaos_config(args, "chaos"),
        context=dict(args.context or ()),
        report_path=args.report,
        run_dir=args.run_dir,
        drain_timeout_seconds=args.drain_timeout,
        quiet=args.quiet,
        require_faults=args.require_faults,
        given_flags=frozenset("--" + dest.replace("_", "-") for dest in getattr(args, "given", ())),
    )


def run(args: argparse.Namespace) -> int:
    from ..any_stack.chaos_run import run_chaos

    code, _ = run_chaos(options(args))
    return code
