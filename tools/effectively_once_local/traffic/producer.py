"""The one producer of the local tooling: what each queue is sent, and the sending, with the send log.

Both profiles of the pipeline use it: the payments demo (``payments/payments_input.py`` reads the payments file into
lines) and the chaos run for any stack (``traffic/chaos_input.py`` reads its input into lines). A line is anything with
the :class:`SendLine` attributes: its number in the input, the body to send, its business key (``None``: not a valid
key, never duplicated on purpose), and for FIFO queues its message group id and deduplication id.

:func:`plan`: every line once, in input order; a fraction of the keyed lines sent twice back to back (standard
queues only: a FIFO group is processed one at a time, so a back-to-back copy tests nothing); a fraction resent after
all originals, as a producer retrying does. On a FIFO queue a resend is one of two kinds, drawn with even odds:
inside the deduplication interval (the same deduplication id: SQS must drop it) or after it (a new deduplication id,
:func:`late_dedup_id`: SQS delivers it). :func:`send`: ``SendMessageBatch`` in chunks of 10, each message SQS
accepted written to the send log (``sent-<label>.jsonl`` in the run folder) with the message id SQS returned, which
ties an input line to the delivery log (``attribution.sent_never_delivered``). An asynchronous target (a function
behind an EventBridge rule or an SNS topic) is sent to through a :data:`Sender` of its own (:func:`event_sender`,
:func:`topic_sender`): every copy is a new put, with a new event id, as a producer's retry is; the send log keeps
that id as the ``message_id``. A function nothing in the stack invokes is sent to directly (:func:`invoke_sender`:
``Invoke`` with ``InvocationType="Event"``, the body as the payload). Each kind of asynchronous source, its sender
and how the line comes back out of the events it delivers: ``traffic/source_kinds.py``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..chaos.fault_model import ChaosConfig

SEND_BATCH_MAX = 10  # SendMessageBatch and PutEvents take at most 10 entries (SQS and EventBridge API references)
ORIGINAL = "original"
CONCURRENT_DUPLICATE = "concurrent_duplicate"
#: A resend with the same FIFO deduplication id, inside SQS's 5-minute deduplication interval: SQS must drop it.
RESEND = "resend"
#: A FIFO resend after the interval, as a producer retrying later sends it: a new deduplication id, so SQS
#: delivers it, and only the consumer's idempotency stops a second effect.
LATE_RESEND = "late_resend"


class SendLine(Protocol):
    """What the producer needs of an input line."""

    @property
    def number(self) -> int: ...  # 1-based, in the input file

    @property
    def body(self) -> str: ...

    @property
    def key(self) -> str | None: ...  # the business key; None: not a valid key

    @property
    def group_id(self) -> str: ...  # MessageGroupId on a FIFO queue

    @property
    def dedup_id(self) -> str: ...  # MessageDeduplicationId on a FIFO queue


L = TypeVar("L", bound=SendLine)


class SendError(RuntimeError):
    """SQS rejected a message; the message names its input line."""


#: A label's own sender (an asynchronous target): takes a chunk of at most :data:`SEND_BATCH_MAX` messages, returns
#: the id the service gave each, in order. :raises SendError: the service refused one (named with its line).
Sender = Callable[[list["Outgoing[Any]"]], list[str]]


def _object_detail(msg: Outgoing[Any], what: str) -> str:
    try:
        parsed = json.loads(msg.line.body)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise SendError(f"line {msg.line.number}: {what} takes a JSON object, and this body is not one")
    return str(msg.line.body)


def event_sender(events: Any, *, bus_name: str, source: str, detail_type: str) -> Sender:
    """``PutEvents`` on ``bus_name`` with the rule's ``source`` and ``detail_type``, the body as ``Detail`` (a JSON
    object: EventBridge refuses anything else)."""

    def put(chunk: list[Outgoing[Any]]) -> list[str]:
        entries = [
            {
                "EventBusName": bus_name,
                "Source": source,
                "DetailType": detail_type,
                "Detail": _object_detail(m, "an EventBridge event's detail"),
            }
            for m in chunk
        ]
        answer = events.put_events(Entries=entries)
        for msg, entry in zip(chunk, answer["Entries"], strict=True):
            if entry.get("ErrorCode"):
                raise SendError(f"EventBridge refused the event of line {msg.line.number}: {entry.get('ErrorMessage')}")
        return [str(e["EventId"]) for e in answer["Entries"]]

    return put


def topic_sender(sns: Any, *, topic_arn: str) -> Sender:
    """``Publish`` to ``topic_arn``, one message per line (the body as ``Message``)."""

    def publish(chunk: list[Outgoing[Any]]) -> list[str]:
        return [str(sns.publish(TopicArn=topic_arn, Message=m.line.body)["MessageId"]) for m in chunk]

    return publish


#: The response header in which the local AWS answers a direct asynchronous ``Invoke`` with the id it gave the event
#: (``aws/moto_async_bridges.lambda_event_invocations``; the inbox message carries the same id,
#: ``aws.async_inbox.EVENT_ID_ATTRIBUTE``). Lambda itself answers with its request id only.
EVENT_ID_HEADER = "x-effectively-once-event-id"


def invoke_sender(lam: Any, *, function_name: str) -> Sender:
    """``Invoke`` of ``function_name`` with ``InvocationType="Event"``, one call per line, the body as the payload
    (JSON: Lambda refuses anything else). Each id is the event id the local AWS answered (:data:`EVENT_ID_HEADER`),
    else the request id.

    :raises SendError: a body that is not JSON, or an answer other than 202 (the event was not queued).
    """

    def invoke(chunk: list[Outgoing[Any]]) -> list[str]:
        ids = []
        for msg in chunk:
            try:
                json.loads(msg.line.body)
            except ValueError:
                raise SendError(f"line {msg.line.number}: a direct invocation takes a JSON payload") from None
            answer = lam.invoke(FunctionName=function_name, InvocationType="Event", Payload=msg.line.body.encode())
            if answer.get("StatusCode") != 202:
                raise SendError(
                    f"Invoke of {function_name} answered {answer.get('StatusCode')} for line {msg.line.number}"
                )
            meta = answer.get("ResponseMetadata") or {}
            ids.append(str((meta.get("HTTPHeaders") or {}).get(EVENT_ID_HEADER) or meta.get("RequestId")))
        return ids

    return invoke


@dataclass(frozen=True)
class Outgoing(Generic[L]):
    """One message to send: its line and why it is sent (``original``, ``concurrent_duplicate`` or ``resend``)."""

    line: L
    kind: str


def plan(
    lines: Iterable[L], route: Callable[[L], str], fifo: dict[str, bool], chaos: ChaosConfig
) -> dict[str, list[Outgoing[L]]]:
    """What each queue (by label, in ``fifo``'s order) is sent, in order. ``route``: a line's queue label.

    The draws come from one ``random.Random(chaos.seed)`` in input order: the same seed and input give the same plan.
    """
    rng = random.Random(chaos.seed)
    out: dict[str, list[Outgoing[L]]] = {label: [] for label in fifo}
    resends: dict[str, list[Outgoing[L]]] = {label: [] for label in fifo}
    for line in lines:
        label = route(line)
        out[label].append(Outgoing(line, ORIGINAL))
        if line.key is None:
            continue
        if not fifo[label] and rng.random() < chaos.concurrent_duplicates:
            out[label].append(Outgoing(line, CONCURRENT_DUPLICATE))
        if rng.random() < chaos.resend:
            late = fifo[label] and rng.random() < 0.5
            resends[label].append(Outgoing(line, LATE_RESEND if late else RESEND))
    for label in out:
        out[label].extend(resends[label])
    return out


def late_dedup_id(dedup_id: str) -> str:
    """The deduplication id of a resend after the interval: the SHA-256 of the original's (64 characters, within
    SQS's 128), the same for every run of the same input."""
    return hashlib.sha256(f"late:{dedup_id}".encode()).hexdigest()


def dedup_id(msg: Outgoing[Any]) -> str:
    """A FIFO message's deduplication id: its line's, or for a :data:`LATE_RESEND` a new one."""
    return late_dedup_id(msg.line.dedup_id) if msg.kind == LATE_RESEND else str(msg.line.dedup_id)


def _fifo_fields(msg: Outgoing[Any], accepted: dict[str, Any]) -> dict[str, Any]:
    """What the send log keeps of a FIFO message SQS accepted: its deduplication id, group and sequence number."""
    return {
        "deduplication_id": dedup_id(msg),
        "group": msg.line.group_id,
        "sequence_number": accepted.get("SequenceNumber"),
    }


def send(
    sqs: Any,
    urls: dict[str, str],
    fifo: dict[str, bool],
    messages: dict[str, list[Outgoing[L]]],
    progress: Callable[[int], None],
    record: Callable[..., None] | None = None,
    senders: dict[str, Sender] | None = None,
) -> dict[str, int]:
    """Send ``messages`` with ``SendMessageBatch``; returns the messages sent per queue label.

    :param record: called once per accepted message with ``queue`` (the label), ``line``, ``key``, ``kind``,
        ``message_id`` (the id SQS returned) and, for FIFO, ``deduplication_id``, ``group`` and ``sequence_number``
        (the one SQS assigned: it increases within a group) (``EventLog.write`` of the run's
        ``sent-<label>.jsonl``). SQS answers a FIFO message it dropped as a duplicate of its deduplication id with
        an id too.
    :param senders: a label's own sender (an asynchronous target): used instead of SQS for that label.
    :raises SendError: SQS rejected an entry (named with its line).
    """
    sent: dict[str, int] = {}
    for label, outgoing in messages.items():
        sent[label] = 0
        for start in range(0, len(outgoing), SEND_BATCH_MAX):
            chunk = outgoing[start : start + SEND_BATCH_MAX]
            if senders and label in senders:
                ids = senders[label](list(chunk))
                for msg, sent_id in zip(chunk, ids, strict=True):
                    if record is not None:
                        record(queue=label, line=msg.line.number, key=msg.line.key, kind=msg.kind, message_id=sent_id)
                sent[label] += len(chunk)
                progress(len(chunk))
                continue
            entries = []
            for i, msg in enumerate(chunk):
                entry: dict[str, Any] = {"Id": str(i), "MessageBody": msg.line.body}
                if fifo[label]:
                    entry["MessageGroupId"] = msg.line.group_id
                    entry["MessageDeduplicationId"] = dedup_id(msg)
                entries.append(entry)
            result = sqs.send_message_batch(QueueUrl=urls[label], Entries=entries)
            if result.get("Failed"):
                bad = result["Failed"][0]
                number = chunk[int(bad["Id"])].line.number
                raise SendError(f"SQS rejected the message of line {number}: {bad.get('Message', bad.get('Code'))}")
            if record is not None:
                for ok in result.get("Successful", []):
                    msg = chunk[int(ok["Id"])]
                    record(
                        queue=label,
                        line=msg.line.number,
                        key=msg.line.key,
                        kind=msg.kind,
                        message_id=ok.get("MessageId"),
                        **(_fifo_fields(msg, ok) if fifo[label] else {}),
                    )
            sent[label] += len(chunk)
            progress(len(chunk))
    return sent
