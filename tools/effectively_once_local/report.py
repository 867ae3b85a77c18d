"""The run's report, computed from what was deployed (ledger tables, dead-letter queues) and from the logs the
platform keeps (SQS deliveries, the function's EMF metrics, the provider's call log), never from the runner's
in-memory counters.

Keys per queue type and in ``total``: ``payments`` (lines routed there), ``valid_payments``, ``poison``,
``deliveries`` (messages handed to the function, redeliveries included), ``charges`` (ledger items: executed
charges), ``duplicates_suppressed`` (EMF ``DuplicatesSuppressed``: answered from an idempotency record),
``dead_lettered`` (messages in the DLQ), ``valid_dead_lettered`` (valid payments in the DLQ: FIFO messages held
behind a transient failure of their group past maxReceiveCount; poison leaves its group at once, so 0 in the demo),
``lost`` (valid payments neither charged nor in the DLQ), ``double_charged`` (payments with more than one ledger
item), ``provider_calls`` and ``provider_replays`` (calls the provider answered from its idempotency key),
``poison_in_dlq`` (poison messages found intact in the DLQ), ``poison_receives_max`` (the most receives any poison
message took before it reached the DLQ, from the platform's logs: :func:`poison_receives`; ``total`` takes the
maximum, not the sum).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from effectively_once_runtime import names

from .chaos import AFTER_CHARGE, AFTER_COMPLETE, DEADLINE, TIMEOUT
from .producer import Line, route

COUNT_KEYS = (
    "payments",
    "valid_payments",
    "poison",
    "deliveries",
    "sent_never_delivered",
    "charges",
    "duplicates_suppressed",
    "dead_lettered",
    "valid_dead_lettered",
    "lost",
    "double_charged",
    "provider_calls",
    "provider_replays",
    "poison_in_dlq",
    "poison_receives_max",
    "dlq_unread",
    "kills_between_charge_and_completion",
    "unexplained_replays",
)
#: Keys whose ``total`` is the maximum over the queue types, not the sum.
MAX_KEYS = ("poison_receives_max",)


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


class DlqReadError(RuntimeError):
    """A DLQ could not be read whole; the message is one line and says what the queue still holds."""


#: How long a DLQ read keeps what it received hidden: a FIFO group stays locked while one of its messages is in
#: flight, which is how the read sees where its own copies begin. Released at the end of the read.
DLQ_READ_VISIBILITY_SECONDS = 120


#: The message attribute a FIFO DLQ copy made by :func:`read_dlq` carries the original's deduplication id in (when
#: there is room, see :func:`read_dlq_messages`), so later reads still report it.
ORIGINAL_DEDUP_ATTRIBUTE = "effectively-once-original-dedup-id"
#: At most 10 message attributes per message (Amazon SQS Developer Guide, "Amazon SQS message attributes").
MAX_MESSAGE_ATTRIBUTES = 10


@dataclass(frozen=True)
class DlqMessage:
    """One message of a DLQ as :func:`read_dlq_messages` saw it.

    ``deduplication_id``: FIFO only, the deduplication id the message was first sent to this DLQ with (the
    ``ORIGINAL_DEDUP_ATTRIBUTE`` of a copy a read made, else the ``MessageDeduplicationId`` system attribute);
    ``None`` on a standard queue, or for a copy that had no room left for the attribute (its own, new id is given
    then in ``copy_deduplication_id``). ``attributes``: message attributes as ``SendMessage`` takes them.
    """

    message_id: str
    body: str
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    group_id: str | None = None
    deduplication_id: str | None = None
    copy_deduplication_id: str | None = None

    def reason(self) -> dict[str, Any] | None:
        """The runtime's dead-letter reason (``effectively-once-reason``: ``message_id``, ``receive_count``, ...),
        or ``None`` for a message SQS moved after ``maxReceiveCount`` receives (or one that is not JSON)."""
        value = self.attributes.get(names.DEAD_LETTER_REASON_ATTRIBUTE, {}).get("StringValue")
        try:
            parsed = json.loads(value) if value else None
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None


def read_dlq(sqs: Any, url: str) -> list[str]:
    """Every body in a DLQ, in order, leaving the queue with the same messages (:func:`read_dlq_messages`)."""
    return [m.body for m in read_dlq_messages(sqs, url)]


def read_dlq_messages(sqs: Any, url: str) -> list[DlqMessage]:
    """Every message in a DLQ, in order, leaving the queue with the same messages.

    A standard queue is read with a long visibility timeout: nothing is deleted. A FIFO queue locks a message
    group while any of its messages is in flight, so at most 10 messages of a group can be seen without deleting
    (moto does the same): each batch is first copied to the tail of its group in the same queue (same body, group
    and message attributes), and an original is deleted only once its copy is stored. The read stops where its own
    copies begin (their message ids are kept): those stay in flight, locking their group, until the read releases
    them. So an interruption at any point (Ctrl-C, throttling, no ``sqs:SendMessage``) loses nothing; it can leave a
    message and its copy both in the queue. Whatever is still in flight at the end is made visible again.

    Deduplication ids: a copy gets a **new** one. SQS drops a FIFO message whose deduplication id was used in the
    last 5 minutes, even after that message was deleted (Amazon SQS Developer Guide, "Exactly-once processing in
    Amazon SQS"): a copy sent with the original's id would be accepted by SendMessage and silently dropped, and the
    message lost once the original is deleted. Losing nothing wins over keeping the id. The original id stays
    readable instead: each :class:`DlqMessage` reports it (``deduplication_id``), and the copy carries it in the
    message attribute ``ORIGINAL_DEDUP_ATTRIBUTE`` when that leaves room under SQS's 10 message attributes for the
    runtime's reason attribute too (the attribute travels with a redrive, and the runtime must be able to add its
    reason should the message fail for good again), so the next read reports it too; a copy without that room keeps
    its attributes unchanged and loses the record of the old id (``deduplication_id`` ``None`` on later reads).

    :raises DlqReadError: SQS refused a call; the message says that nothing was deleted without its copy.
    """
    fifo = url.endswith(".fifo")
    read_id = uuid.uuid4().hex
    received: list[dict[str, Any]] = []  # originals, in queue order
    seen: set[str] = set()
    copies: set[str] = set()  # message ids of the copies this read stored
    in_flight: dict[str, str] = {}  # message id -> receipt handle, released at the end
    idle_polls = 0
    try:
        while idle_polls < 2:
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=DLQ_READ_VISIBILITY_SECONDS,
                # Long polling asks every SQS server; a short poll can answer empty while messages remain.
                WaitTimeSeconds=1,
                MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            for m in messages:
                in_flight[m["MessageId"]] = m["ReceiptHandle"]
            new = [m for m in messages if m["MessageId"] not in copies and m["MessageId"] not in seen]
            idle_polls = 0 if new else idle_polls + 1
            seen.update(m["MessageId"] for m in new)
            received.extend(new)
            if fifo and new:
                stored = _copy_to_tail(sqs, url, new, f"{read_id}-{len(received)}")
                copies.update(stored.values())
                _delete(sqs, url, [m for m in new if m["MessageId"] in stored], in_flight)
                if len(stored) < len(new):
                    raise DlqReadError(
                        f"reading the DLQ {url}: SQS refused to store a copy of {len(new) - len(stored)} message(s);"
                        " they were not deleted, the queue holds every message"
                    )
    except (BotoCoreError, ClientError) as exc:
        raise DlqReadError(
            f"reading the DLQ {url}: {exc}; no message was deleted before its copy was stored (an interrupted read"
            " can leave a message twice in the queue, never lose one)"
        ) from exc
    finally:
        _release(sqs, url, in_flight)
    return [_dlq_message(m) for m in received]


def send_attributes(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Message attributes as SendMessage takes them (ReceiveMessage adds empty list fields)."""
    return {
        name: {k: v for k, v in value.items() if k in ("DataType", "StringValue", "BinaryValue")}
        for name, value in message.get("MessageAttributes", {}).items()
    }


