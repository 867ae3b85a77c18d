"""The local AWS refuses what AWS refuses (issue 58, item 1): SQS requests that moto 5.2.5 (:data:`.moto_patches.
REQUIRED_MOTO_VERSION`) accepts and SQS refuses, and one it refuses that SQS accepts. Applied by
:func:`.moto_patches.apply` (the local AWS's server, before the serialization of ``moto_locking``, which then wraps
the patched visibility change too) and by the runtime tests' in-process moto (``tests/runtime/conftest.py``), through
:func:`apply_refusals`.

A request accepted locally and refused by AWS hides a loss: the runtime's first-sight DLQ copy of a fair-queue record
with a ``MessageDeduplicationId`` passed every local run, and on AWS the copy was refused and the record reached the
DLQ after ``maxReceiveCount`` receives without its reason. Each patch raises moto's own exception classes
(``moto.sqs.exceptions``), so the answer has the shape of moto's other SQS errors (the error code, HTTP 400, the
message), and each refuses the whole request before moto performs any of it. docs/local-aws-limits.md lists every
rule, with the ones moto already refuses; docs/moto-bugs.md has each gap as an upstream report:

- :func:`deduplication_ids_need_a_fifo_queue` (report 14): ``SendMessage`` and ``SendMessageBatch`` with a
  ``MessageDeduplicationId`` on a standard queue (a ``MessageGroupId`` there is a fair queue's tenant: accepted).
- :func:`at_most_ten_message_attributes` (report 15).
- :func:`message_size_in_bytes` (report 16): a message's size is its body and its attributes' names, types and
  values, in bytes, at most the queue's ``MaximumMessageSize``; a ``SendMessageBatch`` is at most 1 MiB in all.
- :func:`visibility_counted_from_the_receive` (report 17): the 12-hour limit of a message's visibility runs from
  its receive, not its send, and ``ChangeMessageVisibilityBatch`` fails the entry over it, not the request.
- :func:`batch_entry_rules` (report 18): ``DeleteMessageBatch`` and ``ChangeMessageVisibilityBatch`` take at most 10
  entries, with distinct ids (moto refuses both for ``SendMessageBatch`` only).

Tests: tests/local/test_moto_refusals.py (each rule with moto as is and patched, and against the server the tooling
starts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

#: At most this many message attributes per message ("Amazon SQS message attributes", Amazon SQS Developer Guide:
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html).
MAX_MESSAGE_ATTRIBUTES = 10
#: At most this many entries in a ``SendMessageBatch``, ``DeleteMessageBatch`` or ``ChangeMessageVisibilityBatch``
#: (Amazon SQS API Reference, SendMessageBatch, TooManyEntriesInBatchRequest:
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
MAX_BATCH_ENTRIES = 10
#: A ``SendMessageBatch``'s messages together, in bytes: 1 MiB ("The maximum allowed individual message size and the
#: maximum total payload size (the sum of the individual lengths of all of the batched messages) are both 1 MiB",
#: Amazon SQS API Reference, SendMessageBatch).
MAX_BATCH_BYTES = 1_048_576
#: A message's visibility ends at most this many seconds after its receive (Amazon SQS API Reference,
#: ChangeMessageVisibility: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html;
#: "The maximum visibility timeout is 12 hours from the time that Amazon SQS receives the ReceiveMessage request",
#: Amazon SQS Developer Guide, Visibility timeout).
MAX_VISIBILITY_SECONDS = 43_200
#: The attribute of a moto ``Message`` holding the time of its latest receive (moto's milliseconds), set by
#: :func:`visibility_counted_from_the_receive`.
RECEIVED_AT_ATTRIBUTE = "_effectively_once_received_at"
#: moto's SQS clock, read by ``moto.sqs.models`` as a module global (milliseconds since the epoch): read through the
#: module at each call, so that another patch's wrapper (``fifo_order.one_instant``) or a test's clock applies.
_CLOCK = "unix_time_millis"
#: The ``SQSResponse`` methods (one per API operation) the refusals wrap.
_RESPONSES = ("send_message", "send_message_batch", "delete_message_batch", "change_message_visibility_batch")


def patched_attributes() -> list[tuple[type, str]]:
    """Every ``(class, attribute)`` of moto's SQS that :func:`apply_refusals` replaces: a test restores them after
    (``monkeypatch.setattr(cls, name, getattr(cls, name))`` before applying)."""
    from moto.sqs import models, responses

    return [
        *((responses.SQSResponse, name) for name in _RESPONSES),
        (models.SQSBackend, "change_message_visibility"),
        (models.SQSBackend, "change_message_visibility_batch"),
        (models.Message, "mark_received"),
    ]


def apply_refusals() -> None:
    """Every refusal of this module (the module docstring); a second call changes nothing. Apply it before
    ``moto_locking.serialize_queue_mutations`` (:func:`visibility_counted_from_the_receive` replaces a method that
    the serialization wraps)."""
    deduplication_ids_need_a_fifo_queue()
    at_most_ten_message_attributes()
    message_size_in_bytes()
    visibility_counted_from_the_receive()
    batch_entry_rules()


# --- how a check is put before moto's own handling of a request ---------------------------------------------------


def check_first(cls: type, name: str, rule: str, check: Callable[[Any], None]) -> None:
    """Wrap ``cls.<name>`` (one API operation of a moto ``BaseResponse``) so that ``check(response)`` runs before moto
    reads the request; ``rule`` marks the wrapper, so a second call wraps nothing twice."""
    method = getattr(cls, name)
    marker = f"__effectively_once_{rule}__"
    if getattr(method, marker, False):
        return

    @wraps(method)
    def checked(self: Any) -> Any:
        check(self)
        return method(self)

    setattr(checked, marker, True)
    setattr(cls, name, checked)


def _check_first(name: str, rule: str, check: Callable[[Any], None]) -> None:
    """:func:`check_first` on ``SQSResponse.<name>``."""
    from moto.sqs.responses import SQSResponse

    check_first(SQSResponse, name, rule, check)


def _on_sends(rule: str, check: Callable[[Any, list[dict[str, Any]]], None]) -> None:
    """``check(queue, messages)`` before ``SendMessage`` (one message) and ``SendMessageBatch`` (its entries)."""
    _check_first("send_message", rule, lambda response: check(_queue(response), [_one_message(response)]))
    _check_first("send_message_batch", rule, lambda response: check(_queue(response), _entries(response)))


def _queue(response: Any) -> Any:
    return response.sqs_backend.get_queue(response._get_queue_name())


def _one_message(response: Any) -> dict[str, Any]:
    """A ``SendMessage`` request as a ``SendMessageBatch`` entry holds it."""
    names = ("MessageBody", "MessageAttributes", "MessageSystemAttributes", "MessageDeduplicationId")
    return {name: response._get_param(name) for name in names}


def _entries(response: Any) -> list[dict[str, Any]]:
    entries = response._get_param("Entries", [])
    return entries if isinstance(entries, list) else []


# --- the rules --------------------------------------------------------------------------------------------------------


def deduplication_ids_need_a_fifo_queue() -> None:
    """moto 5.2.5 accepts a ``MessageDeduplicationId`` on a standard queue, in ``SendMessage`` and
    ``SendMessageBatch``; SQS refuses the request: ``InvalidParameterValue``, "Value <id> for parameter
    MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type."
    (quoted in cdklabs/construct-hub#905; "This parameter applies only to FIFO (first-in-first-out) queues", Amazon
    SQS API Reference, SendMessage). A ``MessageGroupId`` on a standard queue stays accepted: it names a fair queue's
    tenant. docs/moto-bugs.md, report 14; tests: ``test_a_deduplication_id_on_a_standard_queue_is_refused``,
    ``test_a_group_id_on_a_standard_queue_is_accepted_for_fair_queues``."""
    from moto.sqs.exceptions import InvalidParameterValue

    def check(queue: Any, messages: list[dict[str, Any]]) -> None:
        if queue.fifo_queue:
            return
        for message in messages:
            given = message.get("MessageDeduplicationId")
            if given is not None:
                raise InvalidParameterValue(
                    f"Value {given} for parameter MessageDeduplicationId is invalid. "
                    "Reason: The request include parameter that is not valid for this queue type."
                )

    _on_sends("deduplication_ids_need_a_fifo_queue", check)


def at_most_ten_message_attributes() -> None:
    """moto 5.2.5 accepts any number of message attributes; SQS refuses a message with more than
    :data:`MAX_MESSAGE_ATTRIBUTES`: ``InvalidParameterValue``, "Number of message attributes [11] exceeds the allowed
    maximum [10]." (a public report: siutsin/telegram-jung2-bot PR #3134, a ``SendMessageBatch``). The whole request
    is refused, a batch's too. docs/moto-bugs.md, report 15; test: ``test_eleven_message_attributes_are_refused``."""
    from moto.sqs.exceptions import InvalidParameterValue

    def check(queue: Any, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            count = len(message.get("MessageAttributes") or {})
            if count > MAX_MESSAGE_ATTRIBUTES:
                raise InvalidParameterValue(
                    f"Number of message attributes [{count}] exceeds the allowed maximum [{MAX_MESSAGE_ATTRIBUTES}]."
                )

    _on_sends("at_most_ten_message_attributes", check)


def message_size(message: dict[str, Any]) -> int:
    """A message's size as SQS counts it, in bytes: its body in UTF-8 and, for each message attribute, its name, its
    type and its value (a string's UTF-8 bytes, a binary value's bytes). "All parts of the message attribute,
    including Name, Type, and Value, are part of the message size restriction" (Amazon SQS API Reference,
    MessageAttributeValue); a message system attribute is not ("The size of a message system attribute doesn't count
    towards the total size of a message", SendMessage).

    :param message: a ``SendMessageBatch`` entry (``MessageBody``, ``MessageAttributes``) as moto parses it.
    """
    size = len(_utf8(message.get("MessageBody")))
    for name, value in (message.get("MessageAttributes") or {}).items():
        size += len(_utf8(name)) + len(_utf8(value.get("DataType")))
        size += len(_utf8(value.get("StringValue"))) + len(_utf8(value.get("BinaryValue")))
    return size


def _utf8(value: Any) -> bytes:
    if value is None:
        return b""
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


def message_size_in_bytes() -> None:
    """moto 5.2.5 counts a message's body in characters and its attributes not at all, against the queue's
    ``MaximumMessageSize``, and a ``SendMessageBatch``'s bodies the same way against 1 MiB; SQS counts
    :func:`message_size` (bytes, attributes included). Over the queue's maximum: ``InvalidParameterValue``, "One or
    more parameters are invalid. Reason: Message must be shorter than <maximum> bytes." (inferablehq/inferable#306
    quotes it for 262144); a batch over :data:`MAX_BATCH_BYTES` in all: ``AWS.SimpleQueueService.BatchRequestTooLong``,
    "Batch requests cannot be longer than 1048576 bytes. You have sent <n> bytes." (awslabs/
    amazon-sqs-python-extended-client-lib#25 quotes it for 262144). docs/moto-bugs.md, report 16; tests:
    ``test_a_message_counts_its_attributes_and_its_bytes``,
    ``test_a_message_over_a_smaller_queue_maximum_is_refused_in_bytes``,
    ``test_a_batch_counts_its_messages_bytes_and_attributes``."""
    from moto.sqs.exceptions import BatchRequestTooLong, InvalidParameterValue

    def each(queue: Any, messages: list[dict[str, Any]]) -> None:
        maximum = int(queue.maximum_message_size)
        if any(message_size(message) > maximum for message in messages):
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {maximum} bytes."
            )

    def batch(queue: Any, entries: list[dict[str, Any]]) -> None:
        total = sum(message_size(entry) for entry in entries)
        if total > MAX_BATCH_BYTES:
            raise BatchRequestTooLong(total)
        each(queue, entries)

    rule = "message_size_in_bytes"
    _check_first("send_message", rule, lambda response: each(_queue(response), [_one_message(response)]))
    _check_first("send_message_batch", rule, lambda response: batch(_queue(response), _entries(response)))


