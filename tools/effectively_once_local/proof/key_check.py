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
reported as ``replayed_after_kill``, and so are the keys such a kill struck whose replay the store answered
without a second effect line (a kill after the effect's write, before its line, or after
the line: the record was never completed, so the key ran again). More effect lines than the kills on that key
explain are ``unexplained_replays``: a duplicate got past the idempotency layer (only the effect's key stopped it).

Without a store, the effect log lines are a lower bound of the effects when a stall or a deadline kill happened
(``effects_lower_bound``): the runtime writes an effect's line after the effect returned, so an effect stopped by a
real timeout after it acted leaves no line, and a duplicate effect of that key could go unseen.

Kills are attributed from the logs (``chaos/fault_model.py``): a kill's key is the last effect line of the killed
request in the killed process's function log.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from effectively_once_runtime import names
from effectively_once_runtime.effects.unkeyed import MARKER_INFIX
from effectively_once_runtime.identity import normalizer

from ..base.json_lines import read_jsonl
from ..chaos.fault_model import (
    AFTER_CHARGE,
    AFTER_COMPLETE,
    AFTER_EFFECT,
    AFTER_WRITE,
    DEADLINE,
    KILL_PHASES,
    RANDOM_MOMENT,
    TIMEOUT,
)
from ..chaos.faults import IDEMPOTENCY_RECORD, KILL_POINT_ROLES, record_hash, record_hash_candidates
from ..chaos.write_services import WRITE_SERVICES
from .dead_letters import render_dead_letters, verdict_reason
from .faults_struck import render_faults
from .line_states import FAILING_STATES, dlq_why, render_async
from .sdk_faults_seen import render_sdk_faults
from .torn_moments import render_torn

EFFECT_MESSAGE = names.EFFECT_EXECUTED
#: The kill kinds of the report (``total.kills``, the terminal's ``kills:`` line): every phase but the payments seam's.
KILL_KINDS = tuple(phase for phase in KILL_PHASES if phase != AFTER_CHARGE)
#: What a kill after a write followed, by the write's service (``chaos/write_services.py``: each service's
#: ``write_kind``): the report's ``total.kills_after_write``, passing runs included, so a run can say whether its SQL
#: commits were ever struck. HTTP calls are no watched writes: no kill follows one.
WRITE_KINDS: dict[str, str] = {name: service.write_kind for name, service in WRITE_SERVICES.items()}
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
    "replayed_after_error",
    "unexplained_replays",
    "duplicates_suppressed",
)


def log_lines(run_dir: Path, message: str) -> list[dict[str, Any]]:
    """Every line with ``message`` in the run's function logs, each with ``_file``, its log's name (a line cut by a
    kill is skipped)."""
    lines = []
    for path in sorted(run_dir.glob("function-*.log")):
        for doc in read_jsonl([path]):
            if isinstance(doc, dict) and doc.get(names.FIELD_MESSAGE) == message:
                lines.append({**doc, "_file": path.name})
    return lines


def effect_lines(run_dir: Path) -> list[dict[str, Any]]:
    """Every effect line in the run's function logs (a line cut by a kill is skipped)."""
    return log_lines(run_dir, EFFECT_MESSAGE)


