"""Every input line of a chaos run ends in exactly one state (the per-key report's ``lines`` and ``states``,
``proof/key_check.py``): read from what was sent (the send log), what SQS handed out (the delivery log), the effects
per key, the DLQs' contents after the run and the run's redrive; with the evidence of each failing key, the DLQs'
contents by reason, and how the input was sent (``send_kinds``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, TypedDict

#: Passing states: a key effected once (``effected_once``), a key effected once after the run's redrive brought it
#: back from a DLQ (``redriven_then_effected``), a line the app refused, in a DLQ (``invalid_in_dlq``; moved by the
#: runtime with its reason, or by SQS after maxReceiveCount) or on an on-failure queue (the runtime's record of an
#: event refused for good, condition ``PermanentError``, with its reason; never ``stranded``). Failing states:
#: ``stranded`` (a valid key only in a DLQ after the run's redrive), ``never_delivered`` (SQS accepted it, the
#: delivery log never shows it), ``vanished`` (delivered and reported done, with no effect and no DLQ copy),
#: ``duplicated``, ``incomplete`` (its effect in some of the run's required stores and not in the others at the end,
#: ``stores.incomplete_keys``; it wins over ``invalid_in_dlq``), ``reordered`` (effected once, but before a key of
#: its FIFO group that SQS sequenced earlier: ``proof/group_order.py``); and ``unexpected`` keys (effects for keys
#: never sent) from :func:`build`.
PASSING_STATES = ("effected_once", "redriven_then_effected", "invalid_in_dlq")
FAILING_STATES = ("stranded", "never_delivered", "vanished", "duplicated", "incomplete", "reordered")


def _sent_id(delivery: dict[str, Any]) -> Any:
    """The id the send log keeps for what ``delivery`` delivered: an asynchronous delivery's event id (what the
    ``PutEvents`` or ``Publish`` answered), else its SQS message id; ``None`` for an asynchronous line that was no
    invocation (an on-failure record, an event the runtime rejected before the handler)."""
    if delivery.get("async"):
        return delivery.get("event_id") if delivery.get("invoked") else None
    return delivery.get("message_id")


def _delivered_keys(sent_rows: list[dict[str, Any]], deliveries: list[dict[str, Any]]) -> tuple[set[Any], set[int]]:
    """Keys and line numbers of which at least one accepted message shows in the delivery log (for an asynchronous
    target, the event id the send log keeps shows as the delivery's ``event_id``)."""
    delivered_ids = {d.get("message_id") for d in deliveries} | {d["event_id"] for d in deliveries if d.get("event_id")}
    rows = [r for r in sent_rows if r.get("message_id") in delivered_ids]
    return {r.get("key") for r in rows}, {int(r["line"]) for r in rows if isinstance(r.get("line"), int)}


class States(TypedDict):
    """The chaos report's ``states`` section (:func:`line_states`); its ``counts`` also go into the report's
    ``total``."""

    counts: dict[str, int]  # every state of PASSING_STATES + FAILING_STATES -> lines in it
    keys: dict[str, list[str]]  # each failing state, and redriven_then_effected -> its keys, sorted
    invalid_lines: list[dict[str, Any]]  # {"line", "state", "moved_by"?} per input line without a key
    per_key: dict[str, dict[str, Any]]  # key -> {"state", "sends", "deliveries", "effects", ...}
    evidence: dict[str, dict[str, Any]]  # failing key (50 per state at most) -> what the logs and DLQs say of it


def line_states(
    *,
    lines: list[Any],
    effects: Counter[str],
    duplicated: list[str],
    redriven: Collection[str],
    dlq_messages: dict[str, list[Any]],
    sent_rows: list[dict[str, Any]],
    deliveries: list[dict[str, Any]],
    kill_records: list[dict[str, Any]],
    key_of: Any,
    suppressed: Counter[str] | None = None,
    marked: Mapping[str, AbstractSet[str]] | None = None,
) -> States:
    """The state of every input line (the constants above), with evidence for each failing one, and a row per key
    (``per_key``: its state, sends, deliveries, effects, duplicates suppressed, kills by kind).

    ``lines``: the input (``number``, ``body``, ``key``); ``effects``: effects per key (store or log lines);
    ``dlq_messages``: each DLQ's messages after the run's redrive (``readback.DlqMessage``), by queue name;
    ``sent_rows``: the send log; ``deliveries``: the delivery log; ``key_of(body)``: a body's business key;
    ``suppressed``: duplicates suppressed per key (the ``duplicate suppressed`` log lines); ``marked``: the keys of
    the failing states found elsewhere, by state, in order of precedence (after ``duplicated``): ``incomplete``
    (``stores.incomplete_keys``), ``reordered`` (``group_order.reordered``'s ``then``).
    """
    delivered, delivered_lines = _delivered_keys(sent_rows, deliveries)
    in_dlq, dlq_bodies = _dlq_entries(dlq_messages, key_of)
    states: dict[str, str] = {}
    for key in dict.fromkeys(ln.key for ln in lines if ln.key is not None):
        mark = next((state for state, keys in (marked or {}).items() if key in keys), None)
        if key in duplicated:
            states[key] = "duplicated"
        elif mark is not None:
            states[key] = mark  # incomplete (refused or not), or reordered
        elif effects[key] >= 1:
            states[key] = "redriven_then_effected" if key in redriven else "effected_once"
        else:
            states[key] = _unexecuted(in_dlq.get(key, []), key in delivered)
    invalid = []
    for ln in lines:
        if ln.key is not None:
            continue
        found = dlq_bodies.get(ln.body)
        state = "invalid_in_dlq" if found else "vanished" if ln.number in delivered_lines else "never_delivered"
        invalid.append({"line": ln.number, "state": state, **({"moved_by": found["moved_by"]} if found else {})})
    counts = Counter(states.values()) + Counter(i["state"] for i in invalid)
    failing = {s: sorted(k for k, v in states.items() if v == s) for s in FAILING_STATES}
    return {
        "counts": {s: counts.get(s, 0) for s in PASSING_STATES + FAILING_STATES},
        "keys": {
            **failing,
            "redriven_then_effected": sorted(k for k, v in states.items() if v == "redriven_then_effected"),
        },
        "invalid_lines": invalid,
        "per_key": _per_key(states, effects, sent_rows, deliveries, kill_records, suppressed or Counter()),
        "evidence": {
            key: _evidence(key, in_dlq.get(key, []), sent_rows, deliveries, kill_records)
            for state in FAILING_STATES
            for key in failing[state][:50]
        },
    }


def _unexecuted(entries: list[dict[str, Any]], delivered: bool) -> str:
    """The state of a key with no effect, from its DLQ entries and whether it was delivered."""
    if entries and all(e["moved_by"] == "runtime" for e in entries):
        return "invalid_in_dlq"  # the app refused it (a permanent error), with its reason
    if entries:
        return "stranded"
    return "vanished" if delivered else "never_delivered"


def _dlq_entries(
    dlq_messages: dict[str, list[Any]], key_of: Any
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    """Each DLQ message as an entry (``dlq``, ``moved_by``: ``runtime`` with its reason, else ``sqs``): the entries
    per business key, and the first entry per body (for the input lines without a key)."""
    in_dlq: dict[str, list[dict[str, Any]]] = {}
    dlq_bodies: dict[str, dict[str, Any]] = {}
    for queue, messages in dlq_messages.items():
        for m in messages:
            reason = m.reason()
            entry = {"dlq": queue, "moved_by": "runtime" if reason else "sqs", "reason": reason}
            dlq_bodies.setdefault(m.body, entry)
            key = key_of(m.body)
            if key is not None:
                in_dlq.setdefault(key, []).append(entry)
    return in_dlq, dlq_bodies


def _per_key(
    states: dict[str, str],
    effects: Counter[str],
    sent_rows: list[dict[str, Any]],
    deliveries: list[dict[str, Any]],
    kill_records: list[dict[str, Any]],
    suppressed: Counter[str],
) -> dict[str, dict[str, Any]]:
    """One row per key: its final state, messages sent and delivered (an asynchronous target's invocations of the
    key's events too), effects, duplicates suppressed, kills."""
    ids: dict[Any, set[Any]] = {}
    for r in sent_rows:
        ids.setdefault(r.get("key"), set()).add(r.get("message_id"))
    delivered = Counter(_sent_id(d) for d in deliveries)
    kills: dict[str, Counter[str]] = {}
    for k in kill_records:
        if k.get("key"):
            kills.setdefault(str(k["key"]), Counter())[str(k.get("phase"))] += 1
    rows = {
        key: {
            "state": state,
            "sends": len(ids.get(key, ())),
            "deliveries": sum(delivered[i] for i in ids.get(key, ()) if i is not None),
            "effects": effects[key],
            "duplicates_suppressed": suppressed[key],
            "kills": dict(kills.get(key, {})),
        }
        for key, state in states.items()
    }
    for key, row in rows.items():
        if row["state"] == "stranded":
            row["batch_kills"] = dict(Counter(str(k["phase"]) for k in batch_kills(key, kill_records)))
    return rows


def batch_kills(key: str, kill_records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kills of an invocation whose batch held ``key`` that no record books to ``key`` (the kill struck another
    key's work, or before any write): the whole batch comes back, so the key was killed too. Each once, as the
    evidence lists kills (``phase``, ``after_write``, ``seq``), with its ``request_id``."""

    def ident(k: dict[str, Any]) -> tuple[Any, ...]:
        return k.get("log"), k.get("pid"), k.get("seq"), k.get("request_id")

    own = {ident(k) for k in kill_records if k.get("key") == key}
    seen: set[tuple[Any, ...]] = set()
    out = []
    for k in kill_records:
        if key not in (k.get("batch_keys") or []) or ident(k) in own or ident(k) in seen:
            continue
        seen.add(ident(k))
        after = (k.get("last_write") or {}).get("op")
        out.append(
            {"phase": k.get("phase"), "after_write": after, "seq": k.get("seq"), "request_id": k.get("request_id")}
        )
    return out


def _evidence(
    key: str,
    dlq: list[dict[str, Any]],
    sent_rows: list[dict[str, Any]],
    deliveries: list[dict[str, Any]],
    kill_records: list[dict[str, Any]],
) -> dict[str, Any]:
    """What the logs and the DLQs say of one key: its sends, deliveries, kills (each with the write it followed), the
    kills of its batches booked to no record of it (``batch_kills``: :func:`batch_kills`) and where it sits in a DLQ,
    and why."""
    ids = {r.get("message_id") for r in sent_rows if r.get("key") == key}
    mine = [d for d in deliveries if _sent_id(d) in ids - {None}]
    return {
        "sends": sorted(Counter(str(r.get("kind")) for r in sent_rows if r.get("key") == key).items()),
        "deliveries": len(mine),
        "max_receive_count": max((int(d.get("receive_count", 0)) for d in mine), default=0),
        "kills": [
            {"phase": k.get("phase"), "after_write": (k.get("last_write") or {}).get("op"), "seq": k.get("seq")}
            for k in kill_records
            if k.get("key") == key
        ],
        "batch_kills": batch_kills(key, kill_records),
        "dlq": dlq,
    }


def dlq_contents(dlq_messages: dict[str, list[Any]], key_of: Any) -> dict[str, Any]:
    """Per DLQ: how many messages, why each is there (the runtime's reason's error type, or ``maxReceiveCount``
    for one SQS moved), and the keys (``None`` for a body without one)."""
    out: dict[str, Any] = {}
    for queue, messages in sorted(dlq_messages.items()):
        why: Counter[str] = Counter()
        for m in messages:
            reason = m.reason()
            why[str(reason.get("error_type")) if reason else MOVED_BY_SQS] += 1
        out[queue] = {
            "messages": len(messages),
            "why": dict(sorted(why.items())),
            "keys": sorted({str(k) for k in (key_of(m.body) for m in messages) if k is not None})[:100],
        }
    return out


#: The ``why`` key of a message SQS moved (``dlq_contents``), kept in the JSON; printed as what it means.
MOVED_BY_SQS = "maxReceiveCount"


def dlq_why(why: Mapping[str, int]) -> str:
    """A DLQ's ``why`` counts (:func:`dlq_contents`) in words, for the terminal and the page: ``40 moved by the redrive
    policy`` (SQS, after maxReceiveCount receives), ``1 refused by the app: InvalidRecord`` (the runtime, with its
    reason's error type); ``empty`` for none."""
    parts = [
        f"{n} moved by the redrive policy" if reason == MOVED_BY_SQS else f"{n} refused by the app: {reason}"
        for reason, n in why.items()
    ]
    return ", ".join(parts) or "empty"


def send_kinds(sent_rows: list[dict[str, Any]], deliveries: list[dict[str, Any]], fifo: set[str]) -> dict[str, Any]:
    """What the producer sent, by kind (``traffic/producer.py``: ``original``, ``concurrent_duplicate``, ``resend``,
    ``late_resend``), and on FIFO queues the resends inside the deduplication interval that were delivered anyway:
    SQS must drop those, so anything but 0 means the local AWS did not deduplicate (a finding about the emulator,
    not the app)."""
    delivered = {d.get("message_id") for d in deliveries}
    inside = [r for r in sent_rows if r.get("queue") in fifo and r.get("kind") == "resend"]
    return {
        "by_kind": dict(sorted(Counter(str(r.get("kind")) for r in sent_rows).items())),
        "fifo_resends_inside_window": len(inside),
        "fifo_resends_after_window": sum(
            1 for r in sent_rows if r.get("queue") in fifo and r.get("kind") == "late_resend"
        ),
        "fifo_resends_inside_window_delivered": sum(1 for r in inside if r.get("message_id") in delivered),
    }


#: The on-failure record conditions an asynchronous target's run can end an event with (Lambda's destination
#: record's ``requestContext.condition``; ``aws/async_inbox.py``).
ON_FAILURE_CONDITIONS = ("RetriesExhausted", "EventAgeExceeded", "PermanentError")


def async_counts(deliveries: list[dict[str, Any]], *, refused: int = 0) -> dict[str, Any] | None:
    """The asynchronous path's figures from the delivery log's asynchronous lines (``runner/async_poller.py``):
    ``events`` (inbox messages: one event each), ``invocations``, ``delivered_twice`` (Lambda's duplicate deliveries
    without an error), ``retries`` (invocations of a later attempt), ``killed``, ``errors``, ``on_failure`` (records
    by condition, each condition shown: Lambda's from the delivery log, ``PermanentError`` the ``refused`` records
    the runtime itself wrote, read from the on-failure queues after the run) and ``redrive_invocations``
    (invocations of events the run's redrive sent back); ``None`` when the run had no asynchronous target."""
    rows = [d for d in deliveries if d.get("async")]
    if not rows:
        return None
    invoked = [d for d in rows if d.get("invoked")]
    first = [d for d in invoked if not d.get("duplicate")]
    failed = Counter(str(d.get("condition")) for d in rows if d.get("outcome") == "on_failure")
    failed["PermanentError"] += refused
    return {
        "events": len({d.get("message_id") for d in rows}),
        "invocations": len(invoked),
        "delivered_twice": sum(1 for d in invoked if d.get("duplicate")),
        "retries": sum(1 for d in first if int(d.get("attempt") or 1) > 1),
        "killed": sum(1 for d in invoked if d.get("outcome") == "killed"),
        "errors": sum(1 for d in invoked if d.get("outcome") == "error"),
        "on_failure": {**dict.fromkeys(ON_FAILURE_CONDITIONS, 0), **failed},
        "redrive_invocations": sum(1 for d in first if d.get("source") == "redrive"),
    }


def render_async(counts: dict[str, Any]) -> str:
    """:func:`async_counts` as the terminal report's line."""
    on_failure = ", ".join(f"{condition}={n}" for condition, n in counts["on_failure"].items())
    return (
        f"asynchronous: {counts['events']} events, {counts['invocations']} invocations, {counts['delivered_twice']}"
        f" delivered twice without an error, {counts['retries']} retries by Lambda, {counts['killed']} killed,"
        f" {counts['errors']} errors; on-failure records: {on_failure}; {counts['redrive_invocations']} invocations"
        " from the run's redrive"
    )
