"""Which of the faults a chaos run asked for struck (issue 43, item 2): a run that exercised nothing says so.

Per fault class (:data:`FAULT_CLASSES`: each kind of kill, stalls, resends, concurrent duplicates and Lambda's
duplicate asynchronous deliveries), how many struck, read from the report the run already built: the kills by kind
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
the first send, from the stack's template (``profiles/inert_faults.py``): a flag the user gave is refused then, and a
default one is left out of the draw and listed as ``left_out``; ``could_not_strike`` keeps what only the run shows
(a function that could write and never did).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..base.exit_codes import EXIT_FAULTS_NOT_STRUCK
from ..base.json_lines import read_jsonl
from ..chaos.fault_model import AFTER_COMPLETE, AFTER_EFFECT, AFTER_WRITE, RANDOM_MOMENT, TIMEOUT, ChaosConfig
from ..chaos.faults import KILL_POINT_ROLES


@dataclass(frozen=True)
class FaultClass:
    """One fault class: its name in the report, its ``ChaosConfig`` field, the chaos command's flag and what makes
    it strike (shown when it did not)."""

    name: str
    field: str
    flag: str
    strikes: str


FAULT_CLASSES = (
    FaultClass(
        "after_effect",
        "crash_after_charge",
        "--crash-after-effect",
        "kills at the runtime's effect line, so only a handler on effectively_once_runtime with a declared effect;"
        " --crash-after-write kills after any handler's writes",
    ),
    FaultClass(
        AFTER_WRITE,
        "crash_after_write",
        "--crash-after-write",
        "kills after a write the local AWS accepted (DynamoDB, S3, SQS, SNS, a SQL commit): raise it or send more"
        " lines",
    ),
    FaultClass(
        RANDOM_MOMENT,
        "crash_random",
        "--crash-random",
        "a moment drawn within twice the longest invocation so far (at least 1 s) strikes only if the invocation"
        " still runs then: a higher fraction or more lines",
    ),
    FaultClass(
        AFTER_COMPLETE,
        "crash_after_complete",
        "--crash-after-complete",
        "one draw per invocation: raise it or send more lines",
    ),
    FaultClass(
        "stall",
        "timeout",
        "--timeouts",
        "stalls at the first write the local AWS accepts or the effect line, so a handler with neither is never"
        " stalled; --crash-random strikes any handler",
    ),
    FaultClass("resend", "resend", "--resend", "one draw per key: raise it or send more keys"),
    FaultClass(
        "concurrent_duplicate",
        "concurrent_duplicates",
        "--concurrent-duplicates",
        "never on a FIFO queue (its deduplication id drops the twin): --resend sends FIFO copies after the"
        " deduplication interval",
    ),
    FaultClass(
        "async_duplicate",
        "async_duplicate",
        "--async-duplicate",
        "only an asynchronous target (an EventBridge rule's, an SNS topic's or a directly invoked function) is"
        " delivered twice",
    ),
    FaultClass(
        "partial_batch_write",
        "partial_batch_write",
        "--partial-batch-writes",
        "a DynamoDB BatchWriteItem call of two or more requests, off the idempotency table, answered with part of"
        " them in UnprocessedItems: raise it or send more lines",
    ),
    FaultClass(
        "throttle",
        "throttle",
        "--throttle",
        "a write call the runner watches (DynamoDB, S3, SQS, SNS), off the idempotency table, failing with the"
        " service's throttling error: raise it or send more lines",
    ),
)
#: Each kill class's kill phase (``total.kills``).
_KILL_PHASE = {AFTER_EFFECT: AFTER_EFFECT, AFTER_WRITE: AFTER_WRITE, RANDOM_MOMENT: RANDOM_MOMENT}
_KILL_PHASE |= {AFTER_COMPLETE: AFTER_COMPLETE, "stall": TIMEOUT}


def _struck(report: dict[str, Any]) -> dict[str, int]:
    """How many of each class struck, from the report's kills, sends and asynchronous path."""
    kills = report["total"].get("kills") or {}
    sends = (report.get("sends") or {}).get("by_kind") or {}
    return {
        **{name: int(kills.get(phase, 0)) for name, phase in _KILL_PHASE.items()},
        "resend": int(sends.get("resend", 0)) + int(sends.get("late_resend", 0)),
        "concurrent_duplicate": int(sends.get("concurrent_duplicate", 0)),
        "async_duplicate": int((report.get("async") or {}).get("delivered_twice", 0)),
        "partial_batch_write": int(_sdk(report).get("unprocessed_items", 0)),
        "throttle": int(_sdk(report).get("throttled", 0)),
    }


