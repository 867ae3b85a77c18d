"""The chaos proof for any stack, the general profile of the pipeline (``pipeline.py``): deploy a CDK app to a local
AWS, run every SQS event source mapping of one stack with the local runner under chaos, report per business key
(``effects.py``).

``python -m effectively_once_local chaos --app-dir DIR --stack NAME --input FILE --key JMESPATH`` or, from pytest,
``run_chaos(ChaosOptions(...))``, which returns the exit code and the report.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from .chaos import ChaosConfig
from .chaos_input import InputFileError, InputLine, body_key, compile_key, load_input, resolve_queue
from .deploy import DeployError
from .effects import build, effect_lines, kills, render, verdict
from .esm import PollerPool
from .html_report import RunClock, conclude, read_events
from .pipeline import Deployment, clear_run_dir, describe, drive, local_deployment, poller_specs
from .readback import read_dlq, scan_table
from .server import aws_env, local_endpoint, local_session
from .stack import DeployedMapping, disable, discover_mappings
from .traffic import plan


@dataclass(frozen=True)
class ChaosOptions:
    """One chaos run. ``key``: JMESPath over each body giving its business key. ``effect_table``: the effect's own
    store (logical id, physical name, or a part of the logical id that names one table of the stack) and
    ``effect_key`` its attribute holding the business key; without them, effects are the effect log lines and
    ``effect_takes_key`` states that a replayed effect is answered from its key. ``context``: ``cdk deploy -c``
    values (e.g. a short function timeout, so that stalls past the deadline end quickly)."""

    app_dir: Path
    stack: str
    input: Path
    key: str
    effect_table: str | None = None
    effect_key: str | None = None
    effect_takes_key: bool = False
    concurrency: int = 2
    chaos: ChaosConfig = ChaosConfig()
    context: dict[str, str] = field(default_factory=dict)
    report_path: Path = Path("reports/chaos-report.json")
    run_dir: Path = Path(".local-aws/chaos")
    drain_timeout_seconds: int = 600
    quiet: bool = False
    #: A local AWS where the stack is already deployed (tests deploy several stacks at once), with the ``cdk.out`` it
    #: was deployed from. :default: ``None``: a fresh local AWS, and ``cdk deploy`` of ``stack`` into it.
    endpoint: str | None = None
    cdk_out: Path | None = None

    def __post_init__(self) -> None:
        if (self.effect_table is None) != (self.effect_key is None):
            raise InputFileError("--effect-table and --effect-key go together (the table and its key attribute)")


def _table_name(session: Any, stack: str, name: str) -> str:
    cfn = session.client("cloudformation")
    tables = [
        r
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for r in page["StackResourceSummaries"]
        if r.get("ResourceType") == "AWS::DynamoDB::Table"
    ]
    for t in tables:
        if name in (t["LogicalResourceId"], t.get("PhysicalResourceId")):
            return str(t["PhysicalResourceId"])
    matches = [t for t in tables if name.lower() in t["LogicalResourceId"].lower()]
    if len(matches) != 1:
        shown = ", ".join(t["LogicalResourceId"] for t in tables) or "none"
        raise DeployError(f"--effect-table {name!r} names {len(matches)} tables of {stack} (its tables: {shown})")
    return str(matches[0]["PhysicalResourceId"])


def _attr_text(value: dict[str, Any] | None) -> str | None:
    if not value:
        return None
    for kind in ("S", "N"):
        if kind in value:
            return str(value[kind])
    return json.dumps(value, sort_keys=True)


def _store_counts(session: Any, table: str | None, key_attribute: str | None) -> Counter[str] | None:
    """Effects per key in the effect's own store (one item per executed effect), ``None`` without a store."""
    if table is None or key_attribute is None:
        return None
    items = scan_table(session.client("dynamodb"), table)
    return Counter(k for k in (_attr_text(i.get(key_attribute)) for i in items) if k is not None)


@dataclass(frozen=True)
class _Outcome:
    mappings: list[DeployedMapping]
    messages_sent: int
    poller_restarts: int
    dlq_bodies: list[str]
    store: Counter[str] | None
    table: str | None