def original_dedup_id(message: dict[str, Any]) -> str | None:
    """The deduplication id a received FIFO message was first sent with: the attribute a read's copy carries, else
    its own ``MessageDeduplicationId``; ``None`` for a copy without the attribute (no room) or a standard queue."""
    carried = message.get("MessageAttributes", {}).get(ORIGINAL_DEDUP_ATTRIBUTE, {}).get("StringValue")
    if carried:
        return str(carried)
    own = message.get("Attributes", {}).get("MessageDeduplicationId")
    return None if own is None or own.startswith(_COPY_DEDUP_MARK) else str(own)


def _dlq_message(m: dict[str, Any]) -> DlqMessage:
    system = m.get("Attributes", {})
    return DlqMessage(
        message_id=m["MessageId"],
        body=m["Body"],
        attributes=send_attributes(m),
        group_id=system.get("MessageGroupId"),
        deduplication_id=original_dedup_id(m),
        copy_deduplication_id=system.get("MessageDeduplicationId"),
    )


#: How a read's copy's deduplication id begins (then a uuid4 hex and a position): told apart from an original's.
_COPY_DEDUP_MARK = "eo-dlq-read-"


def _copy_to_tail(sqs: Any, url: str, messages: list[dict[str, Any]], prefix: str) -> dict[str, str]:
    """Send copies of ``messages`` to the tail of their groups; returns original message id -> copy message id for
    each copy SQS stored."""
    entries = []
    for i, m in enumerate(messages):
        entry: dict[str, Any] = {
            "Id": str(i),
            "MessageBody": m["Body"],
            "MessageGroupId": m["Attributes"]["MessageGroupId"],
            # unique: mark + uuid4 hex + position, under SQS's 128 characters
            "MessageDeduplicationId": f"{_COPY_DEDUP_MARK}{prefix}-{i}",
        }
        attributes = send_attributes(m)
        original = original_dedup_id(m)
        # Room for the runtime's reason too, should the message be redriven and dead-lettered on first sight.
        needed = len(attributes) + 1 + (names.DEAD_LETTER_REASON_ATTRIBUTE not in attributes)
        room = ORIGINAL_DEDUP_ATTRIBUTE in attributes or needed <= MAX_MESSAGE_ATTRIBUTES
        if original is not None and room:
            attributes[ORIGINAL_DEDUP_ATTRIBUTE] = {"DataType": "String", "StringValue": original}
        if attributes:
            entry["MessageAttributes"] = attributes
        entries.append(entry)
    result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return {messages[int(ok["Id"])]["MessageId"]: ok["MessageId"] for ok in result.get("Successful", [])}


