"""``make soak``: record the run in ``benchmarks/soak-runs.json`` and re-render the soak table of ``docs/demo.md``.

``python benchmarks/soak_page.py --report reports/soak-report.json --run-dir .local-aws/soak --started EPOCH
--load N`` reads the soak's report (the demo's keys: ``total``, ``run``, ``redrive``, ``verdict``) and its run
folder's function logs, turns them into one run (:func:`run_row`; ``--load``: the busy spinners that ran beside the
demo, ``make soak``'s ``SOAK_LOAD``, default 0) and adds it to the committed data file, earlier runs kept (a run that
finished at the same time, the same report fed again, is replaced), then renders the generated section of the page
from the data file: one column per run, in the order they were recorded. Without ``--report`` it only re-renders
the section; ``--check`` exits 1 when the page differs from that render (``tests/unit/test_soak_page.py`` checks the
committed page). The Makefile's ``soak`` recipe calls it after the demo, whatever the demo's exit code: a run that
wrote no report (``--report``'s file older than ``--started``) is not recorded, and the script exits 1; a ``--load``
that is not a non-negative integer exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from effectively_once_runtime.names import FIELD_DEFERRED, MSG_RECORDS_DEFERRED

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))

import sections  # noqa: E402
from machine import memory_gib  # noqa: E402
from spinners import spinner_count  # noqa: E402

DATA = BENCHMARKS / "soak-runs.json"
PAGE = ROOT / "docs" / "demo.md"
RUN_DIR = ROOT / ".local-aws" / "soak"
BEGIN = sections.begin_marker("benchmarks/soak_page.py", "benchmarks/soak-runs.json", "soak runs", "make soak")
#: The chaos's kill phases in the report's ``kills`` (``effectively_once_local.chaos.fault_model``): injected, and
#: real deadline.
KILL_PHASES = ("after_charge", "after_complete", "timeout", "deadline")
#: Paths whose changes leave the run as it was: a commit is "+dirty" only for changes elsewhere.
NOT_THE_RUN = (":(exclude)docs", ":(exclude)benchmarks/soak-runs.json")


def records_deferred(run_dir: Path) -> int | None:
    """The records the runtime deferred over the run (the outage backlog included): the sum of the ``deferred``
    field of every ``records deferred`` line (``names.FIELD_DEFERRED``, ``names.MSG_RECORDS_DEFERRED``: a batch gives
    records back before its deadline) of the function logs (``function-*.log``, one JSON object a line;
    other lines skipped). ``None`` when the folder holds no function log."""
    logs = sorted(run_dir.glob("function-*.log"))
    if not logs:
        return None
    total = 0
    for path in logs:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("message") == MSG_RECORDS_DEFERRED:
                total += int(entry.get(FIELD_DEFERRED) or 0)
    return total


def git_commit(root: Path = ROOT) -> str:
    """The checked-out commit, 7 hex digits, with ``+dirty`` when tracked files outside ``NOT_THE_RUN`` differ from
    it; ``unknown`` outside a git clone."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"], cwd=root, check=True, capture_output=True, text=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_THE_RUN],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if changed else "")


