"""Redrive a stack's dead-letter queues back to their source queues, without losing or reordering a message.

``python -m effectively_once_local redrive --stack NAME [--queue standard|fifo] [--max-per-second N]``

Each SQS event source mapping of the stack names a source queue; its redrive policy names the DLQ
(:func:`.sandbox.discover`). Two ways to move what the DLQ holds back to the source:

- **AWS** (any endpoint but loopback): SQS's own redrive, ``StartMessageMoveTask`` with ``SourceArn`` the DLQ and an
  explicit ``DestinationArn``, the source queue. Explicit, because a copy the runtime sent to the DLQ on first sight
  (``DEAD_LETTER_QUEUE_URL``) was *sent* there, not moved by SQS, and has no recorded source queue to return to.
  ``MaxNumberOfMessagesPerSecond`` is passed through when given (1..500; else SQS picks the rate). The command then
  polls ``ListMessageMoveTasks`` (SQS allows one active task per queue, so the most recent is ours) until the task is
  ``COMPLETED``, ``FAILED`` or ``CANCELLED``, and reports the messages moved and, for a task that did not complete,
  those left (``ApproximateNumberOfMessagesToMove - ApproximateNumberOfMessagesMoved``) with its ``FailureReason``.
  Source: Amazon SQS API Reference, StartMessageMoveTask and ListMessageMoveTasks.
- **Local** (an endpoint on loopback: ``localhost``, ``127.0.0.1``, ``::1``): moto 5.2.5 has no message move tasks
  (it raises ``NotImplementedError``), so the command moves messages itself: receive from the DLQ (all message
  attributes and system attributes), send each to the source with the same body, message attributes, and for FIFO
  the same ``MessageGroupId``, one message at a time in the order received (FIFO: the DLQ hands out a group's
  messages in order, so the source gets them in that order), and delete it from the DLQ only after the send
  succeeded. An interruption between the send and the delete leaves a copy in both queues: a duplicate, which the
  idempotent consumer answers from its record; never a loss. It moves at most as many messages as the DLQ held when
  it started, so a message that fails again and returns cannot keep it running. A FIFO message goes back with a
  deduplication id of its own, ``redrive-<its DLQ message id>`` (:func:`redrive_dedup_id`), never the id it was
  first sent with: SQS (and the local AWS, ``_moto_server.remember_deduplication_ids``) keeps a deduplication id
  for 5 minutes after the message was deleted, so a message SQS moved to the DLQ after maxReceiveCount and redriven
  within 5 minutes of its first send would be accepted, silently dropped, and lost with the delete. The DLQ message
  id is the same on a repeated move of one message, so a move interrupted after its send is still one message.

The choice is made by endpoint, up front (``sqs.meta.endpoint_url``), not by trying the API and falling back: an
error from a real AWS endpoint must stop the command, never switch it to a slower path with other guarantees.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from .deploy import aws_session
from .limits import SQS_MAX_MESSAGE_MOVE_RATE
from .readback import send_attributes
from .sandbox import discover
from .stack import DeployedMapping

#: The highest ``MaxNumberOfMessagesPerSecond`` SQS accepts (``--max-per-second``).
MAX_MESSAGES_PER_SECOND = SQS_MAX_MESSAGE_MOVE_RATE
#: Terminal statuses of a message move task (ListMessageMoveTasks: RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED).
DONE_STATUSES = ("COMPLETED", "FAILED", "CANCELLED")
POLL_SECONDS = 5.0
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: How long a message received for the local move stays invisible to others: ample for one send and one delete.
LOCAL_VISIBILITY_SECONDS = 60


class RedriveError(RuntimeError):
    """An expected error (unknown queue label, a queue without a DLQ); the message is one line."""


@dataclass(frozen=True)
class Target:
    """One DLQ and the source queue its messages go back to; ``label`` is ``standard`` or ``fifo``."""

    label: str
    dlq_url: str
    dlq_arn: str
    source_url: str
    source_arn: str


@dataclass(frozen=True)
class Outcome:
    """What a redrive of one DLQ did. ``left``: messages not moved by a task that did not complete."""

    label: str
    how: str
    status: str
    moved: int
    left: int = 0
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "COMPLETED"

    def line(self) -> str:
        text = f"{self.label}: {self.status.lower()} ({self.how}), moved {self.moved}"
        if not self.ok:
            text += f", not moved {self.left}" + (f": {self.reason}" if self.reason else "")
        return text


def is_local(sqs: Any) -> bool:
    """Whether the client talks to a local AWS on loopback (moto), where the local move is used."""
    return (urlparse(sqs.meta.endpoint_url).hostname or "") in LOOPBACK_HOSTS


def targets(session: Any, stack: str, queue: str | None) -> list[Target]:
    """The stack's DLQs and their source queues (``queue``: only that label).

    :raises RedriveError: ``queue`` names a type of queue the stack does not have.
    :raises DeployError: the stack has no SQS event source mapping (from :func:`.sandbox.discover`).
    """
    pipelines = discover(session, stack)
    if queue is not None and queue not in pipelines:
        raise RedriveError(f"stack {stack} has no {queue} queue (it has: {', '.join(sorted(pipelines))})")
    sqs = session.client("sqs")
    found = []
    for label in sorted(pipelines) if queue is None else [queue]:
        pipeline = pipelines[label]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=pipeline.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        found.append(Target(label, pipeline.dlq_url, dlq_arn, pipeline.mapping.queue_url, pipeline.mapping.queue_arn))
    return found


def mapping_targets(sqs: Any, mappings: list[DeployedMapping]) -> list[Target]:
    """The DLQs of any stack's SQS event source mappings (``stack.discover_mappings``) with their source queues,
    labelled by the source queue's logical id; a mapping without a DLQ, or a DLQ shared with another mapping, once."""
    found: dict[str, Target] = {}
    for m in mappings:
        if m.dlq_url is None or m.dlq_url in found:
            continue
        arn = sqs.get_queue_attributes(QueueUrl=m.dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        found[m.dlq_url] = Target(m.label, m.dlq_url, arn, m.mapping.queue_url, m.mapping.queue_arn)
    return list(found.values())


def move_task(
    sqs: Any,
    target: Target,
    max_per_second: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    poll_seconds: float = POLL_SECONDS,
) -> Outcome:
    """Redrive with SQS's ``StartMessageMoveTask`` and wait for the task to end (see the module docstring)."""
    request: dict[str, Any] = {"SourceArn": target.dlq_arn, "DestinationArn": target.source_arn}
    if max_per_second is not None:
        request["MaxNumberOfMessagesPerSecond"] = max_per_second
    sqs.start_message_move_task(**request)
    while True:
        results = sqs.list_message_move_tasks(SourceArn=target.dlq_arn, MaxResults=1)["Results"]
        task = results[0] if results else {"Status": "RUNNING"}
        if task["Status"] in DONE_STATUSES:
            moved = int(task.get("ApproximateNumberOfMessagesMoved", 0))
            to_move = int(task.get("ApproximateNumberOfMessagesToMove") or moved)
            return Outcome(
                target.label,
                "StartMessageMoveTask",
                task["Status"],
                moved,
                left=0 if task["Status"] == "COMPLETED" else max(0, to_move - moved),
                reason=task.get("FailureReason", ""),
            )
        sleep(poll_seconds)


#: How a locally redriven FIFO message's deduplication id begins (then the DLQ message's id).
REDRIVE_DEDUP_PREFIX = "redrive-"


def redrive_dedup_id(dlq_message_id: str) -> str:
    """The deduplication id a FIFO message is redriven with: its own in the DLQ, never the one it was first sent with
    (the module docstring says why)."""
    return f"{REDRIVE_DEDUP_PREFIX}{dlq_message_id}"


def local_move(
    sqs: Any,
    target: Target,
    max_per_second: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Move the DLQ's messages to the source one by one: send, then delete (see the module docstring).

    A send that fails raises (botocore's ``ClientError``): the message stays in the DLQ, nothing is lost.
    """
    depth = sqs.get_queue_attributes(QueueUrl=target.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])
    limit = int(depth["Attributes"]["ApproximateNumberOfMessages"])
    moved = 0
    while moved < limit:
        received = sqs.receive_message(
            QueueUrl=target.dlq_url,
            MaxNumberOfMessages=min(10, limit - moved),
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            VisibilityTimeout=LOCAL_VISIBILITY_SECONDS,
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not received:
            break
        for message in received:
            request: dict[str, Any] = {"QueueUrl": target.source_url, "MessageBody": message["Body"]}
            if message.get("MessageAttributes"):
                request["MessageAttributes"] = send_attributes(message)
            system = message.get("Attributes", {})
            if "MessageGroupId" in system:
                request["MessageGroupId"] = system["MessageGroupId"]
                request["MessageDeduplicationId"] = redrive_dedup_id(message["MessageId"])
            sqs.send_message(**request)
            sqs.delete_message(QueueUrl=target.dlq_url, ReceiptHandle=message["ReceiptHandle"])
            moved += 1
            if max_per_second:
                sleep(1.0 / max_per_second)
    return Outcome(target.label, "local move: receive, send, delete", "COMPLETED", moved)


def redrive(stack: str, queue: str | None, max_per_second: int | None, session: Any | None = None) -> int:
    """The ``redrive`` command: every DLQ of ``stack`` (or the ``queue`` one) back to its source.

    :returns: ``0`` when every move completed, ``1`` when a task failed or was cancelled.
    """
    if session is None:
        session = aws_session()
    sqs = session.client("sqs")
    move = local_move if is_local(sqs) else move_task
    code = 0
    for target in targets(session, stack, queue):
        print(f"{target.label}: redriving {target.dlq_arn} -> {target.source_arn}", flush=True)
        outcome = move(sqs, target, max_per_second)
        print(outcome.line(), flush=True)
        code = code or (0 if outcome.ok else 1)
    return code