def _delete(sqs: Any, url: str, messages: list[dict[str, Any]], in_flight: dict[str, str]) -> None:
    if not messages:
        return
    result = sqs.delete_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
    )
    for ok in result.get("Successful", []):
        in_flight.pop(messages[int(ok["Id"])]["MessageId"], None)


def _release(sqs: Any, url: str, in_flight: dict[str, str]) -> None:
    """Make what the read still holds visible again (best effort: else it shows again after the timeout)."""
    handles = list(in_flight.values())
    try:
        for start in range(0, len(handles), 10):
            sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                    for i, h in enumerate(handles[start : start + 10])
                ],
            )
    except Exception:  # noqa: BLE001 - the messages are safe in the queue either way
        pass


def dlq_depth(sqs: Any, url: str) -> int:
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
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
        dlq_messages = read_dlq_messages(sqs, pipeline.dlq_url)
        dlq_bodies = [m.body for m in dlq_messages]
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
            row.update(run_log_counts(run_dir, label))
            deliveries = _jsonl(sorted(run_dir.glob(f"deliveries-{label}-*.jsonl")))
            receives = poison_receives([m for m in dlq_messages if not is_valid(m.body)], deliveries)
            row["poison_receives_max"] = max(receives.values(), default=0)
            sent = _jsonl([run_dir / f"sent-{label}.jsonl"]) if (run_dir / f"sent-{label}.jsonl").is_file() else []
            row["sent_never_delivered"] = len(sent_never_delivered(sent, deliveries, dlq_messages))
        report[label] = row
    total: dict[str, Any] = {}
    for key in COUNT_KEYS:
        values = [row[key] for row in report.values() if key in row]
        if values:
            total[key] = max(values) if key in MAX_KEYS else sum(values)
    kill_rows = [row["kills"] for row in report.values() if "kills" in row]
    if kill_rows:
        total["kills"] = {p: sum(k[p] for k in kill_rows) for p in kill_rows[0]}
    report["total"] = total
    return report


def poison_receives(poison: list[DlqMessage], deliveries: list[dict[str, Any]]) -> dict[str, int]:
    """How many receives each poison message in a DLQ took before it got there: original message id -> receives.

    The original is the message the runtime's reason attribute names (``message_id``; a copy sent on first sight),
    else the DLQ message itself (SQS moves a message after ``maxReceiveCount`` receives with its message id). Its
    receives are the highest ``ApproximateReceiveCount`` of the platform's delivery log for that id
    (``deliveries-*.jsonl``: one line per message handed to the function) and the reason's ``receive_count``
    (the receive on which the runtime dead-lettered it), whichever is higher: a kill after the copy was sent and
    before the delete adds a receive the log shows. A poison message the delivery log never saw and without a
    reason counts 0 (it was sent straight to the DLQ).
    """
    seen: dict[str, int] = {}
    for d in deliveries:
        mid = d.get("message_id")
        if isinstance(mid, str):
            seen[mid] = max(seen.get(mid, 0), int(d.get("receive_count", 0)))
    result: dict[str, int] = {}
    for m in poison:
        reason = m.reason() or {}
        original = str(reason.get("message_id") or m.message_id)
        count = max(int(reason.get("receive_count") or 0), seen.get(original, 0))
        result[original] = max(result.get(original, 0), count)
    return result


