"""Which of the faults a chaos run asked for struck (issue 43, item 2): a run that exercised nothing says so.

Per fault class (one row of ``chaos/fault_classes.FAULT_CLASSES`` each: each kind of kill, stalls, resends,
concurrent duplicates, Lambda's duplicate asynchronous deliveries and the SDK faults), how many struck, read by the
row's ``counted`` paths from the report the run already built: the kills by kind
(``total.kills``; a stall is the kill of the invocation it held past its deadline, ``timeout``), the sends by kind
(``sends.by_kind``) and the asynchronous path (``async.delivered_twice``). A class the run asked for (its fraction
above 0) that never struck is named, with its flag and what would make it strike:

- ``not_struck``: it could strike on this run and did not (too few invocations or keys for its fraction);
- ``could_not_strike``: nothing in this run gave it a place to strike: kills at the effect line and stalls with no
  effect line and no watched write in the whole run (a handler not built on the runtime, writing nothing the local
  AWS watches), concurrent duplicates with only FIFO targets (a FIFO queue's deduplication id drops the twin),
  duplicate asynchronous deliveries with no asynchronous target.

Kills are drawn with the process id and the clock, so two identical runs strike differently: the default exit code
never depends on what struck. ``--require-faults`` (opt-in) turns a class in ``not_struck`` into exit code
:data:`EXIT_FAULTS_NOT_STRUCK`, when the per-key verdict found nothing (its exit 1 wins). A class that could not
strike does not fail the run; the line that names it says which flag would. Most such classes are known before
the first send, from the stack's template (``any_stack/inert_faults.py``): a flag the user gave is refused then, and a
default one is left out of the draw and listed as ``left_out``; ``could_not_strike`` keeps what only the run shows
(a function that could write and never did).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict

from ..base.exit_codes import EXIT_FAULTS_NOT_STRUCK
from ..base.json_lines import read_jsonl
from ..chaos.fault_classes import CLASS_OF_PHASE, FAULT_CLASSES, ChaosConfig, FaultClass, count
from ..chaos.faults import KILL_POINT_ROLES
from ..chaos.forced_strikes import FORCIBLE, MIN_STRIKES


def _struck(report: dict[str, Any]) -> dict[str, int]:
    """How many of each class struck, by its ``counted`` paths (``fault_classes.count``): the report's kills, sends,
    asynchronous path and SDK faults."""
    return {cls.name: count(report, cls) for cls in FAULT_CLASSES}


def _sdk_calls(report: dict[str, Any], kind: str) -> bool:
    """Whether the run made an SDK call of ``kind`` an SDK fault strikes (``proof/sdk_faults_seen.py``)."""
    return bool((report.get("sdk_faults") or {}).get(kind))


#: Per place a fault class needs (``FaultClass.place``): whether this run gave it none, from the report, the run's
#: targets' kinds (``standard``, ``fifo``, ``async``) and the writes the environments' logs show; and why.
_NO_PLACE: dict[str, tuple[Callable[[dict[str, Any], Collection[str], int], bool], str]] = {
    "effect_line": (
        lambda report, kinds, writes: _effect_lines(report) == 0,
        "no effect line in the run: the handler declares no effect of the runtime",
    ),
    "aws_write": (
        lambda report, kinds, writes: not _sdk_calls(report, "aws_write_calls"),
        "no DynamoDB, S3, SQS or SNS write call in the run (a SQL commit is never throttled)",
    ),
    "watched_write": (
        lambda report, kinds, writes: writes == 0,
        "no watched write in the run (DynamoDB, S3, SQS, SNS, a SQL commit)",
    ),
    "effect_line_or_write": (
        lambda report, kinds, writes: _effect_lines(report) == 0 and writes == 0,
        "no effect line and no watched write in the run",
    ),
    "non_fifo_target": (lambda report, kinds, writes: not set(kinds) - {"fifo"}, "every target is a FIFO queue"),
    "async_target": (lambda report, kinds, writes: "async" not in kinds, "no asynchronous target"),
    "batch_write": (
        lambda report, kinds, writes: not _sdk_calls(report, "batch_write_calls"),
        "no DynamoDB BatchWriteItem call in the run",
    ),
    "batch_call": (
        lambda report, kinds, writes: not _sdk_calls(report, "batch_calls"),
        "no SQS or SNS batch call by the handler in the run (SendMessageBatch, DeleteMessageBatch,"
        " ChangeMessageVisibilityBatch, PublishBatch)",
    ),
}


def _effect_lines(report: dict[str, Any]) -> int:
    return int(report["total"].get("effect_log_lines", 0))


def _no_place(cls: FaultClass, report: dict[str, Any], kinds: Collection[str], writes: int) -> str | None:
    """Why nothing in this run gave ``cls`` a place to strike (``None``: it had one, or it needs none). ``kinds``:
    the run's targets' kinds (``standard``, ``fifo``, ``async``); ``writes``: the writes the environments' logs
    show."""
    if cls.place is None:
        return None
    lacks, why = _NO_PLACE[cls.place]
    return why if lacks(report, kinds, writes) else None


def watched_writes(run_dir: Path) -> int:
    """The writes in the run's chaos logs that a kill or a stall may follow (``faults.KILL_POINT_ROLES``)."""
    records = read_jsonl(sorted(run_dir.glob("chaos-*.jsonl")))
    return sum(1 for r in records if r.get("event") == "write" and r.get("role") in KILL_POINT_ROLES)


