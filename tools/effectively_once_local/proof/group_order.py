"""FIFO order, per message group (issue 30, item 7): within each group, the keys' first executions must follow the
order SQS assigned their messages (``SequenceNumber``, which increases within a group, whatever order concurrent
producers sent in). A key executed before a key of its group that SQS sequenced earlier is ``reordered``, a failing
state naming the group and both keys.

- **A key's place** in its group is the smallest sequence number of its accepted messages (the send log's
  ``sequence_number``: its original; a resend comes later).
- **A key's first execution** is its first ``effect executed`` line (the runtime's line for a declared effect, with
  its Powertools timestamp, to the millisecond, and its place in its function log). Two lines of one log are ordered
  by their place in it (one execution environment runs one batch at a time, in order); lines of two logs by their
  timestamps, a tie being no evidence of disorder.
- **Left out:** keys that went through a DLQ and the run's redrive (they run late by design), keys with no effect line
  (refused, never effected; an app whose effects are not the runtime's declared ones is not checked: ``checked`` is
  then 0), and standard queues.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from typing import Any

#: Powertools Logger's default timestamp (``%Y-%m-%d %H:%M:%S,%f%z``, milliseconds): ``2026-12-04 23:17:43,206+0000``.
_TIMESTAMP = "%Y-%m-%d %H:%M:%S,%f%z"


def _moment(line: dict[str, Any], position: int) -> tuple[float, str, int]:
    """When an effect line was written: its timestamp (seconds), its log and its place in the run's lines."""
    try:
        when = datetime.strptime(str(line.get("timestamp")), _TIMESTAMP).timestamp()
    except ValueError:
        when = float("nan")
    return when, str(line.get("_file")), position


def _before(a: tuple[float, str, int], b: tuple[float, str, int]) -> bool:
    """Whether ``a`` happened strictly before ``b``: by place within one log, else by timestamp."""
    if a[1] == b[1]:
        return a[2] < b[2]
    return a[0] < b[0]


def first_executions(lines: Iterable[dict[str, Any]], key_of: Callable[[Any], str | None]) -> dict[str, Any]:
    """Each key's first execution (:func:`_moment` of its first effect line); ``key_of`` maps a line's
    ``idempotency_key`` to the run's key (normalised as the run's)."""
    first: dict[str, tuple[float, str, int]] = {}
    for position, line in enumerate(lines):
        key = key_of(line.get("idempotency_key"))
        if key is None:
            continue
        moment = _moment(line, position)
        if key not in first or _before(moment, first[key]):
            first[key] = moment
    return first


def reordered(
    sent_rows: Iterable[dict[str, Any]], first: dict[str, Any], left_out: Collection[str]
) -> tuple[list[dict[str, Any]], int]:
    """The keys executed out of their group's order: ``[{"group", "queue", "first": the key SQS sequenced first,
    "then": the key executed before it}]``, one per out-of-order key (the earliest-sequenced key it overtook), and the
    number of keys checked (``first`` has their execution, ``left_out`` does not hold them).

    :param sent_rows: the send log (FIFO rows carry ``group`` and ``sequence_number``).
    :param first: :func:`first_executions`.
    :param left_out: keys not checked (redriven from a DLQ).
    """
    place: dict[tuple[str, str], dict[str, int]] = {}
    for row in sent_rows:
        key, group, number = row.get("key"), row.get("group"), row.get("sequence_number")
        if key is None or group is None or number is None or key in left_out or key not in first:
            continue
        keys = place.setdefault((str(row.get("queue")), str(group)), {})
        keys[str(key)] = min(int(number), keys.get(str(key), int(number)))
    found: list[dict[str, Any]] = []
    checked = 0
    for (queue, group), keys in sorted(place.items()):
        in_order = sorted(keys, key=keys.__getitem__)
        checked += len(in_order)
        for later_index, later in enumerate(in_order):
            overtaken = next(
                (earlier for earlier in in_order[:later_index] if _before(first[later], first[earlier])), None
            )
            if overtaken is not None:
                found.append({"group": group, "queue": queue, "first": overtaken, "then": later})
    return found, checked
