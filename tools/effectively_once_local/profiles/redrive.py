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
  attributes and system attributes), send each to the source with the same body, message attributes, and for FIFO
  the same ``MessageGroupId``, one message at a time in the order received (FIFO: the DLQ hands out a group's
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

**On-failure queues** (``--on-failure``, :func:`on_failure_targets`): an SQS queue that is the ``OnFailure``
destination of an asynchronously invoked function's ``EventInvokeConfig`` holds Lambda's destination records
(``requestContext``, ``requestPayload``, ``responseContext``, ``responsePayload``: AWS Lambda Developer Guide,
"Capturing records of Lambda asynchronous invocations"), not events: moving them to a source queue would hand the
function a record in place of its event. So each record is unwrapped (``async_queue.request_payload``) and its event
invoked again, asynchronously, as the function named by the record's ``requestContext.functionArn`` (without its
``$LATEST`` qualifier; a record without one: the function the queue belongs to). Found by the same discovery
(``StackDiscovery.on_failure_queues``): per function of the stack with ``ListFunctionEventInvokeConfigs``, or, with a
``cdk.out``, from the stack's synthesized ``AWS::Lambda::EventInvokeConfig`` resources (moto 5.2.5 skips those at
deploy, so a local AWS needs the ``cdk.out``).

- **AWS**: ``Invoke`` with ``InvocationType="Event"`` and the event as the payload; Lambda answers 202 when it
  queued the event (AWS Lambda API Reference, Invoke), which then gets the function's retries and on-failure
  destination again (:func:`invoke_on_failure`).
- **Local**: the event goes to the function's inbox (``async_queue.inbox_name``, created if missing) with the source
  ``redrive`` (``async_queue.SOURCE_ATTRIBUTE``); the local runner invokes it from there with the same retries
  (:func:`local_redrive_on_failure`).

Either way a record is deleted only after its event was accepted; an interruption between the two leaves a record
whose event was invoked: a duplicate, which the idempotent consumer answers from its record, never a loss. A body
that is not a destination record, and a record whose invoke failed, stay in the queue (visible again at the end of
the run) and are counted in ``left`` with the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError

from ..aws.deploy import DeployError, aws_session
from ..aws.discovery import DeployedMapping, StackDiscovery, dead_letter_queues, discover
from ..aws.readback import send_attributes
from ..base.tool_limits import SQS_MAX_MESSAGE_MOVE_RATE
from ..runner.async_inbox import REDRIVE, SOURCE_ATTRIBUTE, inbox_name, request_payload

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
    #: What ``moved`` counts: a DLQ's messages ``moved``, an on-failure queue's records ``re-invoked``.
    moved_word: str = "moved"
    #: What ``left`` counts, then printed always; ``None``: printed as ``not <moved_word>`` when not completed.
    left_word: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "COMPLETED"

    def line(self) -> str:
        text = f"{self.label}: {self.status.lower()} ({self.how}), {self.moved_word} {self.moved}"
        if self.left_word is not None or not self.ok:
            text += f", {self.left_word or 'not ' + self.moved_word} {self.left}"
            text += f": {self.reason}" if self.reason else ""
        return text


