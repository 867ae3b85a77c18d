"""Elapsed times the pages state, from recorded runs (issue 34, item 4): no page states how long a command takes
unless a run measured it, and then as the range of the recorded runs, with their machines and load.

``benchmarks/times.json`` (committed) holds, per measure, its latest runs (at most :data:`KEEP`), each
``{"seconds", "date", "commit", "cores", "memory_gib", "load"}`` (``load``: the 1-minute load average when the run
ended). The runs are recorded by the commands themselves, given pytest's ``--record-time MEASURE`` (the Makefile
passes it; tests/conftest.py):

- ``make test`` and ``make proof``: the pytest session's wall time, when it passed;
- ``make proof``'s walk-through (tests/e2e/test_walkthrough.py): the page's set-up block, each chaos command, and
  the deploy it printed.

They record into :data:`LOCAL` (``.local-aws/times.json``, git-ignored), so a clone stays clean after its tests,
passed or failed. ``make record-times`` (``python benchmarks/times.py --take``) moves those runs into the committed
file and re-renders each page's generated section of times from it (:data:`SECTIONS`, markers as in
``sections.py``), on purpose, to be committed; ``python benchmarks/times.py`` alone re-renders them.
``tests/unit/test_times_page.py`` checks the pages against the committed file, and that recording leaves every
tracked file as it was. Configured windows (a visibility timeout, the 5-minute deduplication window) are facts, not
measurements, and stay prose.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any


def _sibling(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` loaded by its path: this module is loaded into test sessions too, where putting
    ``benchmarks/`` on ``sys.path`` would let its scripts (``run``, ``pages``) shadow other modules."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(__file__).resolve().parent / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_sections = _sibling("sections")
begin_marker, replace = _sections.begin_marker, _sections.replace
memory_gib = _sibling("machine").memory_gib

ROOT = Path(__file__).resolve().parents[1]
TIMES = ROOT / "benchmarks" / "times.json"
#: Where the suites record (git-ignored): ``make record-times`` moves its runs into :data:`TIMES`.
LOCAL = ROOT / ".local-aws" / "times.json"
SCRIPT = "benchmarks/times.py"
SOURCE = "benchmarks/times.json"
COMMAND = "python benchmarks/times.py"
KEEP = 10

#: Every measure a page may state: its name in times.json, and what it times.
MEASURES = {
    "make test": "`make test`'s pytest session (lint, types and the site come before it)",
    "make proof": "`make proof`'s pytest session",
    "walkthrough set-up": "the walk-through's first block: `make wheel`, the venv, `pip install`, `npm install`",
    "walkthrough chaos run": "one `chaos` command of the walk-through, start to exit, deploy included",
    "walkthrough deploy": "the `cdk deploy` of a walk-through chaos run (its `deployed ... in` line)",
}


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time (pytest-xdist's workers record into the same file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load(path: Path = TIMES) -> dict[str, list[dict[str, Any]]]:
    """The recorded runs per measure (``{}`` when there is no file yet)."""
    if not path.is_file():
        return {}
    data: dict[str, list[dict[str, Any]]] = json.loads(path.read_text(encoding="utf-8"))["measures"]
    return data


def record(measure: str, seconds: float, *, path: Path = LOCAL, now: dt.datetime | None = None) -> dict[str, Any]:
    """Add one run of ``measure`` (a key of :data:`MEASURES`) to ``path`` (by default the untracked :data:`LOCAL`),
    keeping its latest :data:`KEEP`.

    :raises KeyError: ``measure`` is not one of :data:`MEASURES`.
    """
    if measure not in MEASURES:
        raise KeyError(f"{measure!r} is not a measure of {SCRIPT} ({', '.join(MEASURES)})")
    row = {
        "seconds": round(seconds, 1),
        "date": (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d"),
        "commit": commit(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "load": round(os.getloadavg()[0], 2),
    }
    with _locked(path):
        _add(path, {measure: [row]})
    return row


def _add(path: Path, runs: dict[str, list[dict[str, Any]]]) -> None:
    """``runs`` added to the file at ``path``, after its own, each measure's latest :data:`KEEP` kept (locked)."""
    data = load(path)
    for measure, rows in runs.items():
        data[measure] = [*data.get(measure, []), *rows][-KEEP:]
    body = {"measures": {name: data[name] for name in MEASURES if name in data}}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def take(source: Path = LOCAL, path: Path = TIMES) -> int:
    """Move the runs recorded in ``source`` (:data:`LOCAL`) into ``path`` (the committed :data:`TIMES`), after its
    own; ``source`` is removed. Returns the runs moved (0: nothing recorded)."""
    with _locked(source):
        runs = load(source)
        if runs:
            with _locked(path):
                _add(path, runs)
        source.unlink(missing_ok=True)
    return sum(map(len, runs.values()))


