"""The main job, the payments profile of the pipeline (``engine/pipeline.py``): deploy the sandbox stack to a local
AWS, push payments through it with chaos, report (``payments/payments_report.py``, and the general per-key report,
``proof/key_check.py``), then the outage backlog and its redrive (``payments/backlog.py``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..aws.deploy import DeployError
from ..aws.discovery import DeployedMapping, disable, discover_async_targets
from ..aws.readback import read_dlq, read_dlq_messages, scan_table
from ..aws.server import aws_env, local_endpoint, local_session
from ..base.json_lines import read_jsonl
from ..base.run_figures import LoadSampler, own_maxrss, run_figures
from ..base.run_figures import render as render_figures
from ..chaos.fault_model import ChaosConfig
from ..engine.pipeline import Deployment, Drive, clear_run_dir, describe, drain, drive, local_deployment, poller_specs
from ..proof import key_check as effects
from ..proof.sdk_faults_seen import demo_sdk_faults, render_demo_sdk_faults
from ..report.page import RunClock, conclude, read_events
from ..report.report_shape import DEMO, assemble
from ..runner.mapping_runner import PollerPool, PollerSpec
from ..traffic.chaos_input import body_key, compile_key
from ..traffic.producer import plan
from . import async_leg
from .backlog import DEFAULT_BACKLOG
from .payments_input import QUEUES, STANDARD, Line, load_payments, route
from .payments_report import build_report, render, verdict
from .payments_view import GATEWAY_SEAM, UNSAFE_ENV, Pipeline, discover, validity_check


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
    #: K charged and K new payments per DLQ for the outage backlog after the main run (``payments/backlog.py``);
    #: 0: none.
    redrive_backlog: int = DEFAULT_BACKLOG
    #: A local AWS where ``stack`` is deployed already, with the ``cdk.out`` it was deployed from (the function
    #: timeout and maxReceiveCount are then the deployed ones). :default: ``None``: a fresh local AWS and a deploy.
    endpoint: str | None = None
    cdk_out: Path | None = None

    def deploy_context(self) -> dict[str, str]:
        """``cdk deploy -c`` values: the function timeout and maxReceiveCount asked for, and a stack that can go."""
        return {
            "function_timeout_seconds": str(self.function_timeout_seconds),
            "max_receive_count": str(self.max_receive_count),
            "destroy_on_delete": "true",
        }


def _sandbox_pipelines(session: Any, opts: DemoOptions, log: Callable[[str], None]) -> dict[str, Pipeline]:
    """The stack's standard and FIFO pipelines, moto's own mappings switched off.

    :raises DeployError: the stack lacks one of them.
    """
    pipelines = discover(session, opts.stack)
    disable(session, [p.deployed for p in pipelines.values()])
    for p in pipelines.values():
        log(describe(p.deployed))
    missing = set(QUEUES) - set(pipelines)
    if missing:
        raise DeployError(f"stack {opts.stack} lacks a {'/'.join(sorted(missing))} pipeline")
    return pipelines


def per_key_report(
    session: Any, pipelines: dict[str, Pipeline], lines: list[Any], run_dir: Path, messages_sent: int
) -> dict[str, Any]:
    """The general chaos report (``proof/key_check.py``) for the payments: business key ``payment_id``, the ledgers as
    the effect store (items per ``payment_id``), the charge's effect lines as the cross-check."""
    key = compile_key("payment_id")
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    store: Counter[str] = Counter()
    for p in pipelines.values():
        store.update(item["payment_id"]["S"] for item in scan_table(dynamodb, p.ledger_table))
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
        failed_after_effect=Counter(
            str(ln.get(names.FIELD_IDEMPOTENCY_KEY))
            for ln in effects.log_lines(run_dir, names.MSG_EFFECT_REPEATED_AFTER_FAILURE)
        ),
    )


