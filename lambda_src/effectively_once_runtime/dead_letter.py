"""Permanent failures to the dead-letter queue on first sight (``DEAD_LETTER_QUEUE_URL``).

One place decides what is permanent (``is_permanent``); ``DeadLetterQueue.send`` copies an SQS record to the DLQ
with its body, its message attributes and one attribute more (``names.DEAD_LETTER_REASON_ATTRIBUTE``, a JSON
reason). The record is then reported done; when the copy cannot be sent it is reported failed instead and SQS moves
it after ``maxReceiveCount`` receives: nothing is ever lost.

On a FIFO queue the copy keeps the original's message group id and takes the original's message id as its
deduplication id, so a second delivery of the same poison message (the first copy was sent but the record not
deleted) is deduplicated by SQS within its 5-minute deduplication interval. A standard queue has no deduplication:
such a second delivery sends a second copy, which is harmless (it is poison, and a person reads it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyKeyError, IdempotencyValidationError

from . import names
from .errors import PermanentError, caused_by

#: At most 10 message attributes per message (Amazon SQS Developer Guide, "Amazon SQS message attributes"): a copy
#: whose original already has 10 (other than the reason) cannot carry the reason and is not sent.
MAX_MESSAGE_ATTRIBUTES = 10
#: The reason's ``message`` is cut to this many characters: a reason must not copy a megabyte.
REASON_MESSAGE_CHARS = 300

#: Exceptions that can never succeed on a retry. Everything else (throttling, timeouts, an in-progress duplicate,
#: a persistence-layer error, any unexpected exception) is transient. A body that is not strict JSON, not an object
#: or without a key is the runtime's ``InvalidRecord``, a ``PermanentError``. A ``json.JSONDecodeError`` raised by a
#: record function itself is not listed: a provider answering an HTML error page raises it too, which is transient;
#: a record function raises ``PermanentError`` for what it knows to be permanent.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (PermanentError, IdempotencyKeyError, IdempotencyValidationError)

# ``https://sqs.<region>.amazonaws.com[.cn]/...`` and the legacy ``https://<region>.queue.amazonaws.com/...``
# (Amazon SQS Developer Guide, "Queue and message identifiers").
_QUEUE_HOST = re.compile(r"(?:sqs\.(?P<a>[a-z0-9-]+)|(?P<b>[a-z0-9-]+)\.queue)\.amazonaws\.com(?:\.cn)?")
# SendMessage: MessageDeduplicationId is up to 128 characters of a-z, A-Z, 0-9 and !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~
_DEDUP_ALLOWED = re.compile(r"[!-~]{1,128}")


def is_permanent(error: BaseException, declared: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether ``error`` makes its record a permanent failure: it, or an exception in its ``__cause__`` chain, is one
    of ``PERMANENT_ERRORS`` or of ``declared`` (``Consumer(permanent=...)``)."""
    return caused_by(error, PERMANENT_ERRORS + declared)


def check_permanent(permanent: Any) -> tuple[type[BaseException], ...]:
    """``permanent`` (``Consumer(permanent=...)``: an exception type, or a tuple or list of them) as a tuple.

    :raises TypeError: it holds something that is not an exception type.
    """
    types = tuple(permanent) if isinstance(permanent, (tuple, list)) else (permanent,)
    for item in types:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"permanent must be a tuple of exception types, but {item!r} was given")
    return types


def queue_region(url: str, variable: str = names.ENV_DEAD_LETTER_QUEUE_URL) -> str | None:
    """The Region in an SQS queue URL; ``None`` for another host (a local endpoint: the client's Region applies).

    :param variable: the environment variable the URL came from, for the message.
    :raises ValueError: ``url`` is not an http(s) URL with a queue path.
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.path.count("/") < 2:
        raise ValueError(
            f"{variable} must be an SQS queue URL (https://sqs.<region>.amazonaws.com/"
            f"<account>/<name>), but {url!r} was given"
        )
    match = _QUEUE_HOST.fullmatch(parsed.hostname)
    return None if match is None else match.group("a") or match.group("b")


def send_attributes(event_attributes: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Message attributes of a Lambda SQS record (``stringValue``/``binaryValue`` base64/``dataType``) in the shape
    ``SendMessage`` takes (``StringValue``/``BinaryValue`` bytes/``DataType``). The list values are reserved by SQS
    ("not implemented") and never set, so they are not copied."""
    converted: dict[str, dict[str, Any]] = {}
    for name, value in (event_attributes or {}).items():
        data_type = value.get("dataType") or "String"
        attribute: dict[str, Any] = {"DataType": data_type}
        if data_type.startswith("Binary"):
            raw = value.get("binaryValue") or b""
            # Lambda gives base64 text; a record built from a boto3 ReceiveMessage (local tooling) holds bytes.
            attribute["BinaryValue"] = bytes(raw) if isinstance(raw, (bytes, bytearray)) else base64.b64decode(raw)
        else:
            attribute["StringValue"] = value.get("stringValue") or ""
        converted[name] = attribute
    return converted


