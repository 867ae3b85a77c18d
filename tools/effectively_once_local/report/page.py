"""A run's outputs: the terminal summary, the JSON report, and its picture, an HTML page beside it (same path,
``.html``) that opens offline.

The page is built from the report dict and the run's timed events (:class:`TimedEvent`), whatever the run: the demo's
payments or the general ``chaos`` command. It shows over time (seconds since the first send, the start-up and deploy
before it one bar: ``chart.py``) the messages sent, deliveries, charges or effects, duplicates suppressed, DLQ
arrivals and kills by kind, then the report's totals and blocks and the timed events per queue, every section a
table (no raw JSON). The chart's figures are the timed table's "all (the chart's figures)" column, by the same
names. The chart is
embedded as a base64 PNG; the page loads nothing else.

Where each series comes from (:func:`read_events`; every line is timed by its writer, wall-clock epoch seconds):

- sent: the producer's batches as ``SendMessageBatch`` accepted them (:class:`RunClock`);
- deliveries: the local event source mapping's delivery log, ``deliveries-*.jsonl`` (``ts``);
- charges: the simulated provider's call log, ``provider-*.jsonl``, results not answered from a key (``ts``);
- effects: the runtime's effect lines in the function logs (Powertools Logger ``timestamp``);
- duplicates suppressed: the runtime's EMF ``DuplicatesSuppressed`` (``_aws.Timestamp``), what the report sums;
- DLQ arrivals: the runtime's ``record dead-lettered`` line (a permanent failure sent on first sight). A message
  SQS itself moves after ``maxReceiveCount`` receives leaves no timed trace the runner can read: SQS keeps a standard
  queue message's enqueue time when it moves it (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/setting-up-dead-letter-queue-retention.html),
  and the report's read of a FIFO DLQ replaces each message with a copy (``readback.read_dlq_messages``). The page
  counts those in its tables, not on the chart, and says how many arrivals it timed;
- kills: the chaos log, ``chaos-*.jsonl`` (``ts``, ``phase``).
"""

from __future__ import annotations

import base64
import html
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..base.json_lines import read_jsonl
from ..proof.dead_letters import APP
from ..proof.line_states import dlq_why
from .chart import KINDS, TimedEvent, origin, png

__all__ = [
    "ALL",
    "KINDS",
    "LATER",
    "NOT_QUEUES",
    "RunClock",
    "TimedEvent",
    "conclude",
    "page_path",
    "read_events",
    "write_page",
]

#: Top-level report keys that are not a queue's column (the payments report's and the chaos report's blocks).
NOT_QUEUES = (
    "total",
    "run",
    "verdict",
    "per_key",
    "redrive",
    "states",
    "dlq",
    "sends",
    "normalization",
    "async",
    "unkeyed",
)

#: Powertools Logger's default ``timestamp`` format (``%F`` is its milliseconds directive).
_POWERTOOLS_TIME = "%Y-%m-%d %H:%M:%S,%f%z"


@dataclass
class RunClock:
    """What the run itself times: when it started (wall-clock epoch seconds), the producer's sends
    (``progress(queue, show)`` is the progress callback for one queue's sends), the moments a run marks (``mark(text)``:
    dashed lines, e.g. when polling starts) and when the report's figures were read (``report_taken()``: what the page
    counts its timed events up to, beside the report's figures; later events, e.g. the outage backlog, get a column
    of their own)."""

    events: list[TimedEvent] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    report_at: float | None = None

    def progress(self, queue: str, show: Callable[[int], Any]) -> Callable[[int], None]:
        def sent(n: int) -> None:
            self.events.append(TimedEvent(time.time(), "sent", queue, count=n))
            show(n)

        return sent

    def mark(self, text: str) -> None:
        self.marks.append((time.time(), text))

    def report_taken(self) -> None:
        self.report_at = time.time()
        self.mark("report")


def _label(path: Path, prefix: str) -> str:
    """``<prefix>-<label>-<pid>.<ext>`` -> label (labels may hold dashes)."""
    return path.stem[len(prefix) + 1 :].rsplit("-", 1)[0]


def _log_time(doc: dict[str, Any]) -> float | None:
    value = doc.get("timestamp")
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value, _POWERTOOLS_TIME).timestamp()
    except ValueError:
        try:
            return datetime.fromisoformat(value).timestamp()  # a Logger set to RFC 3339
        except ValueError:
            return None


