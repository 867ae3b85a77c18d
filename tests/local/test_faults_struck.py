"""A run that exercised nothing says so (issue 43, item 2): per fault class, how many struck; each class asked for
that never struck named with its flag, apart from those nothing in the run gave a place to strike; and
``--require-faults`` turning the first kind into exit code 3, never the default. No AWS: reports built here."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.chaos.fault_classes import FAULT_CLASSES
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.cli import fault_flags
from effectively_once_local.cli.main import _parser
from effectively_once_local.proof.faults_struck import (
    EXIT_FAULTS_NOT_STRUCK,
    faults_block,
    render_faults,
    required,
    watched_writes,
)
from effectively_once_local.proof.key_check import KILL_KINDS, render

#: The chaos command's defaults, from its own parser given only its required arguments and built as the command
#: builds them (``cli/fault_flags.chaos_config``); docs/chaos.md's values are held to them in test_fault_classes.py.
DEFAULTS = fault_flags.chaos_config(
    _parser()[0].parse_args(
        ["chaos", "--app-dir", str(Path(__file__).parent), "--stack", "S", "--input", "in.jsonl", "--key", "k"]
    ),
    "chaos",
)


def _report(kills: dict[str, int] | None = None, sends: dict[str, int] | None = None, lines: int = 0) -> dict[str, Any]:
    return {
        "total": {"kills": {**dict.fromkeys(KILL_KINDS, 0), **(kills or {})}, "effect_log_lines": lines},
        "sends": {"by_kind": {"original": 200, **(sends or {})}},
    }


def test_a_run_with_no_kill_on_an_app_off_the_runtime_names_every_class_that_did_not_strike() -> None:
    """The issue's run: 200 keys, 23 invocations, 0 kills, on a handler with no effect line and writes watched."""
    block = faults_block(_report(sends={"resend": 19, "concurrent_duplicate": 11}), DEFAULTS, {"standard"}, writes=211)

    assert block["struck"]["resend"] == 19 and block["struck"]["concurrent_duplicate"] == 11
    assert (block["struck_total"], block["kills_struck"]) == (30, 0)
    assert [r["flag"] for r in block["not_struck"]] == [
        "--crash-after-write",
        "--crash-random",
        "--crash-after-complete",
        "--timeouts",
    ]
    could_not = {r["flag"]: r["why"] for r in block["could_not_strike"]}
    assert could_not == {
        "--crash-after-effect": "no effect line in the run: the handler declares no effect of the runtime",
        "--async-duplicate": "no asynchronous target",
    }
    text = "\n".join(render_faults(block))
    assert "faults struck: 30 (" in text and "0 kills in all" in text
    assert "not struck: --crash-after-write 0.05: kills after a write the local AWS accepted" in text
    assert "could not strike: --crash-after-effect 0.03: no effect line in the run" in text
    assert "--crash-after-write kills after any handler's writes" in text, "the flag that would strike"


@pytest.mark.parametrize(
    "kinds, writes, lines, could_not",
    [
        ({"fifo"}, 5, 3, {"--concurrent-duplicates", "--async-duplicate"}),
        ({"fifo", "async"}, 5, 3, set()),
        ({"standard"}, 0, 0, {"--crash-after-effect", "--crash-after-write", "--timeouts", "--async-duplicate"}),
        ({"standard"}, 1, 0, {"--crash-after-effect", "--async-duplicate"}),
    ],
)
def test_a_class_with_no_place_to_strike_is_told_apart(
    kinds: set[str], writes: int, lines: int, could_not: set[str]
) -> None:
    block = faults_block(_report(lines=lines), DEFAULTS, kinds, writes)

    assert {r["flag"] for r in block["could_not_strike"]} == could_not
    asked = {c.flag for c in FAULT_CLASSES if asdict(DEFAULTS)[c.field] > 0}
    assert {r["flag"] for r in block["not_struck"]} | could_not == asked, "nothing struck"


def test_a_class_not_asked_for_or_that_struck_is_never_named() -> None:
    chaos = ChaosConfig(crash_after_write=0.5)
    block = faults_block(_report(kills={"after_write": 3, "deadline": 1}), chaos, {"standard"}, writes=9)

    assert block["not_struck"] == [] and block["could_not_strike"] == []
    assert block["kills_struck"] == 4, "the watchdog's deadline kills count among the kills"
    assert block["asked"]["after_write"] == 0.5 and block["asked"]["resend"] == 0.0


def test_require_faults_fails_only_a_passing_run_with_a_class_that_could_strike_and_did_not() -> None:
    missed = faults_block(_report(sends={"resend": 1, "concurrent_duplicate": 1}), DEFAULTS, {"standard"}, 9)
    only_inert = faults_block(
        _report(
            kills={"after_write": 1, "random_moment": 1, "after_complete": 1, "timeout": 1},
            sends={"resend": 1, "concurrent_duplicate": 1},
        ),
        DEFAULTS,
        {"standard"},
        9,
    )

    code, reasons = required((0, []), missed, True)
    assert code == EXIT_FAULTS_NOT_STRUCK == 3
    assert reasons == [
        "--require-faults: 4 fault classes asked for could strike and never did (--crash-after-write 0.05, "
        "--crash-random 0.02, --crash-after-complete 0.03, --timeouts 0.02)"
    ]
    assert required((0, []), missed, False) == (0, []), "the default exit code never depends on what struck"
    assert required((1, ["2 keys lost"]), missed, True) == (1, ["2 keys lost"]), "a finding wins"
    assert required((0, []), only_inert, True) == (0, []), "a class with no place to strike is named, not failed"


def test_watched_writes_are_the_kill_points_of_the_chaos_logs(tmp_path: Path) -> None:
    rows = [
        {"event": "write", "role": "effect"},
        {"event": "write", "role": "dead_letter"},
        {"event": "write", "role": "idempotency_record"},
        {"event": "kill", "phase": "after_write"},
    ]
    (tmp_path / "chaos-orders-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    assert watched_writes(tmp_path) == 2


def test_the_report_shows_the_faults_lines() -> None:
    from effectively_once_local.proof import key_check

    report = key_check.build(
        sent={"a": 1},  # type: ignore[arg-type]
        invalid_lines=0,
        messages_sent=1,
        dlq_keys=set(),
        dead_lettered=0,
        log_counts={"a": 1},  # type: ignore[arg-type]
        store_counts=None,
        kill_records=[],
        effect_takes_key=False,
    )
    report["faults"] = faults_block(report, ChaosConfig(crash_after_write=0.2), {"standard"}, 1)

    assert "not struck: --crash-after-write 0.2" in render(report)


def test_the_page_has_a_table_of_the_faults_struck(tmp_path: Path) -> None:
    from effectively_once_local.report.page import RunClock, write_page

    report = _report(kills={"after_write": 3})
    report["faults"] = faults_block(report, DEFAULTS, {"standard"}, 9)

    page = write_page(tmp_path / "c.html", report, [], clock=RunClock(started=100.0), title="c").read_text()

    assert "Faults struck" in page and 'data-faults="after_write">3<' in page