def deduplication_id(record: SQSRecord) -> str:
    """The copy's FIFO deduplication id: the original's message id (stable across its deliveries), or its SHA-256
    when it holds characters the id may not."""
    message_id = record.message_id
    if _DEDUP_ALLOWED.fullmatch(message_id):
        return message_id
    return hashlib.sha256(message_id.encode()).hexdigest()


def reason(record: SQSRecord, error: BaseException, function_name: str | None) -> str:
    """The reason attribute's value: JSON with ``error_type``, ``message`` (cut short), ``message_id``,
    ``receive_count`` (``ApproximateReceiveCount``, a number) and ``function_name``."""
    text = str(error)
    if len(text) > REASON_MESSAGE_CHARS:
        text = text[:REASON_MESSAGE_CHARS] + "..."
    return json.dumps(
        {
            "error_type": type(error).__name__,
            "message": text,
            "message_id": record.message_id,
            "receive_count": int(record.attributes.approximate_receive_count),
            "function_name": function_name,
        },
        separators=(",", ":"),
    )


class RuntimeQueue:
    """A queue the runtime sends to, with one SQS client per execution environment, built on the first send in the
    Region of the queue URL (the DLQ here, the on-failure queue in ``on_failure.py``).

    :param url: the queue's URL.
    :param variable: the environment variable it came from, for the error message.
    :param client_factory: builds the SQS client, called once as ``client_factory(region_name)``.
        :default: ``boto3.client("sqs", region_name=...)``.
    :raises ValueError: ``url`` is not a queue URL.
    """

    def __init__(
        self,
        url: str,
        variable: str = names.ENV_DEAD_LETTER_QUEUE_URL,
        *,
        client_factory: Callable[[str | None], Any] | None = None,
    ) -> None:
        self.url = url
        self.region = queue_region(url, variable)
        self._client_factory = client_factory or sqs_client
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._client_factory(self.region)
        return self._client


class DeadLetterQueue(RuntimeQueue):
    """The queue permanent failures are sent to (``DEAD_LETTER_QUEUE_URL``), as a :class:`RuntimeQueue`.

    :param url: the DLQ's URL.
    :param client_factory: builds the SQS client. :default: ``boto3.client("sqs", region_name=...)``.
    :raises ValueError: ``url`` is not a queue URL.
    """

    def __init__(self, url: str, *, client_factory: Callable[[str | None], Any] | None = None) -> None:
        super().__init__(url, names.ENV_DEAD_LETTER_QUEUE_URL, client_factory=client_factory)

    def message(self, record: SQSRecord, error: BaseException, function_name: str | None) -> dict[str, Any]:
        """The ``SendMessage`` request for ``record``'s copy.

        :raises ValueError: the original's attributes and the reason are more than ``MAX_MESSAGE_ATTRIBUTES``.
        """
        attributes = send_attributes(record.raw_event.get("messageAttributes"))
        attributes[names.DEAD_LETTER_REASON_ATTRIBUTE] = {
            "DataType": "String",
            "StringValue": reason(record, error, function_name),
        }
        if len(attributes) > MAX_MESSAGE_ATTRIBUTES:
            raise ValueError(
                f"the message has {len(attributes) - 1} message attributes: with the reason it would have "
                f"{len(attributes)}, more than SQS allows ({MAX_MESSAGE_ATTRIBUTES})"
            )
        request: dict[str, Any] = {"QueueUrl": self.url, "MessageBody": record.body, "MessageAttributes": attributes}
        group = record.attributes.message_group_id
        if group:  # a FIFO group, or a fair queue's tenant (a standard queue's record may carry one): kept
            request["MessageGroupId"] = group
            if names.is_fifo_address(self.url):  # SQS refuses a deduplication id on a standard queue
                request["MessageDeduplicationId"] = deduplication_id(record)
        return request

    def send(self, record: SQSRecord, error: BaseException, function_name: str | None) -> str:
        """Send ``record``'s copy; the copy's message id.

        :raises ValueError: too many message attributes (nothing sent).
        :raises botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: the send failed.
        """
        request = self.message(record, error, function_name)
        return str(self.client.send_message(**request).get("MessageId", ""))


def sqs_client(region: str | None) -> Any:
    """A boto3 SQS client in ``region`` (the default Region when ``None``)."""
    import boto3

    return boto3.client("sqs", region_name=region) if region else boto3.client("sqs")
