"""Forced strikes (issue 57, item 1; ``chaos/forced_strikes.py``): a small run strikes each forcible class it asked for
for sure, at most :data:`MIN_STRIKES` tries each and once per batch, and says what it forced and what it left untested.
The run itself: ``tests/e2e/test_proof_gallery.py::test_a_fresh_item_per_execution_fails_a_default_run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.chaos import fault_model as chaos_module
from effectively_once_local.chaos.fault_classes import FAULT_CLASSES, ChaosConfig
from effectively_once_local.chaos.fault_model import (
    AFTER_CHARGE,
    AFTER_COMPLETE,
    AFTER_EFFECT,
    AFTER_WRITE,
    TIMEOUT,
    EventLog,
    InvocationChaos,
)
from effectively_once_local.chaos.faults import EFFECT
from effectively_once_local.chaos.forced_strikes import MIN_STRIKES, PLAN_FILE, ForcedStrikes, write_plan
from effectively_once_local.proof.faults_struck import faults_block, forced_strikes, ok_prefix, render_faults

#: The chaos command's default fractions (each fault class's flag default).
DEFAULTS = ChaosConfig(**{c.field: c.chaos.default for c in FAULT_CLASSES})
KEYS = [f"o-{i}" for i in range(20)]


class Killed(Exception):
    pass


@pytest.fixture
def no_suicide(monkeypatch: pytest.MonkeyPatch) -> None:
    def kill() -> None:
        raise Killed

    monkeypatch.setattr(chaos_module, "kill_self", kill)


def _chaos(run_dir: Path, config: ChaosConfig = DEFAULTS, pid: str = "1") -> InvocationChaos:
    chaos = InvocationChaos(
        config,
        EventLog(run_dir / f"chaos-q-{pid}.jsonl"),
        "q",
        at_effect_line=True,
        forcing=ForcedStrikes.load(run_dir),
    )
    chaos.rng.random = lambda: 0.99  # type: ignore[method-assign]  # the draw strikes nothing
    return chaos


def _kills(run_dir: Path) -> list[dict[str, Any]]:
    records = [json.loads(ln) for f in sorted(run_dir.glob("chaos-*.jsonl")) for ln in f.read_text().splitlines()]
    return [r for r in records if r["event"] == "kill"]


def _effect(chaos: InvocationChaos, key: str) -> None:
    chaos.on_write({"op": "dynamodb.PutItem", "target": "outbox", "role": EFFECT, "record_id": None})
    chaos.on_effect(key, "confirm")


def test_the_plan_holds_the_forcible_classes_asked_and_the_inputs_last_keys(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, DEFAULTS, KEYS)

    assert plan is not None and plan["fates"] == [AFTER_CHARGE, AFTER_WRITE, TIMEOUT, AFTER_COMPLETE]
    assert plan["tail_keys"] == KEYS[-4 * MIN_STRIKES :], "3 keys per class, the last of the input"
    only_writes = write_plan(tmp_path, ChaosConfig(crash_after_write=0.5, crash_random=0.5), KEYS)
    assert only_writes is not None and only_writes["fates"] == [AFTER_WRITE] and len(only_writes["tail_keys"]) == 3
    assert write_plan(tmp_path, ChaosConfig(resend=0.5, crash_random=0.1), KEYS) is None
    assert not (tmp_path / PLAN_FILE).exists(), "no forcible class asked: no plan left from the run before"
    assert ForcedStrikes.load(tmp_path) is None


def test_a_run_in_the_same_folder_starts_from_no_strikes(tmp_path: Path, no_suicide: None) -> None:
    write_plan(tmp_path, DEFAULTS, KEYS)
    before = _chaos(tmp_path)
    before.begin(10**9, KEYS[-1:], "r0")
    with pytest.raises(Killed):
        _effect(before, KEYS[-1])

    write_plan(tmp_path, DEFAULTS, KEYS)
    again = _chaos(tmp_path, pid="2")
    again.begin(10**9, KEYS[-1:], "r1")

    assert again.forced == AFTER_CHARGE, "the last run's strikes and struck keys are not this run's"


def test_the_tail_invocation_is_struck_at_the_effect_line_whatever_the_draw(tmp_path: Path, no_suicide: None) -> None:
    write_plan(tmp_path, DEFAULTS, KEYS)
    head = _chaos(tmp_path)
    head.begin(10**9, KEYS[:5], "r0")
    _effect(head, KEYS[0])
    head.end()
    head.on_return()  # an invocation of the input's first keys is left to the draw: nothing struck

    tail = _chaos(tmp_path)
    tail.begin(10**9, KEYS[-5:], "r1")
    with pytest.raises(Killed):
        _effect(tail, KEYS[-5])

    (kill,) = _kills(tmp_path)
    assert (kill["phase"], kill["forced"], kill["batch_keys"]) == (AFTER_EFFECT, True, KEYS[-5:])


def test_each_class_is_forced_until_it_has_three_tries_and_a_batch_only_once(tmp_path: Path, no_suicide: None) -> None:
    write_plan(tmp_path, ChaosConfig(crash_after_charge=0.01, crash_after_complete=0.01), KEYS)
    fates = []
    for i, key in enumerate(KEYS[-6:]):
        chaos = _chaos(tmp_path, ChaosConfig(crash_after_charge=0.01, crash_after_complete=0.01), pid=str(i))
        chaos.begin(10**9, [key], f"r{i}")
        fates.append(chaos.fate)
        with pytest.raises(Killed):
            _effect(chaos, key)
            chaos.end()
            chaos.on_return()
        again = _chaos(tmp_path, pid=f"{i}-again")
        again.begin(10**9, [key], f"r{i}-again")
        assert again.forced is None, "the redelivery of a batch struck by force is left to the draw"

    assert fates == [AFTER_CHARGE, AFTER_COMPLETE] * 3, "the class with the fewest tries first, in the table's order"
    unmarked = ForcedStrikes.load(tmp_path)
    assert unmarked is not None
    unmarked.tail.add("fresh")
    assert unmarked.choose(["fresh"], DEFAULTS.fates()) is None, "three tries each: nothing more forced"
    none = dict.fromkeys((c.name for c in FAULT_CLASSES), 0)
    assert forced_strikes(tmp_path) == none | {"after_effect": 3, "after_complete": 3}


def test_a_fate_is_claimed_before_the_invocation_runs(tmp_path: Path, no_suicide: None) -> None:
    config = ChaosConfig(timeout=0.02)
    write_plan(tmp_path, config, KEYS)
    drawn = _chaos(tmp_path, config, pid="drawn")
    drawn.rng.random = lambda: 0.0  # type: ignore[method-assign]
    for i in range(MIN_STRIKES - 1):  # two drawn stalls, killed at the deadline
        drawn.begin(10**9, [KEYS[i]], f"d{i}")
        with pytest.raises(Killed):
            drawn.crash(TIMEOUT)
    first, second = _chaos(tmp_path, config, pid="a"), _chaos(tmp_path, config, pid="b")

    first.begin(10**9, KEYS[-2:-1], "a")  # not struck yet: its stall holds it until the deadline
    redelivered = _chaos(tmp_path, config, pid="again")
    redelivered.begin(10**9, KEYS[-2:-1], "a-again")
    second.begin(10**9, KEYS[-1:], "b")

    assert first.forced == TIMEOUT, "one try left, and the first poller took it"
    assert redelivered.forced is None, "its batch is marked as it is forced on, before the kill"
    assert second.forced is None, "the other poller finds no try left: no class forced past three"


def test_a_poller_whose_chaos_asks_nothing_is_never_forced(tmp_path: Path) -> None:
    write_plan(tmp_path, DEFAULTS, KEYS)
    calm = _chaos(tmp_path, ChaosConfig(seed=DEFAULTS.seed))  # the redrive's pollers
    calm.begin(10**9, KEYS[-3:], "r")

    assert calm.forced is None and calm.fate is None
    only_complete = _chaos(tmp_path, ChaosConfig(crash_after_complete=0.01))
    only_complete.begin(10**9, KEYS[-3:], "r2")
    assert only_complete.forced == AFTER_COMPLETE, "only a fate its own chaos asks for"


def test_a_forced_fate_with_no_place_is_a_try_spent(tmp_path: Path, no_suicide: None) -> None:
    config = ChaosConfig(crash_after_charge=0.5)
    write_plan(tmp_path, config, KEYS)
    for i in range(MIN_STRIKES):
        chaos = _chaos(tmp_path, config, pid=str(i))
        chaos.begin(10**9, [KEYS[-1 - i]], f"r{i}")
        assert chaos.forced == AFTER_CHARGE
        chaos.end()  # answered from the record: no effect line, no kill
        chaos.on_return()

    chaos = _chaos(tmp_path, config)
    chaos.begin(10**9, [KEYS[-1 - MIN_STRIKES]], "r-last")
    assert chaos.forced is None and _kills(tmp_path) == []


def test_drawn_strikes_count_and_a_forced_write_kill_strikes_at_the_first_write(
    tmp_path: Path, no_suicide: None
) -> None:
    config = ChaosConfig(crash_after_write=0.2)
    write_plan(tmp_path, config, KEYS)
    for i in range(2):  # two drawn strikes, on the input's first keys
        drawn = _chaos(tmp_path, config, pid=f"d{i}")
        drawn.rng.random = lambda: 0.0  # type: ignore[method-assign]
        drawn.begin(10**9, [KEYS[i]], f"d{i}")
        with pytest.raises(Killed):
            _effect(drawn, KEYS[i])
    forced = _chaos(tmp_path, config)
    forced.begin(10**9, [KEYS[-1]], "f")
    with pytest.raises(Killed):
        forced.on_write({"op": "dynamodb.PutItem", "target": "outbox", "role": EFFECT, "record_id": None})
    after = _chaos(tmp_path, config, pid="after")
    after.begin(10**9, [KEYS[-2]], "a")

    assert sorted(k["forced"] for k in _kills(tmp_path)) == [False, False, True]
    assert after.forced is None, "two drawn and one forced: three strikes"


def test_the_report_names_the_forced_strikes_and_an_ok_with_an_untested_window(tmp_path: Path) -> None:
    report = {"total": {"kills": {"after_effect": 1, "after_write": 1}, "effect_log_lines": 20}}
    block = faults_block(report, DEFAULTS, {"standard"}, 20, forced={"after_effect": 1, "after_write": 1})

    assert block["forced"]["after_effect"] == 1 and block["forced"]["stall"] == 0
    assert "  forced: after_effect=1, after_write=1 (the draw left these classes under 3 strikes" in "\n".join(
        render_faults(block)
    )
    assert ok_prefix(block) == "OK, crash window untested (--crash-after-complete 0.03, --timeouts 0.02)"
    every = {"after_effect": 3, "after_write": 3, "after_complete": 3, "timeout": 3}
    struck = faults_block(
        {"total": {"kills": every, "effect_log_lines": 20}, "sends": {"by_kind": {"resend": 2}}},
        DEFAULTS,
        {"standard"},
        20,
    )
    assert ok_prefix(struck) == "OK", "a random moment that missed leaves the crash window tested"
