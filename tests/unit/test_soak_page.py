"""The soak table of docs/demo.md (issue 21): the committed page is what benchmarks/soak_page.py renders from the
committed benchmarks/soak-runs.json, and a soak's report fed through the script (as `make soak` does) becomes one more
run of the data file and one more column of the table, the earlier runs kept."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import load_benchmark

soak_page = load_benchmark("soak_page")
DATA: dict[str, Any] = json.loads(soak_page.DATA.read_text(encoding="utf-8"))
DEFERRED = (3, 4)
SPINNERS = "busy spinners beside the run (`SOAK_LOAD`)"


def _report() -> dict[str, Any]:
    """A small soak report: the demo's keys the script reads, every figure distinct."""
    return {
        "standard": {"deliveries": 700},
        "total": {
            "valid_payments": 200,
            "poison": 6,
            "poison_in_dlq": 5,
            "lost": 1,
            "double_charged": 2,
            "unexplained_replays": 3,
            "sent_never_delivered": 4,
            "deliveries": 1234,
            "charges": 198,
            "valid_dead_lettered": 9,
            "kills": {"after_charge": 11, "after_complete": 12, "timeout": 13, "deadline": 14},
        },
        "redrive": {"standard": {"charged_new_provider_calls": 1}, "fifo": {"charged_new_provider_calls": 2}},
        "run": {
            "payments_per_second": 12.345,
            "processing_seconds": 98.76,
            "load_average": {"min": 0.51, "mean": 1.26, "max": 2.04, "samples": 20, "cores": 2},
        },
        "verdict": {"exit_code": 1, "reasons": ["1 lost"]},
    }


@pytest.fixture
def copies(tmp_path: Path) -> dict[str, Path]:
    """The data file and the page copied into ``tmp_path``, a fake report, and a run folder with function logs."""
    data, page = tmp_path / "soak-runs.json", tmp_path / "demo.md"
    shutil.copy(soak_page.DATA, data)
    shutil.copy(soak_page.PAGE, page)
    report = tmp_path / "soak-report.json"
    report.write_text(json.dumps(_report()), encoding="utf-8")
    run_dir = tmp_path / "soak"
    run_dir.mkdir()
    lines = [json.dumps({"message": soak_page.MSG_RECORDS_DEFERRED, soak_page.FIELD_DEFERRED: n}) for n in DEFERRED]
    lines += [json.dumps({"message": "record processed"}), "Traceback (not JSON)"]
    (run_dir / "function-standard-123.log").write_text("\n".join(lines[:1] + lines[2:]) + "\n", encoding="utf-8")
    (run_dir / "function-fifo-456.log").write_text(lines[1] + "\n", encoding="utf-8")
    return {"data": data, "page": page, "report": report, "run_dir": run_dir}


def _feed(copies: dict[str, Path], started: float, *extra: str) -> int:
    return int(
        soak_page.main(
            [
                *("--report", str(copies["report"]), "--run-dir", str(copies["run_dir"])),
                *("--data", str(copies["data"]), "--page", str(copies["page"])),
                *("--started", str(started), "--commit", "abc1234", *extra),
            ]
        )
    )


def _row(page: str, label: str) -> list[str]:
    (line,) = [line for line in page.splitlines() if line.startswith(f"| {label} |")]
    return [cell.strip() for cell in line.strip("|").split("|")][1:]


def test_committed_page_is_what_the_script_renders_from_the_committed_runs() -> None:
    page = soak_page.PAGE.read_text(encoding="utf-8")

    assert page == soak_page.render_page(page, DATA), (
        "docs/demo.md's soak table is out of date or was edited by hand: run `python benchmarks/soak_page.py`"
    )
    assert len(DATA["runs"]) >= 6  # the runs of 2026-12-01, kept


