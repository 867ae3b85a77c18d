"""The demo's asynchronous leg (issue 23): a share of the valid payments arrives through the sandbox's EventBridge
bus instead of the standard queue, and the local runner plays Lambda's asynchronous queue for the standard payment
function (retries, duplicates without an error, on-failure records) with the demo's kills.

Which payments: a stable share (:data:`DEFAULT_SHARE`, by the CRC-32 of the payment id) of the valid payments whose
account routes to the standard queue, so their charges land in the standard ledger and the demo's totals hold them
as they hold every payment. Every copy the producer sends (a concurrent duplicate, a resend) is a new ``PutEvents``
with a new event id, as a producer's retry is.

The ``async`` block of the report (:func:`leg`): ``payments`` (sent through the bus), ``events_put``,
``invocations`` (with ``duplicate_deliveries``, Lambda's repeat without an error, and ``retries``), ``kills``,
``lost`` (neither charged nor in the on-failure queue), ``double_charged``, ``on_failure`` (the records the run left,
by condition) and ``redrive``: the on-failure queue's records, plus an outage backlog of K charged and K new payments
written as Lambda's destination records, invoked again through the function's inbox
(``on_failure_redrive.local_redrive_on_failure``) with the runner polling calmly: ``charged_resent`` and
``charged_new_provider_calls`` (must be 0), ``new_sent`` and ``new_charged`` (all of them), ``double_charged`` (0).
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..aws.async_inbox import RETRIES_EXHAUSTED, destination_record
from ..aws.discovery import DeployedMapping
from ..aws.readback import read_dlq_messages, scan_table
from ..base.json_lines import read_jsonl
from ..chaos.fault_model import ChaosConfig
from ..engine.pipeline import drain
from ..redrive.on_failure_redrive import local_redrive_on_failure
from ..runner.mapping_runner import PollerPool, PollerSpec
from ..traffic.producer import Sender, event_sender
from .payments_input import STANDARD, Line, route

#: The share of the standard queue's valid payments sent through the bus instead.
DEFAULT_SHARE = 0.2


def target(mappings: list[DeployedMapping]) -> DeployedMapping | None:
    """The asynchronous target the sandbox's bus delivers to (the first with an EventBridge source), if any."""
    return next((m for m in mappings if any(s.kind == "eventbridge" for s in m.sources)), None)


def sender(session: Any, found: DeployedMapping) -> Sender:
    """``PutEvents`` on the target's bus with its rule's source and detail-type."""
    rule = next(s for s in found.sources if s.kind == "eventbridge")
    return event_sender(
        session.client("events"),
        bus_name=str(rule.bus_name),
        source=str(rule.source),
        detail_type=str(rule.detail_type),
    )


def chosen(line: Line, is_valid: Callable[[str], bool], share: float) -> bool:
    """Whether a payment goes through the bus: valid, routed to the standard queue, in the stable share."""
    pid = line.payment_id
    return bool(
        pid
        and route(line.account_id) == STANDARD
        and is_valid(line.body)
        and zlib.crc32(pid.encode()) % 1000 < share * 1000
    )


def _provider_calls(run_dir: Path) -> Counter[str]:
    return Counter(
        str(c.get("payment_id"))
        for c in read_jsonl(sorted(run_dir.glob("provider-*.jsonl")))
        if c.get("event") == "call"
    )


def _ledger(session: Any, table: str) -> Counter[str]:
    return Counter(item["payment_id"]["S"] for item in scan_table(session.client("dynamodb"), table))


def _event(detail: dict[str, Any], source: str, detail_type: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": "2026-12-02T00:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
    }


def _main_run(
    session: Any, found: DeployedMapping, sent: list[Line], ledger: Counter[str], run_dir: Path
) -> dict[str, Any]:
    deliveries = [d for d in read_jsonl(sorted(run_dir.glob(f"deliveries-{found.label}-*.jsonl"))) if d.get("invoked")]
    kills = [k for k in read_jsonl(sorted(run_dir.glob(f"chaos-{found.label}-*.jsonl"))) if k.get("event") == "kill"]
    records = read_dlq_messages(session.client("sqs"), str(found.on_failure_url)) if found.on_failure_url else []
    conditions = Counter(json.loads(m.body).get("requestContext", {}).get("condition") for m in records)
    in_records = {
        str((json.loads(m.body).get("requestPayload") or {}).get("detail", {}).get("payment_id")) for m in records
    }
    ids = {str(ln.payment_id) for ln in sent}
    return {
        "payments": len(ids),
        "events_put": len(read_jsonl([run_dir / f"sent-{found.label}.jsonl"])),
        "invocations": len(deliveries),
        "duplicate_deliveries": sum(1 for d in deliveries if d.get("duplicate")),
        "retries": sum(1 for d in deliveries if int(d.get("attempt") or 1) > 1),
        "kills": len(kills),
        "lost": sum(1 for p in ids if ledger[p] == 0 and p not in in_records),
        "double_charged": sum(1 for p in ids if ledger[p] > 1),
        "on_failure": {"records": len(records), "by_condition": dict(sorted(conditions.items()))},
    }


