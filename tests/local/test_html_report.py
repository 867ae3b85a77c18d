"""The run's picture (``report/page.py``): one offline HTML page beside the JSON report, built from the report and
the run's timed events; the run logs it reads carry wall-clock timestamps."""

from __future__ import annotations

import html
import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from effectively_once_local.chaos import fault_model as chaos_module
from effectively_once_local.chaos.fault_model import AFTER_CHARGE, ChaosConfig, EventLog, InvocationChaos
from effectively_once_local.payments.payments_view import ChaosGateway
from effectively_once_local.report.page import (
    LATER,
    RunClock,
    TimedEvent,
    conclude,
    page_path,
    read_events,
    write_page,
)
from effectively_once_runtime import names

T0 = 1_800_000_000.0


def _demo_report() -> dict[str, Any]:
    row = {"payments": 5, "valid_payments": 4, "charges": 4, "deliveries": 7, "duplicates_suppressed": 2}
    return {
        "fifo": dict(row),
        "standard": {**row, "charges": 5, "valid_payments": 5, "deliveries": 9},
        "total": {
            "payments": 10,
            "valid_payments": 9,
            "charges": 9,
            "deliveries": 16,
            "duplicates_suppressed": 4,
            "dead_lettered": 1,
            "lost": 0,
            "double_charged": 0,
            "kills": {"after_charge": 2, "after_complete": 1, "timeout": 0, "deadline": 0},
        },
        "per_key": {"total": {"messages_sent": 12, "effects": 9, "lost": 0, "kills": {"after_effect": 0}}},
        "run": {"seconds": 30.5, "messages_sent": 12},
        "verdict": {"exit_code": 0, "reasons": []},
    }


def _events() -> list[TimedEvent]:
    out = [TimedEvent(T0 + 1 + i / 10, "sent", "standard") for i in range(6)]
    out += [TimedEvent(T0 + 2 + i, "delivery", "fifo") for i in range(4)]
    out += [TimedEvent(T0 + 3, "charge", "fifo"), TimedEvent(T0 + 4, "duplicate_suppressed", "standard", count=2)]
    out += [TimedEvent(T0 + 5, "kill", "fifo", "after_charge"), TimedEvent(T0 + 6, "dlq_arrival", "standard")]
    return out


def _totals_in(page: str, table: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(rf'data-{table}="([\w.]+)">(-?\d+)<', page)}


def _flat(total: dict[str, Any]) -> dict[str, int]:
    out = {}
    for key, value in total.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": int(v) for k, v in value.items()})
        elif isinstance(value, int):
            out[key] = value
    return out


def test_page_is_written_self_contained_and_holds_the_reports_totals(tmp_path: Path) -> None:
    report = _demo_report()
    path = write_page(tmp_path / "report.html", report, _events(), clock=RunClock(started=T0), title="demo")

    page = path.read_text(encoding="utf-8")
    assert path == tmp_path / "report.html"
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page must open offline"
    assert "<link" not in page and "<script" not in page
    assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', page)
    assert _totals_in(page, "total") == _flat(report["total"])
    assert _totals_in(page, "per-key-total") == _flat(report["per_key"]["total"])
    # the report's per-queue figures, one column per queue
    assert re.search(r'data-queue="fifo" data-key="deliveries">7<', page)
    assert re.search(r'data-queue="standard" data-key="charges">5<', page)


def test_page_of_a_report_without_queue_rows_counts_its_events_per_queue(tmp_path: Path) -> None:
    # The general chaos report has totals only: the per-queue table comes from the timed events.
    report = {
        "total": {"messages_sent": 6, "effects": 1, "kills": {"after_effect": 1}},
        "effects_counted_from": "store",
        "keys": {"lost": [], "duplicated": []},
        "cross_check": {"store_items_without_log_line": 0, "log_keys_without_store_item": 0},
        "run": {"seconds": 9.0},
    }
    path = write_page(tmp_path / "chaos.html", report, _events(), clock=RunClock(started=T0), title="chaos")

    page = path.read_text(encoding="utf-8")
    assert "Per queue (the report's)" not in page and 'data-queue="cross_check"' not in page
    assert _totals_in(page, "total") == _flat(report["total"])
    assert re.search(r'data-queue="standard" data-key="sent">6<', page)
    assert re.search(r'data-queue="fifo" data-key="delivery">4<', page)
    assert re.search(r'data-queue="standard" data-key="duplicate_suppressed">2<', page)


