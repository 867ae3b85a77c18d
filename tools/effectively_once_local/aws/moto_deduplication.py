"""moto's FIFO deduplication (SQS and SNS): two fixes for the local tooling, on moto
:data:`.moto_patches.REQUIRED_MOTO_VERSION`. Applied by :func:`.moto_patches.apply` (the local AWS's server), whose
module docstring lists every patch and the module that holds it. Check, record and append run under
:data:`.moto_locking.SQS_LOCK`.

Fixed (moto 5.2.x): FIFO deduplication that forgets. moto compares a FIFO message's deduplication id only with
the messages still in the queue: once the first copy is received and deleted, a resend with the same id is queued
again, where SQS keeps the id for the 5-minute deduplication interval ("Amazon SQS continues tracking the
deduplication ID even after the message has been received and deleted": Amazon SQS FIFO queue key terms); and it
ignores ``DeduplicationScope=messageGroup`` (the same id in two groups is one message, where SQS queues two). Fix:
each FIFO queue remembers each deduplication id it accepted (per message group with that scope) with the time it
was first accepted, for moto's ``DEDUPLICATION_TIME_IN_SECONDS`` (read on every send, so a test can shorten it); a
send within that window with a known id is answered as before (a message id) and not queued. SNS FIFO topics get
it too: moto hands a publish's deduplication id on to each SQS FIFO subscription's ``SendMessage``. A FIFO topic
with ``ContentBasedDeduplication`` makes no id at all in moto; the second fix gives such a publish the SHA-256 of
its body, as SNS does.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from functools import wraps
from typing import Any

from .moto_locking import SQS_LOCK

#: The attribute of a moto FIFO ``Queue`` that holds the deduplication ids its sends were accepted with
#: (:func:`remember_deduplication_ids`): key (the id; ``(group, id)`` with ``DeduplicationScope=messageGroup``) ->
#: ``sent_timestamp`` (ms) of the message first accepted with it, oldest first. Read and changed under
#: :data:`SQS_LOCK`.
DEDUPLICATION_IDS_ATTRIBUTE = "_effectively_once_deduplication_ids"


class _WithoutMotosDeduplication:
    """A FIFO queue as moto's own ``Queue.add_message`` sees it for a send :func:`remember_deduplication_ids` already
    accepted: not FIFO, so that it skips its deduplication (against the queued messages only, and ignoring the
    scope); every other attribute read is the queue's (the append, the lock, the event source mappings)."""

    fifo_queue = False

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def _deduplication_key(queue: Any, message: Any) -> Any:
    if queue.deduplication_scope == "messageGroup":
        return (message.group_id, message.deduplication_id)
    return message.deduplication_id


def remember_deduplication_ids() -> None:
    """moto 5.2.5: ``Queue.add_message`` compares a FIFO message's deduplication id (explicit, or the body's SHA-256
    with ``ContentBasedDeduplication``) only with the messages still in the queue, so a resend after the first copy
    was received and deleted is queued again (SQS drops it for the 5-minute deduplication interval, deleted or not),
    and it ignores ``DeduplicationScope=messageGroup`` (the same id in two groups is dropped once; SQS queues both).
    The patch keeps, per FIFO queue (:data:`DEDUPLICATION_IDS_ATTRIBUTE`), each id accepted by a send (per group
    with that scope) and the ``sent_timestamp`` of its first message, for moto's ``DEDUPLICATION_TIME_IN_SECONDS``
    read at each send; a send within that window with a known id returns without queueing (``SendMessage``
    answers with a message id, as SQS does), any other is queued by moto's own ``add_message`` with its check
    skipped (:class:`_WithoutMotosDeduplication`). A message moved to a dead-letter queue (received before: a send
    never was) and a standard queue keep moto's behaviour. Check, record and append run under :data:`SQS_LOCK`; a
    second call changes nothing. SNS FIFO topics deduplicate through this too: moto passes a publish's id on to
    each SQS FIFO subscription's ``send_message``. docs/moto-bugs.md, report 5; tests:
    ``test_a_resend_after_the_delete_is_dropped``, ``test_a_resend_after_the_deduplication_window_is_queued``,
    ``test_a_content_based_resend_after_the_delete_is_dropped``,
    ``test_an_sns_fifo_publish_after_the_delete_is_dropped``,
    ``test_message_group_scope_deduplicates_within_a_group_only``."""
    from moto.sqs import models

    add_message: Callable[..., None] = models.Queue.add_message
    if getattr(add_message, "__effectively_once_deduplication__", False):
        return

    @wraps(add_message)
    def add_message_remembering_ids(self: Any, message: Any) -> None:
        if not (self.fifo_queue and message.deduplication_id and message.approximate_receive_count == 0):
            add_message(self, message)  # a standard queue, or a message moved to a DLQ: moto's own
            return
        with SQS_LOCK:
            window_ms = models.DEDUPLICATION_TIME_IN_SECONDS * 1000
            now = message.sent_timestamp
            accepted: dict[Any, int] = self.__dict__.setdefault(DEDUPLICATION_IDS_ATTRIBUTE, {})
            while accepted:  # forget what left the window (oldest first): a send costs O(1), not O(ids kept)
                oldest, since = next(iter(accepted.items()))
                if now - since < window_ms:
                    break
                del accepted[oldest]
            key = _deduplication_key(self, message)
            first = accepted.get(key)
            if first is not None and now - first < window_ms:
                return  # a duplicate within the window: accepted, not queued
            accepted.pop(key, None)  # a key back after its window goes last: the dict stays oldest first
            accepted[key] = now
            add_message(_WithoutMotosDeduplication(self), message)

    add_message_remembering_ids.__effectively_once_deduplication__ = True  # type: ignore[attr-defined]
    models.Queue.add_message = add_message_remembering_ids  # type: ignore[method-assign]


def sns_content_based_deduplication_ids() -> None:
    """moto 5.2.5: a FIFO topic with ``ContentBasedDeduplication`` accepts a publish without a deduplication id and
    makes none, so its SQS FIFO subscriptions get none: the delivery fails unless the queue deduplicates on content
    itself, and then it hashes what it receives (without raw delivery, the envelope, which has a new ``MessageId``
    on every publish: no two are ever duplicates). SNS makes the id from the SHA-256 of the message body and
    includes it in what it delivers to SQS FIFO queues. The patch gives such a publish that id (``Topic.publish``),
    which moto passes on to each SQS subscription; an explicit id is kept. A second call changes nothing.
    docs/moto-bugs.md, report 6; test: ``test_an_sns_content_based_publish_after_the_delete_is_dropped``."""
    from moto.sns import models as sns_models

    publish = sns_models.Topic.publish
    if getattr(publish, "__effectively_once_deduplication__", False):
        return
    signature = inspect.signature(publish)

    @wraps(publish)
    def publish_with_content_based_id(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)
        topic = bound.arguments["self"]
        if topic.fifo_topic and topic.content_based_deduplication and not bound.arguments.get("deduplication_id"):
            body = str(bound.arguments["message"])
            bound.arguments["deduplication_id"] = hashlib.sha256(body.encode("utf-8")).hexdigest()
        return publish(*bound.args, **bound.kwargs)

    publish_with_content_based_id.__effectively_once_deduplication__ = True  # type: ignore[attr-defined]
    sns_models.Topic.publish = publish_with_content_based_id  # type: ignore[method-assign]