def is_local(sqs: Any) -> bool:
    """Whether the client talks to a local AWS on loopback (moto), where the local move is used."""
    return (urlparse(sqs.meta.endpoint_url).hostname or "") in LOOPBACK_HOSTS


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
            if "MessageGroupId" in system:
                request["MessageGroupId"] = system["MessageGroupId"]
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
) -> int:
    """The ``redrive`` command: every DLQ of ``stack`` (or the ``queue`` one) back to its source; with
    ``on_failure``, every on-failure queue's records re-invoked instead (:func:`redrive_on_failure`). Either way
    the queues come from one discovery of the stack (``discovery.discover``).

    :param cdk_out: with ``on_failure`` only: the folder the stack was deployed from, whose template names the
        on-failure queues. :default: ``None``: ``ListFunctionEventInvokeConfigs`` per function.
    :returns: ``0`` when every move completed (every record re-invoked), ``1`` otherwise.
    :raises RedriveError: ``cdk_out`` or ``queue`` with ``on_failure`` misused; see also :func:`targets` and
        :func:`on_failure_targets`.
    """
    if on_failure and queue is not None:
        raise RedriveError("arguments --on-failure, --queue: --queue names a DLQ; leave it out with --on-failure")
    if cdk_out is not None and not on_failure:
        raise RedriveError("argument --cdk-out: only with --on-failure (the DLQs are found from the deployed stack)")
    if session is None:
        session = aws_session()
    found = discover(session, stack, cdk_out)
    if on_failure:
        return redrive_on_failure(session, stack, cdk_out, max_per_second, found=found)
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
    """

    stack: str
    queue: str | None = None
    max_per_second: int | None = None
    on_failure: bool = False
    cdk_out: Path | None = None


def run_redrive(opts: RedriveOptions, session: Any | None = None) -> int:
    """The ``redrive`` command on its options object: :func:`redrive`."""
    return redrive(
        opts.stack, opts.queue, opts.max_per_second, session=session, on_failure=opts.on_failure, cdk_out=opts.cdk_out
    )


# --- on-failure queues: each destination record's event invoked again ------------------------------------
#: How an on-failure queue's label begins (then the function's logical id).
ON_FAILURE_LABEL = "on-failure"
#: Lambda's status code for an event it queued: "For the Event invocation type, this status code is 202" (AWS
#: Lambda API Reference, Invoke, Response Elements: StatusCode).
ASYNC_ACCEPTED = 202
#: The qualifier a destination record's ``functionArn`` carries for the unpublished version.
LATEST_QUALIFIER = ":$LATEST"
#: ``Outcome.how`` of the two paths.
HOW_INVOKE, HOW_INBOX = "Invoke, InvocationType Event", "local: the function's inbox"
_NO_QUEUE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")


class InvokeRefused(RuntimeError):
    """Lambda answered an asynchronous ``Invoke`` with another status code than 202: the event was not queued."""


@dataclass(frozen=True)
class OnFailureTarget:
    """An SQS queue that is the ``OnFailure`` destination of a function's ``EventInvokeConfig``, and that function.

    ``label``: ``on-failure <the function's logical id>``; ``function_name``: its physical name, as which a record
    naming no function is re-invoked.
    """

    label: str
    queue_url: str
    queue_arn: str
    function_name: str


def on_failure_targets(
    session: Any, stack: str, cdk_out: Path | None = None, found: StackDiscovery | None = None
) -> list[OnFailureTarget]:
    """The on-failure queues of ``stack``'s functions, by label (``StackDiscovery.on_failure_queues``): from
    ``cdk_out``'s synthesized template (its ``AWS::Lambda::EventInvokeConfig`` resources, resolved to the stack's
    physical ids) when given, else from ``ListFunctionEventInvokeConfigs`` per ``AWS::Lambda::Function`` of the
    stack. Destinations that are not SQS queues (SNS, Lambda, EventBridge, S3) are not redriven here.

    :param found: the stack's discovery. :default: ``None``: ``discovery.discover(session, stack, cdk_out)``.
    :raises RedriveError: the stack has no on-failure queue.
    :raises DeployError: ``cdk_out`` has no template of the stack, or the template names a function or queue the
        deployed stack does not have.
    :raises botocore.exceptions.ClientError: the stack or a queue does not exist, or access is denied.
    """
    queues = (found or discover(session, stack, cdk_out)).on_failure_queues
    if not queues:
        hint = "" if cdk_out is not None else " (a local AWS keeps none: give --cdk-out, the deploy's cdk.out)"
        raise RedriveError(f"stack {stack} has no on-failure queue (an SQS OnFailure destination){hint}")
    return [OnFailureTarget(f"{ON_FAILURE_LABEL} {q.function_id}", q.url, q.arn, q.function_name) for q in queues]


def redrive_on_failure(
    session: Any,
    stack: str,
    cdk_out: Path | None,
    max_per_second: int | None,
    *,
    found: StackDiscovery | None = None,
) -> int:
    """Every on-failure queue of ``stack`` (:func:`on_failure_targets`, from ``found`` when given): against AWS
    :func:`invoke_on_failure`, on a local AWS on loopback :func:`local_redrive_on_failure`. Prints one line per
    queue before and after.

    :returns: ``0`` when every record of every queue was re-invoked, ``1`` when one was left.
    """
    sqs = session.client("sqs")
    lam = None if is_local(sqs) else session.client("lambda")
    code = 0
    for target in on_failure_targets(session, stack, cdk_out, found):
        print(f"{target.label}: re-invoking the records of {target.queue_arn} as {target.function_name}", flush=True)
        if lam is None:
            outcome = local_redrive_on_failure(
                sqs, target.queue_url, target.function_name, label=target.label, max_per_second=max_per_second
            )
        else:
            outcome = invoke_on_failure(
                lam, sqs, target.queue_url, target.function_name, label=target.label, max_per_second=max_per_second
            )
        print(outcome.line(), flush=True)
        code = code or (0 if outcome.ok else 1)
    return code


def invoke_on_failure(
    lam: Any,
    sqs: Any,
    on_failure_url: str,
    function_name: str,
    *,
    label: str | None = None,
    max_per_second: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Re-invoke each record's event with ``Invoke(InvocationType="Event")`` (a status other than 202 raises
    :class:`InvokeRefused`), then delete the record (the module docstring says which are left).

    :param function_name: the function the queue belongs to, for a record naming none.
    :param label: the outcome's label. :default: ``on-failure <function_name>``.
    :param max_per_second: the most ``Invoke`` calls per second. :default: ``None``: as fast as they go.
    """

    def invoke(function: str, event: Any) -> None:
        answer = lam.invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode("utf-8"))
        if answer.get("StatusCode") != ASYNC_ACCEPTED:
            raise InvokeRefused(f"Invoke of {function} answered {answer.get('StatusCode')}, not {ASYNC_ACCEPTED}")

    return _reinvoke_records(sqs, on_failure_url, function_name, invoke, HOW_INVOKE, label, max_per_second, sleep)