def sent_never_delivered(
    sent: list[dict[str, Any]], deliveries: list[dict[str, Any]], dlq: list[DlqMessage]
) -> list[dict[str, Any]]:
    """The first sends of payment lines that SQS accepted and never handed out: rows of the run's send log
    (``sent-<queue>.jsonl``: ``kind``, ``message_id``, FIFO ``deduplication_id``, in send order) of kind
    ``original`` whose message id is in no delivery (``deliveries-*.jsonl``) and no DLQ message (its own id: moved
    by SQS; or the runtime's reason ``message_id``: a copy). A FIFO send whose deduplication id was sent before in
    the run is left out: SQS may drop it as a duplicate. Resends and concurrent duplicates are left out too. A
    payment whose first send vanished can still be charged through its resend, so ``lost`` does not show it: this
    count does (must be 0: anything else means the local AWS dropped an accepted message)."""
    seen = {d.get("message_id") for d in deliveries}
    seen |= {m.message_id for m in dlq} | {(m.reason() or {}).get("message_id") for m in dlq}
    seen.discard(None)
    sent_dedup_ids: set[str] = set()
    out = []
    for row in sent:
        dedup = row.get("deduplication_id")
        repeated = dedup is not None and dedup in sent_dedup_ids
        if dedup is not None:
            sent_dedup_ids.add(dedup)
        if row.get("kind") == "original" and not repeated and row.get("message_id") not in seen:
            out.append(row)
    return out


def run_log_counts(run_dir: Path, label: str) -> dict[str, Any]:
    """What one pipeline's run logs say: deliveries, suppressed duplicates, provider calls and replays, kills by
    phase, and the provider replays no kill explains."""
    deliveries = _jsonl(sorted(run_dir.glob(f"deliveries-{label}-*.jsonl")))
    provider = _jsonl(sorted(run_dir.glob(f"provider-{label}-*.jsonl")))
    replays = [c for c in provider if c.get("event") == "result" and c.get("replayed")]
    kill_log = [k for k in _jsonl(sorted(run_dir.glob(f"chaos-{label}-*.jsonl"))) if k.get("event") == "kill"]
    kills = Counter(k.get("phase") for k in kill_log)
    # A kill while a payment's provider call had started and its idempotency record was not yet completed: only
    # such a payment may come back as a provider replay.
    calls = provider_calls_by_pid(run_dir, label)
    interrupted = [
        key for k in kill_log if k.get("phase") != AFTER_COMPLETE for key in [inflight_at_kill(k, calls)] if key
    ]
    return {
        "deliveries": len(deliveries),
        "duplicates_suppressed": emf_sum(
            sorted(run_dir.glob(f"function-{label}-*.log")), names.METRIC_DUPLICATES_SUPPRESSED
        ),
        "provider_calls": sum(1 for c in provider if c.get("event") == "call"),
        "provider_replays": len(replays),
        "kills": {p: kills.get(p, 0) for p in (AFTER_CHARGE, AFTER_COMPLETE, TIMEOUT, DEADLINE)},
        "kills_between_charge_and_completion": len(interrupted),
        "unexplained_replays": sum(1 for r in replays if r.get("payment_id") not in set(interrupted)),
    }


def provider_calls_by_pid(run_dir: Path, label: str) -> dict[int, list[dict[str, Any]]]:
    """Each poller's provider calls, in the order it made them (its own file: ``provider-<label>-<pid>.jsonl``)."""
    calls: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(run_dir.glob(f"provider-{label}-*.jsonl")):
        pid = int(path.stem.rsplit("-", 1)[1])
        calls[pid] = [c for c in _jsonl([path]) if c.get("event") == "call"]
    return calls


def inflight_at_kill(kill: dict[str, Any], calls: dict[int, list[dict[str, Any]]]) -> str | None:
    """The payment a kill may have interrupted between its charge and its completion: the last provider call the
    killed process logged in the killed invocation. Read from the process's own log, which ends where the kill
    struck: a marker kept in memory can be read by the watchdog thread while the handler already logged the call
    of the next payment (a kill would then be booked to the previous payment, and the next one's replay look
    unexplained). The logs are per pid, and a long run reuses pids: two pollers' calls can share one file, each
    numbering its invocations from 1, so a call is matched by the kill's Lambda request id (unique per invocation)
    when both carry one. Kill records without an invocation number (older runs) keep their marker."""
    if "invocation" not in kill:
        return kill.get("inflight_payment")
    mine = [c for c in calls.get(int(kill.get("pid", -1)), []) if c.get("invocation") == kill["invocation"]]
    request_id = kill.get("request_id")
    if request_id is not None:
        mine = [c for c in mine if c.get("request_id", request_id) == request_id]
    return str(mine[-1]["payment_id"]) if mine else None