def commit(root: Path = ROOT) -> str:
    """The checked-out commit, 7 hex digits, with ``+dirty`` when tracked files other than the ones
    ``make record-times`` rewrites (times.json, the pages of :data:`SECTIONS`) differ from it; ``unknown`` outside a
    git clone."""
    rewritten = [f":(exclude){path}" for path in (SOURCE, *(page for page, _, _ in SECTIONS))]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=root, check=True, capture_output=True)
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *rewritten],
            cwd=root,
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.decode().strip() + ("+dirty" if changed.stdout.strip() else "")


# --- rendering ------------------------------------------------------------------------------------------------------


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def span(runs: list[dict[str, Any]]) -> str:
    """The range of ``runs``' times: ``40 s`` for one run or equal times, ``35 s to 48 s`` otherwise."""
    low, high = min(r["seconds"] for r in runs), max(r["seconds"] for r in runs)
    return duration(low) if duration(low) == duration(high) else f"{duration(low)} to {duration(high)}"


def machines(runs: list[dict[str, Any]]) -> str:
    """Where ``runs`` ran and under what load: ``3 runs, 2026-12-05 to 2026-12-07, 2 cores and 23 GiB, 1-minute
    load 0.8 to 2.4 at the end (median 1.2)``."""
    kinds = sorted({f"{r['cores']} cores" + (f" and {r['memory_gib']} GiB" if r["memory_gib"] else "") for r in runs})
    dates = sorted(r["date"] for r in runs)
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    loads = [float(r["load"]) for r in runs]
    load = (
        f"{min(loads):.1f}" if f"{min(loads):.1f}" == f"{max(loads):.1f}" else f"{min(loads):.1f} to {max(loads):.1f}"
    )
    median = f" (median {statistics.median(loads):.1f})" if len(loads) > 2 else ""
    count = "1 run" if len(runs) == 1 else f"{len(runs)} runs"
    return f"{count}, {when}, {' or '.join(kinds)}, 1-minute load {load} at the end{median}"


def stated(data: dict[str, list[dict[str, Any]]], measure: str) -> str:
    """``<range> (<machines>)``, or ``not measured yet`` when no run is recorded."""
    runs = data.get(measure) or []
    if not runs:
        return "not measured yet"
    return f"{span(runs)} ({machines(runs)})"


def _walkthrough(data: dict[str, list[dict[str, Any]]]) -> str:
    if not data.get("walkthrough chaos run"):
        return (
            "Not measured yet: `make proof` records this page's runs, and `make record-times` states their times here."
        )
    return (
        f"Measured on recorded runs of this page's test (`make proof`): a chaos run takes "
        f"{stated(data, 'walkthrough chaos run')}; of that, the deploy takes {stated(data, 'walkthrough deploy')}. "
        f"The set-up block above takes {stated(data, 'walkthrough set-up')}."
    )


def _suites(data: dict[str, list[dict[str, Any]]]) -> str:
    rows = [
        "| command | what is timed | recorded runs |",
        "|---|---|---|",
        *(f"| `{name}` | {MEASURES[name]} | {stated(data, name)} |" for name in ("make test", "make proof")),
    ]
    return "\n".join(rows)


#: The generated sections: page (repository path), section name, renderer.
SECTIONS: tuple[tuple[str, str, Callable[[dict[str, list[dict[str, Any]]]], str]], ...] = (
    ("docs/walkthrough.md", "walk-through times", _walkthrough),
    ("docs/tests.md", "suite times", _suites),
)


def marker(section: str) -> str:
    return begin_marker(SCRIPT, SOURCE, section, COMMAND)


def render_pages(data: dict[str, list[dict[str, Any]]], root: Path = ROOT) -> dict[str, str]:
    """Each page of :data:`SECTIONS` with its sections rendered from ``data`` (page path -> text)."""
    pages: dict[str, str] = {}
    for page, section, render in SECTIONS:
        text = pages.get(page) or (root / page).read_text(encoding="utf-8")
        pages[page] = replace(text, marker(section), render(data))
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="re-render the pages' generated sections of times from times.json")
    parser.add_argument("--record", nargs=2, metavar=("MEASURE", "SECONDS"), help=f"record one run into {SOURCE} first")
    parser.add_argument(
        "--take",
        action="store_true",
        help=f"first move the runs recorded in {LOCAL.relative_to(ROOT)} into {SOURCE} (make record-times)",
    )
    args = parser.parse_args(argv)
    if args.record:
        record(args.record[0], float(args.record[1]), path=TIMES)
    if args.take:
        print(f"{take()} recorded runs moved from {LOCAL.relative_to(ROOT)} into {SOURCE}; commit it with the pages")
    for page, text in render_pages(load()).items():
        (ROOT / page).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
