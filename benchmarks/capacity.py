"""``make capacity``: the capacity model, ``docs/capacity.md``, computed from ``benchmarks/measured.json``.

``make bench`` measures the per-payment counts (Lambda invocations, SQS requests by action, DynamoDB requests by
table for a first delivery and a duplicate) and the handler's wall time per invocation, and writes them to
``benchmarks/measured.json`` (committed; ``reports/`` is not). This script turns them into figures at 100, 1,000
and 10,000 payments per second on a standard and a FIFO queue: Lambda concurrency (Little's law), pollers, SQS API
calls against the FIFO limits, DynamoDB request units per table, the monthly cost, and what breaks first. Nothing
in the document is typed in: every figure is computed here from the measured inputs, the stated assumptions
(``Assumptions``) and the quotas and prices below, each with its source URL. ``tests/unit/test_capacity.py``
regenerates the document and fails when the committed one differs.

``python benchmarks/capacity.py`` writes the document; ``--check`` exits 1 when it is out of date.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))

import cost_model  # noqa: E402


def _load_limits() -> Any:
    """``constructs/effectively_once/limits.py`` alone (standard library only), without the package's CDK imports."""
    spec = importlib.util.spec_from_file_location(
        "_effectively_once_limits", ROOT / "constructs" / "effectively_once" / "limits.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The AWS limits the constructs use, with their sources: the per-poller figures are read from there, not copied.
limits = _load_limits()

MEASURED = BENCHMARKS / "measured.json"
OUTPUT = ROOT / "docs" / "capacity.md"
RATES = (100, 1_000, 10_000)
KINDS = ("standard", "fifo")
#: The month the AWS pricing pages use for monthly figures: 730 hours.
SECONDS_PER_MONTH = 730 * 3600

LAMBDA_QUOTAS_URL = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
SQS_SCALING_URL = limits.LAMBDA_SQS_SCALING_URL
SCALING_CONFIG_URL = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
    "aws-properties-lambda-eventsourcemapping-scalingconfig.html"
)
PROVISIONED_CONFIG_URL = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
    "aws-properties-lambda-eventsourcemapping-provisionedpollerconfig.html"
)
PROVISIONED_ANNOUNCEMENT_URL = (
    "https://aws.amazon.com/blogs/aws/"
    "aws-lambda-enhances-sqs-processing-with-new-provisioned-mode-3x-faster-scaling-16x-higher-capacity"
)
SQS_QUOTAS_URL = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html"
SQS_FIFO_THROTTLING_URL = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/troubleshooting-fifo-throttling-issues.html"
DYNAMODB_ON_DEMAND_INITIAL_URL = limits.DYNAMODB_ON_DEMAND_URL + "#on-demand-capacity-mode-initial"
DYNAMODB_WARM_THROUGHPUT_URL = limits.DYNAMODB_WARM_THROUGHPUT_URL
DYNAMODB_ON_DEMAND_MAX_URL = (
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html"
)


@dataclass(frozen=True)
class Quota:
    """An AWS quota or documented behaviour the model uses, with the page that states it."""

    label: str
    value: float
    source: str
    note: str = ""


