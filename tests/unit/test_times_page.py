"""The elapsed times the pages state come from recorded runs (issue 34, item 4): the generated sections of
docs/tests.md and docs/walkthrough.md are what ``benchmarks/times.py`` renders from the committed
``benchmarks/times.json``, every recorded run names its machine and load, and the times stated by hand before are
gone."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from .helpers import REPO, load_benchmark

times = load_benchmark("times")


def test_the_pages_show_what_times_json_holds() -> None:
    rendered = times.render_pages(times.load())

    assert set(rendered) == {"docs/tests.md", "docs/walkthrough.md"}
    for page, text in rendered.items():
        assert (REPO / page).read_text(encoding="utf-8") == text, f"{page}: run `python benchmarks/times.py`"


def test_every_recorded_run_names_its_machine_and_load() -> None:
    data = times.load()

    assert set(data) <= set(times.MEASURES)
    for measure, runs in data.items():
        assert 0 < len(runs) <= times.KEEP, measure
        for run in runs:
            assert set(run) == {"seconds", "date", "commit", "cores", "memory_gib", "load"}, measure
            assert run["seconds"] > 0 and run["cores"] >= 1 and run["load"] >= 0, (measure, run)
            dt.date.fromisoformat(run["date"])


@pytest.mark.parametrize(
    "phrase",
    ["About 40 seconds", "25 of them the deploy", "14 min 22 s", "9 min 23 s", "5 to 6 minutes", "instead of 7"],
)
def test_no_page_keeps_a_time_stated_by_hand(phrase: str) -> None:
    pages = [REPO / "README.md", *(REPO / "docs").glob("*.md")]

    assert [p.name for p in pages if phrase in p.read_text(encoding="utf-8")] == []


def test_record_keeps_the_latest_runs_of_a_known_measure(tmp_path: Path) -> None:
    path = tmp_path / "times.json"
    for seconds in range(1, times.KEEP + 3):
        times.record("make proof", float(seconds), path=path, now=dt.datetime(2026, 12, 5, tzinfo=dt.UTC))

    runs = json.loads(path.read_text())["measures"]["make proof"]
    assert [r["seconds"] for r in runs] == [float(s) for s in range(3, times.KEEP + 3)]
    assert runs[0]["date"] == "2026-12-05" and runs[0]["cores"] >= 1
    with pytest.raises(KeyError, match="not a measure"):
        times.record("make tset", 1.0, path=path)


def _run(seconds: float, load: float, date: str = "2026-12-05") -> dict[str, object]:
    return {"seconds": seconds, "date": date, "commit": "abc1234", "cores": 2, "memory_gib": 23, "load": load}


def test_a_range_with_its_machines_and_load() -> None:
    runs = [_run(35.2, 0.4), _run(48.0, 2.1, "2026-12-06"), _run(61.0, 1.0)]

    assert times.span(runs) == "35 s to 1 min 1 s"
    assert times.machines(runs) == (
        "3 runs, 2026-12-05 to 2026-12-06, 2 cores and 23 GiB, 1-minute load 0.4 to 2.1 at the end (median 1.0)"
    )
    assert times.stated({"make test": runs[:1]}, "make test") == (
        "35 s (1 run, 2026-12-05, 2 cores and 23 GiB, 1-minute load 0.4 at the end)"
    )
    assert times.stated({}, "make test") == "not measured yet"
    assert times.duration(600) == "10 min"
