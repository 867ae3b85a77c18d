"""The report's committed shape (``report/report_shape.json``, ``report/report_shape.py``): recorded reports of a
chaos run and of the demo are of it, a report that drifts (a key added, left out, mistyped or moved) is refused, the
one function that assembles a report writes it in the committed order, and every test session holds the reports it
produces to the shape (``tests/conftest.py``)."""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.report.report_shape import (
    CHAOS,
    CHECK_ENV,
    DEMO,
    ReportShapeError,
    assemble,
    hold,
    problems,
    shape_of,
)

RECORDED = Path(__file__).parent / "recorded"
#: Reports of real runs (tests/e2e: the asynchronous leg's stack alone, and the payments demo's safe run).
REPORTS = {CHAOS: RECORDED / "chaos-report.json", DEMO: RECORDED / "demo-report.json"}


def _recorded(kind: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(REPORTS[kind].read_text(encoding="utf-8"))
    return report


@pytest.mark.parametrize("kind", [CHAOS, DEMO])
def test_a_recorded_report_is_of_its_committed_shape(kind: str) -> None:
    report = _recorded(kind)

    assert problems(report, shape_of(kind)) == []
    hold(report, kind)


def test_the_shape_names_every_section_in_the_recorded_order() -> None:
    assert [name.removesuffix("?") for name in shape_of(CHAOS)] == list(_recorded(CHAOS))
    assert [name.removesuffix("?") for name in shape_of(DEMO)] == list(_recorded(DEMO))


def _drifted(kind: str, change: str) -> dict[str, Any]:
    """The recorded report with one drift: a key added to ``total``, one left out, a value of another type, two
    sections swapped, a per-key row with an unknown key."""
    report = copy.deepcopy(_recorded(kind))
    if change == "added":
        report["total"]["new_count"] = 1
    elif change == "missing":
        del report["total"]["lost"]
    elif change == "mistyped":
        report["total"]["lost"] = "0"
    elif change == "moved":
        names = list(report)
        names[0], names[1] = names[1], names[0]
        report = {name: report[name] for name in names}
    elif change == "row":
        row = next(iter(report["states"]["per_key"].values()))
        row["colour"] = "red"
    return report


@pytest.mark.parametrize(
    ("kind", "change", "said"),
    [
        (CHAOS, "added", "report.total.new_count: not in the shape"),
        (CHAOS, "missing", "report.total.lost: missing"),
        (CHAOS, "mistyped", 'report.total.lost: "0" is not int'),
        (CHAOS, "moved", "report: keys in the order ['effects_counted_from', 'total'"),
        (CHAOS, "row", ".colour: not in the shape"),
        (DEMO, "added", "report.total.new_count: not in the shape"),
        (DEMO, "missing", "report.total.lost: missing"),
        (DEMO, "mistyped", 'report.total.lost: "0" is not int'),
    ],
)
def test_a_report_that_drifts_is_refused(kind: str, change: str, said: str) -> None:
    report = _drifted(kind, change)

    with pytest.raises(ReportShapeError) as refused:
        hold(report, kind)

    assert said in str(refused.value)
    assert any(said in p for p in problems(report, shape_of(kind)))


def test_a_bool_is_not_a_count_and_null_only_where_the_shape_allows_it() -> None:
    report = _recorded(CHAOS)
    report["total"]["lost"] = False
    report["effects_lower_bound"] = None
    report["async"] = None  # the shape allows it: a run without an asynchronous target

    assert problems(report, shape_of(CHAOS)) == [
        "report.total.lost: false is not int",
        "report.effects_lower_bound: null is not bool",
    ]


def test_assemble_writes_the_sections_in_the_committed_order_byte_for_byte() -> None:
    recorded = _recorded(CHAOS)
    sections = list(recorded.items())
    random.Random(7).shuffle(sections)

    report = assemble(CHAOS, dict(sections))

    assert json.dumps(report, indent=2) == json.dumps(recorded, indent=2)


def test_assemble_leaves_out_an_optional_section_given_as_none() -> None:
    recorded = _recorded(DEMO)
    sections = {**recorded, "redrive": None, "async": None}

    report = assemble(DEMO, sections)

    assert "redrive" not in report and "async" not in report
    assert list(report) == [name for name in recorded if name not in ("redrive", "async")]


def test_assemble_keeps_a_required_section_that_is_null() -> None:
    report = assemble(CHAOS, {**_recorded(CHAOS), "async": None})

    assert "async" in report and report["async"] is None


def test_assemble_refuses_a_section_the_shape_does_not_name_or_a_missing_one() -> None:
    recorded = _recorded(CHAOS)

    with pytest.raises(ReportShapeError, match=r"not in the shape \['colour'\], missing \[\]"):
        assemble(CHAOS, {**recorded, "colour": "red"})
    with pytest.raises(ReportShapeError, match=r"not in the shape \[\], missing \['verdict'\]"):
        assemble(CHAOS, {k: v for k, v in recorded.items() if k != "verdict"})


def test_assemble_holds_the_whole_report_under_the_check_and_not_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    drifted = _drifted(CHAOS, "mistyped")

    monkeypatch.setenv(CHECK_ENV, "check")
    with pytest.raises(ReportShapeError, match=r'report\.total\.lost: "0" is not int'):
        assemble(CHAOS, drifted)
    monkeypatch.delenv(CHECK_ENV)
    assert assemble(CHAOS, drifted)["total"]["lost"] == "0"


def test_every_test_session_holds_the_reports_it_produces_to_the_shape() -> None:
    from tests.conftest import REPORT_SHAPE_ENV

    assert REPORT_SHAPE_ENV == CHECK_ENV
    assert os.environ.get(CHECK_ENV) == "check"


def test_the_shape_language_refuses_an_unknown_type() -> None:
    with pytest.raises(ValueError, match="unknown type"):
        problems(1, "integer")


def test_a_failing_keys_evidence_as_the_run_builds_it_is_of_the_shape() -> None:
    """A failing key's evidence (``line_states._evidence``) as the run holds it before writing: its sends a list of
    (kind, count) tuples, which the JSON report writes as lists. The recorded passing run has none; the first make
    proof under the check refused 15 failing runs' reports on these tuples."""
    from effectively_once_local.proof.line_states import _evidence

    report = _recorded(CHAOS)
    sent = [{"key": "k-1", "kind": "original", "message_id": "m-1"}, {"key": "k-1", "kind": "resend"}]
    report["states"]["evidence"]["k-1"] = _evidence("k-1", [], sent, [], [])

    assert report["states"]["evidence"]["k-1"]["sends"] == [("original", 1), ("resend", 1)]
    assert problems(report, shape_of(CHAOS)) == []
    report["states"]["evidence"]["k-1"]["sends"] = [("original", 1.5)]
    assert problems(report, shape_of(CHAOS)) == ["report.states.evidence.k-1.sends[0][1]: 1.5 is not str|int"]
