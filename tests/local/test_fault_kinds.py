"""Every kill kind the runner can inject is counted in both reports of a chaos run (the JSON's ``total.kills`` and the
terminal's ``kills:`` line) and named on docs/extending.md (issue 29, item 5): a new kind that is drawn but never
reported would make a run look calmer than it was."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.chaos import fault_model
from effectively_once_local.chaos.fault_model import AFTER_CHARGE, AFTER_EFFECT, KILL_PHASES, ChaosConfig, EventLog
from effectively_once_local.proof import key_check

REPO = Path(__file__).resolve().parents[2]
#: The kinds of a chaos run's report: the payments seam's ``after_charge`` is the effect line's ``after_effect`` there.
REPORTED = tuple(AFTER_EFFECT if phase == AFTER_CHARGE else phase for phase in KILL_PHASES)


def _report(kill_records: list[dict[str, Any]]) -> dict[str, Any]:
    """A per-key report of two keys, each effected once, with ``kill_records``."""
    return key_check.build(
        sent=Counter(["a", "b"]),
        invalid_lines=0,
        messages_sent=2,
        dlq_keys=set(),
        dead_lettered=0,
        log_counts=Counter(["a", "b"]),
        store_counts=None,
        kill_records=kill_records,
        effect_takes_key=True,
    )


def test_every_fate_the_config_draws_is_a_kill_phase() -> None:
    assert set(ChaosConfig().fates()) <= set(KILL_PHASES)
    assert len(set(KILL_PHASES)) == len(KILL_PHASES)


def test_a_kill_of_a_phase_outside_the_list_is_refused_before_anything_is_logged_or_killed(tmp_path: Path) -> None:
    log = tmp_path / "chaos.jsonl"
    chaos = fault_model.InvocationChaos(ChaosConfig(), EventLog(log), "Orders")

    with pytest.raises(ValueError, match="'after_lunch' is not one of"):
        chaos.crash("after_lunch")
    assert log.read_text() == ""


@pytest.mark.parametrize("struck", [(), REPORTED], ids=["no-kill", "one-of-each"])
def test_every_kind_is_counted_in_the_json_and_the_terminal_report(struck: tuple[str, ...]) -> None:
    # With no kill at all each kind still shows, as 0: a passing run says which kinds never struck.
    keys = [f"k{i}" for i in range(len(REPORTED))]
    report = key_check.build(
        sent=Counter(keys),
        invalid_lines=0,
        messages_sent=len(keys),
        dlq_keys=set(),
        dead_lettered=0,
        log_counts=Counter(keys),
        store_counts=None,
        kill_records=[{"key": key, "phase": phase} for key, phase in zip(keys, struck, strict=False)],
        effect_takes_key=True,
    )

    counted = report["total"]["kills"]
    assert {kind: counted.get(kind) for kind in REPORTED} == {kind: struck.count(kind) for kind in REPORTED}
    line = next(ln for ln in key_check.render(report).splitlines() if ln.startswith("kills: "))
    assert dict(re.findall(r"(\w+)=(\d+)", line)) == {kind: str(n) for kind, n in counted.items()}
    # The demo prints the per-key summary under its own kills line: one kills line in the terminal (issue 34).
    assert [ln for ln in key_check.render(report, kills=False).splitlines() if ln.startswith("kills")] == []


def test_every_kind_is_named_on_the_extending_page() -> None:
    page = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")

    assert [phase for phase in KILL_PHASES if f"`{phase}`" not in page] == []


def test_kills_after_a_write_are_counted_by_the_write_in_every_report() -> None:
    """``total.kills_after_write`` (issue 30, item 4): every kind of watched write, in the JSON and the terminal,
    a passing run's too, so a run says whether its SQL commits were ever struck."""
    from effectively_once_local.chaos.faults import WRITE_OPERATIONS
    from effectively_once_local.chaos.sql_watch import SQL_COMMIT

    def after(op: str) -> dict[str, Any]:
        return {"phase": "after_write", "key": None, "last_write": {"op": op, "seq": 1}}

    kinds = [after(SQL_COMMIT), after(SQL_COMMIT), after("dynamodb.PutItem"), {"phase": "random_moment", "key": None}]
    struck = _report(kinds)["total"]["kills_after_write"]
    calm = _report([])

    assert set(WRITE_OPERATIONS) | {SQL_COMMIT.split(".")[0]} == set(key_check.WRITE_KINDS)
    assert struck == {"dynamodb_write": 1, "s3_put": 0, "send": 0, "sql_commit": 2}
    assert calm["total"]["kills_after_write"] == dict.fromkeys(struck, 0)
    assert "kills after a write, by the write: dynamodb_write=0, s3_put=0, send=0, sql_commit=0" in key_check.render(
        calm
    )


def test_every_kind_is_counted_in_the_payments_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's payments report counts every kill phase too (``run_log_counts``), 0 for one that never struck: a
    kind the demo can draw never drops out of its report."""
    from effectively_once_local.payments.payments_report import run_log_counts

    monkeypatch.setattr(fault_model, "kill_self", lambda: None)  # the record is what matters, not the SIGKILL
    for phase in REPORTED:
        fault_model.InvocationChaos(ChaosConfig(), EventLog(tmp_path / "chaos-standard-1.jsonl"), "standard").crash(
            phase
        )

    calm = run_log_counts(tmp_path / "none", "standard")["kills"]
    struck = run_log_counts(tmp_path, "standard")["kills"]

    assert calm == dict.fromkeys(KILL_PHASES, 0)
    assert struck == {phase: REPORTED.count(phase) for phase in KILL_PHASES}


def test_a_kind_that_strikes_after_the_handler_returned_strikes_in_both_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both loops (the SQS batches and the asynchronous attempts) hand the handler's return to the chaos
    (``InvocationChaos.on_return``), where ``after_complete`` strikes: a kind of that sort is added there alone."""
    monkeypatch.setattr(fault_model, "kill_self", lambda: None)
    log = tmp_path / "chaos.jsonl"
    for fate in (fault_model.AFTER_COMPLETE, fault_model.TIMEOUT, None):
        chaos = fault_model.InvocationChaos(ChaosConfig(), EventLog(log), "standard")
        chaos.fate = fate
        chaos.on_return()
    assert [line for line in log.read_text().splitlines() if '"kill"' in line] == [
        line for line in log.read_text().splitlines() if '"after_complete"' in line
    ]
    assert log.read_text().count('"after_complete"') == 1
    for module in ("batch_poller", "async_poller"):
        source = (REPO / "tools" / "effectively_once_local" / "runner" / f"{module}.py").read_text(encoding="utf-8")
        assert source.count("chaos.on_return()") == 1, module
        assert "AFTER_COMPLETE" not in source, module
