"""``python -m effectively_once_local``: the local AWS demo and its tools. ``--help`` per subcommand.

Every argument is checked before anything starts (no local AWS, no deploy, no AWS call): numbers against their
ranges, the payments file read and parsed whole (and it must hold at least one valid payment by the handler's own
rules), folders that must be folders, output paths that must not be, and no option another one would silently
ignore. Every expected error ends in one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from botocore.exceptions import BotoCoreError, ClientError

from effectively_once.limits import (
    LAMBDA_MAX_TIMEOUT_SECONDS,
    LAMBDA_MIN_TIMEOUT_SECONDS,
    SQS_MAX_MAX_RECEIVE_COUNT,
    SQS_MIN_MAX_RECEIVE_COUNT,
)
from effectively_once_runtime.identity import NORMALIZATIONS

from ..aws.deploy import DeployError, cdk_command
from ..aws.readback import DlqReadError
from ..aws.server import LocalAwsError
from ..base.tool_limits import CFN_STACK_NAME_PATTERN
from ..chaos.fault_model import ChaosConfig
from ..profiles.backlog import DEFAULT_BACKLOG
from ..profiles.payments_input import PaymentsFileError, generate_sample, load_payments
from ..profiles.redrive import MAX_MESSAGES_PER_SECOND, RedriveError
from ..profiles.remote import SETTLE_SECONDS, WAIT_MARGIN_SECONDS
from ..runner.mapping_runner import packaged_lambda_src
from ..traffic.chaos_input import InputFileError, compile_key
from ..traffic.producer import SendError

if TYPE_CHECKING:
    from ..profiles.chaos_run import ChaosOptions
    from ..profiles.demo import DemoOptions

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
)


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (``(default: %(default)s)``), unless the help already says it
    (``default:``), the default is ``None`` (the help says what happens) or the option is a flag."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default:" in text or action.default in (None, argparse.SUPPRESS) or action.nargs == 0:
            return text
        return f"{text} (default: %(default)s)"


class _Given(argparse.Action):
    """Stores the value like ``store`` and remembers that the option was given (``args.given``), for the checks of
    options another option makes pointless (``--no-chaos``, ``--unsafe``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, *_: Any) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (``error: argument --x: ...``) and exit code 2, like every other expected error.
    Every option's help shows its default (:class:`_HelpFormatter`), subcommands' too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {_one_line(message)} (see {self.prog} --help)\n")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _chaos_config(args: argparse.Namespace, crash_after_effect: float) -> ChaosConfig:
    """The chaos flags both runners share; ``crash_after_effect`` is ``--crash-after-effect`` (chaos) or
    ``--crash-after-charge`` (demo): the same kill, named after what each run's effect is."""
    return ChaosConfig(
        resend=args.resend,
        concurrent_duplicates=args.concurrent_duplicates,
        crash_after_charge=crash_after_effect,
        crash_after_complete=args.crash_after_complete,
        timeout=args.timeouts,
        seed=args.seed,
        crash_after_write=getattr(args, "crash_after_write", 0.0),
        crash_random=getattr(args, "crash_random", 0.0),
        async_duplicate=getattr(args, "async_duplicate", 0.0),
    )


