"""The ``redrive`` command's ``--on-failure`` path: the records of a stack's on-failure queues re-invoked
(``redrive/dlq_redrive.py`` moves the DLQs).

**On-failure queues** (``--on-failure``, :func:`on_failure_targets`): an SQS queue that is the ``OnFailure``
destination of an asynchronously invoked function's ``EventInvokeConfig`` holds Lambda's destination records
(``requestContext``, ``requestPayload``, ``responseContext``, ``responsePayload``: AWS Lambda Developer Guide,
"Capturing records of Lambda asynchronous invocations"), not events: moving them to a source queue would hand the
function a record in place of its event. So each record is unwrapped (``async_inbox.request_payload``) and its event
invoked again, asynchronously, as the function named by the record's ``requestContext.functionArn`` (without its
``$LATEST`` qualifier; a record without one: the function the queue belongs to). Found by the same discovery
(``StackDiscovery.on_failure_queues``): per function of the stack with ``ListFunctionEventInvokeConfigs``, or, with a
``cdk.out``, from the stack's synthesized ``AWS::Lambda::EventInvokeConfig`` resources (moto 5.2.5 skips those at
deploy, so a local AWS needs the ``cdk.out``).

- **AWS**: ``Invoke`` with ``InvocationType="Event"`` and the event as the payload; Lambda answers 202 when it
  queued the event (AWS Lambda API Reference, Invoke), which then gets the function's retries and on-failure
  destination again (:func:`invoke_on_failure`).
- **Local**: the event goes to the function's inbox (``async_inbox.inbox_name``, created if missing) with the source
  ``redrive`` (``async_inbox.SOURCE_ATTRIBUTE``); the local runner invokes it from there with the same retries
  (:func:`local_redrive_on_failure`).

Either way a record is deleted only after its event was accepted; an interruption between the two leaves a record
whose event was invoked: a duplicate, which the idempotent consumer answers from its record, never a loss. A body
that is not a destination record, and a record whose invoke failed, stay in the queue (visible again at the end of
the run) and are counted in ``left`` with the reason.

A record the runtime wrote for an event the app refused for good (``requestContext.condition`` ``PermanentError``,
``effectively_once_runtime.on_failure``) stays in the queue too, unless ``include_refused`` (``--include-refused``):
invoked again, it would only be refused again. It is counted as ``kept``, not as a failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from effectively_once_runtime import names

from ..aws.async_inbox import REDRIVE, SOURCE_ATTRIBUTE, inbox_name, record_condition, request_payload
from ..aws.discovery import StackDiscovery, discover
from .redrive_outcome import LOCAL_VISIBILITY_SECONDS, Outcome, RedriveError, is_local

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
    include_refused: bool = False,
) -> int:
    """Every on-failure queue of ``stack`` (:func:`on_failure_targets`, from ``found`` when given): against AWS
    :func:`invoke_on_failure`, on a local AWS on loopback :func:`local_redrive_on_failure`, each with
    ``include_refused``. Prints one line per queue before and after.

    :returns: ``0`` when every record of every queue was re-invoked, ``1`` when one was left.
    """
    sqs = session.client("sqs")
    lam = None if is_local(sqs) else session.client("lambda")
    code = 0
    for target in on_failure_targets(session, stack, cdk_out, found):
        print(f"{target.label}: re-invoking the records of {target.queue_arn} as {target.function_name}", flush=True)
        if lam is None:
            outcome = local_redrive_on_failure(
                sqs,
                target.queue_url,
                target.function_name,
                label=target.label,
                max_per_second=max_per_second,
                include_refused=include_refused,
            )
        else:
            outcome = invoke_on_failure(
                lam,
                sqs,
                target.queue_url,
                target.function_name,
                label=target.label,
                max_per_second=max_per_second,
                include_refused=include_refused,
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
    include_refused: bool = False,
) -> Outcome:
    """Re-invoke each record's event with ``Invoke(InvocationType="Event")`` (a status other than 202 raises
    :class:`InvokeRefused`), then delete the record (the module docstring says which are left).

    :param function_name: the function the queue belongs to, for a record naming none.
    :param label: the outcome's label. :default: ``on-failure <function_name>``.
    :param max_per_second: the most ``Invoke`` calls per second. :default: ``None``: as fast as they go.
    :param include_refused: re-invoke the runtime's ``PermanentError`` records too. :default: ``False``: kept.
    """

    def invoke(function: str, event: Any) -> None:
        answer = lam.invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode("utf-8"))
        if answer.get("StatusCode") != ASYNC_ACCEPTED:
            raise InvokeRefused(f"Invoke of {function} answered {answer.get('StatusCode')}, not {ASYNC_ACCEPTED}")

    tally = _Tally(_depth(sqs, on_failure_url), include_refused=include_refused)
    return _reinvoke_records(
        sqs, on_failure_url, function_name, invoke, HOW_INVOKE, label, max_per_second, sleep, tally
    )


def local_redrive_on_failure(
    sqs: Any,
    on_failure_url: str,
    function_name: str,
    *,
    label: str | None = None,
    max_per_second: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    include_refused: bool = False,
) -> Outcome:
    """Send each record's event to its function's inbox queue (``async_inbox.inbox_name``, created when missing)
    with ``SOURCE_ATTRIBUTE`` ``redrive``, then delete the record; the local runner invokes it from there. What the
    demo and chaos profiles call; the module docstring says which records are left.

    :param function_name: the function the queue belongs to (its name), for a record naming none.
    :param label: the outcome's label. :default: ``on-failure <function_name>``.
    :param max_per_second: the most events sent per second. :default: ``None``: as fast as they go.
    :param include_refused: send the runtime's ``PermanentError`` records' events too. :default: ``False``: kept.
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

    tally = _Tally(_depth(sqs, on_failure_url), include_refused=include_refused)
    return _reinvoke_records(sqs, on_failure_url, function_name, send, HOW_INBOX, label, max_per_second, sleep, tally)


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
    include_refused: bool = False  # re-invoke the runtime's PermanentError records too
    reinvoked: int = 0
    not_records: int = 0
    failed: int = 0
    kept: int = 0  # the runtime's PermanentError records left on purpose
    first_error: str = ""

    def outcome(self, label: str, how: str) -> Outcome:
        left = max(self.limit - self.reinvoked - self.kept, self.not_records + self.failed)
        reasons = [f"{self.not_records} not a destination record"] if self.not_records else []
        reasons += [f"{self.failed} not re-invoked: {self.first_error}"] if self.failed else []
        if unreceived := left - self.not_records - self.failed:
            reasons.append(f"{unreceived} not received (in flight elsewhere)")
        if self.kept:
            reasons.append(
                f"{self.kept} refused by the app for good (condition {names.ON_FAILURE_CONDITION}) kept: "
                "--include-refused re-invokes them"
            )
        return Outcome(
            label,
            how,
            "COMPLETED" if left == 0 else "FAILED",
            self.reinvoked,
            left=left,
            reason="; ".join(reasons),
            moved_word="re-invoked",
            left_word="left",
            kept=self.kept,
        )


def _depth(sqs: Any, queue_url: str) -> int:
    """The messages a queue holds now (``ApproximateNumberOfMessages``)."""
    depth = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(depth["Attributes"]["ApproximateNumberOfMessages"])


def _reinvoke_records(
    sqs: Any,
    queue_url: str,
    function_name: str,
    reinvoke: Callable[[str, Any], None],
    how: str,
    label: str | None,
    max_per_second: int | None,
    sleep: Callable[[float], None],
    tally: _Tally,
) -> Outcome:
    """Receive up to as many messages as the queue held at the start (``tally.limit``); re-invoke each record's
    event, then delete it; leave what is not a record, or failed, or a refusal kept, and make those visible again
    at the end."""
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
    """Re-invoke one message's event; ``False`` (counted in ``tally``) when it is not a record, a refusal kept,
    or the invoke failed."""
    try:
        event = request_payload(message["Body"])
    except ValueError:
        tally.not_records += 1
        return False
    if not tally.include_refused and record_condition(message["Body"]) == names.ON_FAILURE_CONDITION:
        tally.kept += 1
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
