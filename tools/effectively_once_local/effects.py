"""The chaos run's report, per business key, Jepsen-style: what was sent against what was done.

The business key of each sent message comes from the input (the ``--key`` JMESPath over the body), never from what
the handler keys on: a handler keyed on the wrong thing (the SQS ``messageId``) then shows up as duplicates and
unexpected keys.

Effects per key are counted in the effect's own store when one is named (``--effect-table``/``--effect-key``: one
item per executed effect, counted per value of the key attribute), else from the runtime's effect log lines
(``message`` = ``effect executed``, field ``idempotency_key``) in the function logs. With a store, the log lines
cross-check it (``cross_check``).

Per key: **lost** (a valid key with no effect and not in a DLQ), **duplicated** (more than one effect), **unexpected**
(an effect for a key never sent). A second execution of a key's effect is allowed only where a kill fell between
that key's effect and its completion, and only when the effect takes the key (so the second execution is answered,
not repeated): with a store, that is checked (several effect lines, one item: the conditional put keyed on the
idempotency key answered the replay); without one, the user states it (``--effect-takes-key``). Those keys are
reported as ``replayed_after_kill``. More effect lines than the kills on that key explain are
``unexplained_replays``: a duplicate got past the idempotency layer (only the effect's key stopped it).

Without a store, the effect log lines are a lower bound of the effects when a stall or a deadline kill happened
(``effects_lower_bound``): the runtime writes an effect's line after the effect returned, so an effect stopped by a
real timeout after it acted leaves no line, and a duplicate effect of that key could go unseen.

Kills are attributed from the logs (chaos.py): a kill's key is the last effect line of the killed request in the
killed process's function log.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from .chaos import AFTER_COMPLETE, AFTER_EFFECT, DEADLINE, TIMEOUT
from .json_lines import read_jsonl

EFFECT_MESSAGE = names.EFFECT_EXECUTED
KILL_KINDS = (AFTER_EFFECT, AFTER_COMPLETE, TIMEOUT, DEADLINE)
#: The per-key classes, in the order shown.
COUNT_KEYS = (
    "messages_sent",
    "keys_sent",
    "invalid_lines",
    "effects",
    "effect_log_lines",
    "dead_lettered_keys",
    "lost",
    "duplicated",
    "unexpected",
    "replayed_after_kill",
    "unexplained_replays",
)


def effect_lines(run_dir: Path) -> list[dict[str, Any]]:
    """Every effect line in the run's function logs (a line cut by a kill is skipped)."""
    lines = []
    for path in sorted(run_dir.glob("function-*.log")):
        for doc in read_jsonl([path]):
            if isinstance(doc, dict) and doc.get(names.FIELD_MESSAGE) == EFFECT_MESSAGE:
                lines.append({**doc, "_file": path.name})
    return lines


def kills(run_dir: Path) -> list[dict[str, Any]]:
    """Every kill record, each with ``key``: the key it may have interrupted between its effect and its completion
    (``None`` for a kill after completion, or before any effect of its request)."""
    lines = effect_lines(run_dir)
    out = []
    for path in sorted(run_dir.glob("chaos-*.jsonl")):
        label = path.stem[len("chaos-") :].rsplit("-", 1)[0]
        for record in read_jsonl([path]):
            if record.get("event") != "kill":
                continue
            key = None
            if record.get("phase") != AFTER_COMPLETE:
                log_name = f"function-{label}-{record.get('pid')}.log"
                mine = [
                    ln
                    for ln in lines
                    if ln["_file"] == log_name and ln.get("function_request_id") == record.get("request_id")
                ]
                key = mine[-1].get(names.FIELD_IDEMPOTENCY_KEY) if mine else None
            out.append({**record, "key": key})
    return out