def run_row(
    report: dict[str, Any],
    *,
    finished_at: str,
    commit: str,
    note: str = "",
    records_deferred: int | None = None,
    wall_seconds: int | None = None,
    memory_gib: int | None = None,
    soak_load: int | None = None,
) -> dict[str, Any]:
    """One run of the data file, from a soak report. Keys: ``finished_at`` (ISO 8601 UTC, seconds; a day for runs
    recorded by hand), ``commit``, ``note`` (what changed, free text), ``cores`` and ``memory_gib`` (the machine),
    ``exit_code`` (``verdict.exit_code``); from ``total``: ``valid_payments``, ``poison``, ``poison_in_dlq``,
    ``lost``, ``double_charged``, ``unexplained_replays``, ``sent_never_delivered``, ``deliveries``, ``charges``,
    ``valid_dead_lettered`` and ``kills`` by phase (``KILL_PHASES``); ``redrive_charged_provider_calls`` (the outage
    backlog's provider calls for payments already charged, summed over the queues; ``None`` without a backlog);
    from ``run``: ``load_average`` (``mean``, ``min``, ``max`` of the 1-minute load average), ``payments_per_second``
    and ``processing_seconds``; ``records_deferred`` (:func:`records_deferred`) and ``wall_seconds`` (the whole
    ``make soak``); ``soak_load``: the busy spinners beside the demo (``make soak SOAK_LOAD=N``,
    ``benchmarks/spinners.py``; ``None`` for the runs recorded before it was). A figure the report lacks is
    ``None``."""
    total = report.get("total", {})
    run = report.get("run", {})
    load = run.get("load_average") or {}
    redrive = report.get("redrive")
    kills = total.get("kills", {})
    return {
        "finished_at": finished_at,
        "commit": commit,
        "note": note,
        "cores": load.get("cores", os.cpu_count()),
        "memory_gib": memory_gib,
        "soak_load": soak_load,
        "exit_code": report.get("verdict", {}).get("exit_code"),
        **{
            key: total.get(key)
            for key in (
                "valid_payments",
                "poison",
                "poison_in_dlq",
                "lost",
                "double_charged",
                "unexplained_replays",
                "sent_never_delivered",
                "deliveries",
                "charges",
                "valid_dead_lettered",
            )
        },
        "kills": {phase: kills.get(phase) for phase in KILL_PHASES},
        "redrive_charged_provider_calls": (
            sum(row.get("charged_new_provider_calls", 0) for row in redrive.values()) if redrive else None
        ),
        "load_average": {k: load.get(k) for k in ("mean", "min", "max")} if load else None,
        "payments_per_second": run.get("payments_per_second"),
        "processing_seconds": run.get("processing_seconds"),
        "records_deferred": records_deferred,
        "wall_seconds": wall_seconds,
    }


