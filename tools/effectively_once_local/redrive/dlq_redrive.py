"""Redrive a stack's dead-letter queues back to their source queues, without losing or reordering a message.

``python -m effectively_once_local redrive --stack NAME [--queue standard|fifo] [--max-per-second N]``

Each SQS event source mapping of the stack names a source queue; its redrive policy names the DLQ
(``StackDiscovery.dlqs``, the one discovery of ``aws/discovery.py``). Two ways to move what the DLQ holds back to
the source:

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
  attributes and system attributes), send each to the source with the same body, message attributes and
  ``MessageGroupId`` (a FIFO group, or a fair queue's tenant; a deduplication id for a FIFO source only: SQS refuses
  one on a standard queue), one message at a time in the order received (FIFO: the DLQ hands out a group's
  messages in order, so the source gets them in that order), and delete it from the DLQ only after the send
  succeeded. An interruption between the send and the delete leaves a copy in both queues: a duplicate, which the
  idempotent consumer answers from its record; never a loss. It moves at most as many messages as the DLQ held when
  it started, so a message that fails again and returns cannot keep it running. A FIFO message goes back with a
  deduplication id of its own, ``redrive-<its DLQ message id>`` (:func:`redrive_dedup_id`), never the id it was
  first sent with: SQS (and the local AWS, ``moto_deduplication.remember_deduplication_ids``) keeps a deduplication id
  for 5 minutes after the message was deleted, so a message SQS moved to the DLQ after maxReceiveCount and redriven
  within 5 minutes of its first send would be accepted, silently dropped, and lost with the delete. The DLQ message
  id is the same on a repeated move of one message, so a move interrupted after its send is still one message.

The choice is made by endpoint, up front (``sqs.meta.endpoint_url``), not by trying the API and falling back: an
error from a real AWS endpoint must stop the command, never switch it to a slower path with other guarantees.

**On-failure queues** (``--on-failure``): ``redrive/on_failure_redrive.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..aws.deploy import DeployError, aws_session
from ..aws.discovery import DeployedMapping, StackDiscovery, dead_letter_queues, discover
from ..aws.readback import send_attributes
from ..base.tool_limits import SQS_MAX_MESSAGE_MOVE_RATE
from .on_failure_redrive import redrive_on_failure
from .redrive_outcome import LOCAL_VISIBILITY_SECONDS, Outcome, RedriveError, is_local

# Re-exported: their home is ``redrive_outcome``; ``redrive`` was where they were found.
__all__ = ["LOCAL_VISIBILITY_SECONDS", "Outcome", "RedriveError", "is_local"]

#: The highest ``MaxNumberOfMessagesPerSecond`` SQS accepts (``--max-per-second``).
MAX_MESSAGES_PER_SECOND = SQS_MAX_MESSAGE_MOVE_RATE
#: Terminal statuses of a message move task (ListMessageMoveTasks: RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED).
DONE_STATUSES = ("COMPLETED", "FAILED", "CANCELLED")
POLL_SECONDS = 5.0


@dataclass(frozen=True)
class Target:
    """One DLQ and the source queue its messages go back to; ``label`` is ``standard`` or ``fifo``."""

    label: str
    dlq_url: str
    dlq_arn: str
    source_url: str
    source_arn: str


def targets(session: Any, stack: str, queue: str | None, found: StackDiscovery | None = None) -> list[Target]:
    """The stack's DLQs and their source queues (``queue``: only that label), labelled ``standard`` or ``fifo`` by
    their source queue's type, as the payments sandbox's two pipelines are (``payments_view.discover``).

    :param found: the stack's discovery. :default: ``None``: ``discovery.discover(session, stack)``.
    :raises RedriveError: ``queue`` names a type of queue the stack does not have.
    :raises DeployError: the stack has no SQS event source mapping, two of one queue type, or a queue without a
        redrive policy.
    """
    by_type = _by_queue_type(found or discover(session, stack))
    if queue is not None and queue not in by_type:
        raise RedriveError(f"stack {stack} has no {queue} queue (it has: {', '.join(sorted(by_type))})")
    return [by_type[label] for label in (sorted(by_type) if queue is None else [queue])]


def _by_queue_type(found: StackDiscovery) -> dict[str, Target]:
    """The DLQ of each of the stack's mappings, by its source queue's type (``standard`` / ``fifo``)."""
    if not found.mappings:
        raise DeployError(f"stack {found.stack} has no SQS event source mapping")
    seen: set[str] = set()
    for m in found.mappings:
        if m.dlq_url is None:
            raise DeployError(f"queue {m.queue_name} has no redrive policy")
        label = "fifo" if m.fifo else "standard"
        if label in seen:
            raise DeployError(f"stack {found.stack} has more than one {label} SQS event source mapping")
        seen.add(label)
    return {
        ("fifo" if d.source.fifo else "standard"): Target(
            "fifo" if d.source.fifo else "standard",
            d.url,
            d.arn,
            d.source.mapping.queue_url,
            d.source.mapping.queue_arn,
        )
        for d in found.dlqs
    }


def mapping_targets(sqs: Any, mappings: list[DeployedMapping]) -> list[Target]:
    """The DLQs of any stack's SQS event source mappings (``discovery.dead_letter_queues``) with their source
    queues, labelled by the source queue's logical id; a mapping without a DLQ, or a DLQ shared with another
    mapping, once."""
    return [
        Target(d.source.label, d.url, d.arn, d.source.mapping.queue_url, d.source.mapping.queue_arn)
        for d in dead_letter_queues(sqs, mappings)
    ]


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
            if "MessageGroupId" in system:  # a FIFO group, or a fair queue's tenant: kept
                request["MessageGroupId"] = system["MessageGroupId"]
                if names.is_fifo_address(target.source_url):  # SQS refuses a deduplication id on a standard queue
                    request["MessageDeduplicationId"] = redrive_dedup_id(message["MessageId"])
            sqs.send_message(**request)
            sqs.delete_message(QueueUrl=target.dlq_url, ReceiptHandle=message["ReceiptHandle"])
            moved += 1
            if max_per_second:
                sleep(1.0 / max_per_second)
    return Outcome(target.label, "local move: receive, send, delete", "COMPLETED", moved)


def redrive(
    stack: str,
    queue: str | None,
    max_per_second: int | None,
    session: Any | None = None,
    *,
    on_failure: bool = False,
    cdk_out: Path | None = None,
    include_refused: bool = False,
) -> int:
    """The ``redrive`` command: every DLQ of ``stack`` (or the ``queue`` one) back to its source; with
    ``on_failure``, every on-failure queue's records re-invoked instead (:func:`redrive_on_failure`). Either way
    the queues come from one discovery of the stack (``discovery.discover``).

    :param cdk_out: with ``on_failure`` only: the folder the stack was deployed from, whose template names the
        on-failure queues. :default: ``None``: ``ListFunctionEventInvokeConfigs`` per function.
    :param include_refused: with ``on_failure`` only: re-invoke the records of events the app refused for good too.
        :default: ``False``: they stay in the queue.
    :returns: ``0`` when every move completed (every record re-invoked), ``1`` otherwise.
    :raises RedriveError: ``cdk_out`` or ``queue`` with ``on_failure`` misused; see also :func:`targets` and
        :func:`on_failure_targets`.
    """
    if on_failure and queue is not None:
        raise RedriveError("arguments --on-failure, --queue: --queue names a DLQ; leave it out with --on-failure")
    if cdk_out is not None and not on_failure:
        raise RedriveError("argument --cdk-out: only with --on-failure (the DLQs are found from the deployed stack)")
    if include_refused and not on_failure:
        raise RedriveError(
            "argument --include-refused: only with --on-failure (a DLQ's messages are all moved; the runtime's "
            "refusals in an on-failure queue are what it selects)"
        )
    if session is None:
        session = aws_session()
    found = discover(session, stack, cdk_out)
    if on_failure:
        return redrive_on_failure(session, stack, cdk_out, max_per_second, found=found, include_refused=include_refused)
    sqs = session.client("sqs")
    move = local_move if is_local(sqs) else move_task
    code = 0
    for target in targets(session, stack, queue, found):
        print(f"{target.label}: redriving {target.dlq_arn} -> {target.source_arn}", flush=True)
        outcome = move(sqs, target, max_per_second)
        print(outcome.line(), flush=True)
        code = code or (0 if outcome.ok else 1)
    return code


@dataclass(frozen=True)
class RedriveOptions:
    """``redrive``'s options (``cli/redrive_command.py`` builds them from its arguments); :func:`redrive`'s
    parameters of the same names.

    :param stack: the deployed stack.
    :param queue: only this queue type's DLQ (``"standard"``, ``"fifo"``). :default: ``None``: every DLQ.
    :param max_per_second: messages moved (records re-invoked) per second. :default: ``None``: SQS picks the rate.
    :param on_failure: re-invoke the on-failure queues' records instead of moving the DLQs.
    :param cdk_out: with ``on_failure``: the folder the stack was deployed from.
    :param include_refused: with ``on_failure``: the records of events the app refused for good too.
    """

    stack: str
    queue: str | None = None
    max_per_second: int | None = None
    on_failure: bool = False
    cdk_out: Path | None = None
    include_refused: bool = False


def run_redrive(opts: RedriveOptions, session: Any | None = None) -> int:
    """The ``redrive`` command on its options object: :func:`redrive`."""
    return redrive(
        opts.stack,
        opts.queue,
        opts.max_per_second,
        session=session,
        on_failure=opts.on_failure,
        cdk_out=opts.cdk_out,
        include_refused=opts.include_refused,
    )
