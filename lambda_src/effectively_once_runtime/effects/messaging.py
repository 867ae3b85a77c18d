"""Queues and topics: SQS ``SendMessage`` and SNS ``Publish`` inside a declared effect. The caller's boto3 client is
used; nothing else is imported.

- **FIFO, inside the window** (:func:`send_fifo`, :func:`publish_fifo`): ``MessageDeduplicationId`` is the adapter
  key through ``effect_keys.form`` (1 to 128 characters of ``!`` to ``~``, what SendMessage and Publish take: a
  scoped key as it is, a longer or unusual business key as a readable head plus its SHA-256). SQS and SNS
  accept a second message with the same deduplication id and drop it for 5 minutes after the first was accepted
  (``DEDUPLICATION_INTERVAL_SECONDS``); a replay after that sends a second copy.
- **Standard queues and topics, or FIFO past the window** (:func:`send_message`, :func:`publish`): un-keyed effects
  with ``delivery=`` (``unkeyed.py``): a pending marker means "maybe sent". On a FIFO queue or topic they set the
  deduplication id too, so a replay inside the window is also dropped by SQS or SNS.

Sources: Amazon SQS API Reference, SendMessage (``MessageDeduplicationId``: "any messages sent with the same message
deduplication ID are accepted successfully but aren't delivered during the 5-minute deduplication interval"; at most
128 characters, alphanumeric and punctuation); Amazon SQS Developer Guide, "Exactly-once processing in Amazon SQS";
Amazon SNS API Reference, Publish (``MessageDeduplicationId``: "deduplication of sent messages within the 5 minute
minimum deduplication interval"; per topic, or per message group when ``FifoThroughputScope`` is ``MessageGroup``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from .. import effect_keys
from ..errors import InvalidEffectCall, PermanentError
from ..names import FIFO_SUFFIX, is_fifo_address
from ._context import adapter_key
from .unkeyed import MarkerTable, check_delivery, rejected_by_aws, run_marked

T = TypeVar("T")

#: How long SQS and SNS FIFO drop a message whose deduplication id was already accepted, in seconds (sources above).
DEDUPLICATION_INTERVAL_SECONDS = 300
#: Error codes by which SQS or SNS refuse a message for what it is (its body, attributes or group id): it can never be
#: sent as it is (Amazon SQS API Reference and Amazon SNS API Reference, SendMessage and Publish, Errors).
REJECTED_CODES = frozenset(
    {
        "InvalidParameterValue",
        "InvalidParameter",
        "InvalidMessageContents",
        "MissingParameter",
        "InvalidAttributeName",
        "InvalidAttributeValue",
    }
)


class MessageRejected(PermanentError):
    """SQS or SNS refused the message itself (``REJECTED_CODES``: too large, characters it does not take, a bad
    attribute or group id): a retry sends the same message, so it is permanent (the record goes to the DLQ with this
    reason). The message names the error code and AWS's message, never the body."""


