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

**On-failure queues** (``--on-failure``, :func:`on_failure_targets`): an SQS queue that is the ``OnFailure``
destination of an asynchronously invoked function's ``EventInvokeConfig`` holds Lambda's destination records
(``requestContext``, ``requestPayload``, ``responseContext``, ``responsePayload``: AWS Lambda Developer Guide,
"Capturing records of Lambda asynchronous invocations"), not events: moving them to a source queue would hand the
function a record in place of its event. So each record is unwrapped (``async_queue.request_payload``) and its event
invoked again, asynchronously, as the function named by the record's ``requestContext.functionArn`` (without its
``$LATEST`` qualifier; a record without one: the function the queue belongs to). Found per function of the stack
with ``ListFunctionEventInvokeConfigs``, or, with a ``cdk.out``, from the stack's synthesized
``AWS::Lambda::EventInvokeConfig`` resources (moto 5.2.5 skips those at deploy, so a local AWS needs the ``cdk.out``).

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

from ..aws.deploy import aws_session
from ..aws.discovery import DeployedMapping
from ..aws.readback import send_attributes
from ..base.tool_limits import SQS_MAX_MESSAGE_MOVE_RATE
from ..runner.async_inbox import REDRIVE, SOURCE_ATTRIBUTE, inbox_name, request_payload
from .payments_view import discover

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
    ``on_failure``, every on-failure queue's records re-invoked instead (:func:`redrive_on_failure`).

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
    if on_failure:
        return redrive_on_failure(session, stack, cdk_out, max_per_second)
    sqs = session.client("sqs")
    move = local_move if is_local(sqs) else move_task
    code = 0
    for target in targets(session, stack, queue):
        print(f"{target.label}: redriving {target.dlq_arn} -> {target.source_arn}", flush=True)
        outcome = move(sqs, target, max_per_second)
        print(outcome.line(), flush=True)
        code = code or (0 if outcome.ok else 1)
    return code


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
_EVENT_INVOKE_CONFIG, _SQS_QUEUE = "AWS::Lambda::EventInvokeConfig", "AWS::SQS::Queue"
_FUNCTION = "AWS::Lambda::Function"


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


def on_failure_targets(session: Any, stack: str, cdk_out: Path | None = None) -> list[OnFailureTarget]:
    """The on-failure queues of ``stack``'s functions, by label: from ``cdk_out``'s synthesized template (its
    ``AWS::Lambda::EventInvokeConfig`` resources, resolved to the stack's physical ids) when given, else from
    ``ListFunctionEventInvokeConfigs`` per ``AWS::Lambda::Function`` of the stack. Destinations that are not SQS
    queues (SNS, Lambda, EventBridge, S3) are not redriven here.

    :raises RedriveError: the stack has no on-failure queue; ``cdk_out`` has no template of the stack, or the
        template names a function or queue the deployed stack does not have.
    :raises botocore.exceptions.ClientError: the stack or a queue does not exist, or access is denied.
    """
    cfn, sqs = session.client("cloudformation"), session.client("sqs")
    resources = {
        r["LogicalResourceId"]: (r.get("ResourceType", ""), r.get("PhysicalResourceId", ""))
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for r in page["StackResourceSummaries"]
    }
    found = (
        _template_destinations(cdk_out, stack, resources)
        if cdk_out is not None
        else _configured_destinations(session.client("lambda"), resources)
    )
    targets_: dict[tuple[str, str], OnFailureTarget] = {}
    for logical, function, queue_name, owner in found:
        extra = {"QueueOwnerAWSAccountId": owner} if owner else {}
        url = sqs.get_queue_url(QueueName=queue_name, **extra)["QueueUrl"]
        if (url, function) not in targets_:
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            targets_[url, function] = OnFailureTarget(f"{ON_FAILURE_LABEL} {logical}", url, arn, function)
    if not targets_:
        hint = "" if cdk_out is not None else " (a local AWS keeps none: give --cdk-out, the deploy's cdk.out)"
        raise RedriveError(f"stack {stack} has no on-failure queue (an SQS OnFailure destination){hint}")
    return sorted(targets_.values(), key=lambda t: (t.label, t.queue_url))


#: One destination found: (function logical id, function name, queue name, queue owner account or "").
_Destination = tuple[str, str, str, str]


def _configured_destinations(lam: Any, resources: dict[str, tuple[str, str]]) -> list[_Destination]:
    found: list[_Destination] = []
    for logical, (kind, function) in sorted(resources.items()):
        if kind != _FUNCTION:
            continue
        pages = lam.get_paginator("list_function_event_invoke_configs").paginate(FunctionName=function)
        for config in (c for page in pages for c in page.get("FunctionEventInvokeConfigs", [])):
            arn = config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination", "")
            if ":sqs:" in arn:
                found.append((logical, function, arn.split(":")[5], arn.split(":")[4]))
    return found