def _outage_backlog(
    sqs: Any, found: DeployedMapping, sent: list[Line], ledger: Counter[str], backlog: int
) -> tuple[list[str], list[dict[str, Any]]]:
    """The outage backlog written into the target's on-failure queue as Lambda's destination records: up to
    ``backlog`` payments the run charged once, and ``backlog`` new ones the ledger has not seen; ``(the charged
    payment ids, the new payments)``."""
    rule = next(s for s in found.sources if s.kind == "eventbridge")
    charged = sorted(p for p in {str(ln.payment_id) for ln in sent} if ledger[p] == 1)[:backlog]
    by_id = {str(ln.payment_id): json.loads(ln.body) for ln in sent}
    template = next(iter(by_id.values()), {"account_id": "acct-000", "currency": "EUR"})
    new = [
        {**template, "payment_id": f"async-backlog-{n:04d}", "amount": 1000 + n}
        for n in range(1, backlog + 1)
        if ledger[f"async-backlog-{n:04d}"] == 0
    ]
    assert found.on_failure_url and found.mapping.async_config is not None
    for detail in [by_id[p] for p in charged] + new:
        record = destination_record(
            _event(detail, str(rule.source), str(rule.detail_type)),
            function_arn=found.mapping.async_config.function_arn,
            condition=RETRIES_EXHAUSTED,
            approximate_invoke_count=3,
            error_type="TimeoutError",
            error_message="an outage: the provider timed out on every attempt",
        )
        sqs.send_message(QueueUrl=found.on_failure_url, MessageBody=json.dumps(record))
    return charged, new


def leg(
    session: Any,
    found: DeployedMapping,
    *,
    sent: list[Line],
    ledger_table: str,
    specs: list[tuple[PollerSpec, int]],
    backlog: int,
    run_dir: Path,
    drain_timeout_seconds: int,
    seed: int,
) -> dict[str, Any]:
    """The ``async`` block (module docstring): the main run's figures, then the on-failure redrive with its
    outage backlog, polled by ``specs`` (the target's pollers) without injected chaos."""
    block = _main_run(session, found, sent, _ledger(session, ledger_table), run_dir)
    sqs = session.client("sqs")
    assert found.on_failure_url and found.mapping.async_config is not None
    charged, new = _outage_backlog(sqs, found, sent, _ledger(session, ledger_table), backlog)
    calls_before = _provider_calls(run_dir)
    calm = [(replace(spec, chaos=ChaosConfig(seed=seed)), n) for spec, n in specs]
    pool = PollerPool(calm)
    pool.start()
    try:
        outcome = local_redrive_on_failure(sqs, found.on_failure_url, found.mapping.function_name)
        drain(
            pool,
            sqs,
            [found.mapping.queue_url],
            outcome.moved,
            timeout_seconds=drain_timeout_seconds,
            run_dir=run_dir,
            quiet=True,
        )
    finally:
        pool.stop()
    after, calls_after = _ledger(session, ledger_table), _provider_calls(run_dir)
    new_ids = [str(d["payment_id"]) for d in new]
    block["redrive"] = {
        "records_redriven": outcome.moved,
        "records_left": outcome.left,
        "charged_resent": len(charged),
        "charged_new_provider_calls": sum(calls_after[p] - calls_before[p] for p in charged),
        "new_sent": len(new_ids),
        "new_charged": sum(1 for p in new_ids if after[p] == 1),
        "double_charged": sum(1 for p in charged + new_ids if after[p] > 1),
        "on_failure_after": len(read_dlq_messages(sqs, found.on_failure_url)),
    }
    return block


def problems(block: dict[str, Any]) -> list[str]:
    """The verdict's reasons from the ``async`` block (empty: it passes)."""
    out = []
    if block.get("lost"):
        out.append(f"async: {block['lost']} payments sent through the bus lost (neither charged nor recorded)")
    if block.get("double_charged"):
        out.append(f"async: {block['double_charged']} payments sent through the bus charged more than once")
    redrive = block.get("redrive") or {}
    if redrive.get("charged_new_provider_calls"):
        out.append(
            f"async redrive: {redrive['charged_new_provider_calls']} provider calls for payments already charged"
        )
    if redrive.get("new_charged", 0) != redrive.get("new_sent", 0):
        out.append(
            f"async redrive: {redrive.get('new_charged')} of {redrive.get('new_sent')} new payments charged once"
        )
    if redrive.get("double_charged"):
        out.append(f"async redrive: {redrive['double_charged']} payments charged more than once")
    if redrive.get("records_left") or redrive.get("on_failure_after"):
        out.append("async redrive: records left in the on-failure queue")
    return out


def _by_condition(counts: dict[str, int]) -> str:
    """`` (RetriesExhausted=3, EventAgeExceeded=1)``, or nothing when there are none (no raw dict in the text)."""
    return f" ({', '.join(f'{k}={v}' for k, v in counts.items())})" if counts else ""


def render(block: dict[str, Any]) -> str:
    """The text report's ``async`` lines."""
    redrive = block.get("redrive") or {}
    return (
        f"async (EventBridge -> the standard function): {block['payments']} payments, "
        f"{block['events_put']} events put, "
        f"{block['invocations']} invocations ({block['duplicate_deliveries']} duplicate deliveries, "
        f"{block['retries']} retries), {block['kills']} kills, {block['lost']} lost, "
        f"{block['double_charged']} double-charged; on-failure records {block['on_failure']['records']}"
        f"{_by_condition(block['on_failure']['by_condition'])}\n"
        f"  on-failure redrive: {redrive.get('records_redriven', 0)} records invoked again "
        f"({redrive.get('charged_resent', 0)} charged: {redrive.get('charged_new_provider_calls', 0)} provider calls; "
        f"{redrive.get('new_charged', 0)} of {redrive.get('new_sent', 0)} new charged once), "
        f"{redrive.get('double_charged', 0)} double-charged"
    )