def test_events_after_the_report_was_taken_get_a_column_of_their_own(tmp_path: Path) -> None:
    # The demo's outage backlog runs after its report: the per-queue counts stop where the report's figures do.
    clock = RunClock(started=T0, report_at=T0 + 3.5)
    page = write_page(tmp_path / "r.html", _demo_report(), _events(), clock=clock, title="demo").read_text("utf-8")

    assert re.search(r'data-queue="fifo" data-key="delivery">2<', page)  # at T0+2 and T0+3
    assert re.search(rf'data-queue="{LATER}" data-key="delivery">2<', page)
    assert re.search(rf'data-queue="{LATER}" data-key="kill">1<', page)
    assert "DLQ arrivals timed up to the report: 0 runtime sends" in page


def test_page_of_a_run_with_no_events_still_shows_its_totals(tmp_path: Path) -> None:
    report = {"total": {"messages_sent": 0, "effects": 0}}
    page = write_page(tmp_path / "empty.html", report, [], clock=RunClock(started=T0), title="empty").read_text(
        encoding="utf-8"
    )

    assert _totals_in(page, "total") == {"messages_sent": 0, "effects": 0}


def test_event_log_lines_carry_a_wall_clock_timestamp(tmp_path: Path) -> None:
    before = time.time()
    EventLog(tmp_path / "deliveries-standard-1.jsonl").write(message_id="m1", receive_count=1)
    after = time.time()

    line = json.loads((tmp_path / "deliveries-standard-1.jsonl").read_text())
    assert line["message_id"] == "m1" and line["receive_count"] == 1
    assert before <= line["ts"] <= after


def test_provider_and_kill_log_lines_carry_timestamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chaos_module, "kill_self", lambda: None)
    chaos = InvocationChaos(ChaosConfig(), EventLog(tmp_path / "chaos-standard-1.jsonl"), "standard")
    chaos.begin(time.monotonic() + 5)
    chaos.fate = AFTER_CHARGE
    inner = SimpleNamespace(charge=lambda p, idempotency_key=None: SimpleNamespace(charge_id="c1", replayed=False))
    ChaosGateway(inner, chaos, EventLog(tmp_path / "provider-standard-1.jsonl")).charge(
        SimpleNamespace(payment_id="p1"), idempotency_key="p1"
    )

    provider = [json.loads(ln) for ln in (tmp_path / "provider-standard-1.jsonl").read_text().splitlines()]
    kill = json.loads((tmp_path / "chaos-standard-1.jsonl").read_text().splitlines()[-1])  # after its invocation
    assert [p["event"] for p in provider] == ["call", "result"]
    assert all(isinstance(p["ts"], float) for p in provider)
    assert kill["event"] == "kill" and kill["phase"] == AFTER_CHARGE and isinstance(kill["ts"], float)


def _function_line(path: Path, doc: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(doc) + "\n")


def test_events_are_read_from_the_run_logs(tmp_path: Path) -> None:
    EventLog(tmp_path / "deliveries-fifo-1.jsonl").write(message_id="m1", receive_count=1)
    EventLog(tmp_path / "deliveries-fifo-1.jsonl").write(message_id="m1", receive_count=2)
    (tmp_path / "deliveries-fifo-2.jsonl").write_text('{"message_id":"old","receive_count":1}\n')  # no ts: skipped
    provider = EventLog(tmp_path / "provider-standard-3.jsonl")
    provider.write(event="call", payment_id="p1")
    provider.write(event="result", payment_id="p1", charge_id="p1", replayed=False)
    provider.write(event="result", payment_id="p1", charge_id="p1", replayed=True)  # answered, not charged
    EventLog(tmp_path / "chaos-standard-3.jsonl").write(event="kill", phase="timeout")
    log = tmp_path / "function-standard-3.log"
    _function_line(log, {"message": names.EFFECT_EXECUTED, "timestamp": "2027-01-15 08:00:01,250+0000"})
    _function_line(log, {"message": names.MSG_RECORD_DEAD_LETTERED, "timestamp": "2027-01-15 08:00:02,500+0000"})
    _function_line(log, {"_aws": {"Timestamp": 1_800_000_003_000}, names.METRIC_DUPLICATES_SUPPRESSED: [1.0, 1.0]})
    (log.parent / "function-fifo-1.log").write_text("Traceback (most recent call last):\n")

    events = read_events(tmp_path)

    kinds = {(e.kind, e.queue): 0 for e in events}
    for e in events:
        kinds[(e.kind, e.queue)] += e.count
    assert kinds == {
        ("delivery", "fifo"): 2,
        ("charge", "standard"): 1,
        ("effect", "standard"): 1,
        ("kill", "standard"): 1,
        ("dlq_arrival", "standard"): 1,
        ("duplicate_suppressed", "standard"): 2,
    }
    assert next(e for e in events if e.kind == "kill").detail == "timeout"
    effect = next(e for e in events if e.kind == "effect")
    assert effect.t == pytest.approx(datetime(2027, 1, 15, 8, 0, 1, 250000, tzinfo=UTC).timestamp())
    assert next(e for e in events if e.kind == "duplicate_suppressed").t == pytest.approx(1_800_000_003.0)