def _emf_count(value: Any) -> int:
    return int(sum(value) if isinstance(value, list) else value)


def read_events(run_dir: Path) -> list[TimedEvent]:
    """The timed events in a run folder's logs (see the module docstring); lines without a time are skipped."""
    out: list[TimedEvent] = []
    for path in sorted(run_dir.glob("deliveries-*.jsonl")):
        label = _label(path, "deliveries")
        out += [TimedEvent(float(d["ts"]), "delivery", label) for d in read_jsonl([path]) if "ts" in d]
    for path in sorted(run_dir.glob("provider-*.jsonl")):
        label = _label(path, "provider")
        out += [
            TimedEvent(float(c["ts"]), "charge", label)
            for c in read_jsonl([path])
            if "ts" in c and c.get("event") == "result" and not c.get("replayed")
        ]
    for path in sorted(run_dir.glob("chaos-*.jsonl")):
        label = _label(path, "chaos")
        out += [
            TimedEvent(float(k["ts"]), "kill", label, str(k.get("phase")))
            for k in read_jsonl([path])
            if "ts" in k and k.get("event") == "kill"
        ]
    for path in sorted(run_dir.glob("function-*.log")):
        label = _label(path, "function")
        for doc in read_jsonl([path]):
            if not isinstance(doc, dict):
                continue
            aws = doc.get("_aws")
            if isinstance(aws, dict) and names.METRIC_DUPLICATES_SUPPRESSED in doc and "Timestamp" in aws:
                count = _emf_count(doc[names.METRIC_DUPLICATES_SUPPRESSED])
                out.append(TimedEvent(aws["Timestamp"] / 1000, "duplicate_suppressed", label, count=count))
                continue
            kind = {names.EFFECT_EXECUTED: "effect", names.MSG_RECORD_DEAD_LETTERED: "dlq_arrival"}.get(
                str(doc.get(names.FIELD_MESSAGE))
            )
            t = _log_time(doc) if kind else None
            if kind and t is not None:
                out.append(TimedEvent(t, kind, label))
    return sorted(out, key=lambda e: e.t)


