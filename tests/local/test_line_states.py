"""Every input line ends in exactly one state (``proof/line_states.py``): effected once, redriven then effected once,
invalid in a DLQ (with who moved it) pass; stranded, never delivered, vanished and duplicated fail the run, each
listed with its evidence. The cases of issue 22: stranded valid work and vanished input used to pass."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from effectively_once_local.aws.readback import DlqMessage
from effectively_once_local.proof.key_check import build, verdict
from effectively_once_local.proof.line_states import dlq_contents, line_states
from effectively_once_local.traffic.chaos_input import InputLine
from effectively_once_runtime import names


def _line(number: int, key: str | None, body: str | None = None) -> InputLine:
    return InputLine(number, body or json.dumps({"order_id": key}), key, None, None)


def _dlq(body: str, reason: dict[str, Any] | None = None) -> DlqMessage:
    attributes = {}
    if reason is not None:
        attributes[names.DEAD_LETTER_REASON_ATTRIBUTE] = {"DataType": "String", "StringValue": json.dumps(reason)}
    return DlqMessage(message_id=f"d-{body}", body=body, attributes=attributes)


def _key_of(body: str) -> str | None:
    try:
        return json.loads(body).get("order_id")
    except (ValueError, AttributeError):
        return None


LINES = [
    _line(1, "done"),
    _line(2, "redriven"),
    _line(3, "stranded"),
    _line(4, "vanished"),
    _line(5, "never"),
    _line(6, "refused"),
    _line(7, None, "not json"),  # the runtime moved it with its reason
    _line(8, None, "also not json"),  # delivered, reported done, sent nowhere
]
SENT = [{"line": ln.number, "key": ln.key, "kind": "original", "message_id": f"m{ln.number}"} for ln in LINES]
DELIVERED = [{"message_id": f"m{n}", "receive_count": 1} for n in (1, 2, 3, 4, 6, 7, 8)]
DLQ = {
    "orders-dlq": [
        _dlq(json.dumps({"order_id": "stranded"})),  # SQS moved it after maxReceiveCount; the redrive did not help
        _dlq(json.dumps({"order_id": "refused"}), {"error_type": "PermanentError", "message_id": "m6"}),
        _dlq("not json", {"error_type": "InvalidRecord", "message_id": "m7"}),
    ]
}
KILLS = [{"key": "stranded", "phase": "after_write", "seq": 4, "last_write": {"op": "dynamodb.PutItem"}}]


def _line_states(**more: Any) -> dict[str, Any]:
    """The states of :data:`LINES` with the run's facts above, and ``more`` (``marked``)."""
    return line_states(
        lines=LINES,
        effects=Counter({"done": 1, "redriven": 1}),
        duplicated=[],
        redriven={"redriven", "stranded"},
        dlq_messages=DLQ,
        sent_rows=SENT,
        deliveries=DELIVERED,
        kill_records=KILLS,
        key_of=_key_of,
        **more,
    )


@pytest.fixture(scope="module")
def states() -> dict[str, Any]:
    return _line_states()


def test_every_line_gets_exactly_one_state(states: dict[str, Any]) -> None:
    assert states["counts"] == {
        "effected_once": 1,
        "redriven_then_effected": 1,
        "invalid_in_dlq": 2,  # "refused" (the app's PermanentError) and line 7 (not JSON)
        "stranded": 1,
        "never_delivered": 1,
        "vanished": 2,  # key "vanished" and line 8
        "duplicated": 0,
        "incomplete": 0,
        "reordered": 0,
    }
    assert sum(states["counts"].values()) == len(LINES)


def test_the_failing_states_found_elsewhere_take_their_keys() -> None:
    """Issue 30, items 6 and 7: the later key of a reordered pair (``group_order.reordered``'s ``then``) ends
    ``reordered``, not ``effected_once``; a key in some required stores only ends ``incomplete``, not invalid."""
    found = _line_states(marked={"incomplete": {"refused"}, "reordered": {"done"}})

    assert found["counts"]["reordered"] == 1 and found["counts"]["effected_once"] == 0
    assert found["keys"]["reordered"] == ["done"]
    # incomplete wins over invalid: a key refused after one of its effects was written (issue 30, item 6)
    assert found["keys"]["incomplete"] == ["refused"] and found["counts"]["invalid_in_dlq"] == 1


