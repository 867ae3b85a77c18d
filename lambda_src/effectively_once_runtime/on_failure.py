"""Events refused on first sight on the asynchronous path (``ON_FAILURE_QUEUE_URL``): the mirror of the DLQ on
first sight (``dead_letter.py``) for EventBridge, SNS and S3 triggers, and for direct invocations with
``ON_FAILURE_DIRECT``.

Lambda retries a failed asynchronous invocation (up to 2 times), then sends a record of the event to the function's
on-failure destination. An event the app refused for good (a ``PermanentError``, an invalid record, an exception
declared ``permanent=``) would only fail again on each retry. So the runtime records it itself, on the same queue
and in the shape of Lambda's own records (AWS Lambda Developer Guide, "Capturing records of Lambda asynchronous
invocations"), and the invocation succeeds: Lambda never retries it, and one reader and one redrive take both kinds.

=========================================== =======================================================================
field                                       value
=========================================== =======================================================================
``version``                                 ``"1.0"``
``timestamp``                               when the record was made, ISO 8601 in UTC with milliseconds
``requestContext.requestId``                the invocation's request id (``context.aws_request_id``)
``requestContext.functionArn``              the invoked function's ARN, qualified (``:$LATEST`` when it was not)
``requestContext.condition``                ``"PermanentError"`` (``names.ON_FAILURE_CONDITION``); Lambda's own
                                            records say ``RetriesExhausted`` or ``EventAgeExceeded``
``requestContext.approximateInvokeCount``   ``1``: the function cannot tell which attempt it is; first sight
``requestPayload``                          the event; for an SNS or S3 record, ``{"Records": [that record]}``
``responseContext``                         ``statusCode`` 200, ``executedVersion``, ``functionError`` ``"Handled"``
``responsePayload``                         ``errorType`` (the exception's class) and ``errorMessage`` (the reason)
=========================================== =======================================================================

A redrive invokes the ``requestPayload`` again, as for Lambda's own records; the event is refused again, and a new
record is sent. When the record cannot be sent (no grant, the queue is gone, the record is too large), the failure
is raised instead: Lambda retries the event, then sends its own record. Nothing is lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from . import names
from .body import SHOWN_CHARS
from .dead_letter import RuntimeQueue

#: The version Lambda's destination records carry.
RECORD_VERSION = "1.0"
#: The qualifier of an unqualified invoked ARN: the function's unpublished version.
LATEST = "$LATEST"
#: The reason (``responsePayload.errorMessage``) is cut to this many characters.
REASON_CHARS = SHOWN_CHARS * 5


def qualified_arn(arn: str, version: str | None) -> str:
    """``arn`` with its qualifier: as it is when it has one (a version or an alias), else with ``version`` (the
    executed version, ``$LATEST`` when unknown). A function ARN is ``arn:<partition>:lambda:<region>:<account>:
    function:<name>[:<qualifier>]``."""
    return arn if arn.count(":") >= 7 else f"{arn}:{version or LATEST}"


def destination_record(
    event: Any, error: BaseException, context: Any, *, now: datetime | None = None
) -> dict[str, Any]:
    """The record of ``event``, refused with ``error`` in the invocation of ``context`` (see the module docstring)."""
    when = (now or datetime.now(UTC)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    version = getattr(context, "function_version", None) or LATEST
    arn = getattr(context, "invoked_function_arn", None) or ""
    reason = str(error)
    return {
        "version": RECORD_VERSION,
        "timestamp": when,
        "requestContext": {
            "requestId": getattr(context, "aws_request_id", None) or "",
            "functionArn": qualified_arn(arn, version) if arn else "",
            "condition": names.ON_FAILURE_CONDITION,
            "approximateInvokeCount": 1,
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "executedVersion": version, "functionError": "Handled"},
        "responsePayload": {
            "errorType": type(error).__name__,
            "errorMessage": reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS] + "...",
        },
    }


class OnFailureQueue(RuntimeQueue):
    """The function's on-failure queue, as a ``dead_letter.RuntimeQueue`` (one SQS client per execution environment,
    built on the first send in the Region of the queue URL).

    :param url: the queue's URL (``ON_FAILURE_QUEUE_URL``).
    :param direct: record refused direct invocations too (``ON_FAILURE_DIRECT``). :default: ``False``.
    :param client_factory: builds the SQS client, called once as ``client_factory(region_name)``.
        :default: ``boto3.client("sqs", region_name=...)``.
    :raises ValueError: ``url`` is not a queue URL.
    """

    def __init__(
        self, url: str, *, direct: bool = False, client_factory: Callable[[str | None], Any] | None = None
    ) -> None:
        super().__init__(url, names.ENV_ON_FAILURE_QUEUE_URL, client_factory=client_factory)
        self.direct = direct

    def send(self, event: Any, error: BaseException, context: Any) -> str:
        """Send the record of ``event``; the record's message id.

        :raises TypeError, ValueError: the event is not JSON-ready (nothing sent).
        :raises botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: the send failed.
        """
        body = json.dumps(destination_record(event, error, context), separators=(",", ":"))
        return str(self.client.send_message(QueueUrl=self.url, MessageBody=body).get("MessageId", ""))
