"""The demo's asynchronous leg (``effectively_once_local.payments.async_leg``): which payments go through the bus, and
the verdict's reasons from its block (each violation named; a clean block passes)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from effectively_once_local.payments import async_leg
from effectively_once_local.payments.payments_input import FIFO, STANDARD, Line, route


def _line(number: int, pid: str | None, account: str, amount: int = 100) -> Line:
    body = json.dumps({"payment_id": pid, "account_id": account, "amount": amount, "currency": "EUR"})
    return Line(number=number, body=body, account_id=account, payment_id=pid)


def _valid(body: str) -> bool:
    return bool(json.loads(body).get("amount", 0) > 0)


def test_a_stable_share_of_the_standard_queues_valid_payments_goes_through_the_bus() -> None:
    accounts = [f"acct-{i:03d}" for i in range(40)]
    standard = next(a for a in accounts if route(a) == STANDARD)
    fifo = next(a for a in accounts if route(a) == FIFO)
    lines = [_line(i, f"pay-{i:05d}", standard) for i in range(2000)]

    chosen = [ln for ln in lines if async_leg.chosen(ln, _valid, 0.2)]

    assert 0.15 < len(chosen) / len(lines) < 0.25
    assert chosen == [ln for ln in lines if async_leg.chosen(ln, _valid, 0.2)], "the same payments every run"
    assert not any(async_leg.chosen(_line(i, f"pay-{i:05d}", fifo), _valid, 1.0) for i in range(50)), "FIFO: never"
    assert not async_leg.chosen(_line(1, "pay-x", standard, amount=-5), _valid, 1.0), "poison: never"
    assert not async_leg.chosen(_line(1, None, standard), _valid, 1.0)


CLEAN: dict[str, Any] = {
    "lost": 0,
    "double_charged": 0,
    "redrive": {
        "charged_new_provider_calls": 0,
        "new_sent": 5,
        "new_charged": 5,
        "double_charged": 0,
        "records_left": 0,
        "on_failure_after": 0,
    },
}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"lost": 2}, "lost"),
        ({"double_charged": 1}, "charged more than once"),
        ({"redrive": {**CLEAN["redrive"], "charged_new_provider_calls": 1}}, "already charged"),
        ({"redrive": {**CLEAN["redrive"], "new_charged": 4}}, "4 of 5 new payments"),
        ({"redrive": {**CLEAN["redrive"], "double_charged": 1}}, "charged more than once"),
        ({"redrive": {**CLEAN["redrive"], "on_failure_after": 1}}, "left in the on-failure queue"),
    ],
)
def test_each_violation_in_the_block_fails_the_demo_and_a_clean_block_passes(
    change: dict[str, Any], words: str
) -> None:
    assert async_leg.problems(CLEAN) == []
    found = async_leg.problems({**CLEAN, **change})
    assert len(found) == 1 and words in found[0], found


def test_the_async_line_names_the_on_failure_conditions_without_a_raw_dict() -> None:
    block = {
        "payments": 3,
        "events_put": 4,
        "invocations": 5,
        "duplicate_deliveries": 1,
        "retries": 1,
        "kills": 1,
        "lost": 0,
        "double_charged": 0,
        "on_failure": {"records": 0, "by_condition": {}},
    }

    empty = async_leg.render(block)
    named = async_leg.render({**block, "on_failure": {"records": 2, "by_condition": {"RetriesExhausted": 2}}})

    assert "on-failure records 0\n" in empty and "{" not in empty
    assert "on-failure records 2 (RetriesExhausted=2)\n" in named
