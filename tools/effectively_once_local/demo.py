"""The main job: deploy to a local AWS, push payments through with chaos, report."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from . import effects
from .backlog import DEFAULT_BACKLOG
from .chaos import ChaosConfig, EventLog
from .deploy import DeployError, deploy
from .esm import PollerPool, PollerSpec
from .figures import LoadSampler, own_maxrss, run_figures
from .figures import render as render_figures
from .html_report import RunClock, conclude, read_events
from .producer import FIFO, STANDARD, Line, load_payments, plan_messages, send
from .report import _jsonl, build_report, render, scan_ledger, verdict
from .server import LocalAwsError, MotoServer, aws_env, local_endpoint, local_session
from .stack import Pipeline, disable_mappings, discover


@dataclass(frozen=True)
class DemoOptions:
    payments: Path
    app_dir: Path
    handler_root: Path
    stack: str = "PaymentsSandbox"
    function_timeout_seconds: int = 2
    max_receive_count: int = 5
    concurrency: int = 2
    chaos: ChaosConfig = ChaosConfig()
    unsafe: bool = False
    report_path: Path = Path("reports/demo-report.json")
    run_dir: Path = Path(".local-aws/run")
    drain_timeout_seconds: int = 600
    quiet: bool = False
    #: K charged and K new payments per DLQ for the outage backlog after the main run (``backlog.py``); 0: none.
    redrive_backlog: int = DEFAULT_BACKLOG


def _bar(total: int, desc: str, quiet: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="msg", disable=quiet, file=sys.stderr, mininterval=0.5, leave=True)


def _in_queue(sqs: Any, urls: list[str]) -> int:
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    total = 0
    for url in urls:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        total += sum(int(attrs.get(n, 0)) for n in names)
    return total


def _validity_check(handler_root: Path) -> Callable[[str], bool]:
    """The handler's own validation rules decide which lines are valid payments."""
    sys.path.insert(0, str(handler_root))
    from payments.model import InvalidPayment, parse_payment

    def is_valid(body: str) -> bool:
        try:
            parse_payment(body)
            return True
        except InvalidPayment:
            return False
        except Exception:  # noqa: BLE001 - e.g. an integer over 4,300 digits: the handler cannot accept it either
            return False

    return is_valid


#: The files a run writes into its folder (esm.py, chaos.py): a new run removes the previous run's, and nothing else
#: (the folder may hold the payments file, or be the working folder).
RUN_FILES = ("deliveries-*.jsonl", "provider-*.jsonl", "chaos-*.jsonl", "function-*.log", "sent-*.jsonl")