def _provider_calls(run_dir: Path, label: str) -> Counter[str]:
    return Counter(
        str(c.get("payment_id"))
        for c in read_jsonl(sorted(run_dir.glob(f"provider-{label}-*.jsonl")))
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
    """The outage backlog (``payments/backlog.py``): K charged and K new payments into each DLQ, both DLQs redriven with
    the ``redrive`` command's local move, the runner polling (without chaos) until the queues drain; the
    ``redrive`` block."""
    from ..redrive.dlq_redrive import local_move, targets
    from .backlog import charged_lines, counts, inject, named_originals, new_lines, read_first_processed_receive

    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    k = opts.redrive_backlog
    taken = {ln.payment_id for ln in lines if ln.payment_id}
    plan: dict[str, tuple[list[Line], list[Line]]] = {}
    poison_before: dict[str, int] = {}
    named_before: dict[str, set[str]] = {}
    calls_before: dict[str, Counter[str]] = {}
    for label, p in sorted(pipelines.items()):
        ledger_ids = {item["payment_id"]["S"] for item in scan_table(dynamodb, p.ledger_table)}
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
        urls = [p.mapping.queue_url for p in pipelines.values()]
        drain(
            pool, sqs, urls, moved, timeout_seconds=opts.drain_timeout_seconds, run_dir=opts.run_dir, quiet=opts.quiet
        )
    finally:
        pool.stop()
    block: dict[str, dict[str, int]] = {}
    for label, p in sorted(pipelines.items()):
        charged, new = plan[label]
        block[label] = counts(
            charged=[str(ln.payment_id) for ln in charged],
            new=[str(ln.payment_id) for ln in new],
            ledger=Counter(item["payment_id"]["S"] for item in scan_table(dynamodb, p.ledger_table)),
            calls_before=calls_before[label],
            calls_after=_provider_calls(opts.run_dir, label),
            poison_redriven=poison_before[label],
            dlq_after=read_dlq_messages(sqs, p.dlq_url),
            is_valid=is_valid,
            processed=read_first_processed_receive(opts.run_dir, label),
            named_before=named_before[label],
        )
    return block


def _conclude(
    sections: dict[str, Any], figures: dict[str, Any], opts: DemoOptions, clock: RunClock, log: Callable[[str], None]
) -> tuple[int, dict[str, Any]]:
    """The verdicts (the payments report's and the general per-key one's), the report assembled from ``sections``
    and them (``report_shape.assemble``), the text, the page and the JSON; the exit code and the report."""
    code, reasons = verdict(sections, opts.unsafe)
    if sections.get("async") is not None:
        found = async_leg.problems(sections["async"])
        reasons += found
        code = max(code, 1 if found else 0)
    if not opts.unsafe:
        # The general path's verdict too (the control's duplicates are expected, and judged above).
        per_key_code, per_key_reasons = effects.verdict(sections["per_key"])
        reasons += [f"per key: {r}" for r in per_key_reasons]
        code = max(code, per_key_code)
    report = assemble(DEMO, sections | {"verdict": {"exit_code": code, "reasons": reasons}})
    t = report["total"]
    conclude(
        report,
        text=render(report)
        + "\nper payment id (the general chaos report): "
        + effects.render(report["per_key"], kills=False).replace("\n", "\n  ")
        + "\n"
        + (async_leg.render(report["async"]) + "\n" if "async" in report else "")
        + render_demo_sdk_faults(report["sdk_faults"], opts.chaos)
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


@dataclass(frozen=True)
class _MainRun:
    """What the main run leaves for the report: its pollers (their specs, the pool), what it sent and when, and the
    machine's load while it ran (``LoadSampler.summary``)."""

    specs: list[tuple[PollerSpec, int]]
    pool: PollerPool
    done: Drive
    load: dict[str, Any]


def _drive_payments(
    session: Any,
    deployed: Deployment,
    opts: DemoOptions,
    pipelines: dict[str, Pipeline],
    lines: list[Line],
    bus: tuple[DeployedMapping | None, set[int]],
    clock: RunClock,
) -> _MainRun:
    """The payments through the queues, the lines numbered in ``bus`` through the asynchronous target found (if
    any), with chaos, until drained (``pipeline.drive``)."""
    found, through_bus = bus
    specs = poller_specs(
        [p.deployed for p in pipelines.values()] + ([found] if found is not None else []),
        run_dir=opts.run_dir,
        aws_env=aws_env(deployed.endpoint),
        chaos=opts.chaos,
        concurrency=opts.concurrency,
        handler_root=opts.handler_root,
        seam=GATEWAY_SEAM,
        env_overrides=UNSAFE_ENV if opts.unsafe else None,
    )
    pool = PollerPool(specs)
    urls = {label: p.mapping.queue_url for label, p in pipelines.items()}
    fifo = dict(QUEUES)
    if found is not None:
        urls[found.label], fifo[found.label] = found.mapping.queue_url, False
    bus_label = found.label if found is not None else STANDARD
    load = LoadSampler().start()
    try:
        done = drive(
            session.client("sqs"),
            pool,
            urls,
            fifo,
            plan(lines, lambda ln: bus_label if ln.number in through_bus else route(ln.account_id), fifo, opts.chaos),
            clock=clock,
            run_dir=opts.run_dir,
            drain_timeout_seconds=opts.drain_timeout_seconds,
            quiet=opts.quiet,
            report_path=opts.report_path,
            fresh_deploy=deployed.fresh,
            senders={found.label: async_leg.sender(session, found)} if found is not None else None,
        )
    finally:
        load.stop()
    return _MainRun(specs, pool, done, load.summary())


def _after_the_run(
    session: Any,
    pipelines: dict[str, Pipeline],
    payments: tuple[list[Line], Callable[[str], bool]],
    main: _MainRun,
    bus: tuple[DeployedMapping | None, list[Line]],
    opts: DemoOptions,
    clock: RunClock,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The outage backlog and its redrive (the report's ``redrive`` section), then the asynchronous leg's on-failure
    redrive (its ``async`` section), each ``None`` when it did not run; ``payments``: the lines and the handler's
    validity rule; ``bus``: the asynchronous target found and the lines sent through it."""
    lines, is_valid = payments
    found, bus_lines = bus
    sections: dict[str, Any] = {"redrive": None, "async": None}
    if opts.redrive_backlog and not opts.unsafe:
        k = opts.redrive_backlog
        log(f"outage backlog: {k} charged + {k} new payments into each DLQ, then a redrive")
        clock.mark("outage backlog")
        # The queues' pollers only: the bus leg's pollers would add load (and deadline kills) for nothing.
        queued = [(spec, n) for spec, n in main.specs if spec.mapping.async_config is None]
        sections["redrive"] = redrive_backlog(session, pipelines, lines, is_valid, queued, opts)
    if found is not None:
        log(f"asynchronous leg: {len(bus_lines)} payments through the bus; then its on-failure redrive")
        clock.mark("on-failure redrive")
        sections["async"] = async_leg.leg(
            session,
            found,
            sent=bus_lines,
            ledger_table=pipelines[STANDARD].ledger_table,
            specs=[(spec, n) for spec, n in main.specs if spec.mapping.async_config is not None],
            backlog=opts.redrive_backlog or 5,
            run_dir=opts.run_dir,
            drain_timeout_seconds=opts.drain_timeout_seconds,
            seed=opts.chaos.seed,
        )
    return sections


def run_demo(opts: DemoOptions, log: Callable[[str], None] = print) -> tuple[int, dict[str, Any]]:
    """Returns the exit code and the report. Raises ``PaymentsFileError``, ``LocalAwsError``, ``DeployError``,
    ``SendError``, ``DlqReadError``; ``OSError`` when the report cannot be written (after it is shown)."""
    lines = load_payments(opts.payments)  # checked whole before anything starts
    is_valid = validity_check(opts.handler_root)
    clear_run_dir(opts.run_dir)
    started = time.monotonic()
    clock = RunClock()
    deployment = local_deployment(
        app_dir=opts.app_dir,
        stack=opts.stack,
        context=opts.deploy_context(),
        run_dir=opts.run_dir,
        log=log,
        endpoint=opts.endpoint,
        cdk_out=opts.cdk_out,
    )
    with deployment as deployed, local_endpoint(deployed.endpoint):  # every client below talks to the local AWS
        session = local_session(deployed.endpoint)
        pipelines = _sandbox_pipelines(session, opts, log)
        # The asynchronous leg (async_leg.py): a share of the standard queue's valid payments through the bus.
        found = None if opts.unsafe else async_leg.target(discover_async_targets(session, opts.stack, deployed.cdk_out))
        bus_lines = [
            ln for ln in lines if found is not None and async_leg.chosen(ln, is_valid, async_leg.DEFAULT_SHARE)
        ]
        bus = (found, {ln.number for ln in bus_lines})
        main = _drive_payments(session, deployed, opts, pipelines, lines, bus, clock)
        clock.report_taken()
        sections = build_report(session, pipelines, lines, opts.run_dir, is_valid)
        sections["per_key"] = per_key_report(session, pipelines, lines, opts.run_dir, main.done.messages_sent)
        sections |= _after_the_run(session, pipelines, (lines, is_valid), main, (found, bus_lines), opts, clock, log)
    # The runner's peak after the report and the backlog were built; the pollers' of the main run.
    figures = run_figures(
        payments=len(lines),
        processing_seconds=main.done.drained - main.done.sending_started,
        runner_maxrss=own_maxrss(),
        poller_maxrss=int(main.pool.peak_rss.value),
        load_average=main.load,
    )
    # the main run's, the backlog's and the asynchronous leg's pollers: one run folder
    sections["sdk_faults"] = demo_sdk_faults(opts.run_dir)
    sections["run"] = {
        "unsafe": opts.unsafe,
        "chaos": opts.chaos.__dict__,
        "pollers_per_queue": opts.concurrency,
        "poller_restarts": main.pool.restarts,
        "messages_sent": main.done.messages_sent,
        "seconds": round(time.monotonic() - started, 1),
        **figures,
    }
    return _conclude(sections, figures, opts, clock, log)