def test_a_soak_report_becomes_the_last_run_and_the_last_column(copies: dict[str, Path]) -> None:
    report = _report()
    total, kills = report["total"], report["total"]["kills"]

    assert _feed(copies, time.time() - 125, "--note", "a test run", "--load", "3") == 0

    runs = json.loads(copies["data"].read_text(encoding="utf-8"))["runs"]
    assert runs[:-1] == DATA["runs"]
    new = runs[-1]
    assert (new["commit"], new["note"], new["exit_code"]) == ("abc1234", "a test run", report["verdict"]["exit_code"])
    assert new["records_deferred"] == sum(DEFERRED)
    assert new["soak_load"] == 3
    assert new["kills"] == kills and new["deliveries"] == total["deliveries"]
    assert new["redrive_charged_provider_calls"] == sum(
        row["charged_new_provider_calls"] for row in report["redrive"].values()
    )
    assert new["wall_seconds"] >= 125
    page = copies["page"].read_text(encoding="utf-8")
    assert f"| run {len(runs)} (abc1234) |" in page
    assert _row(page, "what changed")[-1] == "a test run"
    recorded = [str(run["soak_load"]) if run.get("soak_load") is not None else "n/a" for run in DATA["runs"]]
    assert "n/a" in recorded  # the runs before SOAK_LOAD
    assert _row(page, SPINNERS) == [*recorded, "3"]
    assert _row(page, "deliveries")[-1] == f"{total['deliveries']:,}"
    assert _row(page, "kills: real deadline")[-1] == str(kills["deadline"])
    chaos = _row(page, "kills: after the charge / after completion / stalls (the chaos)")[-1]
    assert chaos == f"{kills['after_charge']} / {kills['after_complete']} / {kills['timeout']}"
    load = report["run"]["load_average"]
    assert (
        _row(page, "load average, mean (min to max)")[-1]
        == f"{load['mean']:.1f} ({load['min']:.1f} to {load['max']:.1f})"
    )
    assert _row(page, "poison messages in a DLQ")[-1] == f"{total['poison_in_dlq']} of {total['poison']}"
    assert page == soak_page.render_page(soak_page.PAGE.read_text(encoding="utf-8"), {"runs": runs})


def test_the_same_report_fed_twice_is_one_run(copies: dict[str, Path]) -> None:
    started = time.time() - 10

    assert _feed(copies, started) == 0
    assert _feed(copies, started, "--note", "fed again") == 0

    runs = json.loads(copies["data"].read_text(encoding="utf-8"))["runs"]
    assert len(runs) == len(DATA["runs"]) + 1
    assert runs[-1]["note"] == "fed again"


def test_a_run_that_wrote_no_report_is_not_recorded(copies: dict[str, Path]) -> None:
    data, page = copies["data"].read_text(encoding="utf-8"), copies["page"].read_text(encoding="utf-8")

    assert _feed(copies, time.time() + 60) == 1  # the report is older than the run

    assert copies["data"].read_text(encoding="utf-8") == data
    assert copies["page"].read_text(encoding="utf-8") == page


def test_check_fails_when_the_page_differs_from_its_render(copies: dict[str, Path]) -> None:
    args = ["--data", str(copies["data"]), "--page", str(copies["page"]), "--check"]
    assert soak_page.main(args) == 0

    page = copies["page"].read_text(encoding="utf-8")
    copies["page"].write_text(page.replace("| deliveries |", "| deliveries (edited) |"), encoding="utf-8")

    assert soak_page.main(args) == 1


def test_a_run_without_load_records_0_spinners(copies: dict[str, Path]) -> None:
    assert _feed(copies, time.time() - 10) == 0  # `make soak` without SOAK_LOAD passes --load=0; by hand, no --load

    assert json.loads(copies["data"].read_text(encoding="utf-8"))["runs"][-1]["soak_load"] == 0
    assert _row(copies["page"].read_text(encoding="utf-8"), SPINNERS)[-1] == "0"


@pytest.mark.parametrize("value", ["two", "-1", ""])
def test_a_load_that_is_not_a_non_negative_integer_exits_2_and_records_nothing(
    copies: dict[str, Path], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = copies["data"].read_text(encoding="utf-8")

    with pytest.raises(SystemExit) as exited:
        _feed(copies, time.time() - 10, f"--load={value}")

    assert exited.value.code == 2
    assert f"SOAK_LOAD must be a non-negative integer (spinners), got {value!r}" in capsys.readouterr().err
    assert copies["data"].read_text(encoding="utf-8") == data
