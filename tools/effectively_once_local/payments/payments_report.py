"""The payments demo's report (the payments profile of the pipeline, ``payments/demo.py``), computed from what was
deployed (ledger tables, dead-letter queues) and from the logs the platform keeps (SQS deliveries, the function's
EMF metrics, the provider's call log), never from the runner's in-memory counters.

Keys per queue type and in ``total``: ``payments`` (lines routed there), ``valid_payments``, ``poison``,
``deliveries`` (messages handed to the function, redeliveries included), ``charges`` (ledger items: executed
charges), ``duplicates_suppressed`` (``duplicate suppressed`` log lines: answered from an idempotency record; the
EMF metric ``DuplicatesSuppressed`` undercounts, as a killed invocation's metrics die with it),
``dead_lettered`` (messages in the DLQ), ``valid_dead_lettered`` (valid payments in the DLQ: FIFO messages held
behind a transient failure of their group past maxReceiveCount; poison leaves its group at once, so 0 in the demo),
``lost`` (valid payments neither charged nor in the DLQ), ``double_charged`` (payments with more than one ledger
item), ``provider_calls`` and ``provider_replays`` (calls the provider answered from its idempotency key),
``poison_in_dlq`` (poison messages found intact in the DLQ), ``poison_receives_max`` (the most receives any poison
message took before it reached the DLQ, from the platform's logs: :func:`.attribution.poison_receives`;
``total`` takes the maximum, not the sum).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..aws.readback import queue_depth, read_dlq_messages, scan_table
from ..base.json_lines import read_jsonl
from ..chaos.fault_model import AFTER_COMPLETE, KILL_PHASES
from ..proof.attribution import (
    inflight_at_kill,
    log_line_count,
    poison_receives,
    provider_calls_by_pid,
    sent_never_delivered,
)
from ..report.page import NOT_QUEUES
from .payments_input import Line, route

COUNT_KEYS = (
    "payments",
    "valid_payments",
    "poison",
    "deliveries",
    "sent_never_delivered",
    "charges",
    "duplicates_suppressed",
    "dead_lettered",
    "valid_dead_lettered",
    "lost",
    "double_charged",
    "provider_calls",
    "provider_replays",
    "poison_in_dlq",
    "poison_receives_max",
    "dlq_unread",
    "kills_between_charge_and_completion",
    "unexplained_replays",
)
#: Keys whose ``total`` is the maximum over the queue types, not the sum.
MAX_KEYS = ("poison_receives_max",)


def build_report(
    session: Any,
    pipelines: dict[str, Any],
    lines: list[Line],
    run_dir: Path | None,
    is_valid: Callable[[str], bool],
) -> dict[str, Any]:
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    report: dict[str, Any] = {}
    for label, pipeline in sorted(pipelines.items()):
        routed = [ln for ln in lines if route(ln.account_id) == label]
        valid_ids = {ln.payment_id for ln in routed if ln.payment_id and is_valid(ln.body)}
        poison_bodies = [ln.body for ln in routed if not (ln.payment_id and is_valid(ln.body))]
        ledger = scan_table(dynamodb, pipeline.ledger_table)
        per_payment = Counter(item["payment_id"]["S"] for item in ledger)
        depth = queue_depth(sqs, pipeline.dlq_url)
        dlq_messages = read_dlq_messages(sqs, pipeline.dlq_url)
        dlq_bodies = [m.body for m in dlq_messages]
        dlq_valid_ids = set()
        for body in dlq_bodies:
            if is_valid(body):
                dlq_valid_ids.add(json.loads(body)["payment_id"])
        row: dict[str, Any] = {
            "payments": len(routed),
            "valid_payments": len(valid_ids),
            "poison": len(poison_bodies),
            "charges": len(ledger),
            "dead_lettered": max(depth, len(dlq_bodies)),
            "dlq_unread": max(0, depth - len(dlq_bodies)),
            "valid_dead_lettered": len(dlq_valid_ids),
            "lost": len(valid_ids - set(per_payment) - dlq_valid_ids),
            "double_charged": sum(1 for n in per_payment.values() if n > 1),
            "poison_in_dlq": sum(1 for b in set(poison_bodies) if b in set(dlq_bodies)),
        }
        if run_dir is not None:
            row.update(run_log_counts(run_dir, label))
            deliveries = read_jsonl(sorted(run_dir.glob(f"deliveries-{label}-*.jsonl")))
            receives = poison_receives([m for m in dlq_messages if not is_valid(m.body)], deliveries)
            row["poison_receives_max"] = max(receives.values(), default=0)
            sent = read_jsonl([run_dir / f"sent-{label}.jsonl"]) if (run_dir / f"sent-{label}.jsonl").is_file() else []
            row["sent_never_delivered"] = len(sent_never_delivered(sent, deliveries, dlq_messages))
        report[label] = row
    total: dict[str, Any] = {}
    for key in COUNT_KEYS:
        values = [row[key] for row in report.values() if key in row]
        if values:
            total[key] = max(values) if key in MAX_KEYS else sum(values)
    kill_rows = [row["kills"] for row in report.values() if "kills" in row]
    if kill_rows:
        total["kills"] = {p: sum(k[p] for k in kill_rows) for p in kill_rows[0]}
    report["total"] = total
    return report


def run_log_counts(run_dir: Path, label: str) -> dict[str, Any]:
    """What one pipeline's run logs say: deliveries, suppressed duplicates, provider calls and replays, kills by
    phase, and the provider replays no kill explains."""
    deliveries = read_jsonl(sorted(run_dir.glob(f"deliveries-{label}-*.jsonl")))
    provider = read_jsonl(sorted(run_dir.glob(f"provider-{label}-*.jsonl")))
    replays = [c for c in provider if c.get("event") == "result" and c.get("replayed")]
    kill_log = [k for k in read_jsonl(sorted(run_dir.glob(f"chaos-{label}-*.jsonl"))) if k.get("event") == "kill"]
    kills = Counter(k.get("phase") for k in kill_log)
    # A kill while a payment's provider call had started and its idempotency record was not yet completed: only
    # such a payment may come back as a provider replay.
    calls = provider_calls_by_pid(run_dir, label)
    interrupted = [
        key for k in kill_log if k.get("phase") != AFTER_COMPLETE for key in [inflight_at_kill(k, calls)] if key
    ]
    return {
        "deliveries": len(deliveries),
        # From the log lines, not the EMF metric: a killed invocation's metrics die with it, its lines do not.
        "duplicates_suppressed": log_line_count(
            sorted(run_dir.glob(f"function-{label}-*.log")), names.MSG_DUPLICATE_SUPPRESSED
        ),
        "provider_calls": sum(1 for c in provider if c.get("event") == "call"),
        "provider_replays": len(replays),
        # Every kill phase, 0 for one that never struck: a kind the demo draws is never left out of its report.
        "kills": {p: kills.get(p, 0) for p in KILL_PHASES},
        "kills_between_charge_and_completion": len(interrupted),
        "unexplained_replays": sum(1 for r in replays if r.get("payment_id") not in set(interrupted)),
    }


#: The rows of a ``redrive`` block, per queue type (:func:`.backlog.counts`).
BLOCK_KEYS = (
    "charged_resent",
    "charged_new_provider_calls",
    "new_sent",
    "new_charged",
    "poison_redriven",
    "poison_back_in_dlq",
    "valid_in_dlq",
    "double_charged",
)


def redrive_problems(block: dict[str, dict[str, int]]) -> list[str]:
    """What a ``redrive`` block (the outage backlog, :func:`.backlog.counts`) shows wrong, one line each; empty
    when the redrive did what it must."""
    out = []
    for label, row in sorted(block.items()):
        if row["charged_new_provider_calls"]:
            out.append(
                f"redrive {label}: {row['charged_new_provider_calls']} provider calls for payments already charged"
                " (their idempotency records should have answered)"
            )
        if row["new_charged"] != row["new_sent"]:
            out.append(f"redrive {label}: {row['new_charged']} of {row['new_sent']} new payments charged exactly once")
        if row["poison_back_in_dlq"] != row["poison_redriven"]:
            out.append(
                f"redrive {label}: {row['poison_back_in_dlq']} of {row['poison_redriven']} poison messages"
                " dead-lettered on the first receive the runtime processed them"
            )
        if row["valid_in_dlq"]:
            out.append(f"redrive {label}: {row['valid_in_dlq']} valid payments in the DLQ after the redrive")
        if row["double_charged"]:
            out.append(f"redrive {label}: {row['double_charged']} payments charged more than once")
    return out


def render_redrive(block: dict[str, dict[str, int]]) -> str:
    """The ``redrive`` block as a table: one column per queue type."""
    labels = sorted(block)
    width = max(len(k) for k in BLOCK_KEYS) + 2
    out = ["redrive".ljust(width) + "".join(label.rjust(10) for label in labels)]
    for key in BLOCK_KEYS:
        out.append(key.ljust(width) + "".join(str(block[label].get(key, "-")).rjust(10) for label in labels))
    return "\n".join(out)


def verdict(report: dict[str, Any], unsafe: bool) -> tuple[int, list[str]]:
    """Exit code and reasons. Safe run: 0 unless something was lost, double-charged, an accepted first send was never
    delivered (``sent_never_delivered``), the provider replayed more than the kills between charge and completion
    explain, or the ``redrive`` block (the outage backlog, :func:`redrive_problems`) shows a violation. ``--unsafe``
    control: 0 when it shows double charges (and no accepted first send vanished)."""
    total = report["total"]
    problems = redrive_problems(report.get("redrive") or {})
    if total.get("lost", 0):
        problems.append(f"{total['lost']} payments lost (neither charged nor in a DLQ)")
    if total.get("dlq_unread", 0):
        problems.append(f"{total['dlq_unread']} DLQ messages could not be read (the lost count may be overstated)")
    if total.get("sent_never_delivered", 0):
        problems.append(
            f"{total['sent_never_delivered']} first sends SQS accepted were never delivered nor dead-lettered"
            " (the local AWS dropped them; a resend may have hidden the loss from `lost`)"
        )
    if unsafe:
        if total.get("double_charged", 0) > 0 and not problems:
            return 0, [f"control run without the guards double-charged {total['double_charged']} payments, as expected"]
        if not total.get("double_charged", 0):
            problems.append(
                "control run without the guards showed no double charge: the chaos did not exercise duplicates"
            )
        return 1, problems
    if total.get("double_charged", 0):
        problems.append(f"{total['double_charged']} payments charged more than once")
    bound = total.get("kills_between_charge_and_completion")
    if bound is not None and total.get("provider_replays", 0) > bound:
        problems.append(
            f"provider replays ({total['provider_replays']}) exceed the kills between charge and completion ({bound}):"
            " a duplicate got past the idempotency layer"
        )
    if total.get("unexplained_replays", 0):
        problems.append(
            f"{total['unexplained_replays']} provider replays for payments no kill interrupted: a duplicate got past"
            " the idempotency layer"
        )
    return (1 if problems else 0), problems


def render(report: dict[str, Any]) -> str:
    labels = [k for k in report if k not in NOT_QUEUES] + ["total"]
    keys = [k for k in COUNT_KEYS if any(k in report[label] for label in labels)]
    width = max(len(k) for k in keys) + 2
    out = ["".ljust(width) + "".join(label.rjust(10) for label in labels)]
    for key in keys:
        out.append(key.ljust(width) + "".join(str(report[label].get(key, "-")).rjust(10) for label in labels))
    if "kills" in report["total"]:
        kills = report["total"]["kills"]
        out.append("kills: " + ", ".join(f"{k}={v}" for k, v in kills.items()))
    if report.get("redrive"):
        out.append(render_redrive(report["redrive"]))
    return "\n".join(out)