def local_redrive_on_failure(
    sqs: Any,
    on_failure_url: str,
    function_name: str,
    *,
    label: str | None = None,
    max_per_second: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Send each record's event to its function's inbox queue (``async_queue.inbox_name``, created when missing)
    with ``SOURCE_ATTRIBUTE`` ``redrive``, then delete the record; the local runner invokes it from there. What the
    demo and chaos profiles call; the module docstring says which records are left.

    :param function_name: the function the queue belongs to (its name), for a record naming none.
    :param label: the outcome's label. :default: ``on-failure <function_name>``.
    :param max_per_second: the most events sent per second. :default: ``None``: as fast as they go.
    """
    inboxes: dict[str, str] = {}

    def send(function: str, event: Any) -> None:
        name = function.split(":")[6] if function.startswith("arn:") and function.count(":") >= 6 else function
        if name not in inboxes:
            inboxes[name] = _inbox_url(sqs, inbox_name(name))
        sqs.send_message(
            QueueUrl=inboxes[name],
            MessageBody=json.dumps(event),
            MessageAttributes={SOURCE_ATTRIBUTE: {"DataType": "String", "StringValue": REDRIVE}},
        )

    return _reinvoke_records(sqs, on_failure_url, function_name, send, HOW_INBOX, label, max_per_second, sleep)


def _inbox_url(sqs: Any, name: str) -> str:
    try:
        return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in _NO_QUEUE:
            raise
    return str(sqs.create_queue(QueueName=name)["QueueUrl"])


def record_function(body: str) -> str | None:
    """The function a destination record names (``requestContext.functionArn`` without ``:$LATEST``; another
    qualifier, an alias or version the config was on, is kept); ``None`` when it names none."""
    context = json.loads(body).get("requestContext")
    arn = context.get("functionArn") if isinstance(context, dict) else None
    if not isinstance(arn, str) or not arn:
        return None
    return arn.removesuffix(LATEST_QUALIFIER)


@dataclass
class _Tally:
    """What a re-invoke of one on-failure queue did so far, and the :class:`Outcome` it comes to."""

    limit: int  # the messages the queue held at the start
    reinvoked: int = 0
    not_records: int = 0
    failed: int = 0
    first_error: str = ""

    def outcome(self, label: str, how: str) -> Outcome:
        left = max(self.limit - self.reinvoked, self.not_records + self.failed)
        reasons = [f"{self.not_records} not a destination record"] if self.not_records else []
        reasons += [f"{self.failed} not re-invoked: {self.first_error}"] if self.failed else []
        if unreceived := left - self.not_records - self.failed:
            reasons.append(f"{unreceived} not received (in flight elsewhere)")
        return Outcome(
            label,
            how,
            "COMPLETED" if left == 0 else "FAILED",
            self.reinvoked,
            left=left,
            reason="; ".join(reasons),
            moved_word="re-invoked",
            left_word="left",
        )


def _reinvoke_records(
    sqs: Any,
    queue_url: str,
    function_name: str,
    reinvoke: Callable[[str, Any], None],
    how: str,
    label: str | None,
    max_per_second: int | None,
    sleep: Callable[[float], None],
) -> Outcome:
    """Receive up to as many messages as the queue held at the start; re-invoke each record's event, then delete
    it; leave what is not a record, or failed, and make those visible again at the end."""
    depth = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    tally = _Tally(int(depth["Attributes"]["ApproximateNumberOfMessages"]))
    seen: set[str] = set()
    held: list[str] = []  # receipt handles of the messages left, made visible again at the end
    try:
        while len(seen) < tally.limit:
            received = sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=min(10, tally.limit - len(seen)),
                VisibilityTimeout=LOCAL_VISIBILITY_SECONDS,
                WaitTimeSeconds=0,
            ).get("Messages", [])
            fresh = [m for m in received if m["MessageId"] not in seen]
            held += [m["ReceiptHandle"] for m in received if m["MessageId"] in seen]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                if not _reinvoke_record(message, function_name, reinvoke, tally):
                    held.append(message["ReceiptHandle"])
                    continue
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                tally.reinvoked += 1
                if max_per_second:
                    sleep(1.0 / max_per_second)
    finally:
        _release(sqs, queue_url, held)
    return tally.outcome(label or f"{ON_FAILURE_LABEL} {function_name}", how)


def _reinvoke_record(
    message: dict[str, Any], function_name: str, reinvoke: Callable[[str, Any], None], tally: _Tally
) -> bool:
    """Re-invoke one message's event; ``False`` (counted in ``tally``) when it is not a record or the invoke
    failed."""
    try:
        event = request_payload(message["Body"])
    except ValueError:
        tally.not_records += 1
        return False
    try:
        reinvoke(record_function(message["Body"]) or function_name, event)
    except (ClientError, BotoCoreError, InvokeRefused) as exc:
        tally.failed += 1
        tally.first_error = tally.first_error or " ".join(str(exc).split())
        return False
    return True


def _release(sqs: Any, queue_url: str, handles: list[str]) -> None:
    """Make the messages left visible again now (for a look, or the next run), not after the visibility timeout.
    A handle that no longer holds its message (the timeout passed) needs nothing."""
    for handle in handles:
        try:
            sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
        except ClientError:
            continue