def unkeyed_lines(run_dir: Path, normalize: tuple[str, ...] = ()) -> dict[str, Any]:
    """The runtime's lines for un-keyed effects (``effects.unkeyed``: calls no key protects), counted from the run's
    function logs: ``possibly_lost`` (``effect possibly lost``, ``delivery="at_most_once"``: a replay found the
    call's claim without its completion and skipped the call) and ``repeated`` (``effect repeated``,
    ``delivery="at_least_once"``: the call made again after an attempt that did not complete). Both are upper
    bounds (a kill between the call and its completion counts as possibly lost though the call happened; a kill
    between the attempt and the call counts as repeated though nothing was): a checker compares them with what
    the store of the call shows, never the other way round.

    :returns: ``{"possibly_lost": n, "repeated": n, "calls": {"<effect> <adapter> <delivery>": {"effect",
        "adapter", "delivery", "possibly_lost", "repeated", "keys": {business key: lines}}}}``; the adapter is read
        from the line's marker id (``<key prefix>#effect-marker#<adapter>#...``); keys normalised as the run's.
    """
    same = normalizer(normalize)
    counts = {"possibly_lost": names.MSG_EFFECT_POSSIBLY_LOST, "repeated": names.MSG_EFFECT_REPEATED}
    calls: dict[str, dict[str, Any]] = {}
    totals = dict.fromkeys(counts, 0)
    for what, message in counts.items():
        for line in log_lines(run_dir, message):
            marker = str(line.get(names.FIELD_EFFECT_MARKER) or "")
            adapter = marker.partition(f"#{MARKER_INFIX}#")[2].partition("#")[0] or "unknown"
            effect, delivery = str(line.get(names.FIELD_EFFECT)), str(line.get(names.FIELD_DELIVERY))
            call = calls.setdefault(
                f"{effect} {adapter} {delivery}",
                {"effect": effect, "adapter": adapter, "delivery": delivery, **dict.fromkeys(counts, 0), "keys": {}},
            )
            call[what] += 1
            totals[what] += 1
            key = same(str(line.get(names.FIELD_IDEMPOTENCY_KEY)))
            call["keys"][key] = call["keys"].get(key, 0) + 1
    return {**totals, "calls": dict(sorted(calls.items()))}


def _between_effect_and_completion(kill: dict[str, Any], writes: list[dict[str, Any]]) -> str | None:
    """The key a kill interrupted between its effect and its completion, proved from the environment's write log
    (``chaos/faults.py``: one counter numbers the writes and the kill): the last in-progress put of a Powertools record
    before the kill, then at least one effect write (a kill point), and no later write of that record (its
    completion, or its delete after a failure). The record's id ends in the hash of its key: matched against the
    killed batch's keys. ``None`` when the order shows no such window."""
    mine = [w for w in writes if w.get("request_id") == kill.get("request_id") and w["seq"] < kill.get("seq", 0)]
    started = [
        i for i, w in enumerate(mine) if w.get("role") == IDEMPOTENCY_RECORD and w.get("op") == "dynamodb.PutItem"
    ]
    if not started:
        return None
    record = mine[started[-1]].get("record_id")
    after = mine[started[-1] + 1 :]
    if any(w.get("role") == IDEMPOTENCY_RECORD and w.get("record_id") == record for w in after):
        return None
    if not any(w.get("role") in KILL_POINT_ROLES for w in after):
        return None
    digest = record_hash(record)
    return next((k for k in kill.get("batch_keys") or [] if k and digest in record_hash_candidates(k)), None)


def kills(run_dir: Path) -> list[dict[str, Any]]:
    """Every kill record, each with ``key``: the key it interrupted between its effect and its completion (``None``
    for a kill after completion, or before any effect of its request). Where the environment's writes were watched
    (``chaos/faults.py``) the key is proved from the order of its writes and the kill; else it is the last effect line
    of the killed request in the killed process's function log. ``proved``: the key is known to have been between
    its effect and its completion (from the writes, or a kill at the effect line itself), not only the last line's
    (a stall or deadline whose window the writes do not show); ``log``: the chaos log's file name."""
    lines = effect_lines(run_dir)
    out = []
    for path in sorted(run_dir.glob("chaos-*.jsonl")):
        label = path.stem[len("chaos-") :].rsplit("-", 1)[0]
        records = read_jsonl([path])
        writes = [r for r in records if r.get("event") == "write" and isinstance(r.get("seq"), int)]
        for record in records:
            if record.get("event") != "kill":
                continue
            key = None
            phase = record.get("phase")
            watched = "seq" in record and any(w.get("request_id") == record.get("request_id") for w in writes)
            if record.get("effect_line_key"):
                key = record["effect_line_key"]  # a stall at the effect line: the key of that very line (exact)
            elif phase != AFTER_EFFECT and watched:
                key = None if phase == AFTER_COMPLETE else _between_effect_and_completion(record, writes)
            proved = key is not None or phase == AFTER_EFFECT
            if key is None and phase in (AFTER_EFFECT, TIMEOUT, DEADLINE):
                # At the effect line itself (exact: the effect returned, its record is not completed); or a stall or
                # deadline whose window the writes do not show (an effect answered from its key writes nothing the
                # local AWS accepts): the killed request's last effect line.
                log_name = f"function-{label}-{record.get('pid')}.log"
                mine = [
                    ln
                    for ln in lines
                    if ln["_file"] == log_name and ln.get("function_request_id") == record.get("request_id")
                ]
                key = mine[-1].get(names.FIELD_IDEMPOTENCY_KEY) if mine else None
            out.append({**record, "key": key, "proved": proved and key is not None, "log": path.name})
    return out