#: Every AWS number the model uses, each with its source URL (read 2026-11-30 from stored copies of the pages).
QUOTAS: dict[str, Quota] = {
    "account_concurrency": Quota(
        "Lambda concurrent executions per account and region (default quota)",
        1_000,
        LAMBDA_QUOTAS_URL,
        "can be raised to tens of thousands; new accounts start lower",
    ),
    "esm_start_concurrency": Quota(
        "SQS mapping, default (on-demand) mode: concurrent invokes when messages arrive",
        5,
        SQS_SCALING_URL,
        "standard queues",
    ),
    "esm_ramp_per_minute": Quota(
        "SQS mapping, default mode: concurrent invokes added per minute at most", 300, SQS_SCALING_URL, "standard"
    ),
    "esm_max_concurrency": Quota(
        "SQS mapping, default mode: concurrent invokes per mapping at most",
        1_250,
        SQS_SCALING_URL,
        "standard queues; FIFO: at most one batch in flight per message group",
    ),
    "max_concurrency_max": Quota(
        "`max_concurrency` (ScalingConfig MaximumConcurrency) range", 1_000, SCALING_CONFIG_URL, "2 to 1,000"
    ),
    "provisioned_min_pollers_max": Quota(
        "provisioned mode: minimum pollers (SQS)", 200, PROVISIONED_CONFIG_URL, "2 to 200; always on, billed"
    ),
    "provisioned_max_pollers": Quota(
        "provisioned mode: maximum pollers (SQS)", 2_000, PROVISIONED_CONFIG_URL, "2 to 2,000"
    ),
    "provisioned_max_concurrency": Quota(
        "provisioned mode: concurrency per mapping at most",
        20_000,
        PROVISIONED_ANNOUNCEMENT_URL,
        "scales up to 1,000 concurrent invokes per minute",
    ),
    "provisioned_invokes_per_poller": Quota(
        "provisioned mode: concurrent invokes per poller (SQS)",
        limits.LAMBDA_SQS_INVOKES_PER_POLLER,
        SQS_SCALING_URL,
        "pollers needed: the most demanding of the three per-poller limits",
    ),
    "provisioned_bytes_per_poller": Quota(
        "provisioned mode: throughput per poller (bytes/s, SQS)",
        limits.LAMBDA_SQS_BYTES_PER_POLLER,
        SQS_SCALING_URL,
        "1 MB/s; the Lambda API Reference's ProvisionedPollerConfig says about 5 MBps, the figure the developer "
        "guide gives for Kafka pollers",
    ),
    "provisioned_polls_per_poller": Quota(
        "provisioned mode: SQS polling API calls (ReceiveMessage) per second per poller",
        limits.LAMBDA_SQS_POLLS_PER_POLLER,
        SQS_SCALING_URL,
        "",
    ),
    "fifo_tps_per_action": Quota(
        "FIFO queue without high throughput: API calls per second per action",
        300,
        SQS_QUOTAS_URL,
        "SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch); with batches of 10: 3,000 messages/s",
    ),
    "fifo_high_throughput_tps_per_action": Quota(
        "FIFO queue in high throughput mode: API calls per second per action, us-east-1",
        70_000,
        SQS_QUOTAS_URL,
        "US East (N. Virginia), US West (Oregon), Europe (Ireland); lower in other regions; spread over message "
        "groups (partitions): needs many active groups. Also " + SQS_FIFO_THROTTLING_URL,
    ),
    "dynamodb_new_table_initial_wru": Quota(
        "DynamoDB new on-demand table: write request units per second it serves at once",
        limits.DYNAMODB_ON_DEMAND_INITIAL_WRITE_UNITS,
        DYNAMODB_ON_DEMAND_INITIAL_URL,
        f"{limits.DYNAMODB_ON_DEMAND_INITIAL_READ_UNITS:,} reads (or a linear combination); traffic more than "
        "doubling the previous peak within 30 minutes can throttle; pre-warming (warm throughput) raises it: "
        + DYNAMODB_WARM_THROUGHPUT_URL,
    ),
    "dynamodb_table_wru": Quota(
        "DynamoDB on-demand table: write request units per second (table-level quota)",
        40_000,
        DYNAMODB_ON_DEMAND_MAX_URL,
        "default service quota, the same for reads; can be raised",
    ),
}


@dataclass(frozen=True)
class Assumptions:
    """What the model assumes and the document states (not measured)."""

    region: str = "us-east-1"
    payload_bytes: int = 1_024
    duplicate_rate: float = 0.05
    fifo_message_groups: int = 1_000
    architecture: str = cost_model.DEFAULT_ARCHITECTURE
    #: Payments per invocation as a share of the batch size the bench saw (1.0: full batches of 10, as measured).
    batch_fill: float = 1.0
    notes: tuple[str, ...] = field(
        default=(
            "traffic is steady at the given rate, all month (730 hours); no bursts, no backlog",
            "invocations per payment (and with them `ReceiveMessage` and `DeleteMessageBatch` calls per payment) "
            "were measured draining a backlog, in full batches of 10: a lower bound. Steady traffic without a "
            "batching window is polled as it arrives, in smaller batches, so more invocations and SQS calls per "
            'payment (the rows "at half-full batches" show 5 payments per invocation); the consumer\'s '
            "`max_batching_window` is what keeps batches full (at the cost of that much latency)",
            "every duplicate is a second delivery of a payment that already completed (a producer resend or an "
            "SQS redelivery): it costs the SQS and Lambda share of one message and the measured DynamoDB requests "
            "of a duplicate; crash replays (3 requests, like a first delivery) are left out",
            "a FIFO queue gets the same per-payment counts as the standard one (the bench measures both queues "
            "together); FIFO message groups are spread evenly",
            "items are under 1 KB (one write request unit per write, the failed conditional write of a duplicate "
            "included) and SQS batches under 64 KB (one billed request per call)",
            "the invocation duration is the one measured locally (the handler against moto in process, on a shared, "
            "loaded 2-core machine), taken as proportional to the payments in the batch "
            "(`cost_model.invocation_ms`, the same figure the benchmarks page's cost rows price): real DynamoDB "
            "round trips add to it; concurrency and GB-seconds scale linearly with it",
            "empty receives of idle pollers are left out (a cost per hour of polling, not per payment)",
        )
    )