def send_fifo(
    *,
    client: Any,
    queue_url: str,
    body: str,
    message_group_id: str,
    idempotency_key: str,
    name: str | None = None,
    message_attributes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``SendMessage`` to a FIFO queue with ``MessageDeduplicationId`` = the adapter key: a replay within
    ``DEDUPLICATION_INTERVAL_SECONDS`` (300 s) of the first accepted send is accepted and dropped by SQS.

    :param client: a boto3 SQS client.
    :param queue_url: the queue's URL, ending in ``.fifo``.
    :param body: the message body (SQS's size and character rules apply).
    :param message_group_id: the FIFO message group.
    :param idempotency_key: the key the declared effect was called with.
    :param name: this call's name when the effect sends more than once. :default: ``None``.
    :param message_attributes: ``MessageAttributes`` as SendMessage takes them. :default: ``None``: none.
    :returns: the SendMessage response (``MessageId``, ``SequenceNumber``, ...).
    :raises InvalidEffectCall: ``queue_url`` does not end in ``.fifo`` (use :func:`send_message` with ``delivery=``), an
        empty ``message_group_id``, or the key rules of ``adapter_key``.
    :raises MessageRejected: SQS refused the message itself (permanent).
    :raises botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: any other failure (transient).
    """
    _check_fifo("send_fifo", "queue_url", queue_url, "send_message")
    _check_group("send_fifo", message_group_id)
    key = effect_keys.form(adapter_key("send_fifo", idempotency_key, name))
    request = _sqs_request(queue_url, body, message_group_id, key, message_attributes)
    response: dict[str, Any] = _rejected_as_permanent("send_fifo", lambda: client.send_message(**request))
    return response


def publish_fifo(
    *,
    client: Any,
    topic_arn: str,
    message: str,
    message_group_id: str,
    idempotency_key: str,
    name: str | None = None,
    subject: str | None = None,
    message_attributes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``Publish`` to a FIFO topic with ``MessageDeduplicationId`` = the adapter key: a replay within
    ``DEDUPLICATION_INTERVAL_SECONDS`` (300 s) of the first accepted publish is accepted and dropped by SNS.

    :param client: a boto3 SNS client.
    :param topic_arn: the topic's ARN, ending in ``.fifo``.
    :param message: the message (SNS's size rules apply).
    :param message_group_id: the FIFO message group.
    :param idempotency_key: the key the declared effect was called with.
    :param name: this call's name when the effect publishes more than once. :default: ``None``.
    :param subject: the ``Subject``. :default: ``None``: none.
    :param message_attributes: ``MessageAttributes`` as Publish takes them. :default: ``None``: none.
    :returns: the Publish response (``MessageId``, ``SequenceNumber``).
    :raises InvalidEffectCall: ``topic_arn`` does not end in ``.fifo`` (use :func:`publish` with ``delivery=``), an
        empty ``message_group_id``, or the key rules of ``adapter_key``.
    :raises MessageRejected: SNS refused the message itself (permanent).
    :raises botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: any other failure (transient).
    """
    _check_fifo("publish_fifo", "topic_arn", topic_arn, "publish")
    _check_group("publish_fifo", message_group_id)
    key = effect_keys.form(adapter_key("publish_fifo", idempotency_key, name))
    request = _sns_request(topic_arn, message, message_group_id, key, subject, message_attributes)
    response: dict[str, Any] = _rejected_as_permanent("publish_fifo", lambda: client.publish(**request))
    return response


def send_message(
    *,
    client: Any,
    queue_url: str,
    body: str,
    delivery: str,
    idempotency_key: str,
    name: str | None = None,
    message_group_id: str | None = None,
    message_attributes: Mapping[str, Any] | None = None,
    markers: MarkerTable | None = None,
) -> dict[str, Any] | None:
    """``SendMessage`` as an un-keyed effect (``unkeyed.unkeyed``): for a standard queue, or a FIFO queue whose
    replays may come after the 5-minute deduplication interval. On a FIFO queue the deduplication id is the adapter
    key as well (a replay inside the interval is dropped by SQS too).

    :param client: a boto3 SQS client.
    :param queue_url: the queue's URL.
    :param body: the message body.
    :param delivery: ``"at_most_once"`` or ``"at_least_once"`` (required, no default).
    :param idempotency_key: the key the declared effect was called with.
    :param name: this call's name when the effect sends more than once. :default: ``None``.
    :param message_group_id: the message group (required for a FIFO queue). :default: ``None``.
    :param message_attributes: ``MessageAttributes``. :default: ``None``: none.
    :param markers: the marker table outside a ``Consumer``. :default: ``None``: the consumer's idempotency table.
    :returns: the SendMessage response; on a replay after the send completed, the stored response; ``None`` when the
        send was skipped as possibly lost (``at_most_once``).
    :raises TypeError: ``delivery`` not given.
    :raises InvalidEffectCall: ``delivery`` not one of its values; a FIFO queue without ``message_group_id``; the rules
        of ``unkeyed.unkeyed``.
    :raises MessageRejected: SQS refused the message itself (permanent; the claim is released).
    :raises unkeyed.MarkerUnavailable: the marker could not be written (nothing sent).
    :raises botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: any other failure (transient).
    """
    check_delivery(delivery)
    fifo = is_fifo_address(queue_url)
    if fifo:
        _check_group("send_message to a FIFO queue", message_group_id)
    key = adapter_key("send_message", idempotency_key, name)
    request = _sqs_request(
        queue_url, body, message_group_id, effect_keys.form(key) if fifo else None, message_attributes
    )
    return _rejected_as_permanent(
        "send_message",
        lambda: run_marked(
            "send_message",
            key,
            lambda: client.send_message(**request),
            delivery=delivery,
            markers=markers,
            not_sent=rejected_by_aws,
        ),
    )


def publish(
    *,
    client: Any,
    topic_arn: str,
    message: str,
    delivery: str,
    idempotency_key: str,
    name: str | None = None,
    message_group_id: str | None = None,
    subject: str | None = None,
    message_attributes: Mapping[str, Any] | None = None,
    markers: MarkerTable | None = None,
) -> dict[str, Any] | None:
    """``Publish`` as an un-keyed effect (``unkeyed.unkeyed``): for a standard topic, or a FIFO topic whose replays
    may come after the 5-minute deduplication interval. On a FIFO topic the deduplication id is the adapter key as
    well.

    :param client: a boto3 SNS client.
    :param topic_arn: the topic's ARN.
    :param message: the message.
    :param delivery: ``"at_most_once"`` or ``"at_least_once"`` (required, no default).
    :param idempotency_key: the key the declared effect was called with.
    :param name: this call's name when the effect publishes more than once. :default: ``None``.
    :param message_group_id: the message group (required for a FIFO topic). :default: ``None``.
    :param subject: the ``Subject``. :default: ``None``: none.
    :param message_attributes: ``MessageAttributes``. :default: ``None``: none.
    :param markers: the marker table outside a ``Consumer``. :default: ``None``: the consumer's idempotency table.
    :returns: the Publish response; on a replay after the publish completed, the stored response; ``None`` when the
        publish was skipped as possibly lost (``at_most_once``).
    :raises TypeError: ``delivery`` not given.
    :raises InvalidEffectCall: ``delivery`` not one of its values; a FIFO topic without ``message_group_id``; the rules
        of ``unkeyed.unkeyed``.
    :raises MessageRejected: SNS refused the message itself (permanent; the claim is released).
    :raises unkeyed.MarkerUnavailable: the marker could not be written (nothing published).
    :raises botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: any other failure (transient).
    """
    check_delivery(delivery)
    fifo = is_fifo_address(topic_arn)
    if fifo:
        _check_group("publish to a FIFO topic", message_group_id)
    key = adapter_key("publish", idempotency_key, name)
    request = _sns_request(
        topic_arn, message, message_group_id, effect_keys.form(key) if fifo else None, subject, message_attributes
    )
    return _rejected_as_permanent(
        "publish",
        lambda: run_marked(
            "publish",
            key,
            lambda: client.publish(**request),
            delivery=delivery,
            markers=markers,
            not_sent=rejected_by_aws,
        ),
    )


# --- helpers ------------------------------------------------------------------------------------------------------


def _check_fifo(adapter: str, parameter: str, address: str, unkeyed_variant: str) -> None:
    if not is_fifo_address(address):  # ``address`` not a string is refused here too
        raise InvalidEffectCall(
            f"{adapter} takes a FIFO {parameter} (ending in {FIFO_SUFFIX!r}), but {address!r} was given: a standard "
            f"queue or topic has no deduplication id; use {unkeyed_variant}(..., delivery='at_most_once' or "
            "'at_least_once') instead"
        )


def _check_group(adapter: str, message_group_id: str | None) -> None:
    if not isinstance(message_group_id, str) or not message_group_id:
        raise InvalidEffectCall(f"{adapter} needs a non-empty message_group_id, but {message_group_id!r} was given")


def _sqs_request(
    url: str, body: str, group: str | None, dedup: str | None, attributes: Mapping[str, Any] | None
) -> dict[str, Any]:
    request: dict[str, Any] = {"QueueUrl": url, "MessageBody": body}
    if group is not None:
        request["MessageGroupId"] = group
    if dedup is not None:
        request["MessageDeduplicationId"] = dedup
    if attributes:
        request["MessageAttributes"] = dict(attributes)
    return request


def _sns_request(
    arn: str,
    message: str,
    group: str | None,
    dedup: str | None,
    subject: str | None,
    attributes: Mapping[str, Any] | None,
) -> dict[str, Any]:
    request: dict[str, Any] = {"TopicArn": arn, "Message": message}
    if group is not None:
        request["MessageGroupId"] = group
    if dedup is not None:
        request["MessageDeduplicationId"] = dedup
    if subject is not None:
        request["Subject"] = subject
    if attributes:
        request["MessageAttributes"] = dict(attributes)
    return request


def _rejected_as_permanent(adapter: str, call: Callable[[], T]) -> T:
    """``call()``, with a refusal of the message itself (``REJECTED_CODES``) raised as ``MessageRejected``."""
    try:
        return call()
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code not in REJECTED_CODES:
            raise
        text = error.response.get("Error", {}).get("Message", "")
        raise MessageRejected(f"{adapter}: the message was refused ({code}): {text}"[:500]) from error