def test_run_clock_times_each_batch_per_queue_and_the_marks() -> None:
    shown: list[int] = []
    clock = RunClock()
    clock.progress("fifo", shown.append)(3)
    clock.mark("polling starts")
    clock.progress("standard", shown.append)(2)

    assert shown == [3, 2]
    assert [(e.kind, e.queue, e.count) for e in clock.events] == [("sent", "fifo", 3), ("sent", "standard", 2)]
    assert clock.started <= clock.events[0].t <= clock.marks[0][0] <= clock.events[1].t <= time.time()
    assert clock.marks[0][1] == "polling starts"


def test_conclude_shows_the_report_then_writes_json_and_page(tmp_path: Path) -> None:
    shown: list[str] = []
    report = _demo_report()
    conclude(
        report,
        text="the table",
        reasons=["2 payments lost"],
        fail_prefix="FAIL: ",
        ok_line=None,
        report_path=tmp_path / "out" / "r.json",
        events=_events(),
        clock=RunClock(started=T0),
        title="demo",
        log=shown.append,
    )

    assert json.loads((tmp_path / "out" / "r.json").read_text()) == report
    page = page_path(tmp_path / "out" / "r.json")
    assert page == tmp_path / "out" / "r.html" and page.is_file()
    assert shown[1:3] == ["the table", ""]
    assert "FAIL: 2 payments lost" in shown
    assert shown[-2:] == [f"report written to {tmp_path / 'out' / 'r.json'}", f"page: {page.resolve().as_uri()}"]
    assert "<p>FAIL: 2 payments lost</p>" in page.read_text(encoding="utf-8")


def test_the_page_never_takes_the_json_reports_own_path() -> None:
    assert page_path(Path("reports/demo-report.json")) == Path("reports/demo-report.html")
    assert page_path(Path("out/report")) == Path("out/report.html")
    assert page_path(Path("out/report.html")) == Path("out/report.html.html")


def test_conclude_prints_the_ok_line_when_given(tmp_path: Path) -> None:
    shown: list[str] = []
    conclude(
        {"total": {"effects": 1}},
        text="t",
        reasons=[],
        fail_prefix="FAIL: ",
        ok_line="OK: 1 effect",
        report_path=tmp_path / "r.json",
        events=[],
        clock=RunClock(started=T0),
        title="chaos",
        log=shown.append,
    )

    assert "OK: 1 effect" in shown and not any(s.startswith("FAIL") for s in shown)


def test_each_mark_is_labelled_beside_its_own_line_even_when_marks_are_close() -> None:
    # The demo's last two marks ("report", "outage backlog") fall within a second of each other near the right edge.
    from effectively_once_local.report.chart import chart

    marks = [(T0 + 2, "deployed: sending"), (T0 + 2.3, "polling"), (T0 + 59, "report"), (T0 + 59.4, "outage backlog")]
    fig = chart(_events() + [TimedEvent(T0 + 60, "delivery", "fifo")], T0, marks)
    fig.canvas.draw()
    flow = fig.axes[0]
    zero = T0 + 1  # the first send
    labels = {t.get_text(): t.get_window_extent() for t in flow.texts if t.get_text() in {m for _, m in marks}}
    lines = {text: flow.transData.transform((t - zero, 0))[0] for t, text in marks}

    assert set(labels) == set(lines)
    for text, box in labels.items():
        own = lines[text]
        assert min(abs(box.x0 - own), abs(box.x1 - own)) < 6, f"{text!r} is not beside its line"
        crossed = [other for other, x in lines.items() if other != text and box.x0 < x < box.x1]
        assert crossed == [], f"{text!r} sits across the line of {crossed}"
        for other, other_box in labels.items():
            assert other == text or not box.overlaps(other_box), f"{text!r} overlaps {other!r}"