def kills_after_write(kill_records: list[dict[str, Any]]) -> dict[str, int]:
    """The kills after a write (phase ``after_write``) by the kind of the write they followed (:data:`WRITE_KINDS`,
    read from the kill's ``last_write``; ``other`` for a write of no kind there): every kind, 0 for one never
    struck."""
    struck = Counter(
        WRITE_KINDS.get(str((k.get("last_write") or {}).get("op", "")).split(".", 1)[0], "other")
        for k in kill_records
        if k.get("phase") == AFTER_WRITE
    )
    return {**dict.fromkeys(WRITE_KINDS.values(), 0), **struck}


#: Why a key replayed after a kill is safe, with an effect store named (``True``) and without one.
_SAFE_BECAUSE = {
    True: "each of these keys has one item in the effect store although a kill struck between its effect and its "
    "completion and the key ran again: the effect takes the idempotency key (a conditional put keyed on it "
    "answered the replay, whether or not the replay logged a second effect line)",
    False: "stated with --effect-takes-key: the effect passes the idempotency key on (a provider or a "
    "conditional write that answers a repeated key); every replay follows a kill between that key's effect "
    "and its completion",
}
#: The states of a key sent whose effect ran more than once, by what explains it (:func:`_sort_repeats`).
_REPEATS = ("duplicated", "replayed_after_kill", "replayed_after_error", "unexplained_replays")


def _sort_repeats(
    sent: Counter[str],
    effects: Counter[str],
    log_counts: Counter[str],
    store_counts: Counter[str] | None,
    explained: tuple[Counter[str], Counter[str], Counter[str]],
    effect_takes_key: bool,
    dlq_keys: set[str],
) -> dict[str, list[str]]:
    """Each key sent whose effect ran more than once, sorted, under its state in :data:`_REPEATS`: duplicated (more
    than one store item, or lines from an effect that takes no key), or replayed after a kill, after an error, or
    unexplained; ``explained``: per key, the kills between its effect and completion, its ``effect repeated after
    failure`` lines, and the kills proved to have struck after its effect (``kills``' ``proved``).

    A key with one effect line is replayed after a kill too when such a proved kill struck it and the effect took
    the key (one store item, or ``--effect-takes-key``) and it is not in a DLQ: its record was never completed, so it
    ran again and the store answered the replay, with or without a second line."""
    killed, failed, answered = explained
    sorts: dict[str, list[str]] = {state: [] for state in _REPEATS}
    for key in sorted(k for k in set(effects) | set(log_counts) if k in sent):  # other keys are unexpected
        lines = log_counts[key]
        if store_counts is not None and store_counts[key] > 1:
            sorts["duplicated"].append(key)
            continue
        takes_key = store_counts[key] == 1 if store_counts is not None else effect_takes_key
        if lines <= 1:
            if answered[key] and takes_key and key not in dlq_keys:
                sorts["replayed_after_kill"].append(key)
            continue
        if not takes_key:
            sorts["duplicated"].append(key)
        elif lines - 1 <= killed[key]:
            sorts["replayed_after_kill"].append(key)
        elif lines - 1 <= killed[key] + failed[key]:
            sorts["replayed_after_error"].append(key)
        else:
            sorts["unexplained_replays"].append(key)
    return sorts