def build(
    sent: Counter[str],
    invalid_lines: int,
    messages_sent: int,
    dlq_keys: set[str],
    dead_lettered: int,
    log_counts: Counter[str],
    store_counts: Counter[str] | None,
    kill_records: list[dict[str, Any]],
    effect_takes_key: bool,
) -> dict[str, Any]:
    """The report. ``sent``: business key -> messages sent; ``store_counts``: ``None`` when no store is named."""
    killed: Counter[str] = Counter(k["key"] for k in kill_records if k.get("key"))
    effects = store_counts if store_counts is not None else log_counts
    lost = sorted(k for k in sent if effects[k] == 0 and k not in dlq_keys)
    duplicated, replayed, unexplained = [], [], []
    for key in sorted(k for k in set(effects) | set(log_counts) if k in sent):  # other keys are unexpected
        lines = log_counts[key]
        if store_counts is not None:
            if store_counts[key] > 1:
                duplicated.append(key)
                continue
            takes_key = store_counts[key] == 1
        else:
            takes_key = effect_takes_key
        if lines > 1:
            if not takes_key:
                duplicated.append(key)
            elif lines - 1 <= killed[key]:
                replayed.append(key)
            else:
                unexplained.append(key)
    unexpected = sorted(k for k in set(effects) | set(log_counts) if k not in sent and (effects[k] or log_counts[k]))
    per_kind = Counter(k.get("phase") for k in kill_records)
    report: dict[str, Any] = {
        "total": {
            "messages_sent": messages_sent,
            "keys_sent": len(sent),
            "invalid_lines": invalid_lines,
            "effects": sum(effects[k] for k in effects),
            "effect_log_lines": sum(log_counts.values()),
            "dead_lettered_keys": len(dlq_keys & set(sent)),
            "dead_lettered": dead_lettered,
            "lost": len(lost),
            "duplicated": len(duplicated),
            "unexpected": len(unexpected),
            "replayed_after_kill": len(replayed),
            "unexplained_replays": len(unexplained),
            "kills": {**{kind: 0 for kind in KILL_KINDS}, **per_kind},
            "kills_between_effect_and_completion": sum(killed.values()),
        },
        "effects_counted_from": "store" if store_counts is not None else "effect log lines",
        # The runtime writes an effect's line after the effect returned: a real stall or deadline kill inside an
        # effect leaves an effect that ran without its line, so without a store the counts are a lower bound then.
        "effects_lower_bound": store_counts is None and bool(per_kind[TIMEOUT] + per_kind[DEADLINE]),
        "keys": {
            "lost": lost,
            "duplicated": duplicated,
            "unexpected": unexpected[:100],
            "replayed_after_kill": replayed,
            "unexplained_replays": unexplained,
        },
        "replayed_after_kill_safe_because": (
            "each of these keys has one item in the effect store although its effect ran more than once: the effect "
            "takes the idempotency key (a conditional put keyed on it answered the replay), and every replay follows "
            "a kill between that key's effect and its completion"
            if store_counts is not None
            else "stated with --effect-takes-key: the effect passes the idempotency key on (a provider or a "
            "conditional write that answers a repeated key); every replay follows a kill between that key's effect "
            "and its completion"
        ),
    }
    if store_counts is not None:
        report["cross_check"] = {
            # An effect without its line: the process died between the effect and its log line.
            "store_items_without_log_line": sum(max(0, store_counts[k] - log_counts[k]) for k in store_counts),
            # A line whose key has no item: a replay answered by the key (see replayed_after_kill), or a handler whose
            # idempotency key is not the business key.
            "log_keys_without_store_item": sum(1 for k in log_counts if store_counts[k] == 0),
        }
    return report


def verdict(report: dict[str, Any]) -> tuple[int, list[str]]:
    """Exit 1 on anything lost, duplicated, unexpected or replayed without a kill to explain it."""
    total = report["total"]
    reasons = []
    if total["lost"]:
        reasons.append(f"{total['lost']} keys lost (a valid key with no effect and not in a DLQ)")
    if total["duplicated"]:
        reasons.append(f"{total['duplicated']} keys duplicated (more than one effect for a key)")
    if total["unexpected"]:
        reasons.append(f"{total['unexpected']} unexpected keys (an effect for a key never sent)")
    if total["unexplained_replays"]:
        reasons.append(
            f"{total['unexplained_replays']} keys whose effect ran again without a kill between their effect and "
            "completion: a duplicate got past the idempotency layer"
        )
    return (1 if reasons else 0), reasons


def render(report: dict[str, Any]) -> str:
    total = report["total"]
    width = max(len(k) for k in COUNT_KEYS) + 2
    out = [f"effects counted from: {report['effects_counted_from']}"]
    if report.get("effects_lower_bound"):
        out.append(
            "  a lower bound: stalls or deadline kills may have stopped an effect after it acted and before its line;"
            " name the effect's store (--effect-table, --effect-key) for an exact count"
        )
    out += [key.ljust(width) + str(total[key]).rjust(8) for key in COUNT_KEYS]
    out.append("kills: " + ", ".join(f"{k}={v}" for k, v in total["kills"].items()))
    for name in ("lost", "duplicated", "unexpected", "unexplained_replays"):
        keys = report["keys"][name]
        if keys:
            out.append(f"{name}: " + ", ".join(json.dumps(k) for k in keys[:10]) + (" ..." if len(keys) > 10 else ""))
    if total["replayed_after_kill"]:
        out.append("replayed after a kill, safe because " + report["replayed_after_kill_safe_because"])
    return "\n".join(out)
