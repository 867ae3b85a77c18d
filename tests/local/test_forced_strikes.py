"""Forced strikes (issue 57, item 1; ``chaos/forced_strikes.py``): a small run strikes each forcible class it asked for
for sure, at most :data:`MIN_STRIKES` tries each and once per batch, and says what it forced and what it left untested.
The run itself: ``tests/e2e/test_proof_gallery.py::test_a_fresh_item_per_execution_fails_a_default_run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.chaos import fault_model as chaos_module
from effectively_once_local.chaos.fault_classes import ChaosConfig
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

#: The chaos command's default fractions.
DEFAULTS = ChaosConfig(
    resend=0.1,
    concurrent_duplicates=0.05,
    crash_after_charge=0.03,
    crash_after_complete=0.03,
    timeout=0.02,
    crash_after_write=0.05,
    crash_random=0.02,
)
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
    late = _chaos(tmp_path)
    late.begin(10**9, [KEYS[-7], KEYS[-1]], "r-late")
    assert late.forced is None, "three tries each: nothing more forced"
    assert forced_strikes(tmp_path) | {} == {**forced_strikes(tmp_path), "after_effect": 3, "after_complete": 3}


def test_a_forced_fate_with_no_place_is_a_try_spent(tmp_path: Path, no_suicide: None) -> None:
    write_plan(tmp_path, ChaosConfig(crash_after_charge=0.5), KEYS)
    for i in range(MIN_STRIKES):
        chaos = _chaos(tmp_path, ChaosConfig(crash_after_charge=0.5), pid=str(i))
        chaos.begin(10**9, [KEYS[-1]], f"r{i}")
        assert chaos.forced == AFTER_CHARGE
        chaos.end()  # answered from the record: no effect line, no kill
        chaos.on_return()

    chaos = _chaos(tmp_path, ChaosConfig(crash_after_charge=0.5))
    chaos.begin(10**9, [KEYS[-1]], "r-last")
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
