"""FIFO order per message group (issue 30, item 7; ``proof/group_order.py``): within a group, the keys' first
executions must follow the order SQS sequenced them; a key executed before an earlier-sequenced key of its group is
``reordered``, naming the group and both keys. Keys redriven from a DLQ and keys never effected are left out."""

from __future__ import annotations

from typing import Any

from effectively_once_local.proof.group_order import first_executions, reordered


def _sent(key: str, number: int, group: str = "g", queue: str = "FifoOrders") -> dict[str, Any]:
    return {"queue": queue, "key": key, "group": group, "sequence_number": str(10**19 + number)}


def _line(key: str, stamp: str, log: str = "function-a.log") -> dict[str, Any]:
    return {"idempotency_key": key, "timestamp": f"2026-12-04 23:17:{stamp}+0000", "_file": log}


def _check(sent: list[dict[str, Any]], lines: list[dict[str, Any]], left_out: set[str] = frozenset()) -> Any:  # type: ignore[assignment]
    return reordered(sent, first_executions(lines, lambda key: key), left_out)


def test_keys_executed_in_their_groups_sequence_pass() -> None:
    sent = [_sent("a", 1), _sent("b", 2), _sent("x", 3, group="h"), _sent("a", 9)]  # a's resend comes later
    lines = [_line("a", "01,000"), _line("x", "00,500", "function-b.log"), _line("b", "01,000"), _line("a", "02,000")]

    assert _check(sent, lines) == ([], 3)


def test_a_key_executed_before_an_earlier_one_of_its_group_is_reordered() -> None:
    sent = [_sent("a", 1), _sent("b", 2), _sent("c", 3)]
    lines = [_line("c", "01,000"), _line("a", "01,000"), _line("b", "01,000")]  # one log: its order counts

    found, checked = _check(sent, lines)

    assert checked == 3
    assert found == [
        {"group": "g", "queue": "FifoOrders", "first": "a", "then": "c"},
    ], "c overtook a (and b): one finding per key, naming the earliest it overtook"


def test_two_logs_are_ordered_by_their_timestamps_and_a_tie_is_no_evidence() -> None:
    sent = [_sent("a", 1), _sent("b", 2), _sent("c", 3)]
    lines = [_line("b", "01,000", "function-b.log"), _line("a", "01,000"), _line("c", "00,999", "function-c.log")]

    found, _ = _check(sent, lines)

    assert [(r["first"], r["then"]) for r in found] == [("a", "c")]


def test_redriven_and_never_effected_keys_are_left_out() -> None:
    sent = [_sent("a", 1), _sent("b", 2), _sent("refused", 0)]
    lines = [_line("b", "01,000"), _line("a", "02,000")]

    assert _check(sent, lines, left_out={"a"}) == ([], 1)


def test_a_standard_queue_and_an_asynchronous_target_are_not_checked() -> None:
    sent = [{"queue": "StandardOrders", "key": "a", "message_id": "m-1"}, {"queue": "async-Fn", "key": "b"}]

    assert _check(sent, [_line("b", "01,000"), _line("a", "02,000")]) == ([], 0)
