"""Render bench results as a markdown table: ``table(results)``, one row per measure (value and target) and the lines
under it (when and where it was measured, the synth medians, the unit tests, the runtime-overhead rounds).

``python benchmarks/render.py [path]`` renders ``reports/bench.json`` (or ``path``); ``make bench`` prints the same
table; ``benchmarks/pages.py`` renders it from ``benchmarks/measured.json`` into the generated section of the docs'
Benchmarks page (``docs/benchmarks.md``). ``TABLE_KEYS`` are the result keys it reads, besides the cost rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# (key, label, target, format)
ROWS: list[tuple[str, str, str, str]] = [
    ("synth_ratio", "synth time, `PaymentsSandbox` / plain-L2 baseline (validation on)", "<= 1.10", "{:.3f}"),
    ("synth_ratio_no_validation", "the same, `CDK_VALIDATION=false`", "<= 1.10", "{:.3f}"),
    (
        "synth_ratio_of_fastest",
        "synth ratio of the fastest runs (validation on; least disturbed by other jobs)",
        "",
        "{:.3f}",
    ),
    ("synth_ratio_no_validation_of_fastest", "synth ratio of the fastest runs, `CDK_VALIDATION=false`", "", "{:.3f}"),
    ("ddb_requests_first_delivery", "DynamoDB requests, first delivery", "<= 3", "{}"),
    ("ddb_requests_duplicate", "DynamoDB requests, duplicate of a completed payment", "<= 1", "{}"),
    (
        "ddb_requests_crash_replay",
        "DynamoDB requests, redelivery after a crash between charge and completion",
        "",
        "{}",
    ),
    (
        "lambda_invocations_per_payment",
        "Lambda invocations per payment (clean local run, batch size 10)",
        "<= 0.12",
        "{:.3f}",
    ),
    ("sqs_requests_per_payment", "SQS requests per payment (same run: send, receive, delete)", "<= 1.3", "{:.3f}"),
    ("ddb_requests_per_payment_whole_run", "DynamoDB requests per payment (same run)", "", "{:.3f}"),
    (
        "invocation_ms_mean",
        "handler wall time per invocation, mean (same run, against moto on loopback; ms)",
        "",
        "{:.1f}",
    ),
    (
        "runtime_overhead_ratio",
        "CPU time, 35 ten-record SQS batches: runtime `Consumer` / bare Powertools handler, same work and log lines "
        "(median of 5 interleaved rounds, moto in process)",
        "<= 1.10",
        "{:.3f}",
    ),
    (
        "runtime_overhead_ratio_vs_silent",
        "the same against a bare handler without Logger and Metrics (what the lines and metrics cost)",
        "",
        "{:.3f}",
    ),
    ("handler_batch10_ms_inprocess", "one 10-payment invocation in process against moto (ms)", "", "{:.0f}"),
    ("handler_import_ms", "`import payments.handler`, fresh process (ms)", "", "{:.0f}"),
    ("asset_bytes", "Lambda asset, zipped (bytes)", "", "{:,}"),
    ("unit_tests_seconds", "`pytest tests/unit -q` wall time (s)", "< 60", "{:.1f}"),
]


#: Every result key ``table`` reads besides the cost rows (``cost_per_million_usd*``, computed from the others):
#: ``benchmarks/run.py`` keeps these in ``benchmarks/measured.json``.
TABLE_KEYS: tuple[str, ...] = (
    *(key for key, _, _, _ in ROWS),
    "runtime_overhead_ratio_target_met",
    "machine",
    "synth_seconds_median",
    "synth_runs",
    "synth_measured_at",
    "synth_load_average_1m",
    "unit_tests_summary",
    "runtime_overhead_round_ratios",
    "runtime_overhead_cpu_ms_per_record",
    "runtime_overhead_setup",
)


#: Result keys ``benchmarks/measured.json`` keeps under the capacity model's name instead: {result key: its name}.
MEASURED_NAMES: dict[str, str] = {"handler_batch10_ms_inprocess": "invocation_ms_inprocess_batch10"}


def _cost(c: dict[str, Any]) -> str:
    return (
        f"${c['total']:.2f} (DynamoDB {c['dynamodb']:.2f}, SQS {c['sqs']:.2f}, "
        f"Lambda {c['lambda_requests'] + c['lambda_compute']:.2f})"
    )


def table(r: dict[str, Any]) -> str:
    lines = ["| measure | value | target |", "|---|---|---|"]
    for key, label, target, fmt in ROWS:
        value = fmt.format(r[key]) if key in r else "n/a"
        if f"{key}_target_met" in r:  # a target reported as met or not, never enforced
            value += " (met)" if r[f"{key}_target_met"] else " (not met)"
        lines.append(f"| {label} | {value} | {target} |")
    if "cost_per_million_usd" in r:
        arch = r["cost_per_million_usd"]["assumptions"].get("architecture", "x86_64")
        lines.append(
            f"| cost per 1 million payments, batch size 10, {arch} (USD) | {_cost(r['cost_per_million_usd'])} | |"
        )
    if "cost_per_million_usd_x86_64" in r:
        lines.append(f"| the same on x86_64 (USD) | {_cost(r['cost_per_million_usd_x86_64'])} | |")
    if "cost_per_million_usd_batch_size_1" in r:
        lines.append(f"| the same at batch size 1 (USD) | {_cost(r['cost_per_million_usd_batch_size_1'])} | |")
    m = r.get("machine", {})
    s = r.get("synth_seconds_median", {})
    lines.append("")
    lines.append(
        f"Measured {m.get('measured_at', '?')} on {m.get('cpus', '?')} CPUs (load average at the end "
        f"{m.get('load_average_1m_at_end', '?')}; {m.get('note', '')}). Synth medians of {r.get('synth_runs', '?')} "
        "interleaved whole processes (s): " + ", ".join(f"{k} {v}" for k, v in s.items()) + "."
    )
    if "synth_measured_at" in r:
        load = r.get("synth_load_average_1m", {})
        lines.append(
            f"The synth rows were measured on their own (`--only synth`) at {r['synth_measured_at']}, load average "
            f"{load.get('before', '?')} before, {load.get('after', '?')} after."
        )
    if "unit_tests_summary" in r:
        lines.append(f"Unit tests: {r['unit_tests_summary']}.")
    if "runtime_overhead_round_ratios" in r:
        setup = r.get("runtime_overhead_setup", {})
        ms = r.get("runtime_overhead_cpu_ms_per_record", {})
        lines.append(
            "Runtime overhead rounds (runtime / bare): "
            + ", ".join(f"{v:.3f}" for v in r["runtime_overhead_round_ratios"])
            + "; CPU ms per record: "
            + ", ".join(f"{side} {v:.2f}" for side, v in ms.items())
            + f" (measured {setup.get('measured_at', '?')}, load average {setup.get('load_average_1m_before', '?')} "
            f"before, {setup.get('load_average_1m_after', '?')} after)."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "reports" / "bench.json"
    print(table(json.loads(path.read_text(encoding="utf-8"))))
