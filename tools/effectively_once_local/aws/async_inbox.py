"""Lambda's asynchronous-invocation queue, locally: the contract between the local AWS's bridges, the runner and
the redrive (issue 23). The standard library, the runtime's trigger names and the kinds of asynchronous source
(``traffic/source_kinds.py``).

Lambda puts an asynchronously invoked event (an EventBridge rule's target, an SNS subscription, an S3 notification,
``Invoke(InvocationType="Event")``) in a queue of its own, invokes the function from it, retries after an error, a
timeout or a crash, and after the last attempt sends a record to the on-failure destination (AWS Lambda Developer
Guide, "Invoking a Lambda function asynchronously", "Configuring error handling for asynchronous invocation",
"Capturing records of Lambda asynchronous invocations"). moto 5.2.5 runs none of this, so the local AWS keeps that
queue as an SQS queue per function, the *inbox* (:func:`inbox_name`), which the bridges fill and the runner drains:

- one message per event: its body is the event exactly as the function receives it; the message attribute
  :data:`SOURCE_ATTRIBUTE` says where it came from (:data:`SOURCES`), and for a direct ``Invoke`` (whose event holds
  no id of its own) :data:`EVENT_ID_ATTRIBUTE` the id the local AWS answered the ``Invoke`` with;
- the message's ``ApproximateReceiveCount`` is the attempt number; ``SentTimestamp`` starts its age;
- a retry is the message made visible again after :func:`retry_delay_seconds` (Lambda: about 1 minute before the
  second attempt, 2 before the third), scaled by :data:`TIME_SCALE_ENV` (one stated factor for the delays and the
  maximum event age: a local run cannot wait minutes);
- after the last attempt, or past the maximum event age, the runner sends :func:`destination_record` to the
  on-failure queue and deletes the message.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from effectively_once_runtime import events, names

from ..traffic.source_kinds import SOURCE_KINDS, DirectInvoke

#: The inbox queue's name prefix.
INBOX_PREFIX = "eo-async-"
#: SQS queue names: at most 80 characters of letters, digits, ``-`` and ``_`` (Amazon SQS API Reference,
#: CreateQueue, QueueName).
_QUEUE_NAME_CHARS = 80
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
#: The inbox message attribute naming the event's source.
SOURCE_ATTRIBUTE = "EffectivelyOnceAsyncSource"
#: The inbox message attribute holding a direct ``Invoke``'s event id, which the local AWS also answered the
#: ``Invoke`` with (in ``traffic.producer.EVENT_ID_HEADER``): the send log and the delivery log meet on it.
EVENT_ID_ATTRIBUTE = "EffectivelyOnceEventId"
#: The sources of the inbox's own: a direct ``Invoke`` (``InvocationType="Event"``) and a redriven on-failure record.
INVOKE, REDRIVE = DirectInvoke.inbox_source, "redrive"
#: Two kinds of the asynchronous sources the local AWS bridges (the runtime's triggers), under their old names here.
EVENTBRIDGE, SNS = events.EVENTBRIDGE, events.SNS
#: Every value of :data:`SOURCE_ATTRIBUTE`: each kind's (``traffic/source_kinds.SOURCE_KINDS``, in its order:
#: ``eventbridge``, ``sns``, ``invoke``), then :data:`REDRIVE`.
SOURCES = (*(kind.inbox_source for kind in SOURCE_KINDS), REDRIVE)
#: Lambda's waits before the second and the third attempt, in seconds ("Lambda waits one minute before the second
#: attempt and two minutes before the third": AWS Lambda Developer Guide, asynchronous invocation).
RETRY_DELAYS_SECONDS = (60, 120)
#: The environment variable holding the local time scale (a float > 0) applied to the retry delays and the maximum
#: event age; :data:`DEFAULT_TIME_SCALE` when unset.
TIME_SCALE_ENV = "EFFECTIVELY_ONCE_ASYNC_TIME_SCALE"
#: 1 minute -> 3 s, 2 minutes -> 6 s, 6 hours -> 18 minutes.
DEFAULT_TIME_SCALE = 0.05
#: The on-failure record's ``requestContext.condition`` values: Lambda's own two, and the runtime's for an event the
#: app refused for good (``effectively_once_runtime.on_failure``).
RETRIES_EXHAUSTED, EVENT_AGE_EXCEEDED = "RetriesExhausted", "EventAgeExceeded"
PERMANENT_ERROR = names.ON_FAILURE_CONDITION


def inbox_name(function_name: str) -> str:
    """The inbox queue of the function named ``function_name`` (a valid SQS queue name, stable, distinct for
    distinct functions: a long or unusual name keeps a readable head and a hash)."""
    plain = _OTHER.sub("_", function_name)
    name = INBOX_PREFIX + plain
    if len(name) <= _QUEUE_NAME_CHARS and plain == function_name:
        return name
    digest = hashlib.sha256(function_name.encode()).hexdigest()[:16]
    return f"{INBOX_PREFIX}{plain[: _QUEUE_NAME_CHARS - len(INBOX_PREFIX) - 17]}-{digest}"


def time_scale(env: dict[str, str] | Any) -> float:
    """The local time scale from ``env`` (:data:`TIME_SCALE_ENV`).

    :raises ValueError: a value that is not a number > 0.
    """
    raw = env.get(TIME_SCALE_ENV)
    if raw in (None, ""):
        return DEFAULT_TIME_SCALE
    value = float(raw)
    if not value > 0:
        raise ValueError(f"{TIME_SCALE_ENV} must be a number > 0, but {raw!r} was given")
    return value


def retry_delay_seconds(attempt: int, scale: float) -> float:
    """The wait after failed attempt number ``attempt`` (1-based) before the next, scaled."""
    return RETRY_DELAYS_SECONDS[min(attempt, len(RETRY_DELAYS_SECONDS)) - 1] * scale


def destination_record(
    event: Any,
    *,
    function_arn: str,
    condition: str,
    approximate_invoke_count: int,
    error_type: str | None,
    error_message: str | None,
    request_id: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The record Lambda sends to an on-failure destination ("Capturing records of Lambda asynchronous
    invocations": ``version``, ``timestamp``, ``requestContext`` with ``requestId``, ``functionArn`` (qualified
    ``$LATEST``), ``condition`` and ``approximateInvokeCount``; ``requestPayload``, the event; ``responseContext``
    and ``responsePayload``, the last attempt's error)."""
    when = (now or datetime.now(UTC)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    record: dict[str, Any] = {
        "version": "1.0",
        "timestamp": when,
        "requestContext": {
            "requestId": request_id or str(uuid.uuid4()),
            "functionArn": f"{function_arn}:$LATEST",
            "condition": condition,
            "approximateInvokeCount": approximate_invoke_count,
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
        "responsePayload": None,
    }
    if error_type is not None:
        record["responseContext"]["functionError"] = "Unhandled"
        record["responsePayload"] = {"errorType": error_type, "errorMessage": error_message or "", "trace": []}
    return record


def record_condition(body: str) -> str | None:
    """An on-failure record's ``requestContext.condition`` (``RetriesExhausted``, ``EventAgeExceeded``, or the
    runtime's ``PermanentError``); ``None`` for a body that is not a destination record."""
    try:
        record = json.loads(body)
    except ValueError:
        return None
    context = record.get("requestContext") if isinstance(record, dict) else None
    condition = context.get("condition") if isinstance(context, dict) else None
    return condition if isinstance(condition, str) else None


def refusal(body: str) -> dict[str, Any] | None:
    """The reason of a record the runtime wrote for an event the app refused for good (condition
    ``PermanentError``, ``effectively_once_runtime.on_failure``), in the shape of a DLQ copy's reason attribute:
    ``error_type``, ``message`` and ``condition``; ``None`` for any other body (Lambda's own records included)."""
    if record_condition(body) != names.ON_FAILURE_CONDITION:
        return None
    response = json.loads(body).get("responsePayload")
    response = response if isinstance(response, dict) else {}
    return {
        "error_type": response.get("errorType"),
        "message": response.get("errorMessage"),
        "condition": names.ON_FAILURE_CONDITION,
    }


def request_payload(body: str) -> Any:
    """The event inside an on-failure record's body (its ``requestPayload``).

    :raises ValueError: the body is not JSON, or not a destination record.
    """
    record = json.loads(body)
    if not isinstance(record, dict) or "requestPayload" not in record or "requestContext" not in record:
        raise ValueError("not a Lambda destination record (no requestContext/requestPayload)")
    return record["requestPayload"]