def _sdk(report: dict[str, Any]) -> dict[str, Any]:
    """The SDK faults by kind (``proof/sdk_faults_seen.py``); empty for a report without them."""
    return dict((report.get("sdk_faults") or {}).get("by_kind") or {})


def _no_place(cls: FaultClass, report: dict[str, Any], kinds: Collection[str], writes: int) -> str | None:
    """Why nothing in this run gave ``cls`` a place to strike (``None``: it had one). ``kinds``: the run's targets'
    kinds (``standard``, ``fifo``, ``async``); ``writes``: the writes the environments' logs show."""
    effect_lines = int(report["total"].get("effect_log_lines", 0))
    if cls.name == AFTER_EFFECT and effect_lines == 0:
        return "no effect line in the run: the handler declares no effect of the runtime"
    if cls.name == "throttle" and not (report.get("sdk_faults") or {}).get("aws_write_calls"):
        return "no DynamoDB, S3, SQS or SNS write call in the run (a SQL commit is never throttled)"
    if cls.name == AFTER_WRITE and writes == 0:
        return "no watched write in the run (DynamoDB, S3, SQS, SNS, a SQL commit)"
    if cls.name == "stall" and effect_lines == 0 and writes == 0:
        return "no effect line and no watched write in the run"
    if cls.name == "concurrent_duplicate" and not set(kinds) - {"fifo"}:
        return "every target is a FIFO queue"
    if cls.name == "async_duplicate" and "async" not in kinds:
        return "no asynchronous target"
    if cls.name == "partial_batch_write" and not (report.get("sdk_faults") or {}).get("batch_write_calls"):
        return "no DynamoDB BatchWriteItem call in the run"
    return None


def watched_writes(run_dir: Path) -> int:
    """The writes in the run's chaos logs that a kill or a stall may follow (``faults.KILL_POINT_ROLES``)."""
    records = read_jsonl(sorted(run_dir.glob("chaos-*.jsonl")))
    return sum(1 for r in records if r.get("event") == "write" and r.get("role") in KILL_POINT_ROLES)


def faults_block(
    report: dict[str, Any],
    chaos: ChaosConfig,
    kinds: Collection[str],
    writes: int,
    left_out: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report's ``faults`` block: ``asked`` (each class's fraction, 0 for one not asked), ``struck`` (each
    class's count), ``struck_total``, ``kills_struck`` (every kill, the watchdog's deadline kills included),
    ``not_struck`` and ``could_not_strike`` (``{"fault", "flag", "asked", "why"}`` each: the module docstring), and
    ``left_out``: the classes left at their default that the stack gave no place, so never drawn
    (``profiles/inert_faults.py``: ``{"fault", "flag", "asked", "why", "instead"}`` each, ``asked`` the default).

    :param chaos: the chaos the run drew (a class left out at 0). :param kinds: the kinds of the run's targets
        (``standard``, ``fifo``, ``async``). :param writes: the watched writes the run's chaos logs show.
        :param left_out: the classes left out of the draw. :default: none."""
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
        "kills_struck": sum(int(v) for v in (report["total"].get("kills") or {}).values()),
        "not_struck": not_struck,
        "could_not_strike": could_not,
        "left_out": list(left_out or []),
    }


def render_faults(block: dict[str, Any]) -> list[str]:
    """The terminal's lines: what struck, then each class asked for that did not."""
    struck = ", ".join(f"{name}={n}" for name, n in block["struck"].items() if block["asked"][name] > 0 or n)
    out = [f"faults struck: {block['struck_total']} ({struck or 'none asked'}); {block['kills_struck']} kills in all"]
    out += [f"  not struck: {r['flag']} {r['asked']:g}: {r['why']}" for r in block["not_struck"]]
    out += [
        f"  could not strike: {r['flag']} {r['asked']:g}: {r['why']}; {r['strikes']}" for r in block["could_not_strike"]
    ]
    out += [
        f"  left out of the draw: {r['flag']} {r['asked']:g} (default): {r['why']}; {r['instead']}"
        for r in block.get("left_out") or []
    ]
    return out


def required(verdict: tuple[int, list[str]], block: dict[str, Any], require: bool) -> tuple[int, list[str]]:
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
