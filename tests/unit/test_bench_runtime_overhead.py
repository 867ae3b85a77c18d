"""The runtime-overhead bench row (issue 20): its measuring code on a tiny scale (the shape of the result, never
its value: no test asserts a time), its table row, and ``run.py --only`` updating one row of the report and of
``benchmarks/measured.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .helpers import load_benchmark

runtime_overhead = load_benchmark("runtime_overhead")
render = load_benchmark("render")
run = load_benchmark("run")
SIDES = {"runtime", "bare", "bare_silent"}


def test_measures_every_side_in_each_round_and_reports_the_median_ratio_with_its_target() -> None:
    result = runtime_overhead.measure(rounds=1, batches=2, batch_size=2)

    assert isinstance(result["runtime_overhead_ratio"], float) and result["runtime_overhead_ratio"] > 0
    assert result["runtime_overhead_ratio_target"] == 1.10
    assert isinstance(result["runtime_overhead_ratio_target_met"], bool)
    assert len(result["runtime_overhead_round_ratios"]) == 1
    assert len(result["runtime_overhead_round_ratios_vs_silent"]) == 1
    assert set(result["runtime_overhead_cpu_seconds"]) == SIDES
    assert all(len(v) == 1 and v[0] > 0 for v in result["runtime_overhead_cpu_seconds"].values())
    assert set(result["runtime_overhead_cpu_ms_per_record"]) == SIDES
    assert result["runtime_overhead_setup"]["batches_per_side_per_round"] == 2
    assert result["runtime_overhead_setup"]["records_per_batch"] == 2


def test_table_shows_the_ratio_its_target_whether_it_is_met_and_the_rounds() -> None:
    text = render.table(
        {
            "runtime_overhead_ratio": 1.1234,
            "runtime_overhead_ratio_target_met": False,
            "runtime_overhead_round_ratios": [1.1, 1.2],
            "runtime_overhead_cpu_ms_per_record": {"runtime": 6.5, "bare": 5.9},
        }
    )

    assert "| 1.123 (not met) | <= 1.10 |" in text
    assert "Runtime overhead rounds (runtime / bare): 1.100, 1.200; CPU ms per record: runtime 6.50, bare 5.90" in text


def test_only_updates_its_row_in_the_last_report_and_its_table_figures_in_the_measured_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "reports" / "bench.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"synth_ratio": 1.05, "runtime_overhead_ratio": 1.5}), encoding="utf-8")
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({"batch_size": 10, "runtime_overhead_ratio": 1.5}), encoding="utf-8")
    monkeypatch.setattr(run, "REPORT", report)
    monkeypatch.setattr(run, "MEASURED", measured)
    row = {
        "runtime_overhead_ratio": 1.02,
        "runtime_overhead_ratio_target_met": True,
        "runtime_overhead_cpu_seconds": {"runtime": [0.5]},  # reported, not on the page
    }

    def fake(_: Path) -> dict[str, Any]:
        return dict(row)

    monkeypatch.setitem(run.ONLY, "runtime-overhead", ("measuring ...", fake))

    assert run.main(["--only", "runtime-overhead"]) == 0

    assert json.loads(report.read_text(encoding="utf-8")) == {"synth_ratio": 1.05, **row}
    assert json.loads(measured.read_text(encoding="utf-8")) == {
        "batch_size": 10,
        "runtime_overhead_ratio": row["runtime_overhead_ratio"],
        "runtime_overhead_ratio_target_met": row["runtime_overhead_ratio_target_met"],
    }
