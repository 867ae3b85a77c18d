"""The run's report, computed from what was deployed (ledger tables, dead-letter queues) and from the logs the
platform keeps (SQS deliveries, the function's EMF metrics, the provider's call log), never from the runner's
in-memory counters.

Keys per queue type and in ``total``: ``payments`` (lines routed there), ``valid_payments``, ``poison``,
``deliveries`` (messages handed to the function, redeliveries included), ``charges`` (ledger items: executed
charges), ``duplicates_suppressed`` (EMF ``DuplicatesSuppressed``: answered from an idempotency record),
``dead_lettered`` (messages in the DLQ), ``valid_dead_lettered`` (valid payments in the DLQ, e.g. FIFO messages
queued behind a poison message of their group), ``lost`` (valid payments neither charged nor in the DLQ),
``double_charged`` (payments with more than one ledger item), ``provider_calls`` and ``provider_replays`` (calls
the provider answered from its idempotency key), ``poison_in_dlq`` (poison messages found intact in the DLQ).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from .chaos import AFTER_CHARGE, AFTER_COMPLETE, DEADLINE, TIMEOUT
from .producer import Line, route

COUNT_KEYS = (
    "payments",
    "valid_payments",
    "poison",
    "deliveries",
    "charges",
    "duplicates_suppressed",
    "dead_lettered",
    "valid_dead_lettered",
    "lost",
    "double_charged",
    "provider_calls",
    "provider_replays",
    "poison_in_dlq",
    "dlq_unread",
    "kills_between_charge_and_completion",
    "unexplained_replays",
)


def _jsonl(paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rows.append(json.loads(raw))
            except json.JSONDecodeError:
                continue  # a line cut by a kill
    return rows


def emf_sum(log_paths: list[Path], metric: str) -> int:
    """Sum a metric over the EMF documents in function logs (what CloudWatch would aggregate)."""
    total = 0
    for doc in _jsonl(log_paths):
        if isinstance(doc, dict) and "_aws" in doc and metric in doc:
            value = doc[metric]
            total += int(sum(value) if isinstance(value, list) else value)
    return total


def scan_ledger(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = dynamodb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def read_dlq(sqs: Any, url: str) -> list[str]:
    """Every body in a DLQ, in order, leaving the queue with the same messages.

    A standard queue is read with a long visibility timeout (so no message is received twice), nothing is deleted,
    and the messages are made visible again at the end (a second report reads them at once). A
    FIFO queue locks a message group while any of its messages is in flight, so at most 10 messages of a group can
    be seen without deleting (moto does the same): its messages are read and deleted batch by batch, then sent back
    in their order with their group ids (new message and deduplication ids; bodies unchanged).
    """
    fifo = url.endswith(".fifo")
    received: list[dict[str, Any]] = []
    empty_polls = 0
    while empty_polls < 2:
        messages = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=60 if fifo else 900,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId"],
        ).get("Messages", [])
        if not messages:
            empty_polls += 1
            continue
        received.extend(messages)
        if fifo:
            sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
            )
    if fifo:
        for start in range(0, len(received), 10):
            chunk = received[start : start + 10]
            sqs.send_message_batch(
                QueueUrl=url,
                Entries=[
                    {
                        "Id": str(i),
                        "MessageBody": m["Body"],
                        "MessageGroupId": m["Attributes"]["MessageGroupId"],
                        "MessageDeduplicationId": f"{m['Attributes'].get('MessageDeduplicationId', '')[:90]}-{uuid.uuid4().hex[:12]}",
                    }
                    for i, m in enumerate(chunk)
                ],
            )
    else:  # make them visible again: a second report reads them at once
        for start in range(0, len(received), 10):
            sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(received[start : start + 10])
                ],
            )
    return [m["Body"] for m in received]


def dlq_depth(sqs: Any, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs.get(n, 0)) for n in names)


def build_report(
    session: Any,
    pipelines: dict[str, Any],
    lines: list[Line],
    run_dir: Path | None,
    is_valid: Callable[[str], bool],
) -> dict[str, Any]:
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    report: dict[str, Any] = {}
    for label, pipeline in sorted(pipelines.items()):
        routed = [ln for ln in lines if route(ln.account_id) == label]
        valid_ids = {ln.payment_id for ln in routed if ln.payment_id and is_valid(ln.body)}
        poison_bodies = [ln.body for ln in routed if not (ln.payment_id and is_valid(ln.body))]
        ledger = scan_ledger(dynamodb, pipeline.ledger_table)
        per_payment = Counter(item["payment_id"]["S"] for item in ledger)
        depth = dlq_depth(sqs, pipeline.dlq_url)
        dlq_bodies = read_dlq(sqs, pipeline.dlq_url)
        dlq_valid_ids = set()
        for body in dlq_bodies:
            if is_valid(body):
                dlq_valid_ids.add(json.loads(body)["payment_id"])
        row: dict[str, Any] = {
            "payments": len(routed),
            "valid_payments": len(valid_ids),
            "poison": len(poison_bodies),
            "charges": len(ledger),
            "dead_lettered": max(depth, len(dlq_bodies)),
            "dlq_unread": max(0, depth - len(dlq_bodies)),
            "valid_dead_lettered": len(dlq_valid_ids),
            "lost": len(valid_ids - set(per_payment) - dlq_valid_ids),
            "double_charged": sum(1 for n in per_payment.values() if n > 1),
            "poison_in_dlq": sum(1 for b in set(poison_bodies) if b in set(dlq_bodies)),
        }
        if run_dir is not None:
            deliveries = _jsonl(sorted(run_dir.glob(f"deliveries-{label}-*.jsonl")))
            provider = _jsonl(sorted(run_dir.glob(f"provider-{label}-*.jsonl")))
            replays = [c for c in provider if c.get("event") == "result" and c.get("replayed")]
            kill_log = _jsonl(sorted(run_dir.glob(f"chaos-{label}-*.jsonl")))
            row["deliveries"] = len(deliveries)
            row["duplicates_suppressed"] = emf_sum(sorted(run_dir.glob(f"function-{label}-*.log")), "DuplicatesSuppressed")
            row["provider_calls"] = sum(1 for c in provider if c.get("event") == "call")
            row["provider_replays"] = len(replays)
            kills = Counter(k.get("phase") for k in kill_log)
            row["kills"] = {p: kills.get(p, 0) for p in (AFTER_CHARGE, AFTER_COMPLETE, TIMEOUT, DEADLINE)}
            # A kill while a payment's provider call had started and its idempotency record was not yet completed:
            # only such a payment may come back as a provider replay.
            interrupted = [
                k["inflight_payment"] for k in kill_log if k.get("phase") != AFTER_COMPLETE and k.get("inflight_payment")
            ]
            row["kills_between_charge_and_completion"] = len(interrupted)
            row["unexplained_replays"] = sum(1 for r in replays if r.get("payment_id") not in set(interrupted))
        report[label] = row
    total: dict[str, Any] = {}
    for key in COUNT_KEYS:
        values = [row[key] for row in report.values() if key in row]
        if values:
            total[key] = sum(values)
    kill_rows = [row["kills"] for row in report.values() if "kills" in row]
    if kill_rows:
        total["kills"] = {p: sum(k[p] for k in kill_rows) for p in kill_rows[0]}
    report["total"] = total
    return report


def verdict(report: dict[str, Any], unsafe: bool) -> tuple[int, list[str]]:
    """Exit code and reasons. Safe run: 0 unless something was lost, double-charged, or the provider replayed more
    than the kills between charge and completion explain. ``--unsafe`` control: 0 when it shows double charges."""
    total = report["total"]
    problems = []
    if total.get("lost", 0):
        problems.append(f"{total['lost']} payments lost (neither charged nor in a DLQ)")
    if total.get("dlq_unread", 0):
        problems.append(f"{total['dlq_unread']} DLQ messages could not be read (the lost count may be overstated)")
    if unsafe:
        if total.get("double_charged", 0) > 0 and not problems:
            return 0, [f"control run without the guards double-charged {total['double_charged']} payments, as expected"]
        if not total.get("double_charged", 0):
            problems.append("control run without the guards showed no double charge: the chaos did not exercise duplicates")
        return 1, problems
    if total.get("double_charged", 0):
        problems.append(f"{total['double_charged']} payments charged more than once")
    bound = total.get("kills_between_charge_and_completion")
    if bound is not None and total.get("provider_replays", 0) > bound:
        problems.append(
            f"provider replays ({total['provider_replays']}) exceed the kills between charge and completion ({bound}):"
            " a duplicate got past the idempotency layer"
        )
    if total.get("unexplained_replays", 0):
        problems.append(
            f"{total['unexplained_replays']} provider replays for payments no kill interrupted: a duplicate got past"
            " the idempotency layer"
        )
    return (1 if problems else 0), problems


def render(report: dict[str, Any]) -> str:
    labels = [k for k in report if k not in ("total", "run", "verdict")] + ["total"]
    keys = [k for k in COUNT_KEYS if any(k in report[label] for label in labels)]
    width = max(len(k) for k in keys) + 2
    out = ["".ljust(width) + "".join(label.rjust(10) for label in labels)]
    for key in keys:
        out.append(key.ljust(width) + "".join(str(report[label].get(key, "-")).rjust(10) for label in labels))
    if "kills" in report["total"]:
        kills = report["total"]["kills"]
        out.append("kills: " + ", ".join(f"{k}={v}" for k, v in kills.items()))
    return "\n".join(out)