def _template_destinations(cdk_out: Path, stack: str, resources: dict[str, tuple[str, str]]) -> list[_Destination]:
    path = cdk_out / f"{stack}.template.json"
    if not path.is_file():
        raise RedriveError(f"no synthesized template {path} (was {stack} deployed from {cdk_out}?)")
    template = json.loads(path.read_text(encoding="utf-8")).get("Resources", {})
    found: list[_Destination] = []
    for config_id, config in sorted(template.items()):
        if config.get("Type") != _EVENT_INVOKE_CONFIG:
            continue
        props = config.get("Properties", {})
        destination = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        queue = _template_queue(destination, template, resources, stack)
        if queue is not None:
            logical, function = _template_function(props.get("FunctionName"), resources, stack, config_id)
            found.append((logical, function, *queue))
    return found


def _physical(resources: dict[str, tuple[str, str]], logical: str, stack: str) -> str:
    physical = resources.get(logical, ("", ""))[1]
    if not physical:
        raise RedriveError(f"{logical} of the template is not a resource of the deployed stack {stack}")
    return physical


def _template_queue(
    destination: Any, template: dict[str, Any], resources: dict[str, tuple[str, str]], stack: str
) -> tuple[str, str] | None:
    """(queue name, owner account or "") of an SQS destination; ``None`` for any other kind."""
    if isinstance(destination, str):
        parts = destination.split(":")
        return (parts[5], parts[4]) if len(parts) == 6 and parts[2] == "sqs" else None
    target = destination.get("Fn::GetAtt", [None])[0] if isinstance(destination, dict) else None
    if not isinstance(target, str) or template.get(target, {}).get("Type") != _SQS_QUEUE:
        return None
    # The queue's physical id is its URL on AWS; take the name, whatever form the emulator keeps.
    return _physical(resources, target, stack).rstrip("/").split("/")[-1].split(":")[-1], ""


def _template_function(name: Any, resources: dict[str, tuple[str, str]], stack: str, config: str) -> tuple[str, str]:
    """(logical id, physical name) of an ``EventInvokeConfig``'s ``FunctionName``: a ``Ref``, a ``GetAtt`` or a
    plain name (a function of another stack: labelled by its name)."""
    if isinstance(name, str):
        return name, name
    logical = (name.get("Ref") or name.get("Fn::GetAtt", [None])[0]) if isinstance(name, dict) else None
    if not isinstance(logical, str):
        raise RedriveError(f"{config} of {stack}: FunctionName {name!r} is neither a Ref nor a name")
    return logical, _physical(resources, logical, stack)


def redrive_on_failure(session: Any, stack: str, cdk_out: Path | None, max_per_second: int | None) -> int:
    """Every on-failure queue of ``stack`` (:func:`on_failure_targets`): against AWS :func:`invoke_on_failure`, on
    a local AWS on loopback :func:`local_redrive_on_failure`. Prints one line per queue before and after.

    :returns: ``0`` when every record of every queue was re-invoked, ``1`` when one was left.
    """
    sqs = session.client("sqs")
    lam = None if is_local(sqs) else session.client("lambda")
    code = 0
    for target in on_failure_targets(session, stack, cdk_out):
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
    limit = int(depth["Attributes"]["ApproximateNumberOfMessages"])
    seen: set[str] = set()
    held: list[str] = []  # receipt handles of the messages left, made visible again at the end
    reinvoked, not_records, failed, first_error = 0, 0, 0, ""
    try:
        while len(seen) < limit:
            received = sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=min(10, limit - len(seen)),
                VisibilityTimeout=LOCAL_VISIBILITY_SECONDS,
                WaitTimeSeconds=0,
            ).get("Messages", [])
            fresh = [m for m in received if m["MessageId"] not in seen]
            held += [m["ReceiptHandle"] for m in received if m["MessageId"] in seen]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                try:
                    event = request_payload(message["Body"])
                except ValueError:
                    not_records += 1
                    held.append(message["ReceiptHandle"])
                    continue
                try:
                    reinvoke(record_function(message["Body"]) or function_name, event)
                except (ClientError, BotoCoreError, InvokeRefused) as exc:
                    failed += 1
                    first_error = first_error or " ".join(str(exc).split())
                    held.append(message["ReceiptHandle"])
                    continue
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                reinvoked += 1
                if max_per_second:
                    sleep(1.0 / max_per_second)
    finally:
        _release(sqs, queue_url, held)
    left = max(limit - reinvoked, not_records + failed)
    reasons = [f"{not_records} not a destination record"] if not_records else []
    reasons += [f"{failed} not re-invoked: {first_error}"] if failed else []
    if unreceived := left - not_records - failed:
        reasons.append(f"{unreceived} not received (in flight elsewhere)")
    return Outcome(
        label or f"{ON_FAILURE_LABEL} {function_name}",
        how,
        "COMPLETED" if left == 0 else "FAILED",
        reinvoked,
        left=left,
        reason="; ".join(reasons),
        moved_word="re-invoked",
        left_word="left",
    )


def _release(sqs: Any, queue_url: str, handles: list[str]) -> None:
    """Make the messages left visible again now (for a look, or the next run), not after the visibility timeout.
    A handle that no longer holds its message (the timeout passed) needs nothing."""
    for handle in handles:
        try:
            sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
        except ClientError:
            continue