def batch_entry_rules() -> None:
    """moto 5.2.5 refuses a ``SendMessageBatch`` of more than :data:`MAX_BATCH_ENTRIES` entries, or with two entries
    of one ``Id``, as SQS does; it accepts both in ``DeleteMessageBatch`` and ``ChangeMessageVisibilityBatch``, which
    SQS refuses the same way: ``AWS.SimpleQueueService.TooManyEntriesInBatchRequest``, "Maximum number of entries per
    request are 10. You have sent 11." (vinyldns/vinyldns#347), and ``AWS.SimpleQueueService.
    BatchEntryIdsNotDistinct``, "Id <id> repeated." (elixir-broadway/broadway_sqs#49, a ``DeleteMessageBatch``).
    (Amazon SQS API Reference, DeleteMessageBatch and ChangeMessageVisibilityBatch, Errors.) docs/moto-bugs.md,
    report 18; tests: ``test_a_batch_of_eleven_entries_is_refused``, ``test_a_batch_with_a_repeated_id_is_refused``."""
    from moto.sqs.exceptions import BatchEntryIdsNotDistinct, TooManyEntriesInBatchRequest

    def check(response: Any) -> None:
        ids = [str(entry.get("Id")) for entry in _entries(response)]
        if len(ids) > MAX_BATCH_ENTRIES:
            raise TooManyEntriesInBatchRequest(len(ids))
        repeated = _first_repeated(ids)
        if repeated is not None:
            raise BatchEntryIdsNotDistinct(repeated)

    for name in ("delete_message_batch", "change_message_visibility_batch"):
        _check_first(name, "batch_entry_rules", check)


