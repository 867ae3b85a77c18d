"""moto's SQS, DynamoDB and S3 backends under concurrent calls: three fixes for the local tooling, on moto
:data:`.moto_patches.REQUIRED_MOTO_VERSION`. Applied by :func:`.moto_patches.apply` (the local AWS's server), whose
module docstring lists every patch and the module that holds it.

Fixed (moto 5.2.x): lost messages under concurrent SQS calls. moto's server answers each request on its own
thread, and its SQS backend changes a queue's message list without a lock: ``DeleteMessage`` rebuilds the list and
assigns it back, so a message that ``SendMessage`` appended in between is dropped (SQS answered it with a message
id, and no receive ever returns it), and a message that ``ReceiveMessage`` moved to the DLQ after maxReceiveCount
receives is put back. It is the one mechanism found that fits the soak's lost FIFO payment (10,000 payments, 8
pollers deleting while the producer sends; accepted, never delivered, not in the DLQ). Fix: the calls that change
messages (send, receive, delete, change visibility, purge) run one at a time under one lock for all queues
(:data:`SQS_LOCK`), and a long poll waits with the lock released (moto's own wait would hold it: with visible
messages whose FIFO group is in flight its loop spins until the wait time ends, and a delete would wait as long).
What the API answers is unchanged; a long poll looks again at least every :data:`RECEIVE_RECHECK_SECONDS`.

Fixed (moto 5.2.x), the same kind of fault in DynamoDB: a conditional write is a read, a check and a write with no
lock (``Table.put_item``: ``get_item``, the condition, then the assignment), so two concurrent ``PutItem`` calls with
``attribute_not_exists`` on one key can both pass. DynamoDB makes a conditional write atomic, and the idempotency
layer's first step (Powertools' INPROGRESS record) relies on it: the chaos's concurrent duplicates are exactly two
such calls. Fix: the item calls (``PutItem``, ``GetItem``, ``UpdateItem``, ``DeleteItem``,
``TransactWriteItems``) run one at a time.

Fixed (moto 5.2.5), the same kind of fault in S3: ``PutObject`` with ``If-None-Match: *`` looks the key up and
writes the object later, with no lock, so two concurrent conditional puts on one key can both succeed (S3 lets one
through and answers the other 412 or 409). The S3 effect adapter (``effectively_once_runtime.effects.s3``) relies on
it when two executions of one effect overlap (a redelivery while the first still runs). Fix: every ``PutObject`` on
a bucket and key runs under that key's lock (:data:`S3_PUT_LOCKS`); puts on other keys are not held up.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import partial, wraps
from typing import Any

#: The SQS backend calls that change messages (see the module docstring), run one at a time under
#: :data:`SQS_LOCK`. ``Queue.add_message`` and ``Queue.delete_message`` too: moto calls them from other places (a
#: message moved to a DLQ, its own event source mappings). ``receive_message`` is wrapped apart: a long poll waits
#: with the lock released.
SQS_BACKEND_MUTATIONS = ("send_message", "delete_message", "change_message_visibility", "purge_queue")
SQS_QUEUE_MUTATIONS = ("add_message", "delete_message")
#: One lock for every queue: a receive that moves a message to a DLQ changes two queues, and one lock cannot be
#: taken in two orders (two queues that are each other's DLQ would deadlock with a lock per queue).
SQS_LOCK = threading.Condition(threading.RLock())
#: How often a waiting long poll looks again when nothing was sent, deleted or changed meanwhile: a message whose
#: visibility timeout or delay ends, or whose FIFO group is released by a timeout, wakes nobody.
RECEIVE_RECHECK_SECONDS = 0.1
#: The DynamoDB backend's item calls (see the module docstring), run one at a time under :data:`DYNAMODB_ITEM_LOCK`.
DYNAMODB_ITEM_CALLS = ("put_item", "get_item", "update_item", "delete_item", "transact_write_items")
DYNAMODB_ITEM_LOCK = threading.RLock()


class _KeyLocks:
    """One lock per key, made on first use and dropped when no thread holds it or waits for it (a lock per S3 object
    ever written would otherwise stay for the server's life)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, tuple[threading.Lock, list[int]]] = {}  # key -> (lock, [holders and waiters])

    @contextmanager
    def holding(self, key: Hashable) -> Iterator[None]:
        """Hold ``key``'s lock for the block (another thread holding it: wait until it is released)."""
        with self._guard:
            if key not in self._locks:
                self._locks[key] = (threading.Lock(), [0])
            lock, users = self._locks[key]
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if not users[0]:
                    del self._locks[key]

    def __len__(self) -> int:
        """How many keys have a lock now (held or waited for)."""
        with self._guard:
            return len(self._locks)


#: The S3 backend's ``PutObject`` (see the module docstring) runs under the lock of its ``(bucket, key)``.
S3_PUT_LOCKS = _KeyLocks()

_held = threading.local()  # how deep this thread is in SQS_LOCK's wrapped calls


def _holding(lock: Any, method: Callable[..., Any], notify: bool = False) -> Callable[..., Any]:
    @wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with lock:
            _held.depth = getattr(_held, "depth", 0) + 1
            try:
                return method(*args, **kwargs)
            finally:
                _held.depth -= 1
                if notify:
                    lock.notify_all()  # a long poll may now find a message

    locked.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    return locked


def _long_poll_outside_the_lock(method: Callable[..., Any]) -> Callable[..., Any]:
    """``receive_message`` that takes :data:`SQS_LOCK` for moto's receive without its wait (``wait_seconds_timeout``
    0) and waits, for what is left of the long poll, with the lock released until a wrapped call changes messages
    or :data:`RECEIVE_RECHECK_SECONDS` pass. Called inside another wrapped call (moto's own event source mappings),
    it does not wait: waiting would release the caller's hold."""
    signature = inspect.signature(method)

    @wraps(method)
    def receive(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        wait = float(bound.arguments.get("wait_seconds_timeout") or 0)
        bound.arguments["wait_seconds_timeout"] = 0
        deadline = time.monotonic() + wait
        with SQS_LOCK:
            nested = getattr(_held, "depth", 0) > 0
            while True:
                result = method(*bound.args, **bound.kwargs)
                remaining = deadline - time.monotonic()
                if result or remaining <= 0 or nested:
                    return result
                SQS_LOCK.wait(timeout=min(remaining, RECEIVE_RECHECK_SECONDS))

    receive.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    return receive


def serialize_queue_mutations() -> None:
    """Run the SQS backend's message-changing calls one at a time under :data:`SQS_LOCK`, a long poll waiting
    outside it; a second call changes nothing.

    moto 5.2.5: ``Queue.delete_message`` rebuilds the message list and assigns it back without a lock, so a message
    sent meanwhile vanishes (and one a receive moved to the DLQ meanwhile is put back); its long poll spins through
    the whole wait while the only visible messages are in FIFO groups in flight, and misses a group released during
    the wait. The patch serializes the mutations and waits outside the lock (:func:`_long_poll_outside_the_lock`).
    docs/moto-bugs.md, reports 2 and 3; tests: ``test_a_message_sent_during_a_delete_is_kept``,
    ``test_a_message_moved_to_the_dlq_during_a_delete_stays_moved``,
    ``test_a_long_poll_waits_without_holding_up_a_delete``,
    ``test_two_queues_that_are_each_others_dlq_do_not_deadlock``.
    """
    from moto.sqs import models

    wrapped: list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]
    wrapped = [(models.SQSBackend, n, partial(_holding, SQS_LOCK, notify=True)) for n in SQS_BACKEND_MUTATIONS]
    wrapped += [(models.Queue, n, partial(_holding, SQS_LOCK, notify=True)) for n in SQS_QUEUE_MUTATIONS]
    wrapped.append((models.SQSBackend, "receive_message", _long_poll_outside_the_lock))
    for cls, name, wrap in wrapped:
        method = getattr(cls, name)
        if not getattr(method, "__effectively_once_locked__", False):
            setattr(cls, name, wrap(method))


def serialize_dynamodb_item_calls() -> None:
    """Make the DynamoDB backend's item calls atomic towards each other; a second call changes nothing.

    moto 5.2.5: ``Table.put_item`` reads the item, checks the condition and writes without a lock, so two concurrent
    ``attribute_not_exists`` puts on one key both succeed (DynamoDB lets one through). The patch runs the item calls
    one at a time under :data:`DYNAMODB_ITEM_LOCK`. docs/moto-bugs.md, report 4; test:
    ``test_two_concurrent_conditional_puts_on_one_key_let_one_through``."""
    from moto.dynamodb.models import DynamoDBBackend

    for name in DYNAMODB_ITEM_CALLS:
        method = getattr(DynamoDBBackend, name)
        if not getattr(method, "__effectively_once_locked__", False):
            setattr(DynamoDBBackend, name, _holding(DYNAMODB_ITEM_LOCK, method))


def serialize_s3_puts_per_key() -> None:
    """Make ``PutObject``'s ``If-None-Match: *`` check and its write atomic on each key; a second call changes
    nothing.

    moto 5.2.5: ``S3Response.put_object`` (s3/responses.py) checks that the key has no object, then builds the object
    and only then stores it (``S3Backend.put_object``), with no lock: two concurrent conditional puts on one key both
    pass the check and both succeed, the later write replacing the earlier (S3 lets exactly one through: "If an
    identical key name is found in the bucket, the operation fails", Amazon S3 User Guide, How to prevent object
    overwrites with conditional writes, https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
    The patch runs every ``PutObject`` (the conditional ones and the plain ones, which could otherwise land between a
    conditional put's check and its write) under the lock of its ``(bucket, key)`` (:data:`S3_PUT_LOCKS`): the check,
    the write, and the metadata, ACL and tags moto sets afterwards. Puts on other keys run alongside.
    ``CompleteMultipartUpload`` with ``If-None-Match`` has the same shape and is not patched (nothing here uses it).
    docs/moto-bugs.md, report 7; tests: ``test_two_concurrent_conditional_s3_puts_on_one_key_let_one_through``,
    ``test_conditional_s3_puts_on_other_keys_are_not_held_up``."""
    from moto.s3.responses import S3Response

    put_object = S3Response.put_object
    if getattr(put_object, "__effectively_once_locked__", False):
        return

    @wraps(put_object)
    def put_object_holding_the_key(self: Any) -> Any:
        with S3_PUT_LOCKS.holding((self.bucket_name, self.parse_key_name())):
            return put_object(self)

    put_object_holding_the_key.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object_holding_the_key  # type: ignore[method-assign]