def _run(
    opts: ChaosOptions, lines: list[InputLine], deployed: Deployment, log: Callable[[str], None], clock: RunClock
) -> _Outcome:
    """Discover, send, run until drained, read back (``pipeline.py``). Every client talks to the local AWS only."""
    with local_endpoint(deployed.endpoint):
        session = local_session(deployed.endpoint)
        mappings = discover_mappings(session, opts.stack, deployed.cdk_out)
        disable(session, mappings)
        for m in mappings:
            log(describe(m))
        labels = {m.label: m.queue_name for m in mappings}
        routes = {ln.number: resolve_queue(ln.queue, labels) for ln in lines}
        fifo = {m.label: m.fifo for m in mappings}
        table = _table_name(session, opts.stack, opts.effect_table) if opts.effect_table else None
        specs = poller_specs(
            mappings,
            run_dir=opts.run_dir,
            aws_env=aws_env(deployed.endpoint),
            chaos=opts.chaos,
            concurrency=opts.concurrency,
            key_expression=opts.key,
        )
        pool = PollerPool(specs)
        sqs = session.client("sqs")
        done = drive(
            sqs,
            pool,
            {m.label: m.mapping.queue_url for m in mappings},
            fifo,
            plan(lines, lambda line: routes[line.number], fifo, opts.chaos),
            clock=clock,
            run_dir=opts.run_dir,
            drain_timeout_seconds=opts.drain_timeout_seconds,
            quiet=opts.quiet,
            fresh_deploy=deployed.fresh,
        )
        dlq_bodies = [b for url in sorted({m.dlq_url for m in mappings if m.dlq_url}) for b in read_dlq(sqs, url)]
        store = _store_counts(session, table, opts.effect_key)
        return _Outcome(mappings, done.messages_sent, pool.restarts, dlq_bodies, store, table)


def run_chaos(opts: ChaosOptions, log: Callable[[str], None] = print) -> tuple[int, dict[str, Any]]:
    """Deploy, run, report. Returns the exit code (0 clean, 1 lost/duplicated/unexpected/unexplained) and the
    report (also written to ``opts.report_path``, with its HTML page beside it: ``html_report.py``).

    :raises InputFileError: the input cannot be used or names no queue of the stack.
    :raises LocalAwsError, DeployError: the local AWS or the deploy failed.
    """
    lines = load_input(opts.input, opts.key)  # checked whole before anything starts
    key_path = compile_key(opts.key)
    clear_run_dir(opts.run_dir)
    started = time.monotonic()
    clock = RunClock()
    deployment = local_deployment(
        app_dir=opts.app_dir,
        stack=opts.stack,
        context=dict(opts.context),
        run_dir=opts.run_dir,
        log=log,
        endpoint=opts.endpoint,
        cdk_out=opts.cdk_out,
    )
    with deployment as deployed:
        outcome = _run(opts, lines, deployed, log, clock)
    mappings, total, restarts = outcome.mappings, outcome.messages_sent, outcome.poller_restarts
    dlq_bodies, store, table = outcome.dlq_bodies, outcome.store, outcome.table
    sent = Counter(ln.key for ln in lines if ln.key is not None)
    log_counts = Counter(str(ln.get(names.FIELD_IDEMPOTENCY_KEY)) for ln in effect_lines(opts.run_dir))
    dlq_keys = {k for k in (body_key(key_path, b) for b in dlq_bodies) if k is not None}
    report = build(
        sent=sent,
        invalid_lines=sum(1 for ln in lines if ln.key is None),
        messages_sent=total,
        dlq_keys=dlq_keys,
        dead_lettered=len(dlq_bodies),
        log_counts=log_counts,
        store_counts=store,
        kill_records=kills(opts.run_dir),
        effect_takes_key=opts.effect_takes_key,
    )
    report["run"] = {
        "stack": opts.stack,
        "mappings": {
            m.label: {
                "queue": m.queue_name,
                "function": m.mapping.function_name,
                "handler": m.mapping.handler,
                "fifo": m.fifo,
            }
            for m in mappings
        },
        "key": opts.key,
        "effect_store": {"table": table, "key_attribute": opts.effect_key} if table else None,
        "chaos": opts.chaos.__dict__,
        "pollers_per_mapping": opts.concurrency,
        "poller_restarts": restarts,
        "seconds": round(time.monotonic() - started, 1),
    }
    code, reasons = verdict(report)
    report["verdict"] = {"exit_code": code, "reasons": reasons}
    t = report["total"]
    conclude(
        report,
        text=render(report),
        reasons=reasons,
        fail_prefix="FAIL: ",
        ok_line=(
            f"OK: {t['keys_sent']} keys, {t['effects']} effects, 0 lost, 0 duplicated, 0 unexpected, "
            f"{t['replayed_after_kill']} replayed after a kill"
        )
        if code == 0
        else None,
        report_path=opts.report_path,
        events=clock.events + read_events(opts.run_dir),
        clock=clock,
        title=f"{opts.stack}: chaos run",
        log=log,
    )
    return code, report