def test_failing_lines_are_named_with_their_evidence(states: dict[str, Any]) -> None:
    assert states["keys"]["stranded"] == ["stranded"] and states["keys"]["vanished"] == ["vanished"]
    assert states["keys"]["never_delivered"] == ["never"]
    evidence = states["evidence"]["stranded"]
    assert evidence["dlq"] == [{"dlq": "orders-dlq", "moved_by": "sqs", "reason": None}]
    assert evidence["kills"] == [{"phase": "after_write", "after_write": "dynamodb.PutItem", "seq": 4}]
    assert evidence["deliveries"] == 1 and evidence["sends"] == [("original", 1)]
    assert {i["line"]: i["state"] for i in states["invalid_lines"]} == {7: "invalid_in_dlq", 8: "vanished"}
    assert states["invalid_lines"][0]["moved_by"] == "runtime"


def test_the_verdict_fails_on_stranded_vanished_and_never_delivered(states: dict[str, Any]) -> None:
    report = build(
        sent=Counter(ln.key for ln in LINES if ln.key),
        invalid_lines=2,
        messages_sent=len(SENT),
        dlq_keys={"stranded", "refused"},
        dead_lettered=3,
        log_counts=Counter({"done": 1, "redriven": 1}),
        store_counts=None,
        kill_records=KILLS,
        effect_takes_key=False,
    )
    report |= {"total": report["total"] | states["counts"], "states": states, "dlq": dlq_contents(DLQ, _key_of)}

    code, reasons = verdict(report)

    assert code == 1
    assert [r.split(" ", 2)[1] for r in reasons] == ["valid", "lines", "lines"]
    assert "stranded" in reasons[0] and "never delivered" in reasons[1] and "vanished" in reasons[2]
    assert "line 8" in reasons[2] and "vanished" in reasons[2]
    assert report["dlq"]["orders-dlq"]["why"] == {"InvalidRecord": 1, "PermanentError": 1, "maxReceiveCount": 1}


def test_a_clean_run_passes_with_its_states() -> None:
    lines = [_line(1, "a"), _line(2, None, "x")]
    states = line_states(
        lines=lines,
        effects=Counter({"a": 1}),
        duplicated=[],
        redriven=set(),
        dlq_messages={"q-dlq": [_dlq("x", {"error_type": "InvalidRecord"})]},
        sent_rows=[{"line": 1, "key": "a", "kind": "original", "message_id": "m1"}],
        deliveries=[{"message_id": "m1"}],
        kill_records=[],
        key_of=_key_of,
    )
    report = build(
        sent=Counter({"a": 1}),
        invalid_lines=1,
        messages_sent=2,
        dlq_keys=set(),
        dead_lettered=1,
        log_counts=Counter({"a": 1}),
        store_counts=None,
        kill_records=[],
        effect_takes_key=False,
    )
    report |= {"total": report["total"] | states["counts"], "states": states, "dlq": {}}

    assert verdict(report) == (0, [])
    assert report["total"]["effected_once"] == 1 and report["total"]["invalid_in_dlq"] == 1


def test_every_key_has_a_row_with_its_state_sends_deliveries_effects_and_kills(states: dict[str, Any]) -> None:
    rows = states["per_key"]

    assert set(rows) == {ln.key for ln in LINES if ln.key}
    assert rows["stranded"] == {
        "state": "stranded",
        "sends": 1,
        "deliveries": 1,
        "effects": 0,
        "duplicates_suppressed": 0,
        "kills": {"after_write": 1},
        "batch_kills": {},
    }
    assert rows["never"]["deliveries"] == 0 and rows["done"]["effects"] == 1


