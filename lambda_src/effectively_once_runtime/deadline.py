"""The invocation's deadline, in one place: its remaining time, the margin kept free of it, the deadline handed to
effects, and the check an SQS batch makes before each record. Standard library only.

- **Remaining time** is Lambda's own count, ``context.get_remaining_time_in_millis()`` (milliseconds); there is none
  without a Lambda context (a test calling the handler with ``None``), and then nothing here limits anything.
- **The margin** (``Consumer(deadline_margin=...)``, seconds) is the time kept for what must still happen after the
  work: completing the record, answering the batch. It is fixed at the invocation's start (``Deadline.start``): the
  value given, or by default the larger of ``MIN_DEADLINE_MARGIN_SECONDS`` (1 s) and ``DEADLINE_MARGIN_SHARE`` (10 %)
  of the remaining time then, which stands for the function timeout.
- **Usable time** is the remaining time less the margin: the completion retries (``execution.py``) wait only within
  it, and a declared effect gets it as a monotonic deadline (``EffectCall.deadline``, ``Deadline.monotonic``), which
  the HTTP adapter's retries keep to.
- **The next record of a batch** (``sqs_batch.py``) starts only when the remaining time fits the slowest of the last
  ``RECENT_RECORDS`` records of this execution environment plus ``CLOSING_WORK_MS`` (the response and the metrics
  flush), and never less than the margin (``Deadline.shortfall``).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

#: The default margin's least value (seconds) and its share of the invocation's time at its start.
MIN_DEADLINE_MARGIN_SECONDS = 1.0
DEADLINE_MARGIN_SHARE = 0.10
#: How many of this execution environment's latest records the slowest is taken from.
RECENT_RECORDS = 20
#: What a batch needs after its last record (building the response, flushing the EMF metrics), in milliseconds.
CLOSING_WORK_MS = 100.0


def remaining_ms(context: Any) -> int | None:
    """The invocation's remaining time in milliseconds (``context.get_remaining_time_in_millis()``); ``None``
    without a Lambda context."""
    get = getattr(context, "get_remaining_time_in_millis", None)
    return int(get()) if callable(get) else None


def check_margin(deadline_margin: float | None) -> float | None:
    """``deadline_margin`` (seconds) if it is ``None`` or 0 or more.

    :raises ValueError: negative, or not a number that compares (NaN).
    """
    if deadline_margin is not None and not deadline_margin >= 0:
        raise ValueError(f"deadline_margin must be 0 seconds or more, but {deadline_margin!r} was given")
    return deadline_margin


@dataclass(frozen=True)
class Deadline:
    """One invocation's deadline.

    :ivar context: the Lambda context (``None`` without one: then every method says "no limit").
    :ivar margin_ms: the margin, in milliseconds, fixed at the invocation's start.
    :ivar start_ms: the remaining time at the invocation's start, in milliseconds (it stands for the function
        timeout); ``None`` without a Lambda context.
    """

    context: Any
    margin_ms: float
    start_ms: int | None = None

    @classmethod
    def start(cls, context: Any, deadline_margin: float | None = None) -> Deadline:
        """The deadline of an invocation starting now: the margin is ``deadline_margin`` seconds, or by default the
        larger of 1 s and 10 % of the remaining time now."""
        start = remaining_ms(context)
        if deadline_margin is not None:
            return cls(context, deadline_margin * 1000, start)
        return cls(context, max(MIN_DEADLINE_MARGIN_SECONDS * 1000, DEADLINE_MARGIN_SHARE * (start or 0)), start)

    def remaining_ms(self) -> int | None:
        """The invocation's remaining time now, in milliseconds; ``None`` without a Lambda context."""
        return remaining_ms(self.context)

    def usable_ms(self) -> float | None:
        """The remaining time now less the margin, in milliseconds (negative once the margin is reached); ``None``
        without a Lambda context."""
        left = self.remaining_ms()
        return None if left is None else left - self.margin_ms

    def allows_wait(self, seconds: float) -> bool:
        """Whether waiting ``seconds`` still ends within the usable time (always, without a Lambda context)."""
        usable = self.usable_ms()
        return usable is None or usable >= seconds * 1000

    def monotonic(self) -> float | None:
        """The end of the usable time as a ``time.monotonic()`` value (seconds); ``None`` without a Lambda context.
        The seconds left at any later moment are ``deadline - time.monotonic()``."""
        usable = self.usable_ms()
        return None if usable is None else time.monotonic() + usable / 1000

    def shortfall(self, recent: RecentRecords) -> tuple[int, float] | None:
        """``(remaining ms, needed ms)`` when the next record does not fit: the remaining time is less than the larger
        of the margin and the slowest recent record plus ``CLOSING_WORK_MS``; ``None`` when it fits or without a
        Lambda context."""
        left = self.remaining_ms()
        if left is None:
            return None
        needed = max(self.margin_ms, recent.slowest_ms + CLOSING_WORK_MS)
        return None if left >= needed else (left, needed)


class RecentRecords:
    """How long this execution environment's latest ``RECENT_RECORDS`` records took, in milliseconds: the window,
    not the slowest record ever seen, so that one outlier (a pause on a loaded host) does not make every later batch
    stop after its first record."""

    def __init__(self) -> None:
        #: The durations in milliseconds, the newest last.
        self.durations: deque[float] = deque(maxlen=RECENT_RECORDS)

    @property
    def slowest_ms(self) -> float:
        """The slowest of the window, in milliseconds (0 before the first record)."""
        return max(self.durations, default=0.0)

    def add(self, started: float) -> None:
        """Count a record that started at ``started`` (a ``time.monotonic()`` value) and ended now."""
        self.durations.append((time.monotonic() - started) * 1000)