def add_run(data: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``row`` last in its ``runs``, or in the place of the run that finished at the same time."""
    runs = [r for r in data.get("runs", []) if r["finished_at"] != row["finished_at"]]
    same = [i for i, r in enumerate(data.get("runs", [])) if r["finished_at"] == row["finished_at"]]
    if same:
        runs.insert(same[0], row)
    else:
        runs.append(row)
    return {**data, "runs": runs}


def _n(value: Any, fmt: str = "{:,}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _load(run: dict[str, Any]) -> str:
    load = run.get("load_average")
    if not load or load.get("mean") is None:
        return "n/a"
    return f"{load['mean']:.1f} ({load['min']:.1f} to {load['max']:.1f})"


def _wall(seconds: int | None) -> str:
    return "n/a" if seconds is None else f"{seconds // 60} min {seconds % 60} s"


def _slash(run: dict[str, Any], keys: tuple[str, ...], within: str | None = None) -> str:
    source = (run.get(within) or {}) if within else run
    return " / ".join(_n(source.get(k)) for k in keys)


#: The table's rows: label, and the cell of a run.
ROWS: tuple[tuple[str, Any], ...] = (
    ("what changed", lambda r: r.get("note") or ""),
    ("finished (UTC)", lambda r: r["finished_at"].replace("T", " ")[:16]),
    ("machine: cores, memory", lambda r: f"{_n(r.get('cores'))} cores, {_n(r.get('memory_gib'))} GiB"),
    ("busy spinners beside the run (`SOAK_LOAD`)", lambda r: _n(r.get("soak_load"))),
    ("load average, mean (min to max)", _load),
    ("deliveries", lambda r: _n(r.get("deliveries"))),
    (
        "records deferred (the `deferred` counts of the runtime's `records deferred` lines)",
        lambda r: _n(r.get("records_deferred")),
    ),
    ("kills: real deadline", lambda r: _n((r.get("kills") or {}).get("deadline"))),
    (
        "kills: after the charge / after completion / stalls (the chaos)",
        lambda r: _slash(r, ("after_charge", "after_complete", "timeout"), "kills"),
    ),
    ("valid payments dead-lettered (`valid_dead_lettered`)", lambda r: _n(r.get("valid_dead_lettered"))),
    ("charges", lambda r: _n(r.get("charges"))),
    (
        "`payments_per_second` (`processing_seconds`)",
        lambda r: f"{_n(r.get('payments_per_second'), '{:.2f}')} ({_n(r.get('processing_seconds'), '{:.1f}')} s)",
    ),
    ("wall clock (`make soak`, set-up and deploy included)", lambda r: _wall(r.get("wall_seconds"))),
    ("exit code", lambda r: _n(r.get("exit_code"))),
    ("valid payments", lambda r: _n(r.get("valid_payments"))),
    (
        "lost / double-charged / unexplained replays / first sends never delivered",
        lambda r: _slash(r, ("lost", "double_charged", "unexplained_replays", "sent_never_delivered")),
    ),
    ("poison messages in a DLQ", lambda r: f"{_n(r.get('poison_in_dlq'))} of {_n(r.get('poison'))}"),
    (
        "outage backlog: provider calls for payments already charged",
        lambda r: _n(r.get("redrive_charged_provider_calls")),
    ),
)


def render_table(runs: list[dict[str, Any]]) -> str:
    """The markdown table: a row per figure (``ROWS``), a column per run (``run N (commit)``, N counted from 1)."""
    header = ["figure", *[f"run {i} ({run['commit']})" for i, run in enumerate(runs, 1)]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join([label, *[cell(run) for run in runs]]) + " |" for label, cell in ROWS]
    return "\n".join(lines)


def render_page(page: str, data: dict[str, Any]) -> str:
    """``page`` (the text of ``docs/demo.md``) with its soak section rendered from ``data``."""
    return sections.replace(page, BEGIN, render_table(data["runs"]))


def _shown(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def _load_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="record a soak run and re-render the soak table of docs/demo.md")
    parser.add_argument("--report", type=Path, help="the soak's report to record (without it: re-render only)")
    parser.add_argument("--run-dir", type=Path, default=RUN_DIR, help="the soak's run folder (its function logs)")
    parser.add_argument("--started", type=float, help="epoch seconds `make soak` started: the wall clock's start")
    parser.add_argument("--note", default="", help="what changed since the last run (free text)")
    parser.add_argument(
        "--load", type=spinner_count, default=0, help="the busy spinners beside the run (SOAK_LOAD; default: 0)"
    )
    parser.add_argument("--commit", help="the commit to name (default: the checked-out one)")
    parser.add_argument("--data", type=Path, default=DATA, help="the data file (default: %(default)s)")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from its render")
    args = parser.parse_args(argv)
    data = _load_json(args.data)
    if args.report is not None:
        finished = args.report.stat().st_mtime if args.report.exists() else None
        if finished is None or (args.started is not None and finished < args.started):
            print(f"not recorded: this run wrote no {args.report}", file=sys.stderr)
            return 1
        row = run_row(
            _load_json(args.report),
            finished_at=datetime.fromtimestamp(finished, UTC).isoformat(timespec="seconds"),
            commit=args.commit or git_commit(),
            note=args.note,
            records_deferred=records_deferred(args.run_dir),
            wall_seconds=None if args.started is None else round(time.time() - args.started),
            memory_gib=memory_gib(),
            soak_load=args.load,
        )
        data = add_run(data, row)
        args.data.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"recorded run {data['runs'].index(row) + 1} in {_shown(args.data)}")
    page = args.page.read_text(encoding="utf-8")
    text = render_page(page, data)
    if args.check:
        if text != page:
            print(f"{_shown(args.page)} is out of date: run `python benchmarks/soak_page.py`", file=sys.stderr)
            return 1
        return 0
    if text != page:
        args.page.write_text(text, encoding="utf-8")
        print(f"written {_shown(args.page)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