# --- the page -------------------------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1240px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.ok { color: #1a7f37; font-weight: bold; } .fail { color: #c62828; font-weight: bold; }
table { border-collapse: collapse; margin: 8px 0; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 10px; } td { text-align: right; font-variant-numeric: tabular-nums; }
th { text-align: left; background: #f4f4f4; font-weight: 600; } thead th { text-align: right; }
img { max-width: 100%; } .note { color: #555; font-size: 13px; }
.row { display: flex; flex-wrap: wrap; gap: 12px 36px; align-items: flex-start; } .row h2 { margin-top: 12px; }
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _item(value: Any) -> str:
    """A list's item as text: a pair (``("resend", 2)``) as ``resend=2``, anything else as itself."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return f"{value[0]}={value[1]}"
    return str(value)


def _flat(block: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Every figure of ``block`` as ``(dotted.key, value)``: scalars as they are, nested dicts (kills by kind) as
    ``key.kind``, lists of scalars (pairs as ``a=1``) joined with commas, lists of dicts one row per item
    (``key.0``, ``key.1`` ...)."""
    out: list[tuple[str, Any]] = []
    for key, value in block.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += _flat(value, f"{name}.")
        elif isinstance(value, list | tuple) and any(isinstance(v, dict) for v in value):
            items = [v if isinstance(v, dict) else {"value": v} for v in value]
            out += [row for i, item in enumerate(items) for row in _flat(item, f"{name}.{i}.")]
        elif isinstance(value, list | tuple):
            out.append((name, ", ".join(_item(v) for v in value)))
        else:
            out.append((name, value))
    return out


def _totals_table(total: dict[str, Any], attr: str) -> str:
    rows = "".join(f'<tr><th>{_esc(k)}</th><td data-{attr}="{_esc(k)}">{_esc(v)}</td></tr>' for k, v in _flat(total))
    return f"<table>{rows}</table>"


def _queue_table(columns: dict[str, dict[str, Any]], keys: list[str], key_labels: dict[str, str]) -> str:
    head = "".join(f"<th>{_esc(q)}</th>" for q in columns)
    rows = []
    for key in keys:
        cells = "".join(
            f'<td data-queue="{_esc(q)}" data-key="{_esc(key)}">{_esc(col.get(key, "-"))}</td>'
            for q, col in columns.items()
        )
        rows.append(f"<tr><th>{_esc(key_labels.get(key, key))}</th>{cells}</tr>")
    return f"<table><thead><tr><th></th>{head}</tr></thead>{''.join(rows)}</table>"


def _queue_rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The report's per-queue rows: the top-level blocks its ``total`` adds up (every figure of the block is one of
    the total's keys), e.g. the demo's ``standard`` and ``fifo``; not the chaos report's ``cross_check``."""
    total = report.get("total") or {}
    rows = {}
    for key, value in report.items():
        if key in NOT_QUEUES or not isinstance(value, dict):
            continue
        figures = [k for k, v in value.items() if isinstance(v, int | dict)]
        if figures and all(k in total for k in figures):
            rows[key] = value
    return rows


#: The column of the events after the report's figures were read (all queues).
LATER = "after the report"
#: The column of every queue's events up to the report: the chart's figures, by the same names.
ALL = "all (the chart's figures)"


def _event_columns(events: Iterable[TimedEvent], report_at: float | None) -> dict[str, dict[str, Any]]:
    """Events per queue and kind up to ``report_at`` (all when ``None``), then one column for those after it."""
    counts: dict[str, Counter[str]] = {}
    later: Counter[str] = Counter()
    for e in events:
        if report_at is not None and e.t > report_at:
            later[e.kind] += e.count
        else:
            counts.setdefault(e.queue, Counter())[e.kind] += e.count
    columns = {q: dict(c) for q, c in sorted(counts.items())}
    if columns:
        columns[ALL] = dict(sum(counts.values(), Counter()))
    if later:
        columns[LATER] = dict(later)
    return columns


def _timed_note(report: dict[str, Any], before: list[TimedEvent]) -> str:
    """Under the timed table: where its counts come from, and why one can be lower than the report's."""
    note = (
        "Counted from what the run timed, each written after what it records (sent: the producer's accepted "
        "batches; deliveries: the runner's delivery log; charges: the provider's result lines, replays left out; "
        "effects: the effect lines; duplicates suppressed: the EMF metric; DLQ arrivals: the runtime's first-sight "
        "sends; kills: the chaos log). The report's tables count the stores instead (ledgers, DLQs). A kill between "
        "a provider call and its result line (or an effect and its line), e.g. a deadline kill on a loaded machine, "
        "leaves a charge in the ledger that no line timed, so a timed count can be lower than the report's."
    )
    charges = (report.get("total") or {}).get("charges")
    if isinstance(charges, int):
        timed = sum(e.count for e in before if e.kind == "charge")
        note += f" Here: timed charges: {timed}, the report's (ledger items): {charges}."
    return f'<p class="note" style="max-width: 520px">{_esc(note)}</p>'


def _started_note(report: dict[str, Any], events: list[TimedEvent], clock: RunClock) -> str:
    """When the run started, how long it took, and how much of it came before the first send (the chart's zero)."""
    when = datetime.fromtimestamp(clock.started).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    seconds = (report.get("run") or {}).get("seconds")
    lead = origin(events, clock.started) - clock.started
    took = f", {_esc(seconds)} s in all" if seconds is not None else ""
    lead_note = f"the first send {lead:,.0f} s after the start (start-up and deploy)"
    if not any(e.kind == "sent" for e in events):
        lead_note = f"no send timed: the chart starts at its first event, {lead:,.0f} s after the start"
    return f'<p class="note">started {_esc(when)}{took}; {lead_note}</p>'


def render_page(
    report: dict[str, Any],
    events: list[TimedEvent],
    *,
    clock: RunClock,
    title: str,
    headline: list[str] | None = None,
) -> str:
    """The page's HTML (see :func:`write_page`)."""
    picture = base64.b64encode(png(events, clock.started, clock.marks, clock.report_at)).decode("ascii")
    verdict = report.get("verdict") or {}
    parts = [f"<h1>{_esc(title)}</h1>", _started_note(report, events, clock)]
    if "exit_code" in verdict:
        ok = verdict["exit_code"] == 0
        lines = headline if headline is not None else list(verdict.get("reasons") or [])
        parts.append(f'<p class="{"ok" if ok else "fail"}">exit code {_esc(verdict["exit_code"])}</p>')
        parts += [f"<p>{_esc(line)}</p>" for line in lines]
    parts.append('<h2>Over time</h2><img alt="the run over time" src="data:image/png;base64,' + picture + '">')
    before = [e for e in events if clock.report_at is None or e.t <= clock.report_at]
    timed_dlq = sum(e.count for e in before if e.kind == "dlq_arrival")
    dead = (report.get("total") or {}).get("dead_lettered")
    if dead is not None:
        parts.append(
            f'<p class="note">DLQ arrivals timed{" up to the report" if clock.report_at else ""}: {timed_dlq} '
            f"runtime sends on first sight; the DLQs held {_esc(dead)} messages when the report read them. A send "
            "repeated after a kill is deduplicated by a FIFO DLQ; a message SQS moved after maxReceiveCount receives "
            "is not timed (tables only).</p>"
        )
    tables = ["<div><h2>Totals (the report's)</h2>" + _totals_table(report.get("total") or {}, "total") + "</div>"]
    queues = _queue_rows(report)
    if queues:
        keys = list(dict.fromkeys(k for row in queues.values() for k, v in row.items() if not isinstance(v, dict)))
        tables.append("<div><h2>Per queue (the report's)</h2>" + _queue_table(queues, keys, {}) + "</div>")
    tables += _block_tables(report)
    columns = _event_columns(events, clock.report_at)
    if columns:
        kinds = [k for k in KINDS if any(k in c for c in columns.values())]
        tables.append(
            "<div><h2>Per queue (the timed events)</h2>"
            + _queue_table(columns, kinds, KINDS)
            + _timed_note(report, before)
            + "</div>"
        )
    parts.append('<div class="row">' + "\n".join(tables) + "</div>")
    parts += _states_sections(report)
    run = report.get("run")
    if run:
        parts.append("<h2>Run</h2>" + _totals_table(run, "run"))
    body = "\n".join(parts)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _block_tables(report: dict[str, Any]) -> list[str]:
    """The tables of the report's blocks beside its totals: per business key, the asynchronous path, the faults."""
    blocks = (
        ("Per business key", (report.get("per_key") or {}).get("total"), "per-key-total"),
        ("The asynchronous leg (EventBridge, Lambda's retries, the on-failure redrive)", report.get("async"), "async"),
        ("Faults struck", (report.get("faults") or {}).get("struck"), "faults"),
    )
    return [f"<div><h2>{title}</h2>" + _totals_table(block, attr) + "</div>" for title, block, attr in blocks if block]


def _states_sections(report: dict[str, Any]) -> list[str]:
    """The chaos report's per-line states (each failing key with its evidence), DLQ contents and sends by kind."""
    parts: list[str] = []
    states = report.get("states")
    if states:
        rows = "".join(
            f'<tr><th>{_esc(state)}</th><td data-key="state-{_esc(state)}">{_esc(n)}</td></tr>'
            for state, n in states["counts"].items()
        )
        parts.append(f"<h2>Every input line's state</h2><table>{rows}</table>")
        failing = [
            f"<tr><th>{_esc(state)}</th><td>{_esc(key)}</td><td>{_evidence(states['evidence'].get(key))}</td></tr>"
            for state, keys in states["keys"].items()
            if state != "redriven_then_effected"
            for key in keys[:20]
        ]
        failing += [
            f"<tr><th>{_esc(i['state'])}</th><td>line {_esc(i['line'])}</td><td></td></tr>"
            for i in states.get("invalid_lines", [])
            if i["state"] != "invalid_in_dlq"
        ]
        if failing:
            parts.append("<h2>Findings</h2><table><tr><th>state</th><th>key</th><th>evidence</th></tr>")
            parts.append("".join(failing) + "</table>")
    parts += _listed_section(report)
    dlq = report.get("dlq")
    if dlq:
        rows = "".join(
            f"<tr><th>{_esc(queue)}</th><td>{_esc(held['messages'])}</td><td>{_esc(dlq_why(held['why']))}</td></tr>"
            for queue, held in dlq.items()
        )
        parts.append(f"<h2>What the DLQs hold, and why</h2><table>{rows}</table>")
    sends = report.get("sends")
    if sends:
        parts.append("<h2>What the producer sent</h2>" + _totals_table(sends, "sends"))
    return parts


def _evidence(evidence: Any) -> str:
    """A finding's evidence as ``key: value`` lines (nested figures dotted)."""
    if not isinstance(evidence, dict):
        return _esc("" if evidence is None else evidence)
    return "<br>".join(f"{_esc(k)}: {_esc(v)}" for k, v in _flat(evidence))


def _listed_section(report: dict[str, Any]) -> list[str]:
    """What the chaos report lists without failing: the keys finished only through the run's redrive, with their
    rounds, the keys SQS dead-lettered that the run's faults or a deadline explain (``dead_letters.py``), and the
    torn moments (each kill that left a key's effect in some of the required stores only)."""
    rows = [
        f'<tr><th>redriven</th><td>{_esc(r["key"])}</td><td data-key="redriven-{_esc(r["key"])}">round '
        f"{_esc(', '.join(map(str, r['rounds'])))}</td></tr>"
        for r in (report.get("redriven") or [])[:50]
    ]
    rows += [
        f"<tr><th>dead-lettered</th><td>{_esc(d['key'])}</td><td>moved by the redrive policy ({_esc(d['messages'])}"
        f" messages to {_esc(', '.join(d['dlqs']))}), cause: {_esc(d['cause'])}</td></tr>"
        for d in [d for d in report.get("dead_lettered_without_reason") or [] if d["cause"] != APP][:50]
    ]
    rows += [
        f"<tr><th>torn moment</th><td>{_esc(m['key'])}</td><td>after {_esc(m['after_write'] or m['phase'])}: in "
        f"{_esc(', '.join(m['written']))}; not in {_esc(', '.join(m['missing']))}</td></tr>"
        for m in (report.get("torn_moments") or [])[:50]
    ]
    if not rows:
        return []
    return ["<h2>Listed, not failing</h2><table>" + "".join(rows) + "</table>"]


def page_path(report_path: Path) -> Path:
    """Where the page of a JSON report goes: beside it, same name, ``.html`` (``.html`` added to a report that is
    already named ``.html``: the page never overwrites it)."""
    page = report_path.with_suffix(".html")
    return page if page != report_path else report_path.with_name(report_path.name + ".html")


def write_page(
    path: Path,
    report: dict[str, Any],
    events: list[TimedEvent],
    *,
    clock: RunClock,
    title: str,
    headline: list[str] | None = None,
) -> Path:
    """Write the page: ``events`` over time (seconds since the first send; ``clock.marks`` as dashed lines), the
    report's ``total`` (and ``per_key.total``), its per-queue rows, and the events per queue up to
    ``clock.report_at``. ``headline``: lines under the exit code (default: the verdict's reasons). Returns ``path``.

    :raises OSError: it cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(report, events, clock=clock, title=title, headline=headline), encoding="utf-8")
    return path


def conclude(
    report: dict[str, Any],
    *,
    text: str,
    reasons: list[str],
    fail_prefix: str,
    ok_line: str | None,
    report_path: Path,
    events: list[TimedEvent],
    clock: RunClock,
    title: str,
    log: Callable[[str], None] = print,
) -> Path | None:
    """The tail of every local run (``demo``, ``chaos``): show the report (``text``), a line per reason, the OK line,
    then write the JSON report and its page, and print where they are. Written after they are shown: a write that
    fails (a full disk) still leaves the result on screen. Returns the page's path, ``None`` when it could not be
    drawn (said on screen; the JSON report stands).

    :raises OSError: the JSON report cannot be written.
    """
    log("")
    log(text)
    log("")
    for reason in reasons:
        log(fail_prefix + reason)
    if ok_line:
        log(ok_line)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    log(f"report written to {report_path}")
    try:
        headline = [fail_prefix + r for r in reasons] + ([ok_line] if ok_line else [])
        page = write_page(page_path(report_path), report, events, clock=clock, title=title, headline=headline)
    except Exception as exc:  # noqa: BLE001 - the picture is extra: the verdict and the JSON report stand
        log(f"page not written: {type(exc).__name__}: {exc}")
        return None
    log(f"page: {page.resolve().as_uri()}")
    return page