def _cross_check(store_counts: Counter[str], log_counts: Counter[str]) -> dict[str, int]:
    """The effect store against the effect lines, key by key."""
    return {
        # An effect without its line: the process died between the effect and its log line.
        "store_items_without_log_line": sum(max(0, store_counts[k] - log_counts[k]) for k in store_counts),
        # A line whose key has no item: a replay answered by the key (see replayed_after_kill), or a handler whose
        # idempotency key is not the business key.
        "log_keys_without_store_item": sum(1 for k in log_counts if store_counts[k] == 0),
    }


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
    failed_after_effect: Counter[str] | None = None,
    batch_kills: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report. ``sent``: business key -> messages sent; ``store_counts``: ``None`` when no store is named;
    ``failed_after_effect``: per key, the runtime's ``effect repeated after failure`` lines (the record failed after
    its effect returned, so its retry runs the effect again: a replay that no kill explains, but that line does);
    ``batch_kills``: the other keys each kill's invocation wrote before it where no per-record boundary shows
    (``executions.batch_kills``): they count as kills between those keys' effects and completions, never in the
    kills by kind.
    """
    struck = kill_records + list(batch_kills or [])
    killed: Counter[str] = Counter(k["key"] for k in struck if k.get("key"))
    answered: Counter[str] = Counter(k["key"] for k in struck if k.get("key") and k.get("proved"))
    effects = store_counts if store_counts is not None else log_counts
    lost = sorted(k for k in sent if effects[k] == 0 and k not in dlq_keys)
    explained = (killed, failed_after_effect or Counter(), answered)
    repeats = _sort_repeats(sent, effects, log_counts, store_counts, explained, effect_takes_key, dlq_keys)
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
            "duplicated": len(repeats["duplicated"]),
            "unexpected": len(unexpected),
            **{state: len(repeats[state]) for state in _REPEATS[1:]},
            "kills": {**{kind: 0 for kind in KILL_KINDS}, **per_kind},
            "kills_after_write": kills_after_write(kill_records),
            # Each key a kill struck between its effect and completion, the keys a kill replays with its batch too.
            "kills_between_effect_and_completion": sum(killed.values()),
        },
        "effects_counted_from": "store" if store_counts is not None else "effect log lines",
        # The runtime writes an effect's line after the effect returned: a real stall or deadline kill inside an
        # effect leaves an effect that ran without its line, so without a store the counts are a lower bound then.
        # A kill after a write or at a random moment can also stop an effect between its write and its line.
        "effects_lower_bound": store_counts is None
        and bool(per_kind[TIMEOUT] + per_kind[DEADLINE] + per_kind[AFTER_WRITE] + per_kind[RANDOM_MOMENT]),
        "keys": {"lost": lost, "duplicated": repeats["duplicated"], "unexpected": unexpected[:100]}
        | {state: repeats[state] for state in _REPEATS[1:]},
        "replayed_after_kill_safe_because": _SAFE_BECAUSE[store_counts is not None],
    }
    if store_counts is not None:
        report["cross_check"] = _cross_check(store_counts, log_counts)
    return report


#: What each failing state means, in the verdict's words.
_FAILING = {
    "stranded": "valid keys stranded (only in a DLQ after the run's redrive, never effected)",
    "never_delivered": "lines never delivered (SQS accepted them, the delivery log never shows them)",
    "vanished": "lines vanished (delivered and reported done, with no effect and no DLQ copy)",
    "incomplete": "keys incomplete (their effect in some of the run's required stores and not in the others)",
    "reordered": "keys reordered (executed before a key of their FIFO group that SQS sequenced earlier)",
}


def verdict(report: dict[str, Any]) -> tuple[int, list[str]]:
    """Exit 1 on anything lost, duplicated, unexpected or replayed without a kill to explain it, and, with the
    per-line states (``states``), on any line stranded, never delivered, vanished, incomplete or reordered, and on a
    valid key the app dead-lettered by itself (``dead_letters.verdict_reason``)."""
    total = report["total"]
    reasons = []
    failing = dict(_FAILING)
    if (report.get("run") or {}).get("redrive") is False:
        failing["stranded"] = (
            "valid keys in a DLQ, never effected (--no-redrive: no redrive ran; production holds them there until"
            " someone redrives them)"
        )
    if "states" in report:
        for state, words in failing.items():
            if total.get(state):
                keys = list(report["states"]["keys"].get(state, [])) + [
                    f"line {i['line']}" for i in report["states"]["invalid_lines"] if i["state"] == state
                ]
                if state == "reordered":  # the group and both keys
                    keys = [
                        f"{r['then']} before {r['first']} in group {r['group']}"
                        for r in report.get("fifo_order", {}).get("reordered", [])
                    ]
                shown = ", ".join(str(k) for k in keys[:5]) + (" ..." if len(keys) > 5 else "")
                reasons.append(f"{total[state]} {words}: {shown}")
    elif total["lost"]:
        reasons.append(f"{total['lost']} keys lost (a valid key with no effect and not in a DLQ)")
    hit = [k for k in report["keys"]["lost"] if k in ((report.get("sdk_faults") or {}).get("keys") or {})]
    if hit:
        kinds = ", ".join(k for k, n in report["sdk_faults"]["by_kind"].items() if n)
        shown = ", ".join(hit[:5]) + (" ..." if len(hit) > 5 else "")
        reasons.append(f"{len(hit)} keys lost to injected SDK faults ({kinds}), their messages acknowledged: {shown}")
    if total["duplicated"]:
        reasons.append(f"{total['duplicated']} keys duplicated (more than one effect for a key)")
    if total["unexpected"]:
        reasons.append(f"{total['unexpected']} unexpected keys (an effect for a key never sent)")
    dead_lettered = verdict_reason(report)
    if dead_lettered:
        reasons.append(dead_lettered)
    if total["unexplained_replays"]:
        reasons.append(
            f"{total['unexplained_replays']} keys whose effect ran again without a kill between their effect and "
            "completion: a duplicate got past the idempotency layer"
        )
    return (1 if reasons else 0), reasons


def _kill_lines(total: dict[str, Any]) -> list[str]:
    out = ["kills: " + ", ".join(f"{k}={v}" for k, v in total["kills"].items())]
    if "kills_after_write" in total:
        after = total["kills_after_write"]
        out.append("kills after a write, by the write: " + ", ".join(f"{k}={v}" for k, v in after.items()))
    return out


def render(report: dict[str, Any], *, kills: bool = True) -> str:
    """The per-key summary; ``kills=False`` leaves out the ``kills:`` lines (the demo prints its own, once)."""
    total = report["total"]
    width = max(len(k) for k in COUNT_KEYS) + 2
    out = [f"effects counted from: {report['effects_counted_from']}"]
    if report.get("effects_lower_bound"):
        out.append(
            "  a lower bound: stalls and kills may have stopped an effect after it acted and before its line;"
            " name the effect's store (--effect KIND:NAME:KEYPATH) for an exact count"
        )
    out += [key.ljust(width) + str(total[key]).rjust(8) for key in COUNT_KEYS if key in total]
    out += _kill_lines(total) if kills else []
    for name in ("lost", "duplicated", "unexpected", "unexplained_replays"):
        keys = report["keys"][name]
        if keys:
            out.append(f"{name}: " + ", ".join(json.dumps(k) for k in keys[:10]) + (" ..." if len(keys) > 10 else ""))
    if total["replayed_after_kill"]:
        out.append("replayed after a kill, safe because " + report["replayed_after_kill_safe_because"])
    if total.get("replayed_after_error"):
        out.append(
            "replayed after an error: the record failed after its effect returned (the runtime's 'effect repeated "
            "after failure' line), its retry ran the effect again, and the effect took the key"
        )
    if "states" in report:
        out.append("states: " + ", ".join(f"{s}={n}" for s, n in report["states"]["counts"].items()))
        for state in FAILING_STATES:
            for key in report["states"]["keys"].get(state, [])[:5]:
                out.append(f"  {state} {json.dumps(key)}: {json.dumps(report['states']['evidence'].get(key, {}))}")
    out += _listed(report) + render_dead_letters(report)
    if report.get("faults"):
        out += render_faults(report["faults"])
    unkeyed = report.get("unkeyed") or {}
    if unkeyed.get("possibly_lost") or unkeyed.get("repeated"):
        out.append(
            f"un-keyed effects: {unkeyed['possibly_lost']} possibly lost (at_most_once), {unkeyed['repeated']} "
            "repeated (at_least_once): "
            + ", ".join(f"{name} {c['possibly_lost'] + c['repeated']}" for name, c in unkeyed["calls"].items())
        )
    if report.get("normalization"):
        out.append("NOTE: " + report["normalization"]["hint"])
    if "sends" in report:
        kinds = report["sends"]["by_kind"]
        out.append("sent: " + ", ".join(f"{k}={v}" for k, v in kinds.items()))
    if report.get("async"):
        out.append(render_async(report["async"]))
    order = report.get("fifo_order")
    if order and order["keys_checked"]:
        out.append(
            f"FIFO order: {order['keys_checked']} keys checked in their groups, {len(order['reordered'])} reordered"
            + "".join(f"; {r['then']} before {r['first']} in group {r['group']}" for r in order["reordered"][:5])
        )
    sdk = report.get("sdk_faults")
    if sdk and any(sdk["by_kind"].values()):
        out.append(render_sdk_faults(sdk))
    for queue, held in report.get("dlq", {}).items():
        out.append(f"DLQ {queue}: {held['messages']} messages ({dlq_why(held['why'])})")
    return "\n".join(out)


def _listed(report: dict[str, Any]) -> list[str]:
    """The terminal's lines of what the report lists without failing: the keys that finished only through the run's
    redrive, with their rounds, and the torn moments."""
    out = []
    redriven = report.get("redriven") or []
    if redriven:
        shown = ", ".join(f"{json.dumps(r['key'])} (round {', '.join(map(str, r['rounds']))})" for r in redriven[:5])
        out.append(
            f"redriven (listed, not failing): {len(redriven)} valid keys finished only through the run's redrive, "
            f"which production holds in a DLQ until someone redrives it (--no-redrive shows that): {shown}"
            + (" ..." if len(redriven) > 5 else "")
        )
    if report.get("torn_moments"):
        out.append(render_torn(report["torn_moments"], report["total"]["torn_moments"]))
    again = report.get("rewritten") or {}
    if again:
        out.append(
            f"rewritten (listed, not failing): {len(again)} keys whose one effect was written again (a redelivery after"
            " a kill or an error, or a duplicate delivery, rewriting the same item): "
            + ", ".join(f"{json.dumps(k)} ({n} times)" for k, n in list(again.items())[:5])
            + (" ..." if len(again) > 5 else "")
        )
    for name, row in ((report.get("run") or {}).get("effect_stores") or {}).items():
        if "items_per_delivery" in row:  # proof/executions.py
            flagged = row.get("delivered_once_items_a_multiple") or []
            figure = row["items_per_delivery"]
            out.append(
                f"store {name}: writes without the runtime's per-record boundary, counted per delivery: "
                + (
                    f"{figure} items per delivery (learned from {row.get('items_per_delivery_learned_from_keys')} keys"
                    " delivered once)"
                    if figure is not None
                    else "items per delivery unknown (no key delivered once), one effect per invocation"
                )
                + (f"; delivered once with a multiple of it: {', '.join(flagged[:5])}" if flagged else "")
            )
    return out


#: The normalisations an app may apply, fewest steps first: :func:`normalization_hint` names the simplest that
#: explains the app's keys.
_CANDIDATE_STEPS = (
    ("casefold",),
    ("strip",),
    ("nfkc",),
    ("strip", "casefold"),
    ("nfkc", "casefold"),
    ("nfkc", "strip"),
    ("nfkc", "strip", "casefold"),
)


def normalization_hint(sent_keys: set[str], app_keys: set[str], run_steps: tuple[str, ...]) -> dict[str, Any] | None:
    """When the app's own keys (its effect lines' ``idempotency_key``, raw) are forms of the sent keys (raw) that
    only a normalisation explains, and not the one the run applies: the steps that explain them. The run's verdict
    stands on the run's business identity; this says why its keys and the app's differ. ``None`` otherwise."""
    foreign = app_keys - sent_keys
    if not foreign or foreign <= {normalizer(run_steps)(k) for k in sent_keys}:
        return None
    for steps in _CANDIDATE_STEPS:
        same = normalizer(steps)
        if foreign <= {same(k) for k in sent_keys}:
            return {
                "app_keys_not_sent": len(foreign),
                "app_seems_to_normalize": list(steps),
                "run_normalizes": list(run_steps),
                "hint": "the app's Consumer normalises its keys differently from this run: give the run the same"
                f" --normalize steps ({' '.join(f'--normalize {s}' for s in steps)}) or align the app",
            }
    return None