def forced_strikes(run_dir: Path) -> dict[str, int]:
    """Every fault class -> how many of its strikes the run forced (``chaos/forced_strikes.py``: the kill records
    in the run's chaos logs marked ``forced``)."""
    forced = dict.fromkeys((cls.name for cls in FAULT_CLASSES), 0)
    for record in read_jsonl(sorted(run_dir.glob("chaos-*.jsonl"))):
        if record.get("event") == "kill" and record.get("forced") and record.get("phase") in CLASS_OF_PHASE:
            forced[CLASS_OF_PHASE[record["phase"]].name] += 1
    return forced


class FaultsBlock(TypedDict):
    """The chaos report's ``faults`` section (:func:`faults_block`)."""

    asked: dict[str, float]  # every fault class -> the fraction asked (0 for one not asked)
    struck: dict[str, int]  # every fault class -> how many times it struck
    struck_total: int
    forced: dict[str, int]  # every fault class -> how many of its strikes were forced (chaos/forced_strikes.py)
    kills_struck: int  # every kill, the watchdog's deadline kills included
    not_struck: list[dict[str, Any]]  # {"fault", "flag", "asked", "why"} each
    could_not_strike: list[dict[str, Any]]  # {"fault", "flag", "asked", "why", "strikes"} each
    left_out: list[dict[str, Any]]  # {"fault", "flag", "asked", "why", "instead"} each