def clear_run_dir(run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    for pattern in RUN_FILES:
        for stale in run_dir.glob(pattern):
            stale.unlink()


def per_key_report(
    session: Any, pipelines: dict[str, Pipeline], lines: list[Any], run_dir: Path, messages_sent: int
) -> dict[str, Any]:
    """The general chaos report (``effects.py``) for the payments: business key ``payment_id``, the ledgers as the
    effect store (items per ``payment_id``), the charge's effect lines as the cross-check."""
    from collections import Counter

    from .chaos_input import body_key, compile_key
    from .report import read_dlq, scan_ledger

    key = compile_key("payment_id")
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    store: Counter[str] = Counter()
    for p in pipelines.values():
        store.update(item["payment_id"]["S"] for item in scan_ledger(dynamodb, p.ledger_table))
    dlq_bodies = [b for p in pipelines.values() for b in read_dlq(sqs, p.dlq_url)]
    keys = [body_key(key, ln.body) for ln in lines]
    return effects.build(
        sent=Counter(k for k in keys if k is not None),
        invalid_lines=sum(1 for k in keys if k is None),
        messages_sent=messages_sent,
        dlq_keys={k for k in (body_key(key, b) for b in dlq_bodies) if k is not None},
        dead_lettered=len(dlq_bodies),
        log_counts=Counter(str(ln.get(names.FIELD_IDEMPOTENCY_KEY)) for ln in effects.effect_lines(run_dir)),
        store_counts=store,
        kill_records=effects.kills(run_dir),
        effect_takes_key=False,
    )


def _drain_options(opts: DemoOptions) -> dict[str, Any]:
    return {"timeout_seconds": opts.drain_timeout_seconds, "run_dir": opts.run_dir, "quiet": opts.quiet}


def drain(
    pool: PollerPool, sqs: Any, urls: list[str], total: int, *, timeout_seconds: int, run_dir: Path, quiet: bool
) -> None:
    """Supervise the pollers until the queues hold nothing twice in a row (``make demo`` and ``chaos``).

    :raises LocalAwsError: not drained within ``timeout_seconds``.
    """
    deadline = time.monotonic() + timeout_seconds
    settled_polls = 0
    with _bar(total, "processing", quiet) as bar:
        while settled_polls < 2:
            if time.monotonic() > deadline:
                raise LocalAwsError(f"queues not drained after {timeout_seconds}s; see {run_dir}")
            time.sleep(1)
            pool.supervise()
            remaining = _in_queue(sqs, urls)
            bar.n = max(0, total - remaining)
            bar.refresh()
            settled_polls = settled_polls + 1 if remaining == 0 else 0


def _provider_calls(run_dir: Path, label: str) -> Counter[str]:
    return Counter(
        str(c.get("payment_id"))
        for c in _jsonl(sorted(run_dir.glob(f"provider-{label}-*.jsonl")))
        if c.get("event") == "call"
    )


def redrive_backlog(
    session: Any,
    pipelines: dict[str, Pipeline],
    lines: list[Any],
    is_valid: Callable[[str], bool],
    specs: list[tuple[PollerSpec, int]],
    opts: DemoOptions,
) -> dict[str, dict[str, int]]:
    """The outage backlog (``backlog.py``): K charged and K new payments into each DLQ, both DLQs redriven with
    the ``redrive`` command's local move, the runner polling (without chaos) until the queues drain; the
    ``redrive`` block."""
    from dataclasses import replace

    from .backlog import charged_lines, counts, inject, named_originals, new_lines, read_first_processed_receive
    from .redrive import local_move, targets
    from .report import read_dlq_messages

    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    k = opts.redrive_backlog
    taken = {ln.payment_id for ln in lines if ln.payment_id}
    plan: dict[str, tuple[list[Line], list[Line]]] = {}
    poison_before: dict[str, int] = {}
    named_before: dict[str, set[str]] = {}
    calls_before: dict[str, Counter[str]] = {}
    for label, p in sorted(pipelines.items()):
        ledger_ids = {item["payment_id"]["S"] for item in scan_ledger(dynamodb, p.ledger_table)}
        plan[label] = (charged_lines(lines, label, ledger_ids, k, is_valid), new_lines(lines, label, k, taken))
        dlq_before = read_dlq_messages(sqs, p.dlq_url)
        poison_before[label] = sum(1 for m in dlq_before if not is_valid(m.body))
        named_before[label] = named_originals(dlq_before)
        calls_before[label] = _provider_calls(opts.run_dir, label)
        inject(sqs, p.dlq_url, label, plan[label][0] + plan[label][1])
    calm = [(replace(spec, chaos=ChaosConfig(seed=opts.chaos.seed)), n) for spec, n in specs]
    pool = PollerPool(calm)
    pool.start()
    try:
        moved = 0
        for target in targets(session, opts.stack, None):
            moved += local_move(sqs, target).moved
        drain(pool, sqs, [p.mapping.queue_url for p in pipelines.values()], moved, **_drain_options(opts))
    finally:
        pool.stop()
    block: dict[str, dict[str, int]] = {}
    for label, p in sorted(pipelines.items()):
        charged, new = plan[label]
        block[label] = counts(
            charged=[str(ln.payment_id) for ln in charged],
            new=[str(ln.payment_id) for ln in new],
            ledger=Counter(item["payment_id"]["S"] for item in scan_ledger(dynamodb, p.ledger_table)),
            calls_before=calls_before[label],
            calls_after=_provider_calls(opts.run_dir, label),
            poison_redriven=poison_before[label],
            dlq_after=read_dlq_messages(sqs, p.dlq_url),
            is_valid=is_valid,
            processed=read_first_processed_receive(opts.run_dir, label),
            named_before=named_before[label],
        )
    return block


def run_demo(opts: DemoOptions, log: Callable[[str], None] = print) -> tuple[int, dict[str, Any]]:
    """Returns the exit code and the report. Raises ``PaymentsFileError``, ``LocalAwsError``, ``DeployError``,
    ``SendError``, ``DlqReadError``; ``OSError`` when the report cannot be written (after it is shown)."""

    lines = load_payments(opts.payments)  # checked whole before anything starts
    is_valid = _validity_check(opts.handler_root)
    clear_run_dir(opts.run_dir)
    started = time.monotonic()
    clock = RunClock()
    with MotoServer(log_path=opts.run_dir / "moto.log") as aws, ExitStack() as scope:
        log(f"local AWS (moto) on {aws.endpoint}")
        context = {
            "function_timeout_seconds": str(opts.function_timeout_seconds),
            "max_receive_count": str(opts.max_receive_count),
            "destroy_on_delete": "true",
        }
        t0 = time.monotonic()
        deploy(aws.endpoint, opts.app_dir, opts.stack, context, opts.run_dir / "cdk.log")
        log(f"deployed {opts.stack} with the CDK CLI in {time.monotonic() - t0:.0f}s")
        env = aws_env(aws.endpoint)
        session = local_session(aws.endpoint)
        scope.enter_context(local_endpoint(aws.endpoint))  # every client below talks to the local AWS only
        pipelines: dict[str, Pipeline] = discover(session, opts.stack)
        disable_mappings(session, pipelines)
        for label, p in sorted(pipelines.items()):
            m = p.mapping
            log(
                f"{label}: batch size {m.batch_size}, visibility timeout {m.visibility_timeout_seconds}s, "
                f"maxReceiveCount {m.max_receive_count}, function timeout {m.function_timeout_seconds}s"
            )
        missing = {STANDARD, FIFO} - set(pipelines)
        if missing:
            raise DeployError(f"stack {opts.stack} lacks a {'/'.join(sorted(missing))} pipeline")
        specs = [
            (
                PollerSpec(
                    mapping=p.mapping,
                    run_dir=str(opts.run_dir),
                    handler_root=str(opts.handler_root),
                    aws_env=env,
                    chaos=opts.chaos,
                    unsafe=opts.unsafe,
                ),
                opts.concurrency,
            )
            for p in pipelines.values()
        ]
        pool = PollerPool(specs)
        sqs = session.client("sqs")
        urls = {label: p.mapping.queue_url for label, p in pipelines.items()}
        plan = plan_messages(lines, opts.chaos)
        first = {q: [m for m in msgs if m.kind != "resend"] for q, msgs in plan.items()}
        resends = {q: [m for m in msgs if m.kind == "resend"] for q, msgs in plan.items()}
        total = sum(len(v) for v in plan.values())
        sending = time.monotonic()
        load = LoadSampler().start()
        try:
            # Originals go in before polling starts, resends while it runs (a producer retrying). Sending while
            # pollers run is slow on moto: every SendMessage scans the whole queue (Queue.attributes).
            sent_logs = {queue: EventLog(opts.run_dir / f"sent-{queue}.jsonl") for queue in plan}
            with _bar(total, "sending", opts.quiet) as bar:
                clock.mark("deployed: sending")
                for queue, msgs in first.items():
                    send(sqs, urls, {queue: msgs}, clock.progress(queue, bar.update), sent_logs[queue].write)
                pool.start()
                clock.mark("polling")
                for queue, msgs in resends.items():
                    send(sqs, urls, {queue: msgs}, clock.progress(queue, bar.update), sent_logs[queue].write)
            drain(pool, sqs, list(urls.values()), total, **_drain_options(opts))
            drained = time.monotonic()
        finally:
            pool.stop()
            load.stop()
        clock.report_taken()
        report = build_report(session, pipelines, lines, opts.run_dir, is_valid)
        report["per_key"] = per_key_report(session, pipelines, lines, opts.run_dir, total)
        if opts.redrive_backlog and not opts.unsafe:
            k = opts.redrive_backlog
            log(f"outage backlog: {k} charged + {k} new payments into each DLQ, then a redrive")
            clock.mark("outage backlog")
            report["redrive"] = redrive_backlog(session, pipelines, lines, is_valid, specs, opts)
    # The runner's peak after the report and the backlog were built; the pollers' of the main run.
    figures = run_figures(
        payments=len(lines),
        processing_seconds=drained - sending,
        runner_maxrss=own_maxrss(),
        poller_maxrss=int(pool.peak_rss.value),
        load_average=load.summary(),
    )
    report["run"] = {
        "unsafe": opts.unsafe,
        "chaos": opts.chaos.__dict__,
        "pollers_per_queue": opts.concurrency,
        "poller_restarts": pool.restarts,
        "messages_sent": total,
        "seconds": round(time.monotonic() - started, 1),
        **figures,
    }
    code, reasons = verdict(report, opts.unsafe)
    if not opts.unsafe:
        # The general path's verdict too (the control's duplicates are expected, and judged above).
        per_key_code, per_key_reasons = effects.verdict(report["per_key"])
        reasons += [f"per key: {r}" for r in per_key_reasons]
        code = max(code, per_key_code)
    report["verdict"] = {"exit_code": code, "reasons": reasons}
    t = report["total"]
    conclude(
        report,
        text=render(report)
        + "\nper payment id (the general chaos report): "
        + effects.render(report["per_key"]).replace("\n", "\n  ")
        + "\n"
        + render_figures(figures),
        reasons=reasons,
        fail_prefix="CONTROL: " if opts.unsafe else "FAIL: ",
        ok_line=(
            f"OK: {t['valid_payments']} valid payments, {t['charges']} charges, 0 lost, 0 double-charged, "
            f"{t['duplicates_suppressed']} duplicates suppressed, {t['dead_lettered']} in DLQs"
        )
        if code == 0 and not opts.unsafe
        else None,
        report_path=opts.report_path,
        events=clock.events + read_events(opts.run_dir),
        clock=clock,
        title=f"{opts.stack}: payments demo{' (control run, no guards)' if opts.unsafe else ''}",
        log=log,
    )
    return code, report