def _add_run_outputs(parser: argparse.ArgumentParser, *, report: str, run_dir: str) -> None:
    """The options a deploy-and-run command (demo, chaos) shares: where its report and run folder go, how long it
    waits for the queues to drain, progress bars."""
    parser.add_argument(
        "--report",
        type=_output_file,
        default=report,
        help="the JSON report, its HTML page beside it (.html) (default: %(default)s)",
    )
    parser.add_argument(
        "--run-dir",
        type=_output_folder,
        default=run_dir,
        help="the run's logs and its cdk.out (default: %(default)s; emptied of a previous run's logs)",
    )
    parser.add_argument(
        "--drain-timeout", type=_integer(1), default=600, help="seconds to wait for the queues to drain"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def _handler_root_help(base: str) -> str:
    return f"folder holding the handler package (default: lambda_src in {base} if there, else the package's own)"


def _default_handler_root(app_dir: Path) -> Path:
    repo = app_dir / "lambda_src"
    if repo.is_dir():
        return repo
    return packaged_lambda_src()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


# --- argument types: each raises ArgumentTypeError, which argparse reports naming the argument -----------


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, got {text!r}")
    return value


def _integer(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"{low} or more" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {value}")
        return value

    return parse


def _effect(text: str) -> Any:
    from ..proof.stores import parse_effect

    try:
        return parse_effect(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _stack_name(text: str) -> str:
    if not re.fullmatch(CFN_STACK_NAME_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a CloudFormation stack name (a letter, then letters, digits and hyphens, at most 128)"
        )
    return text


def _folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a folder" if path.exists() else f"{text} does not exist")
    return path


def _writable_ancestor(path: Path, text: str) -> None:
    """The nearest existing folder above ``path`` must be a folder we can create entries in."""
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {ancestor} is not writable")


def _output_file(text: str) -> Path:
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file path")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} is not writable")
    _writable_ancestor(path, text)
    return path


def _output_folder(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} is not writable")
    if not path.exists():
        _writable_ancestor(path, text)
    return path


# --- checks that need more than one argument, still before anything starts ----------------------------


def _check_handler_root(parser: _Parser, root: Path, modules: tuple[str, ...]) -> Callable[[str], bool]:
    from ..profiles.payments_view import validity_check

    if not root.is_dir():
        parser.error(f"argument --handler-root: {root} is not a folder (give the folder holding the payments package)")
    missing = [m for m in modules if not (root / "payments" / f"{m}.py").is_file()]
    if missing:
        parser.error(
            f"argument --handler-root: {root} holds no handler package (missing "
            + ", ".join(f"payments/{m}.py" for m in missing)
            + ")"
        )
    try:
        return validity_check(root)
    except Exception as exc:  # noqa: BLE001 - any import failure of the user's package is a usage error
        parser.error(f"argument --handler-root: cannot import payments.model from {root}: {type(exc).__name__}: {exc}")


def _check_payments(parser: _Parser, path: Path, is_valid: Callable[[str], bool]) -> None:
    try:
        lines = load_payments(path)
    except PaymentsFileError as exc:
        parser.error(f"argument --payments: {exc}")
    if not any(ln.payment_id and is_valid(ln.body) for ln in lines):
        parser.error(
            f"argument --payments: {path}: none of its {len(lines)} lines is a valid payment by the handler's rules"
            " (payments.model); nothing was sent"
        )


def _context(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be key=value, got {text!r}")
    return key, value


def _check_chaos(parser: _Parser, args: argparse.Namespace) -> None:
    from ..traffic.chaos_input import load_input

    fates = args.crash_after_effect + args.crash_after_complete + args.timeouts
    if fates + args.crash_after_write + args.crash_random > 1.0:
        parser.error(
            "arguments --crash-after-effect, --crash-after-complete, --timeouts, --crash-after-write, --crash-random:"
            " one draw per invocation picks among them, so their sum must not exceed 1"
        )
    if args.effect_takes_key and (args.effect_table is not None or args.effect):
        # effects.build: with a store, its item count decides; --effect-takes-key would be ignored.
        parser.error(
            "arguments --effect-table, --effect-takes-key: with a store its items count the effects;"
            " --effect-takes-key is for a run without one"
        )
    if not (args.app_dir / "cdk.json").is_file():
        parser.error(f"argument --app-dir: {args.app_dir} has no cdk.json")
    try:
        cdk_command(args.app_dir.resolve())
    except DeployError as exc:
        parser.error(f"argument --app-dir: {exc}")
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


def _check_ignored(parser: _Parser, args: argparse.Namespace) -> None:
    """A demo option another one would silently ignore is an error: ``--no-chaos`` runs with every chaos fraction
    0 and no seed to draw with (``_run``); ``--unsafe`` runs no outage backlog (``demo.run_demo``)."""
    given: set[str] = getattr(args, "given", set())
    if args.no_chaos:
        for dest in ("resend", "concurrent_duplicates", "crash_after_charge", "crash_after_complete", "timeouts"):
            if dest in given and getattr(args, dest) > 0:
                flag = "--" + dest.replace("_", "-")
                parser.error(f"arguments --no-chaos, {flag}: --no-chaos runs without chaos; {flag} would be ignored")
        if "seed" in given:
            parser.error("arguments --no-chaos, --seed: --no-chaos draws nothing at random; --seed would be ignored")
    if args.unsafe and "redrive_backlog" in given and args.redrive_backlog > 0:
        parser.error(
            "arguments --unsafe, --redrive-backlog: the control run has no outage backlog (its checks assume the"
            " guards); leave --redrive-backlog out or give 0"
        )


def _check(parser: _Parser, args: argparse.Namespace) -> None:
    if args.command in ("sample", "redrive"):
        return
    if args.command == "chaos":
        _check_chaos(parser, args)
        return
    if args.command == "demo":
        chaos = args.crash_after_charge + args.crash_after_complete + args.timeouts
        if chaos > 1.0:
            # One draw per invocation decides between the three (chaos.InvocationChaos.begin).
            parser.error(
                "arguments --crash-after-charge, --crash-after-complete, --timeouts: one draw per invocation picks"
                f" among them, so their sum must not exceed 1, got {chaos:g}"
            )
        _check_ignored(parser, args)
        if not (args.app_dir / "cdk.json").is_file():
            parser.error(f"argument --app-dir: {args.app_dir} has no cdk.json")
        try:
            cdk_command(args.app_dir.resolve())
        except DeployError as exc:
            parser.error(f"argument --app-dir: {exc}")
        root = args.handler_root or _default_handler_root(args.app_dir.resolve())
        modules: tuple[str, ...] = ("model", "gateway")  # the report's rules; the runner's chaos seam
    else:
        root = args.handler_root or _default_handler_root(Path(".").resolve())
        modules = ("model",)
    if args.command != "produce" and args.report.resolve() == args.payments.resolve():
        parser.error(f"argument --report: {args.report} is the payments file; the report would overwrite it")
    args.handler_root = root.resolve()
    _check_payments(parser, args.payments, _check_handler_root(parser, args.handler_root, modules))


def _parser() -> tuple[_Parser, dict[str, _Parser]]:
    """The parser and its subcommands' parsers (checks across arguments report through the subcommand's)."""
    parser = _Parser(prog="python -m effectively_once_local", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_demo, _add_chaos, _add_sample, _add_remote, _add_redrive):
        add(sub)
    return parser, {name: p for name, p in sub.choices.items()}


def _add_demo(sub: argparse._SubParsersAction[Any]) -> None:
    """``demo``: the payments sample's main job on a local AWS."""
    demo = sub.add_parser("demo", help="deploy to a local AWS (moto), send payments with chaos, report")
    demo.add_argument("--payments", type=Path, default=Path("samples/payments.jsonl"), help="JSON Lines input")
    demo.add_argument("--app-dir", type=_folder, default=".", help="folder with cdk.json and node_modules")
    demo.add_argument("--handler-root", type=_folder, default=None, help=_handler_root_help("--app-dir"))
    demo.add_argument(
        "--stack", type=_stack_name, default="PaymentsSandbox", help="the deployed stack (default: %(default)s)"
    )
    demo.add_argument(
        "--function-timeout",
        type=_integer(LAMBDA_MIN_TIMEOUT_SECONDS, LAMBDA_MAX_TIMEOUT_SECONDS),
        default=2,
        help="seconds (context function_timeout_seconds)",
    )
    demo.add_argument(
        "--max-receive-count",
        type=_integer(SQS_MIN_MAX_RECEIVE_COUNT, SQS_MAX_MAX_RECEIVE_COUNT),
        default=5,
        help="receives before SQS moves a message to its DLQ (context max_receive_count)",
    )
    demo.add_argument("--concurrency", type=_integer(1), default=2, help="poller processes per queue")
    for flag, default, text in (
        ("--resend", 0.10, "fraction of payments a producer resends"),
        ("--concurrent-duplicates", 0.05, "fraction sent twice at once"),
        ("--crash-after-charge", 0.03, "fraction of invocations killed after the charge, before its record completes"),
        (
            "--crash-after-complete",
            0.03,
            "fraction of invocations killed after the handler returned, before its delete",
        ),
        ("--timeouts", 0.02, "fraction of invocations stalled past the deadline"),
        (
            "--async-duplicate",
            0.10,
            "fraction of the events through the bus that Lambda's asynchronous queue delivers twice without an error",
        ),
    ):
        demo.add_argument(flag, type=_fraction, action=_Given, default=default, help=text)
    demo.add_argument("--no-chaos", action="store_true", help="no duplicates, no crashes (no chaos flag with it)")
    demo.add_argument("--seed", type=_integer(), action=_Given, default=7, help="the chaos's random seed")
    demo.add_argument(
        "--unsafe", action="store_true", help="control: idempotency layer off and no provider key; no outage backlog"
    )
    _add_run_outputs(demo, report="reports/demo-report.json", run_dir=".local-aws/run")
    demo.add_argument(
        "--redrive-backlog",
        type=_integer(0),
        action=_Given,
        default=DEFAULT_BACKLOG,
        metavar="K",
        help="after the run, K charged and K new payments into each DLQ, redrive, check (0: off)",
    )


def _add_chaos(sub: argparse._SubParsersAction[Any]) -> None:
    """``chaos``: any CDK app's stack under chaos, reported per business key."""
    chaos = sub.add_parser(
        "chaos",
        help="deploy any CDK app to a local AWS, run every SQS mapping of a stack under chaos, report per key",
        description="Deploy --app-dir's CDK app to a local AWS (moto, loopback), run every SQS event source mapping"
        " of --stack with the local runner under chaos, and report per business key: lost, duplicated, unexpected,"
        " replayed after a kill. Exit 1 on anything lost, duplicated or unexpected.",
    )
    chaos.add_argument("--app-dir", type=_folder, required=True, help="folder with the app's cdk.json")
    chaos.add_argument("--stack", type=_stack_name, required=True, help="the stack of --app-dir to deploy and run")
    chaos.add_argument("--input", type=Path, required=True, help="JSON Lines: a body per line, or {body, queue, group}")
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
    chaos.add_argument(
        "--context",
        type=_context,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="cdk deploy -c values the app reads (repeatable; default: none), e.g. stage=chaos",
    )
    chaos.add_argument(
        "--function-env",
        type=_context,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="an environment variable for every function of the run, over its deployed one (repeatable; default:"
        " none), e.g. a switch the app reads",
    )
    chaos.add_argument("--concurrency", type=_integer(1), default=2, help="poller processes per mapping")
    _add_chaos_faults(chaos)
    _add_run_outputs(chaos, report="reports/chaos-report.json", run_dir=".local-aws/chaos")


def _add_chaos_stores(chaos: argparse.ArgumentParser) -> None:
    """``chaos``'s effect stores and redrive: where the effects are counted, and what a DLQ's valid keys get."""
    chaos.add_argument(
        "--effect-table", default=None, help="the effect's own store: a DynamoDB table of the stack (default: none)"
    )
    chaos.add_argument("--effect-key", default=None, help="the attribute of --effect-table holding the business key")
    chaos.add_argument(
        "--effect",
        type=_effect,
        action="append",
        default=None,
        metavar="KIND:NAME:KEYPATH",
        help="a store the effects are counted in (repeatable; default: none): table:NAME:ATTRIBUTE,"
        " bucket:NAME:TEMPLATE with {key} (and * for any characters), queue:NAME:JMESPATH,"
        " provider:[PATH]:JMESPATH (the stand-in's calls, under PATH if given), sqlite:FILE:TABLE:COLUMN,"
        " postgres:DSN:TABLE:COLUMN",
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
        " is stranded and fails the run",
    )
    chaos.add_argument("--redrive-rounds", type=_integer(1), default=3, help="the most redrive rounds")
    chaos.add_argument(
        "--effect-takes-key",
        action="store_true",
        help="without a store: the effect passes the idempotency key on (a replay is answered)",
    )


def _add_chaos_faults(chaos: argparse.ArgumentParser) -> None:
    """``chaos``'s duplicates and kills (``ChaosConfig``'s fractions, ``_chaos_config``) and its seed."""
    chaos.add_argument("--resend", type=_fraction, default=0.10, help="fraction of keys a producer resends")
    chaos.add_argument("--concurrent-duplicates", type=_fraction, default=0.05, help="fraction sent twice at once")
    chaos.add_argument(
        "--crash-after-effect",
        type=_fraction,
        default=0.03,
        help="fraction of invocations killed at an effect line, before completion",
    )
    chaos.add_argument(
        "--crash-after-complete",
        type=_fraction,
        default=0.03,
        help="fraction of invocations killed after the handler returned, before its delete",
    )
    chaos.add_argument(
        "--timeouts",
        type=_fraction,
        default=0.02,
        help="fraction of invocations stalled past the deadline at the first write the local AWS accepts (or effect"
        " line)",
    )
    chaos.add_argument(
        "--async-duplicate",
        type=_fraction,
        default=0.10,
        help="fraction of the events to an asynchronous target (an EventBridge rule's or SNS topic's function) that"
        " Lambda's asynchronous queue delivers twice without an error",
    )
    chaos.add_argument(
        "--crash-after-write",
        type=_fraction,
        default=0.05,
        help="fraction of invocations killed right after a write the local AWS accepted (any effect, declared or not,"
        " or a DLQ send; each write in turn with even odds)",
    )
    chaos.add_argument(
        "--crash-random",
        type=_fraction,
        default=0.02,
        help="fraction of invocations killed at a random moment inside the invocation",
    )
    chaos.add_argument("--seed", type=_integer(), default=7, help="the chaos's random seed")


def _add_sample(sub: argparse._SubParsersAction[Any]) -> None:
    """``sample``: a deterministic payments file."""
    sample = sub.add_parser("sample", help="write a deterministic sample payments file")
    sample.add_argument("--count", type=_integer(1), default=1000, help="valid payments (six poison lines are added)")
    sample.add_argument("--accounts", type=_integer(1), default=40, help="accounts the payments are spread over")
    sample.add_argument("--seed", type=_integer(), default=2026, help="the same seed writes the same file")
    sample.add_argument("--out", type=_output_file, default="samples/payments.jsonl", help="the file to write")


def _add_remote(sub: argparse._SubParsersAction[Any]) -> None:
    """``produce`` and ``report``: the payments against a deployed stack (a real AWS account)."""
    for name, text in (
        ("produce", "send the payments file to a deployed stack (a real AWS account after `cdk deploy`)"),
        ("report", "wait for a deployed stack's queues to drain, then report from its ledgers and DLQs"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument(
            "--stack", type=_stack_name, default="PaymentsSandbox", help="the deployed stack (default: %(default)s)"
        )
        cmd.add_argument("--payments", type=Path, default=Path("samples/payments.jsonl"), help="JSON Lines input")
        cmd.add_argument("--handler-root", type=_folder, default=None, help=_handler_root_help("the working folder"))
        if name == "produce":
            cmd.add_argument("--resend", type=_fraction, default=0.10, help="fraction of payments resent")
            cmd.add_argument(
                "--concurrent-duplicates", type=_fraction, default=0.05, help="fraction sent twice at once"
            )
            cmd.add_argument("--seed", type=_integer(), default=7, help="the duplicates' random seed")
        else:
            cmd.add_argument(
                "--wait",
                type=_integer(0),
                default=None,
                help="seconds to wait for the queues to drain "
                "(default: (maxReceiveCount + 1) x visibility timeout of the deployed queues, "
                f"plus the settle time and {WAIT_MARGIN_SECONDS}s)",
            )
            cmd.add_argument(
                "--settle",
                type=_integer(0),
                default=SETTLE_SECONDS,
                help="seconds the queues must stay empty (SQS counts are approximate)",
            )
            cmd.add_argument(
                "--report",
                type=_output_file,
                default="reports/aws-report.json",
                help="the JSON report (default: %(default)s)",
            )


def _add_redrive(sub: argparse._SubParsersAction[Any]) -> None:
    """``redrive``: a deployed stack's DLQs back to their sources, or its on-failure records invoked again."""
    redrive = sub.add_parser(
        "redrive",
        help="move a deployed stack's dead-letter queues back to their source queues (AWS: SQS's message move "
        "task; a local AWS on loopback: receive, send, then delete), or with --on-failure re-invoke the events in "
        "its on-failure queues; see effectively_once_local.profiles.redrive",
        description="Move every dead-letter queue of --stack (or only --queue's) back to its source queue. Against "
        "AWS: StartMessageMoveTask with an explicit destination, waited for; against a local AWS on loopback "
        "(AWS_ENDPOINT_URL): receive, send, then delete, keeping bodies, attributes, group ids, order and "
        "deduplication ids. With --on-failure: each on-failure queue of the stack's functions (an SQS OnFailure "
        "destination of an EventInvokeConfig) instead; each Lambda destination record's requestPayload is invoked "
        "again asynchronously as the function the record names (AWS: Invoke with InvocationType Event, 202 "
        "expected; a local AWS: the function's inbox, which the local runner invokes), then the record is deleted. "
        "A body that is not a destination record, or whose invoke failed, is left in the queue and counted. Safe "
        "to repeat: the consumer is idempotent. Exit code 0: all moved or re-invoked; 1: some left. "
        "README: 'Dead letters: runbook'.",
    )
    redrive.add_argument(
        "--stack", type=_stack_name, default="PaymentsSandbox", help="the deployed stack (default: %(default)s)"
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
        type=_folder,
        default=None,
        help="with --on-failure: the cdk.out the stack was deployed from (a run's: RUN_DIR/cdk.out), whose "
        "AWS::Lambda::EventInvokeConfig resources name the on-failure queues; needed on a local AWS, which keeps "
        "no EventInvokeConfig (default: ask Lambda)",
    )
    redrive.add_argument(
        "--max-per-second",
        type=_integer(1, MAX_MESSAGES_PER_SECOND),
        default=None,
        help="messages moved (with --on-failure: records re-invoked) per second (default: SQS picks the rate; "
        "locally and with --on-failure, as fast as it goes)",
    )


def _run_sample(args: argparse.Namespace) -> int:
    import json

    rows = generate_sample(args.count, args.accounts, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} lines to {args.out}")
    return 0


def _run_redrive(args: argparse.Namespace) -> int:
    from ..profiles import redrive as redrive

    on_failure, cdk_out = args.on_failure, args.cdk_out
    return redrive.redrive(args.stack, args.queue, args.max_per_second, on_failure=on_failure, cdk_out=cdk_out)


def chaos_options(args: argparse.Namespace) -> ChaosOptions:
    """``chaos``'s options object, built from its parsed arguments (the one place they are read)."""
    from ..profiles.chaos_run import ChaosOptions

    return ChaosOptions(
        app_dir=args.app_dir.resolve(),
        stack=args.stack,
        input=args.input,
        key=args.key,
        normalize=tuple(args.normalize or ()),
        effect_table=args.effect_table,
        effect_key=args.effect_key,
        effect_takes_key=args.effect_takes_key,
        effects=tuple(args.effect or ()),
        function_env=dict(args.function_env or ()),
        provider=args.provider,
        redrive=args.redrive,
        redrive_rounds=args.redrive_rounds,
        concurrency=args.concurrency,
        chaos=_chaos_config(args, args.crash_after_effect),
        context=dict(args.context or ()),
        report_path=args.report,
        run_dir=args.run_dir,
        drain_timeout_seconds=args.drain_timeout,
        quiet=args.quiet,
    )


def _run_chaos(args: argparse.Namespace) -> int:
    from ..profiles.chaos_run import run_chaos

    code, _ = run_chaos(chaos_options(args))
    return code


def _run_remote(args: argparse.Namespace) -> int:
    from ..profiles.remote import produce, report

    if args.command == "produce":
        chaos = ChaosConfig(resend=args.resend, concurrent_duplicates=args.concurrent_duplicates, seed=args.seed)
        return produce(args.stack, args.payments, chaos)
    return report(args.stack, args.payments, args.handler_root, args.wait, args.report, args.settle)


def demo_options(args: argparse.Namespace) -> DemoOptions:
    """``demo``'s options object, built from its parsed arguments (the one place they are read)."""
    from ..profiles.demo import DemoOptions

    chaos = ChaosConfig(seed=args.seed) if args.no_chaos else _chaos_config(args, args.crash_after_charge)
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


def _run_demo(args: argparse.Namespace) -> int:
    from ..profiles.demo import run_demo

    code, _ = run_demo(demo_options(args))
    return code


#: Each subcommand's run, on its parsed and checked arguments; the exit code.
_RUNS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sample": _run_sample,
    "redrive": _run_redrive,
    "chaos": _run_chaos,
    "produce": _run_remote,
    "report": _run_remote,
    "demo": _run_demo,
}


def _run(args: argparse.Namespace) -> int:
    return _RUNS[args.command](args)


def main(argv: list[str] | None = None) -> int:
    parser, commands = _parser()
    args = parser.parse_args(argv)
    _check(commands[args.command], args)
    # A SIGTERM (a CI timeout, `kill`) stops the run like Ctrl-C does (the demo stops its local AWS).
    previous: Any = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args)
    except _ONE_LINE_ERRORS as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        stopped = args.command in ("demo", "chaos")
        print("interrupted: local AWS stopped" if stopped else "interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