def faults_block(
    report: dict[str, Any],
    chaos: ChaosConfig,
    kinds: Collection[str],
    writes: int,
    left_out: list[dict[str, Any]] | None = None,
    forced: Mapping[str, int] | None = None,
) -> FaultsBlock:
    """The report's ``faults`` block: ``asked`` (each class's fraction, 0 for one not asked), ``struck`` (each
    class's count), ``struck_total``, ``kills_struck`` (every kill, the watchdog's deadline kills included),
    ``not_struck`` and ``could_not_strike`` (``{"fault", "flag", "asked", "why"}`` each: the module docstring), and
    ``left_out``: the classes left at their default that the stack gave no place, so never drawn
    (``any_stack/inert_faults.py``: ``{"fault", "flag", "asked", "why", "instead"}`` each, ``asked`` the default).

    :param chaos: the chaos the run drew (a class left out at 0). :param kinds: the kinds of the run's targets
        (``standard``, ``fifo``, ``async``). :param writes: the watched writes the run's chaos logs show.
        :param left_out: the classes left out of the draw. :default: none. :param forced: each class's forced strikes
        (:func:`forced_strikes`). :default: none."""
    fractions = asdict(chaos)
    struck = _struck(report)
    not_struck, could_not = [], []
    for cls in FAULT_CLASSES:
        asked = float(fractions[cls.field])
        if asked <= 0 or struck[cls.name] > 0:
            continue
        reason = _no_place(cls, report, kinds, writes)
        row = {"fault": cls.name, "flag": cls.flag, "asked": asked}
        if reason is None:
            not_struck.append({**row, "why": cls.strikes})
        else:
            could_not.append({**row, "why": reason, "strikes": cls.strikes})
    return {
        "asked": {cls.name: float(fractions[cls.field]) for cls in FAULT_CLASSES},
        "struck": struck,
        "struck_total": sum(struck.values()),
        "forced": {cls.name: int((forced or {}).get(cls.name, 0)) for cls in FAULT_CLASSES},
        "kills_struck": sum(int(v) for v in (report["total"].get("kills") or {}).values()),
        "not_struck": not_struck,
        "could_not_strike": could_not,
        "left_out": list(left_out or []),
    }


def render_faults(block: Mapping[str, Any]) -> list[str]:
    """The terminal's lines: what struck, then each class asked for that did not."""
    struck = ", ".join(f"{name}={n}" for name, n in block["struck"].items() if block["asked"][name] > 0 or n)
    out = [f"faults struck: {block['struck_total']} ({struck or 'none asked'}); {block['kills_struck']} kills in all"]
    forced = ", ".join(f"{name}={n}" for name, n in (block.get("forced") or {}).items() if n)
    if forced:
        out.append(
            f"  forced: {forced} (the draw left these classes under {MIN_STRIKES} strikes: invocations of the input's"
            " last keys were struck for sure)"
        )
    out += [f"  not struck: {r['flag']} {r['asked']:g}: {r['why']}" for r in block["not_struck"]]
    out += [
        f"  could not strike: {r['flag']} {r['asked']:g}: {r['why']}; {r['strikes']}" for r in block["could_not_strike"]
    ]
    out += [
        f"  left out of the draw: {r['flag']} {r['asked']:g} (default): {r['why']}; {r['instead']}"
        for r in block.get("left_out") or []
    ]
    return out


def untested(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The classes of the crash window (``forced_strikes.FORCIBLE``: kills and stalls between a write and the end of
    its invocation) the run asked for that never struck, forced strikes included: ``not_struck`` and
    ``could_not_strike`` rows."""
    return [r for r in [*block["not_struck"], *block["could_not_strike"]] if r["fault"] in FORCIBLE]


def ok_prefix(block: Mapping[str, Any]) -> str:
    """The passing verdict line's head: ``OK``, or ``OK, crash window untested (<flag> <fraction>, ...)`` when a
    class of the crash window never struck (:func:`untested`): an OK that names what it did not prove."""
    flags = ", ".join(f"{r['flag']} {r['asked']:g}" for r in untested(block))
    return f"OK, crash window untested ({flags})" if flags else "OK"


def required(verdict: tuple[int, list[str]], block: Mapping[str, Any], require: bool) -> tuple[int, list[str]]:
    """The per-key ``verdict`` (exit code, reasons) under ``--require-faults`` (``require``): a run the verdict
    passed exits :data:`EXIT_FAULTS_NOT_STRUCK` when a class asked for could strike and never did (``block``:
    :func:`faults_block`), with a reason naming each flag; any other verdict stands as it is."""
    code, reasons = verdict
    if code != 0 or not require or not block["not_struck"]:
        return code, reasons
    flags = ", ".join(f"{r['flag']} {r['asked']:g}" for r in block["not_struck"])
    return EXIT_FAULTS_NOT_STRUCK, [
        f"--require-faults: {len(block['not_struck'])} fault classes asked for could strike and never did ({flags})"
    ]