def test_an_app_normalising_keys_the_run_does_not_is_flagged() -> None:
    from effectively_once_local.proof.key_check import normalization_hint

    hint = normalization_hint({"ABC-1", " abc-2 "}, {"abc-1", "abc-2"}, ())

    assert hint is not None and hint["app_seems_to_normalize"] == ["strip", "casefold"]
    assert "--normalize strip --normalize casefold" in hint["hint"]
    assert normalization_hint({"ABC-1"}, {"ABC-1"}, ()) is None, "the same keys: nothing to say"
    assert normalization_hint({"ABC-1"}, {"abc-1"}, ("casefold",)) is None, "the run applies the app's rule"
    assert normalization_hint({"a"}, {"b"}, ()) is None, "keys no normalisation explains are the verdict's"


def test_the_asynchronous_path_is_counted_from_the_delivery_log() -> None:
    """``async_counts`` (issue 30, item 3): events, invocations, Lambda's duplicates and retries, kills, errors,
    on-failure records by condition and the redrive's invocations; nothing for a run without an asynchronous target."""
    from effectively_once_local.proof.line_states import async_counts, render_async

    def row(message: str, attempt: int, outcome: str, **extra: object) -> dict[str, object]:
        invoked = outcome not in ("on_failure", "rejected")
        fields = {"message_id": message, "attempt": attempt, "outcome": outcome, "invoked": invoked}
        return {"async": True, **fields, **extra}

    rows = [
        row("e1", 1, "ok", source="eventbridge"),
        row("e1", 1, "ok", source="eventbridge", duplicate=True),
        row("e2", 1, "killed", phase="after_write", source="sns"),
        row("e2", 2, "error", source="sns"),
        row("e2", 3, "error", source="sns"),
        row("e2", 4, "on_failure", condition="RetriesExhausted", source="sns"),
        row("e3", 1, "ok", source="redrive"),
        {"message_id": "sqs-1", "receive_count": 1},  # an SQS delivery: not the asynchronous path
    ]

    counts = async_counts(rows, refused=2)

    assert counts == {
        "events": 3,
        "invocations": 6,
        "delivered_twice": 1,
        "retries": 2,
        "killed": 1,
        "errors": 2,
        # PermanentError: the runtime's own records of events refused on first sight (issue 30, item 2)
        "on_failure": {"RetriesExhausted": 1, "EventAgeExceeded": 0, "PermanentError": 2},
        "redrive_invocations": 1,
    }
    assert async_counts(rows)["on_failure"]["PermanentError"] == 0  # type: ignore[index]
    assert async_counts(rows[-1:]) is None
    assert render_async(counts).startswith("asynchronous: 3 events, 6 invocations, 1 delivered twice without an error,")


def test_an_asynchronous_keys_deliveries_are_its_events_invocations() -> None:
    """Per key, an asynchronous target's deliveries are the invocations of the events sent for it (matched by the
    event id the send log keeps), not its inbox messages, and an on-failure record is no delivery (issue 30, item 3:
    they were 0 for every key of that path)."""
    sent = [{"key": "k", "message_id": "event-1", "kind": "original", "line": 1, "queue": "async-Fn"}]
    deliveries = [
        {"async": True, "message_id": "inbox-1", "event_id": "event-1", "invoked": True, "attempt": 1},
        {"async": True, "message_id": "inbox-1", "event_id": "event-1", "invoked": True, "attempt": 2},
        {"async": True, "message_id": "inbox-1", "event_id": "event-1", "invoked": False, "outcome": "on_failure"},
    ]

    states = line_states(
        lines=[SimpleNamespace(number=1, key="k", body='{"id": "k"}')],
        effects=Counter({"k": 1}),
        duplicated=[],
        redriven=set(),
        dlq_messages={},
        sent_rows=sent,
        deliveries=deliveries,
        kill_records=[],
        key_of=lambda body: "k",
    )

    assert states["per_key"]["k"]["deliveries"] == 2
