"""``python -m effectively_once.local``: the local AWS demo and its tools. ``--help`` per subcommand."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from .chaos import ChaosConfig
from .deploy import DeployError
from .producer import PaymentsFileError, generate_sample
from .remote import SETTLE_SECONDS, WAIT_MARGIN_SECONDS
from .server import LocalAwsError


def _default_handler_root(app_dir: Path) -> Path:
    repo = app_dir / "lambda_src"
    if repo.is_dir():
        return repo
    return Path(__file__).resolve().parent.parent / "_lambda_src"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, got {text}")
    return value


from botocore.exceptions import BotoCoreError, ClientError

# Errors that end in one line on stderr and exit code 2, never a traceback.
_ONE_LINE_ERRORS: tuple[type[Exception], ...] = (
    PaymentsFileError, LocalAwsError, DeployError, BotoCoreError, ClientError,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m effectively_once.local", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="deploy to a local AWS (moto), send payments with chaos, report")
    demo.add_argument("--payments", type=Path, default=Path("samples/payments.jsonl"), help="JSON Lines input")
    demo.add_argument("--app-dir", type=Path, default=Path("."), help="folder with cdk.json and node_modules")
    demo.add_argument("--handler-root", type=Path, default=None, help="folder holding the handler package")
    demo.add_argument("--stack", default="PaymentsSandbox")
    demo.add_argument("--function-timeout", type=int, default=2, help="seconds (context function_timeout_seconds)")
    demo.add_argument("--max-receive-count", type=int, default=5)
    demo.add_argument("--concurrency", type=int, default=2, help="poller processes per queue")
    demo.add_argument("--resend", type=_fraction, default=0.10, help="fraction of payments a producer resends")
    demo.add_argument("--concurrent-duplicates", type=_fraction, default=0.05, help="fraction sent twice at once")
    demo.add_argument("--crash-after-charge", type=_fraction, default=0.03, help="fraction of invocations killed")
    demo.add_argument("--crash-after-complete", type=_fraction, default=0.03, help="fraction of invocations killed")
    demo.add_argument("--timeouts", type=_fraction, default=0.02, help="fraction of invocations stalled past the deadline")
    demo.add_argument("--no-chaos", action="store_true", help="no duplicates, no crashes")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--unsafe", action="store_true", help="control: idempotency layer off and no provider key")
    demo.add_argument("--report", type=Path, default=Path("reports/demo-report.json"))
    demo.add_argument("--run-dir", type=Path, default=Path(".local-aws/run"))
    demo.add_argument("--drain-timeout", type=int, default=600, help="seconds to wait for the queues to drain")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")

    sample = sub.add_parser("sample", help="write a deterministic sample payments file")
    sample.add_argument("--count", type=int, default=1000)
    sample.add_argument("--accounts", type=int, default=40)
    sample.add_argument("--seed", type=int, default=2026)
    sample.add_argument("--out", type=Path, default=Path("samples/payments.jsonl"))

    for name, text in (
        ("produce", "send the payments file to a deployed stack (a real AWS account after `cdk deploy`)"),
        ("report", "wait for a deployed stack's queues to drain, then report from its ledgers and DLQs"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--stack", default="PaymentsSandbox")
        cmd.add_argument("--payments", type=Path, default=Path("samples/payments.jsonl"))
        cmd.add_argument("--handler-root", type=Path, default=None)
        if name == "produce":
            cmd.add_argument("--resend", type=_fraction, default=0.10)
            cmd.add_argument("--concurrent-duplicates", type=_fraction, default=0.05)
            cmd.add_argument("--seed", type=int, default=7)
        else:
            cmd.add_argument("--wait", type=int, default=None, help="seconds to wait for the queues to drain "
                             "(default: (maxReceiveCount + 1) x visibility timeout of the deployed queues, "
                             f"plus the settle time and {WAIT_MARGIN_SECONDS}s)")
            cmd.add_argument(
                "--settle", type=int, default=SETTLE_SECONDS, help="seconds the queues must stay empty (SQS counts are approximate)"
            )
            cmd.add_argument("--report", type=Path, default=Path("reports/aws-report.json"))

    args = parser.parse_args(argv)
    if args.command in ("produce", "report"):
        from .remote import produce, report

        root = (args.handler_root or _default_handler_root(Path(".").resolve())).resolve()
        try:
            if args.command == "produce":
                return produce(args.stack, args.payments, ChaosConfig(resend=args.resend, concurrent_duplicates=args.concurrent_duplicates, seed=args.seed))
            return report(args.stack, args.payments, root, args.wait, args.report, args.settle)
        except _ONE_LINE_ERRORS as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.command == "sample":
        rows = generate_sample(args.count, args.accounts, args.seed)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(f"wrote {len(rows)} lines to {args.out}")
        return 0

    from .demo import DemoOptions, run_demo

    chaos = (
        ChaosConfig(seed=args.seed)
        if args.no_chaos
        else ChaosConfig(
            resend=args.resend,
            concurrent_duplicates=args.concurrent_duplicates,
            crash_after_charge=args.crash_after_charge,
            crash_after_complete=args.crash_after_complete,
            timeout=args.timeouts,
            seed=args.seed,
        )
    )
    opts = DemoOptions(
        payments=args.payments,
        app_dir=args.app_dir.resolve(),
        handler_root=(args.handler_root or _default_handler_root(args.app_dir.resolve())).resolve(),
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
    )
    # A SIGTERM (a CI timeout, `kill`) stops the local AWS like Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code, _ = run_demo(opts)
    except _ONE_LINE_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: local AWS stopped", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