def test_page_says_where_the_timed_counts_come_from_and_why_they_may_be_lower(tmp_path: Path) -> None:
    # A kill between a provider call and its result line leaves a ledger charge without a timed result.
    page = write_page(tmp_path / "r.html", _demo_report(), _events(), clock=RunClock(started=T0), title="demo")
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.read_text("utf-8"))).split())

    assert "charges: the provider's result lines" in text
    assert "timed charges: 1, the report's (ledger items): 9" in text
    assert "A kill between a provider call and its result line" in text


def test_a_report_named_html_keeps_its_json_and_gets_its_page_beside_it(tmp_path: Path) -> None:
    report = {"total": {"effects": 1}}

    page = conclude(
        report,
        text="t",
        reasons=[],
        fail_prefix="FAIL: ",
        ok_line=None,
        report_path=tmp_path / "r.html",
        events=[],
        clock=RunClock(started=T0),
        title="chaos",
        log=lambda _: None,
    )

    assert page == tmp_path / "r.html.html" and "<!doctype html>" in page.read_text("utf-8")
    assert json.loads((tmp_path / "r.html").read_text("utf-8")) == report


def test_page_of_a_chaos_report_shows_every_lines_state_the_findings_and_the_dlqs(tmp_path: Path) -> None:
    report = {
        "total": {"messages_sent": 3, "stranded": 1},
        "states": {
            "counts": {"effected_once": 1, "stranded": 1, "vanished": 1},
            "keys": {"stranded": ["o-7"], "redriven_then_effected": []},
            "invalid_lines": [{"line": 3, "state": "vanished"}],
            "evidence": {"o-7": {"deliveries": 2, "dlq": [{"dlq": "orders-dlq", "moved_by": "sqs"}]}},
        },
        "dlq": {"orders-dlq": {"messages": 1, "why": {"maxReceiveCount": 1}, "keys": ["o-7"]}},
        "sends": {"by_kind": {"original": 3}},
        "run": {"seconds": 4.0},
    }

    page = write_page(tmp_path / "chaos.html", report, _events(), clock=RunClock(started=T0), title="chaos").read_text()

    assert re.search(r'data-key="state-stranded">1<', page)
    assert "<td>o-7</td>" in page and "1 moved by the redrive policy" in page and "line 3" in page
    assert "What the producer sent" in page and 'data-queue="dlq"' not in page, "blocks are not queue columns"


def test_page_lists_the_keys_sqs_dead_lettered_that_the_runs_faults_explain(tmp_path: Path) -> None:
    # Issue 55, item 4b: the app's own are in the verdict; the others are listed, not failing.
    report = {
        "total": {"messages_sent": 2},
        "dead_lettered_without_reason": [
            {"key": "o-1", "messages": 2, "dlqs": ["orders-dlq"], "cause": "faults"},
            {"key": "o-2", "messages": 1, "dlqs": ["orders-dlq"], "cause": "app"},
        ],
        "run": {"seconds": 4.0},
    }

    page = write_page(tmp_path / "chaos.html", report, _events(), clock=RunClock(started=T0), title="chaos").read_text()

    assert "Listed, not failing" in page and "<td>o-1</td>" in page and "cause: faults" in page
    assert "<td>o-2</td>" not in page


# --- run pages that add up (issue 34, item 5) -------------------------------------------------------------------


def _legend(fig: Any) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def _run_events() -> list[TimedEvent]:
    """A run that starts 90 s before its first send (the deploy), with an asynchronous leg and events after the
    report (the outage backlog)."""
    out = [TimedEvent(T0 + 90 + i, "sent", "standard", count=2) for i in range(5)]
    out += [TimedEvent(T0 + 91 + i, "delivery", "standard") for i in range(6)]
    out += [TimedEvent(T0 + 92 + i, "delivery", "async-Fn") for i in range(3)]
    out += [TimedEvent(T0 + 93, "duplicate_suppressed", "standard", count=4)]
    out += [TimedEvent(T0 + 94, "duplicate_suppressed", "async-Fn", count=1)]
    out += [
        TimedEvent(T0 + 95, "kill", "standard", "after_complete"),
        TimedEvent(T0 + 96, "kill", "async-Fn", "timeout"),
    ]
    out += [TimedEvent(T0 + 130, "delivery", "standard"), TimedEvent(T0 + 131, "duplicate_suppressed", "fifo")]
    return out


