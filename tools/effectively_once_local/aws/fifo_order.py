"""The local AWS's fix for FIFO order after a visibility timeout (moto 5.2.5; docs/moto-bugs.md, report 11).

SQS FIFO keeps order within a message group: while a message of a group is in flight (received, its visibility
timeout running), no later message of that group is delivered, and when the timeout ends the earlier message comes
back first ("Using the message group ID", SQS Developer Guide:
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/using-messagegroupid-property.html).

moto 5.2.5 counts a group as in flight while any of its received messages is still in its pending set, including
messages whose visibility timeout has ended. ``SQSBackend.receive_message`` takes a message out of that set only when
its pass reaches it, so of a batch that timed out together the first message is skipped (its group still holds the
others) and a later one is delivered first. This module's patch counts a group in flight while any of its messages
is invisible, whatever made it so (a receive, ``ChangeMessageVisibility`` or its batch form, a delete that failed, a
handler killed), so the group's messages come back in order. It also takes every timed-out message out of the
pending set before a receive looks at the queue, so they come back in one batch as SQS sends them (moto's pass
would otherwise take each out as it reaches it, count the group's messages it has just handed out as in flight, and
split the batch).

A receive happens at one instant (report 11, issue 54). moto reads its clock again for every message it looks at
(``Message.visible``), so a visibility timeout that ended during a receive was seen as running by one reading and as
over by the next: the timed-out release, the groups in flight and moto's pass disagreed, and a group's later
message was handed out alone while the earlier one was held back (a thread switch in the middle of a receive, on a
busy machine, was enough). The patched receive reads the clock once (:func:`one_instant`) and every reading of
moto's SQS clock within it gives that instant.

A second fix (report 13): moto 5.2.5 gives each FIFO message a random 20-digit ``SequenceNumber``, so a later message
can carry a smaller one. SQS's "continues to increase for a particular MessageGroupId" (Amazon SQS API Reference,
SendMessage, SequenceNumber), and the chaos run orders a group's keys by it (``proof/group_order.py``).
:func:`sequence_numbers_increase` numbers the messages from one counter of the process instead.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

#: Marks a patched ``receive_message``, so a second call of the patch wraps nothing twice.
_PATCHED = "__effectively_once_fifo_order__"
#: Where the local sequence numbers start: 20 digits, as SQS's (which are 128-bit numbers shown in decimal).
SEQUENCE_BASE = 10**19
_SEQUENCE = itertools.count(1)
_SEQUENCE_LOCK = threading.Lock()
#: moto's SQS clock, read by ``moto.sqs.models`` as a module global (milliseconds since the epoch).
_CLOCK = "unix_time_millis"
#: This thread's instant (``millis``, moto's milliseconds) while it is in :func:`one_instant`; ``None`` outside.
_INSTANT = threading.local()


def next_sequence_number() -> str:
    """The next FIFO sequence number of this process: larger than every one before it, 20 digits."""
    with _SEQUENCE_LOCK:
        return str(SEQUENCE_BASE + next(_SEQUENCE))


def sequence_numbers_increase() -> None:
    """Patch moto's ``SQSBackend.send_message`` (which ``SendMessageBatch`` calls per entry) so that a FIFO message
    gets :func:`next_sequence_number` instead of moto's random digits: the numbers increase in the order the
    messages were accepted, in every group. A second call changes nothing. docs/moto-bugs.md, report 13; test:
    ``test_sequence_numbers_increase_in_the_order_messages_were_sent`` (tests/local/test_fifo_order.py)."""
    from moto.sqs import models

    send = models.SQSBackend.send_message
    if getattr(send, _PATCHED, False):
        return

    @wraps(send)
    def send_numbered(self: Any, *args: Any, **kwargs: Any) -> Any:
        message = send(self, *args, **kwargs)
        if getattr(message, "sequence_number", None) is not None:
            message.sequence_number = next_sequence_number()
        return message

    setattr(send_numbered, _PATCHED, True)
    models.SQSBackend.send_message = send_numbered  # type: ignore[method-assign]


def groups_in_flight(queue: Any) -> set[str]:
    """The message group ids of a moto ``Queue`` that have a message in flight: one not visible, whatever made it
    so. A message never received is visible (a delayed one too: its delay is kept apart), so every invisible one
    is in flight; a message in moto's pending set whose visibility timeout has ended is not. (moto accepts a
    visibility change of a message not in flight, which SQS refuses with ``MessageNotInflight``: such a message
    holds its group here until it is visible again.)

    :param queue: a ``moto.sqs.models.Queue``.
    :returns: the group ids; messages without one (a standard queue's) are not counted.
    """
    return {m.group_id for m in queue._messages if m.group_id is not None and not m.visible}


def release_timed_out(queue: Any) -> None:
    """Take every message of ``queue`` whose visibility timeout has ended out of its pending set (it is in the queue
    again, as moto's receive would find it when its pass reaches it).

    :param queue: a ``moto.sqs.models.Queue``.
    """
    for message in [m for m in queue.pending_messages if m.visible]:
        queue.pending_messages.discard(message)


@contextmanager
def one_instant() -> Iterator[None]:
    """Within the block, every reading of moto's SQS clock (``moto.sqs.models.unix_time_millis`` once
    :func:`fifo_groups_keep_their_order` has wrapped it) in this thread gives the instant of the block's start. A
    block within a block keeps the outer one's instant, moto's own event source mappings included (a message a
    receive moves to a DLQ with a mapping would run that mapping's receive and handler at the instant too; the local
    tooling disables moto's mappings). Other threads read the clock as before."""
    if getattr(_INSTANT, "millis", None) is not None:
        yield
        return
    from moto.sqs import models

    _INSTANT.millis = getattr(models, _CLOCK)()
    try:
        yield
    finally:
        _INSTANT.millis = None


def _read_at_one_instant(clock: Callable[..., float]) -> Callable[..., float]:
    """``clock`` (moto's ``unix_time_millis(dt=None)``), answering :func:`one_instant`'s instant inside its block;
    a reading of a given ``dt`` is a conversion, not the time, and is passed on."""

    @wraps(clock)
    def now_millis(dt: Any = None) -> float:
        frozen: float | None = getattr(_INSTANT, "millis", None)
        return clock(dt) if frozen is None or dt is not None else frozen

    setattr(now_millis, _PATCHED, True)
    return now_millis


def _releasing_first(receive: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(receive)
    def receive_in_order(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        with one_instant():
            release_timed_out(self.get_queue(queue_name))
            return receive(self, queue_name, *args, **kwargs)

    setattr(receive_in_order, _PATCHED, True)
    return receive_in_order


def fifo_groups_keep_their_order() -> None:
    """Patch moto's SQS so a FIFO message group's messages come back in order after a visibility timeout, each
    receive at one instant (see the module docstring). Apply it before ``moto_locking.serialize_queue_mutations``,
    which then wraps the patched receive too and splits a long poll into receives without a wait, each at its own
    instant (alone, a long poll would see its start's instant throughout); a second call changes nothing. Tests:
    tests/local/test_fifo_order.py."""
    from moto.sqs import models

    models.Queue.pending_message_groups = property(groups_in_flight)  # type: ignore[assignment,method-assign]
    clock = getattr(models, _CLOCK)
    if not getattr(clock, _PATCHED, False):
        setattr(models, _CLOCK, _read_at_one_instant(clock))
    if not getattr(models.SQSBackend.receive_message, _PATCHED, False):
        models.SQSBackend.receive_message = _releasing_first(  # type: ignore[method-assign]
            models.SQSBackend.receive_message
        )
