"""What a run reads back from the local AWS (or an account) after it: queue depths, table scans, and the DLQ reader,
which leaves a queue with the messages it found (:func:`read_dlq_messages`), and the attribute copy every re-send of
a received message uses (:func:`send_attributes`: the redrive, the DLQ reader's copies).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from effectively_once_runtime import names


def scan_table(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    """Every item of a DynamoDB table (every page of a scan), in the low-level format."""
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
    #: An on-failure record the runtime wrote for an event the app refused for good, read as a reason
    #: (``aws.async_inbox.refusal``: ``error_type``, ``message``, ``condition``). :default: ``None``.
    refusal: dict[str, Any] | None = None

    def reason(self) -> dict[str, Any] | None:
        """The runtime's dead-letter reason (``effectively-once-reason``: ``message_id``, ``receive_count``, ...) or
        its refusal on an on-failure queue (``refusal``), or ``None`` for a message SQS moved after
        ``maxReceiveCount`` receives, a record Lambda wrote after its retries (or one that is not JSON)."""
        if self.refusal is not None:
            return self.refusal
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
    fifo = names.is_fifo_address(url)
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
                copies.update(_move_to_tail(sqs, url, new, f"{read_id}-{len(received)}", in_flight))
    except (BotoCoreError, ClientError) as exc:
        raise DlqReadError(
            f"reading the DLQ {url}: {exc}; no message was deleted before its copy was stored (an interrupted read"
            " can leave a message twice in the queue, never lose one)"
        ) from exc
    finally:
        _release(sqs, url, in_flight)
    return [_dlq_message(m) for m in received]


def _move_to_tail(sqs: Any, url: str, messages: list[dict[str, Any]], tag: str, in_flight: dict[str, str]) -> set[str]:
    """A FIFO batch copied to the tail of its groups, and each original deleted once its copy is stored; the copies'
    message ids (:func:`read_dlq_messages`).

    :raises DlqReadError: SQS refused to store a copy (its original is not deleted).
    """
    stored = _copy_to_tail(sqs, url, messages, tag)
    _delete(sqs, url, [m for m in messages if m["MessageId"] in stored], in_flight)
    if len(stored) < len(messages):
        raise DlqReadError(
            f"reading the DLQ {url}: SQS refused to store a copy of {len(messages) - len(stored)} message(s);"
            " they were not deleted, the queue holds every message"
        )
    return set(stored.values())


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


def queue_depth(sqs: Any, url: str) -> int:
    """Messages in a queue: visible, in flight and delayed (SQS's approximate counts; moto's are exact)."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs.get(n, 0)) for n in names)


def queues_depth(sqs: Any, urls: list[str]) -> int:
    """The messages in all of ``urls`` (:func:`queue_depth` each)."""
    return sum(queue_depth(sqs, url) for url in urls)