def test_the_time_axis_starts_at_the_first_send_and_the_deploy_is_one_labelled_bar() -> None:
    from effectively_once_local.report.chart import chart, origin

    events = _run_events()
    fig = chart(events, T0, [(T0 + 60, "deployed: sending"), (T0 + 120, "report")], report_at=T0 + 120)
    flow = fig.axes[0]
    texts = [t.get_text() for t in flow.texts]

    assert origin(events, T0) == T0 + 90
    assert min(min(line.get_xdata()) for line in flow.lines if line.get_label().startswith("messages sent")) == 0
    assert "start-up and deploy: 90 s (not to scale)" in texts
    assert "deployed: sending" not in texts, "a mark before the first send is inside the deploy's bar"
    left, right = flow.get_xlim()
    assert -0.1 * (right - left) < left < 0, "the bar is a sliver left of zero, not 90 s of the axis"
    assert fig.axes[2].get_xlabel() == "seconds since the first send"


def test_every_chart_figure_is_the_timed_tables_figure_of_the_same_name(tmp_path: Path) -> None:
    from effectively_once_local.report.chart import KINDS, chart

    events = _run_events()
    clock = RunClock(started=T0, report_at=T0 + 120)
    page = write_page(tmp_path / "r.html", _demo_report(), events, clock=clock, title="demo").read_text()
    legend = _legend(chart(events, T0, [], report_at=T0 + 120))
    table = {
        k: int(v) for k, v in re.findall(r'data-queue="all \(the chart&#x27;s figures\)" data-key="(\w+)">(\d+)<', page)
    }
    later = {k: int(v) for k, v in re.findall(rf'data-queue="{LATER}" data-key="(\w+)">(\d+)<', page)}
    per_queue = {(q, k): int(v) for q, k, v in re.findall(r'data-queue="([\w-]+)" data-key="(\w+)">(\d+)<', page)}

    assert table == {"sent": 10, "delivery": 9, "duplicate_suppressed": 5, "kill": 2}
    assert later == {"delivery": 1, "duplicate_suppressed": 1}
    for kind, figure in table.items():
        assert figure == sum(v for (q, k), v in per_queue.items() if k == kind), kind
        if kind != "kill":  # the kills panel is by phase
            assert any(line.startswith(f"{KINDS[kind]}: {figure}") for line in legend), (kind, legend)
    assert "deliveries: 9\n  6 on the queues, 3 on the asynchronous leg\n  +1 after the report" in legend
    assert "after_complete: 1" in legend and "timeout: 1\n  0 on the queues, 1 on the asynchronous leg" in legend


def test_a_run_without_sends_says_where_its_chart_starts(tmp_path: Path) -> None:
    events = [e for e in _run_events() if e.kind != "sent"]

    page = write_page(tmp_path / "r.html", {"total": {}}, events, clock=RunClock(started=T0), title="chaos").read_text()

    assert "no send timed: the chart starts at its first event, 91 s after the start" in page


def test_the_page_has_no_raw_json_section_and_says_when_the_first_send_came(tmp_path: Path) -> None:
    report = {
        **_demo_report(),
        "sends": {"by_kind": {"original": 3, "resend": 1}},
        "async": {"payments": 2, "redrive": {"records_redriven": 1}, "on_failure": {"records": 0}},
        "states": {
            "counts": {"stranded": 1},
            "keys": {"stranded": ["o-7"]},
            "evidence": {
                "o-7": {"deliveries": 2, "dlq": [{"dlq": "orders-dlq", "moved_by": "sqs"}], "sends": [("original", 1)]}
            },
        },
    }
    page = write_page(tmp_path / "r.html", report, _run_events(), clock=RunClock(started=T0), title="demo").read_text()
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())

    assert "<pre" not in page and '{"' not in html.unescape(page)
    assert 'data-run="seconds">30.5<' in page and 'data-sends="by_kind.original">3<' in page
    assert 'data-async="redrive.records_redriven">1<' in page
    assert "dlq.0.moved_by: sqs" in text and "sends: original=1" in text and "('" not in text
    assert "the first send 90 s after the start (start-up and deploy)" in text
