"""Valid keys SQS dead-lettered by itself (issue 55, item 4b): the messages that reached a DLQ through their queue's
redrive policy, after ``maxReceiveCount`` receives, without the runtime dead-lettering them (no
``effectively-once-reason`` attribute), per business key, with what explains them.

The run's redrive brings such a key back and it passes as ``redriven_then_effected``; production holds it in the DLQ
until someone redrives it ("Using dead-letter queues in Amazon SQS", Amazon SQS Developer Guide,
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html). A chaos
run's faults are far denser than production's crashes, so a key they struck may run out of receives: that is the
run's doing, listed and not failing. A key no fault of the run touched ran out of receives by the app's own
failures (a record held in progress forever, a transient error on every receive, a FIFO group blocked behind such a
record, a ``maxReceiveCount`` too low for the app's retries): valid work dead-lettered without a word, which fails
the run (:func:`failing`).

What explains a key (its ``cause``):

- ``faults``: the run struck it. An injected kill or stall of an invocation whose batch held the key, an injected
  SDK fault in such an invocation, or the run sent the key more than once (a resend, a concurrent duplicate, two
  input lines of one key: a copy in progress elsewhere refuses it). On a FIFO queue a key sent before it in its
  message group struck so counts too: SQS delivers a group in order, so a group's record held back blocks the keys
  behind it (never those ahead of it).
- ``app``: no such fault, and the runtime failed the key by itself at least once (a ``record failed`` line: its
  record function raised, its claim was refused, it was skipped behind a failed key of its FIFO group), whatever
  else happened to it.
- ``deadline``: none of those, but the watchdog killed an invocation holding it (or its group) at its function's
  deadline, or the runtime deferred it because the invocation's remaining time could not fit it (``records
  deferred``: the last records of the batch, never started): the machine was slower than the function's timeout
  allows. Listed, not failing.
- ``app`` too when nothing of the run touched it or its group.

Only the DLQs of queues count: an asynchronous target's on-failure records are Lambda's, after its own retries, and
carry their condition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, TypedDict

from ..chaos.fault_model import DEADLINE

#: The causes of a key dead-lettered by the redrive policy (see the module docstring), in the order they are judged.
FAULTS, AT_DEADLINE, APP = "faults", "deadline", "app"
CAUSES = (FAULTS, AT_DEADLINE, APP)


def moved_by_sqs(
    dlq_messages: Mapping[str, Iterable[Any]], key_of: Callable[[str], Any], on_failure: Collection[str] = ()
) -> dict[str, dict[str, Any]]:
    """The messages of the DLQs (``readback.DlqMessage`` by queue name; not the on-failure queues named in
    ``on_failure``) without the runtime's reason and with a business key: message id -> ``dlq``, ``key``,
    ``group`` (a FIFO message's group id, else ``None``)."""
    found = {}
    for queue, messages in dlq_messages.items():
        if queue in on_failure:
            continue
        for m in messages:
            key = key_of(m.body)
            if m.reason() is None and key is not None:
                found[m.message_id] = {"dlq": queue, "key": str(key), "group": m.group_id}
    return found


def _touched(
    kill_records: Iterable[dict[str, Any]],
    sdk_faults: Iterable[dict[str, Any]],
    invocations: Mapping[str, Iterable[str]],
    sent_rows: Iterable[dict[str, Any]],
    deferred: Mapping[str, int],
) -> tuple[set[str], set[str]]:
    """The keys the run's faults struck (:data:`FAULTS`), and the keys held by an invocation killed at its deadline
    or deferred by one (``deferred``: request id -> how many records it deferred, the last of its batch)."""
    struck: set[str] = set()
    at_deadline: set[str] = set()
    for kill in kill_records:
        keys = {str(k) for k in [*(kill.get("batch_keys") or []), kill.get("key")] if k}
        (at_deadline if kill.get("phase") == DEADLINE else struck).update(keys)
    for request_id, n in deferred.items():
        batch = list(invocations.get(str(request_id), ()))
        at_deadline.update(str(k) for k in (batch[-n:] if n > 0 else []) if k)
    for fault in sdk_faults:
        struck.update(str(k) for k in invocations.get(str(fault.get("request_id")), ()) if k)
    sends = Counter(str(r["key"]) for r in sent_rows if r.get("key") is not None)
    struck.update(key for key, n in sends.items() if n > 1)
    return struck, at_deadline


def _ahead(sent_rows: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """Key -> the keys sent before it in its FIFO message groups (a group is ``(queue label, group id)``; in the
    send log's order, each key at its first send), itself included; a standard queue's key: itself."""
    order: dict[tuple[Any, Any], list[str]] = {}
    ahead: dict[str, set[str]] = {}
    for r in sent_rows:
        if r.get("key") is None:
            continue
        key = str(r["key"])
        ahead.setdefault(key, {key})
        if r.get("group") is not None:
            keys = order.setdefault((r.get("queue"), r["group"]), [])
            if key not in keys:
                ahead[key].update(keys)
                keys.append(key)
    return ahead


def dead_lettered_without_reason(
    moved: Mapping[str, dict[str, Any]],
    *,
    kill_records: Iterable[dict[str, Any]],
    sdk_faults: Iterable[dict[str, Any]],
    invocations: Mapping[str, Iterable[str]],
    sent_rows: list[dict[str, Any]],
    deferred: Mapping[str, int] | None = None,
    failed: Collection[str] = (),
) -> list[dict[str, Any]]:
    """One row per key SQS dead-lettered (``moved``: :func:`moved_by_sqs`, gathered over the run and its redrive
    rounds), sorted by key: ``key``, ``messages`` (how many of its messages SQS moved), ``dlqs`` and ``cause``.

    :param kill_records: every kill (``key_check.kills``: ``phase``, ``key``, ``batch_keys``).
    :param sdk_faults: every injected SDK fault (``sdk_faults_seen.read_sdk_faults``: ``request_id``).
    :param invocations: request id -> the keys of its batch, in its order (``executions.batch_keys``).
    :param sent_rows: the send log (``key``, ``queue``, FIFO ``group``).
    :param deferred: request id -> the records its runtime deferred (``records deferred``: ``deferred``).
    :param failed: the keys of the runtime's ``record failed`` lines.
    """
    struck, at_deadline = _touched(kill_records, sdk_faults, invocations, sent_rows, deferred or {})
    ahead = _ahead(sent_rows)
    rows: dict[str, dict[str, Any]] = {}
    for entry in moved.values():
        row = rows.setdefault(entry["key"], {"key": entry["key"], "messages": 0, "dlqs": set()})
        row["messages"] += 1
        row["dlqs"].add(entry["dlq"])
    for key, row in rows.items():
        around = ahead.get(key, {key})  # a FIFO group's key held back blocks the keys behind it, not those ahead
        row["dlqs"] = sorted(row["dlqs"])
        slow = around & at_deadline and key not in failed
        row["cause"] = FAULTS if around & struck else AT_DEADLINE if slow else APP
    return [rows[k] for k in sorted(rows)]


def failing(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The keys of ``rows`` (:func:`dead_lettered_without_reason`) the app dead-lettered by itself: they fail the
    run."""
    return [row["key"] for row in rows if row["cause"] == APP]


def causes(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many keys of ``rows`` each cause explains, every cause shown."""
    return {**dict.fromkeys(CAUSES, 0), **Counter(row["cause"] for row in rows)}


class DeadLetterTotals(TypedDict):
    """The chaos report's ``total`` entries of the dead-lettered keys (:func:`dead_letter_totals`)."""

    dead_lettered_without_reason: int  # keys
    dead_lettered_by_cause: dict[str, int]  # keys per cause, every cause of CAUSES shown


def dead_letter_totals(rows: list[dict[str, Any]]) -> DeadLetterTotals:
    """The rows' (:func:`dead_lettered_without_reason`) entries in a chaos report's ``total``:
    ``dead_lettered_without_reason`` (keys) and ``dead_lettered_by_cause`` (:func:`causes`); the rows themselves are
    the report's ``dead_lettered_without_reason`` section."""
    return {"dead_lettered_without_reason": len(rows), "dead_lettered_by_cause": causes(rows)}


def verdict_reason(report: dict[str, Any]) -> str | None:
    """The verdict's line when the app dead-lettered valid keys by itself (:func:`failing`), else ``None``."""
    keys = failing(report.get("dead_lettered_without_reason") or [])
    if not keys:
        return None
    shown = ", ".join(keys[:5]) + (" ..." if len(keys) > 5 else "")
    return (
        f"{len(keys)} valid keys dead-lettered by their queue's redrive policy without a reason, no fault of the run"
        f" touching them or their FIFO group (production holds them in the DLQ until someone redrives them): {shown}"
    )


def render_dead_letters(report: dict[str, Any]) -> list[str]:
    """The terminal's line of the keys SQS dead-lettered, by cause; none when there are none."""
    rows = report.get("dead_lettered_without_reason") or []
    if not rows:
        return []
    by = causes(rows)
    shown = ", ".join(f"{row['key']} ({row['cause']})" for row in rows[:5]) + (" ..." if len(rows) > 5 else "")
    return [
        f"dead-lettered without a reason (moved by the redrive policy): {len(rows)} valid keys, {by[FAULTS]} struck"
        f" by the run's faults, {by[AT_DEADLINE]} killed at their deadline, {by[APP]} by the app alone: {shown}"
    ]