@dataclass(frozen=True)
class Inputs:
    """The measured inputs (``benchmarks/measured.json``)."""

    measured_at: str
    how: str
    machine: dict[str, Any]
    batch_size: int
    memory_mb: int
    invocations_per_payment: float
    sqs_by_action: dict[str, float]
    ddb_by_table: dict[str, dict[str, dict[str, int]]]
    invocation_ms: float
    pipeline_invocation_ms: float

    @classmethod
    def from_measured(cls, data: dict[str, Any]) -> Inputs:
        """:raises KeyError: a measurement is missing (re-run ``make bench``)."""
        return cls(
            measured_at=data["measured_at"],
            how=data["how"],
            machine=data["machine"],
            batch_size=data["batch_size"],
            memory_mb=data["memory_mb"],
            invocations_per_payment=data["lambda_invocations_per_payment"],
            sqs_by_action=data["sqs_requests_per_payment_by_action"],
            ddb_by_table=data["ddb_operations_by_table"],
            invocation_ms=data["invocation_ms_inprocess_batch10"],
            pipeline_invocation_ms=data["invocation_ms_mean"],
        )


def load(path: Path = MEASURED) -> Inputs:
    return Inputs.from_measured(json.loads(path.read_text(encoding="utf-8")))


def _units(operations: dict[str, int]) -> tuple[float, float]:
    return cost_model.request_units(operations)