def _first_repeated(ids: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for entry_id in ids:
        if entry_id in seen:
            return entry_id
        seen.add(entry_id)
    return None


def visibility_counted_from_the_receive() -> None:
    """moto 5.2.5 refuses a ``ChangeMessageVisibility`` whose new end is more than 12 hours after the message's
    *send*; SQS counts the 12 hours from its receive ("The maximum visibility timeout is 12 hours from the time that
    Amazon SQS receives the ReceiveMessage request", Amazon SQS Developer Guide, Visibility timeout), so moto refuses
    an hour's extension of a message that waited 11 hours in the queue, which SQS accepts. And its
    ``ChangeMessageVisibilityBatch`` fails the whole request on an entry over the limit, where SQS reports the
    entry under ``Failed`` ("The result of the action on each message is reported individually in the response",
    Amazon SQS API Reference, ChangeMessageVisibilityBatch). The patch records each receive's time on the message
    (:data:`RECEIVED_AT_ATTRIBUTE`, moto's clock) and counts from it, with moto's error ("Value <n> for parameter
    VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200
    seconds]", the text SQS answers: localstack/localstack#3956), and answers the batch entry by entry. Apply it
    before ``moto_locking.serialize_queue_mutations``. docs/moto-bugs.md, report 17; tests:
    ``test_a_visibility_change_counts_from_the_receive_not_the_send``,
    ``test_a_visibility_past_twelve_hours_from_the_receive_is_refused``,
    ``test_a_batch_visibility_past_twelve_hours_fails_its_entry_only``."""
    from moto.sqs import models

    mark_received = models.Message.mark_received
    if getattr(mark_received, "__effectively_once_received_at__", False):
        return

    @wraps(mark_received)
    def mark_received_when(self: Any, visibility_timeout: int | None = None) -> None:
        setattr(self, RECEIVED_AT_ATTRIBUTE, getattr(models, _CLOCK)())
        mark_received(self, visibility_timeout)

    mark_received_when.__effectively_once_received_at__ = True  # type: ignore[attr-defined]
    models.Message.mark_received = mark_received_when  # type: ignore[method-assign]
    models.SQSBackend.change_message_visibility = _change_message_visibility  # type: ignore[method-assign]
    models.SQSBackend.change_message_visibility_batch = _entry_by_entry(  # type: ignore[method-assign]
        models.SQSBackend.change_message_visibility_batch
    )


def _change_message_visibility(self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
    """moto's ``SQSBackend.change_message_visibility`` with the 12-hour limit counted from the message's latest
    receive (its first receive, or its send, for a message received before the patch)."""
    from moto.sqs import models
    from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid

    queue = self.get_queue(queue_name)
    for message in queue._messages:
        if not message.had_receipt_handle(receipt_handle):
            continue
        received = getattr(message, RECEIVED_AT_ATTRIBUTE, None)
        if received is None:
            received = message.approximate_first_receive_timestamp or message.sent_timestamp
        ends = getattr(models, _CLOCK)() + int(visibility_timeout) * 1000
        if ends - received > MAX_VISIBILITY_SECONDS * 1000:
            raise InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                f"VisibilityTimeout for the message is beyond the limit [{MAX_VISIBILITY_SECONDS} seconds]"
            )
        message.change_visibility(visibility_timeout)
        if message.visible and message in queue.pending_messages:
            queue.pending_messages.remove(message)  # visible again: no longer in flight (moto's own step)
        return
    raise ReceiptHandleIsInvalid


def _entry_by_entry(batch: Callable[..., Any]) -> Callable[..., Any]:
    """moto's ``SQSBackend.change_message_visibility_batch``, run on one entry at a time, an entry whose change is
    refused (``InvalidParameterValue``) reported under ``Failed`` with its code and message."""
    from moto.sqs.exceptions import InvalidParameterValue

    @wraps(batch)
    def change_each(self: Any, queue_name: str, entries: list[dict[str, Any]]) -> tuple[list[str], list[Any]]:
        changed: list[str] = []
        failed: list[Any] = []
        for entry in entries:
            try:
                done, refused = batch(self, queue_name, [entry])
            except InvalidParameterValue as error:
                failed.append({"Id": entry["Id"], "SenderFault": True, "Code": error.code, "Message": error.message})
                continue
            changed += done
            failed += refused
        return changed, failed

    return change_each