#: The rows of a ``redrive`` block, per queue type (:func:`.backlog.counts`).
BLOCK_KEYS = (
    "charged_resent",
    "charged_new_provider_calls",
    "new_sent",
    "new_charged",
    "poison_redriven",
    "poison_back_in_dlq",
    "valid_in_dlq",
    "double_charged",
)


def redrive_problems(block: dict[str, dict[str, int]]) -> list[str]:
    """What a ``redrive`` block (the outage backlog, :func:`.backlog.counts`) shows wrong, one line each; empty
    when the redrive did what it must."""
    out = []
    for label, row in sorted(block.items()):
        if row["charged_new_provider_calls"]:
            out.append(
                f"redrive {label}: {row['charged_new_provider_calls']} provider calls for payments already charged"
                " (their idempotency records should have answered)"
            )
        if row["new_charged"] != row["new_sent"]:
            out.append(f"redrive {label}: {row['new_charged']} of {row['new_sent']} new payments charged exactly once")
        if row["poison_back_in_dlq"] != row["poison_redriven"]:
            out.append(
                f"redrive {label}: {row['poison_back_in_dlq']} of {row['poison_redriven']} poison messages"
                " dead-lettered on the first receive the runtime processed them"
            )
        if row["valid_in_dlq"]:
            out.append(f"redrive {label}: {row['valid_in_dlq']} valid payments in the DLQ after the redrive")
        if row["double_charged"]:
            out.append(f"redrive {label}: {row['double_charged']} payments charged more than once")
    return out


def render_redrive(block: dict[str, dict[str, int]]) -> str:
    """The ``redrive`` block as a table: one column per queue type."""
    labels = sorted(block)
    width = max(len(k) for k in BLOCK_KEYS) + 2
    out = ["redrive".ljust(width) + "".join(label.rjust(10) for label in labels)]
    for key in BLOCK_KEYS:
        out.append(key.ljust(width) + "".join(str(block[label].get(key, "-")).rjust(10) for label in labels))
    return "\n".join(out)


def verdict(report: dict[str, Any], unsafe: bool) -> tuple[int, list[str]]:
    """Exit code and reasons. Safe run: 0 unless something was lost, double-charged, an accepted first send was never
    delivered (``sent_never_delivered``), the provider replayed more than the kills between charge and completion
    explain, or the ``redrive`` block (the outage backlog, :func:`redrive_problems`) shows a violation. ``--unsafe``
    control: 0 when it shows double charges (and no accepted first send vanished)."""
    total = report["total"]
    problems = redrive_problems(report.get("redrive", {}))
    if total.get("lost", 0):
        problems.append(f"{total['lost']} payments lost (neither charged nor in a DLQ)")
    if total.get("dlq_unread", 0):
        problems.append(f"{total['dlq_unread']} DLQ messages could not be read (the lost count may be overstated)")
    if total.get("sent_never_delivered", 0):
        problems.append(
            f"{total['sent_never_delivered']} first sends SQS accepted were never delivered nor dead-lettered"
            " (the local AWS dropped them; a resend may have hidden the loss from `lost`)"
        )
    if unsafe:
        if total.get("double_charged", 0) > 0 and not problems:
            return 0, [f"control run without the guards double-charged {total['double_charged']} payments, as expected"]
        if not total.get("double_charged", 0):
            problems.append(
                "control run without the guards showed no double charge: the chaos did not exercise duplicates"
            )
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


#: Top-level report keys that are not a queue type's column.
NOT_QUEUES = ("total", "run", "verdict", "per_key", "redrive")


def render(report: dict[str, Any]) -> str:
    labels = [k for k in report if k not in NOT_QUEUES] + ["total"]
    keys = [k for k in COUNT_KEYS if any(k in report[label] for label in labels)]
    width = max(len(k) for k in keys) + 2
    out = ["".ljust(width) + "".join(label.rjust(10) for label in labels)]
    for key in keys:
        out.append(key.ljust(width) + "".join(str(report[label].get(key, "-")).rjust(10) for label in labels))
    if "kills" in report["total"]:
        kills = report["total"]["kills"]
        out.append("kills: " + ", ".join(f"{k}={v}" for k, v in kills.items()))
    if report.get("redrive"):
        out.append(render_redrive(report["redrive"]))
    return "\n".join(out)