def model(inputs: Inputs, rate: float, kind: str, assumptions: Assumptions = Assumptions()) -> dict[str, Any]:
    """The figures for ``rate`` payments per second on a ``kind`` (``standard`` or ``fifo``) queue.

    :raises ValueError: an unknown ``kind``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: one of {KINDS}")
    q = {k: v.value for k, v in QUOTAS.items()}
    messages = rate * (1 + assumptions.duplicate_rate)
    fill = assumptions.batch_fill
    invocations = messages * inputs.invocations_per_payment / fill
    invocation_ms = cost_model.invocation_ms(inputs.batch_size * fill, inputs.invocation_ms, inputs.batch_size)
    concurrency = invocations * invocation_ms / 1000  # Little's law: L = lambda x W
    # The mapping's receives and deletes go with invocations (one each per batch); the producer's sends do not.
    sqs = {
        action: messages * per_payment / (1 if action.startswith("Send") else fill)
        for action, per_payment in inputs.sqs_by_action.items()
    }
    tables: dict[str, dict[str, float]] = {}
    for table in sorted(set(inputs.ddb_by_table["first_delivery"]) | set(inputs.ddb_by_table["duplicate"])):
        first_w, first_r = _units(inputs.ddb_by_table["first_delivery"].get(table, {}))
        dup_w, dup_r = _units(inputs.ddb_by_table["duplicate"].get(table, {}))
        tables[table] = {
            "wru_per_second": rate * first_w + rate * assumptions.duplicate_rate * dup_w,
            "rru_per_second": rate * first_r + rate * assumptions.duplicate_rate * dup_r,
        }
    ramp = max(0, math.ceil((concurrency - q["esm_start_concurrency"]) / q["esm_ramp_per_minute"]))
    # A poller serves up to 10 concurrent invokes, 1 MB/s and 10 ReceiveMessage calls a second: the most
    # demanding of the three sets the count (at least the SQS minimum of 2).
    provisioned = max(
        limits.ESM_SQS_MIN_MINIMUM_POLLERS,
        math.ceil(concurrency / q["provisioned_invokes_per_poller"]),
        math.ceil(messages * assumptions.payload_bytes / q["provisioned_bytes_per_poller"]),
        math.ceil(sqs.get("ReceiveMessage", 0.0) / q["provisioned_polls_per_poller"]),
    )
    max_action = max(sqs.values())
    # Monthly cost: Lambda (architecture's GB-second price), SQS per billed request (64 KB chunks), DynamoDB.
    seconds = SECONDS_PER_MONTH
    chunks = math.ceil(min(10, inputs.batch_size) * assumptions.payload_bytes / cost_model.SQS_BILLED_CHUNK_BYTES)
    billed_ms = math.ceil(invocation_ms)
    gb_seconds = invocations * seconds * billed_ms / 1000 * inputs.memory_mb / 1024
    sqs_price = (
        cost_model.SQS_FIFO_PER_MILLION_REQUESTS if kind == "fifo" else cost_model.SQS_STANDARD_PER_MILLION_REQUESTS
    )
    wru = sum(t["wru_per_second"] for t in tables.values())
    rru = sum(t["rru_per_second"] for t in tables.values())
    cost = {
        "lambda_requests": invocations * seconds / 1e6 * cost_model.LAMBDA_PER_MILLION_REQUESTS,
        "lambda_compute": gb_seconds * cost_model.LAMBDA_PER_GB_SECOND[assumptions.architecture],
        "sqs": sum(sqs.values()) * chunks * seconds / 1e6 * sqs_price,
        "dynamodb": (wru * cost_model.DYNAMODB_PER_MILLION_WRU + rru * cost_model.DYNAMODB_PER_MILLION_RRU)
        * seconds
        / 1e6,
    }
    cost["total"] = sum(cost.values())
    in_reach = _limits(kind, concurrency, max_action, tables, assumptions)
    return {
        "rate": rate,
        "kind": kind,
        "messages_per_second": messages,
        "invocations_per_second": invocations,
        "concurrency": concurrency,
        "concurrency_at_pipeline_duration": invocations * inputs.pipeline_invocation_ms * fill / 1000,
        "default_mode_ramp_minutes": ramp,
        "provisioned_pollers": provisioned,
        "fifo_groups_needed": math.ceil(concurrency),
        "sqs_calls_per_second": sqs,
        "sqs_calls_per_second_total": sum(sqs.values()),
        "sqs_max_calls_per_action": max_action,
        "dynamodb": tables,
        "monthly_cost_usd": cost,
        "limits": in_reach,
    }


def limit_rates(inputs: Inputs, kind: str, assumptions: Assumptions = Assumptions()) -> list[dict[str, Any]]:
    """Each limit of :func:`model` with the payment rate at which it is reached, lowest first: every value the
    limits compare grows linearly with the rate, so it is ``limit / value at 1 payment per second``. The first
    entry is what breaks first."""
    found = []
    for limit in model(inputs, 1, kind, assumptions)["limits"]:
        found.append({**limit, "reached_at_rate": limit["limit"] / limit["value"] if limit["value"] else math.inf})
    return sorted(found, key=lambda limit: limit["reached_at_rate"])


def _limits(
    kind: str, concurrency: float, max_action: float, tables: dict[str, dict[str, float]], a: Assumptions
) -> list[dict[str, Any]]:
    """Each limit in reach: value, limit, utilization (value / limit) and what moves it."""
    q = QUOTAS
    found = [
        {
            "what": "Lambda concurrency vs the account quota",
            "value": concurrency,
            "limit": q["account_concurrency"].value,
            "moves_it": "a quota increase (Service Quotas); `max_concurrency` (2..1000) caps this mapping's share "
            "so other functions keep theirs",
        },
        {
            "what": "Lambda concurrency vs `max_concurrency`'s ceiling, when it is set",
            "value": concurrency,
            "limit": q["max_concurrency_max"].value,
            "moves_it": "leave `max_concurrency` unset (or use provisioned mode, exclusive with it); a second queue",
        },
    ]
    if kind == "standard":
        found.append(
            {
                "what": "concurrency vs the default-mode mapping ceiling",
                "value": concurrency,
                "limit": q["esm_max_concurrency"].value,
                "moves_it": "provisioned mode (the consumer's `provisioned_poller_config`: minimum/maximum pollers; "
                "up to "
                f"{q['provisioned_max_concurrency'].value:,.0f} concurrency)",
            }
        )
    else:
        found += [
            {
                "what": "concurrency vs active FIFO message groups (one batch in flight per group)",
                "value": concurrency,
                "limit": float(a.fifo_message_groups),
                "moves_it": "more distinct `MessageGroupId` values (the producer's group key; the sample groups "
                "by account)",
            },
            {
                "what": "SQS calls per second per action vs the FIFO limit (no high throughput)",
                "value": max_action,
                "limit": q["fifo_tps_per_action"].value,
                "moves_it": "`high_throughput=True` (`ProcessingQueue`, `ProcessingQueueOptions`)",
            },
            {
                "what": "SQS calls per second per action vs the FIFO high-throughput limit (us-east-1)",
                "value": max_action,
                "limit": q["fifo_high_throughput_tps_per_action"].value,
                "moves_it": "more queues (shard by account), more message groups",
            },
        ]
    for table, units in tables.items():
        moves = (
            "pre-warming: `IdempotencyTable(warm_throughput=dynamodb.WarmThroughput(write_units_per_second=N))`"
            if table == "idempotency"
            else "pre-warming (PaymentProcessor creates the sample's ledger with no prop for it: the DynamoDB "
            "console, or `aws dynamodb update-table --warm-throughput WriteUnitsPerSecond=N`)"
        )
        found.append(
            {
                "what": f"DynamoDB {table} table: write request units per second vs a new on-demand table's initial "
                "throughput",
                "value": units["wru_per_second"],
                "limit": q["dynamodb_new_table_initial_wru"].value,
                "moves_it": moves + ", before the launch (pre-warming is billed; "
                f"{DYNAMODB_WARM_THROUGHPUT_URL}); after that, traffic more than doubling its previous peak within "
                "30 minutes can still throttle",
            }
        )
        found.append(
            {
                "what": f"DynamoDB {table} table: write request units per second vs the table quota",
                "value": units["wru_per_second"],
                "limit": q["dynamodb_table_wru"].value,
                "moves_it": "a quota increase (Service Quotas); pre-warm the table (warm throughput) before a launch",
            }
        )
    for limit in found:
        limit["utilization"] = limit["value"] / limit["limit"]
    return found


def _account_rate(inputs: Inputs, kind: str, assumptions: Assumptions) -> float:
    (account,) = [limit for limit in limit_rates(inputs, kind, assumptions) if "account quota" in limit["what"]]
    return float(account["reached_at_rate"])


# --- rendering ----------------------------------------------------------------------------------------------------
def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render(inputs: Inputs, assumptions: Assumptions = Assumptions()) -> str:
    """The whole document, deterministic for given inputs."""
    results = {kind: [model(inputs, rate, kind, assumptions) for rate in RATES] for kind in KINDS}
    half = dataclasses.replace(assumptions, batch_fill=assumptions.batch_fill / 2)
    at_half = {kind: [model(inputs, rate, kind, half) for rate in RATES] for kind in KINDS}
    m = inputs.machine
    out = [
        "# Capacity model",
        "",
        "<!-- Generated by benchmarks/capacity.py from benchmarks/measured.json (`make capacity`). Do not edit: "
        "tests/unit/test_capacity.py regenerates it and fails when it differs. -->",
        "",
        "What 100, 1,000 and 10,000 payments per second need and cost with `PaymentProcessor`'s defaults (batch "
        f"size {inputs.batch_size}, {inputs.memory_mb} MB, {assumptions.architecture}), on a standard and on a FIFO "
        "queue. Every figure below is computed by `benchmarks/capacity.py` from the inputs `make bench` measured, "
        "the assumptions stated here and the quotas and prices listed at the end with their sources. It is a model: "
        "check it against your own load test before you rely on it.",
        "",
        "## Measured inputs",
        "",
        f"Measured {inputs.measured_at} on {m.get('cpus', '?')} CPUs ({m.get('note', '')}; load average at the "
        f"end {m.get('load_average_1m_at_end', '?')}), by {inputs.how}.",
        "",
    ]
    rows = [
        ["Lambda invocations per payment", _n(inputs.invocations_per_payment, 4)],
        [
            "one 10-payment invocation, median wall time, moto in process (ms): **the model's duration**",
            _n(inputs.invocation_ms, 1),
        ],
        ["handler wall time per invocation, mean over the local run (ms)", _n(inputs.pipeline_invocation_ms, 1)],
    ]
    rows += [[f"SQS `{action}` calls per payment", _n(v, 4)] for action, v in inputs.sqs_by_action.items()]
    for case in ("first_delivery", "duplicate"):
        for table, ops in inputs.ddb_by_table[case].items():
            text = ", ".join(f"{op} {n}" for op, n in ops.items())
            rows.append([f"DynamoDB requests, {case.replace('_', ' ')}, {table} table", text])
    out += _table(["measure", "value"], rows)
    out += [
        "",
        "Two durations were measured. The model uses the first: the median of 7 invocations of the handler with "
        "10 new payments each, in one process against moto's in-process DynamoDB (`benchmarks/ddb_requests.py`): "
        "the handler's own cost, with no network round trips (on AWS each payment adds three DynamoDB round trips "
        "of a few milliseconds). The second is the mean wall time of every invocation of the whole local run, "
        "timed by the local pollers around the handler call (`lambda.Invoke.duration_us` / `lambda.Invoke.timed`) "
        "against the moto server on loopback, with several pollers and other jobs sharing 2 cores: it measures "
        "the loaded machine more than the handler, and the concurrency row below shows what it would mean. "
        "`ReceiveMessage` counts receives that returned messages; empty long polls are left out.",
        "",
        "## Assumptions",
        "",
        f"- region {assumptions.region}; payload {assumptions.payload_bytes:,} bytes per message; duplicate rate "
        f"{assumptions.duplicate_rate:.0%} of payments; {assumptions.fifo_message_groups:,} active FIFO message "
        "groups;",
    ]
    out += [f"- {note};" for note in assumptions.notes[:-1]] + [f"- {assumptions.notes[-1]}."]
    for kind in KINDS:
        out += ["", f"## {'FIFO' if kind == 'fifo' else 'Standard'} queue", ""]
        header = ["", *[f"{r['rate']:,} payments/s" for r in results[kind]]]
        rows = [
            ["messages per second (payments + duplicates)", *[_n(r["messages_per_second"]) for r in results[kind]]],
            ["Lambda invocations per second", *[_n(r["invocations_per_second"], 1) for r in results[kind]]],
            [
                "Lambda concurrency (invocations/s x duration)",
                *[_n(r["concurrency"], 1) for r in results[kind]],
            ],
            [
                "the same at the local run's mean duration (loaded machine)",
                *[_n(r["concurrency_at_pipeline_duration"], 1) for r in results[kind]],
            ],
        ]
        if kind == "standard":
            rows.append(
                [
                    "default mode: minutes to ramp up from 5 concurrent invokes (+300/min)",
                    *[_n(r["default_mode_ramp_minutes"]) for r in results[kind]],
                ]
            )
        else:
            rows.append(["FIFO: active message groups needed", *[_n(r["fifo_groups_needed"]) for r in results[kind]]])
        rows.append(
            [
                "provisioned mode: pollers needed (most demanding of 10 invokes, 1 MB/s, 10 receives/s per poller; "
                "Event Poller Unit-hours not in the monthly cost, see below)",
                *[_n(r["provisioned_pollers"]) for r in results[kind]],
            ]
        )
        for action in inputs.sqs_by_action:
            rows.append([f"SQS `{action}` calls/s", *[_n(r["sqs_calls_per_second"][action], 1) for r in results[kind]]])
        rows.append(["SQS calls/s, all actions", *[_n(r["sqs_calls_per_second_total"], 1) for r in results[kind]]])
        if kind == "fifo":
            for key, label in (
                ("fifo_tps_per_action", "busiest action vs 300 calls/s (no high throughput)"),
                ("fifo_high_throughput_tps_per_action", "busiest action vs 70,000 calls/s (high throughput)"),
            ):
                limit = QUOTAS[key].value
                rows.append([label, *[f"{r['sqs_max_calls_per_action'] / limit:.0%}" for r in results[kind]]])
        for table in results[kind][0]["dynamodb"]:
            rows.append(
                [
                    f"DynamoDB {table} table, write request units/s",
                    *[_n(r["dynamodb"][table]["wru_per_second"]) for r in results[kind]],
                ]
            )
        labels = {
            "lambda_requests": "monthly: Lambda requests",
            "lambda_compute": f"monthly: Lambda GB-seconds ({assumptions.architecture})",
            "sqs": "monthly: SQS requests",
            "dynamodb": "monthly: DynamoDB on-demand",
            "total": "**monthly total (USD)**",
        }
        for key, label in labels.items():
            rows.append([label, *[_usd(r["monthly_cost_usd"][key]) for r in results[kind]]])
        rows += [
            [
                "at half-full batches: Lambda invocations/s",
                *[_n(r["invocations_per_second"], 1) for r in at_half[kind]],
            ],
            ["at half-full batches: SQS calls/s", *[_n(r["sqs_calls_per_second_total"], 1) for r in at_half[kind]]],
            ["at half-full batches: provisioned pollers", *[_n(r["provisioned_pollers"]) for r in at_half[kind]]],
            ["at half-full batches: monthly total", *[_usd(r["monthly_cost_usd"]["total"]) for r in at_half[kind]]],
        ]
        out += _table(header, rows)
        out += [
            "",
            "Provisioned mode is not in the monthly cost: it is billed in Event Poller Unit-hours (the minimum "
            "pollers every hour, plus those added while scaling; "
            f"[AWS Lambda pricing]({cost_model.LAMBDA_PRICING_URL})), and the stored copy of that page read here "
            "shows no per-hour figure (its price table renders with JavaScript), so no price is typed in. Count "
            "`minimum_pollers` x 730 Event Poller Unit-hours a month at least, plus each poller's long polls "
            f"(up to 10 a second, billed as SQS requests; {SQS_SCALING_URL}).",
        ]
        ordered = limit_rates(inputs, kind, assumptions)
        first = ordered[0]
        per_invoke = 1 / model(inputs, 1, kind, assumptions)["concurrency"]
        unit = "active message group" if kind == "fifo" else "concurrent invocation"
        out += [
            "",
            f"**What breaks first: {first['what']}, at about {_n(first['reached_at_rate'])} payments per second** "
            f"(moved by {first['moves_it']}). Each {unit} carries about {_n(per_invoke, 1)} payments per second at "
            f"the measured duration, so `max_concurrency` = N caps the queue at about N x {_n(per_invoke, 1)} "
            "payments per second. At the local run's mean duration instead "
            f"({_n(inputs.pipeline_invocation_ms, 1)} ms), every concurrency limit is reached "
            f"{_n(inputs.pipeline_invocation_ms / inputs.invocation_ms, 1)} times sooner: the account quota at about "
            f"{_n(_account_rate(inputs, kind, assumptions) * inputs.invocation_ms / inputs.pipeline_invocation_ms)} "
            "payments per second. Each limit in reach, with the rate at which it is reached (the figures above grow "
            "linearly with the rate):",
            "",
        ]
        rows = [
            [limit["what"], _n(limit["limit"]), _n(limit["reached_at_rate"]), limit["moves_it"]] for limit in ordered
        ]
        out += _table(["limit", "ceiling", "reached at (payments/s)", "what moves it"], rows)
    out += [
        "",
        "## Quotas and prices used, with their sources",
        "",
        "Read 2026-11-30 from stored copies of the pages; re-check them before you plan on a figure.",
        "",
    ]
    rows = [[q.label, _n(q.value), q.note, q.source] for q in QUOTAS.values()]
    prices = [
        ["Lambda requests (USD per million)", str(cost_model.LAMBDA_PER_MILLION_REQUESTS), "both architectures"],
        *[
            [f"Lambda duration, {arch} (USD per GB-second)", f"{price:.10f}".rstrip("0"), "first tier"]
            for arch, price in cost_model.LAMBDA_PER_GB_SECOND.items()
        ],
    ]
    rows += [[*p, cost_model.LAMBDA_PRICING_URL] for p in prices]
    rows += [
        [
            "SQS standard / FIFO requests (USD per million)",
            f"{cost_model.SQS_STANDARD_PER_MILLION_REQUESTS} / {cost_model.SQS_FIFO_PER_MILLION_REQUESTS}",
            "each 64 KB chunk of a request is one request",
            cost_model.SQS_PRICING_URL,
        ],
        [
            "DynamoDB on-demand writes / reads (USD per million request units)",
            f"{cost_model.DYNAMODB_PER_MILLION_WRU} / {cost_model.DYNAMODB_PER_MILLION_RRU}",
            "",
            cost_model.DYNAMODB_PRICING_URL,
        ],
    ]
    out += _table(["quota or price", "value", "note", "source"], rows)
    out += ["", f"Prices: us-east-1 list prices, {cost_model.PRICES_AS_OF}.", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render(load())
    if "--check" in argv:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run `make capacity`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"written {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
