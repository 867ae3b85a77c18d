"""The "Deploy into your sandbox account" page's figures (docs/sandbox-account.md) come from the code: the cost
model, the producer's plan for `make demo-aws`'s defaults, the benchmark's measured DynamoDB requests (their rows on
docs/benchmarks.md) and the sandbox template's queues."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.cli import main as cli
from effectively_once_local.payments import remote
from effectively_once_local.payments.payments_input import FIFO, load_payments, plan_messages
from effectively_once_local.payments.payments_view import Pipeline
from effectively_once_local.runner.mapping_runner import MappingConfig

from .helpers import docs_page

REPO = Path(__file__).resolve().parents[2]
SANDBOX_PAGE = docs_page("sandbox-account.md")
BENCHMARKS_PAGE = docs_page("benchmarks.md")
SNAPSHOT = REPO / "tests" / "unit" / "__snapshots__" / "test_sandbox" / "test_snapshot.json"


def _section() -> str:
    match = re.search(r"^# Deploy into your sandbox account\n(.*)", SANDBOX_PAGE, re.MULTILINE | re.DOTALL)
    assert match, "docs/sandbox-account.md has no 'Deploy into your sandbox account' title"
    return " ".join(match.group(1).split())  # line breaks do not matter


def _cost_model() -> Any:
    spec = importlib.util.spec_from_file_location("bench_cost_model_readme", REPO / "benchmarks" / "cost_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench_row(label: str) -> int:
    match = re.search(rf"^\| {re.escape(label)} \| (\d+) \|", BENCHMARKS_PAGE, re.MULTILINE)
    assert match, label
    return int(match.group(1))


@pytest.fixture(scope="module")
def produce_defaults() -> tuple[Path, Any]:
    """The payments file and chaos `python -m effectively_once_local produce --stack PaymentsSandbox` uses."""
    seen: list[tuple[Path, Any]] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(remote, "produce", lambda opts: seen.append((opts.payments, opts.chaos)) or 0)
        assert cli.main(["produce", "--stack", "PaymentsSandbox"]) == 0
    return seen[0]


def test_cost_is_the_cost_model_for_the_demo_messages(produce_defaults: tuple[Path, Any]) -> None:
    payments, chaos = produce_defaults
    plan = plan_messages(load_payments(REPO / payments), chaos)
    model = _cost_model()
    # Every DynamoDB request of a delivery is a write of an item under 1 KB (the bench's measured counts).
    first_writes = {"PutItem": _bench_row("DynamoDB requests, first delivery")}
    duplicate_writes = {"PutItem": _bench_row("DynamoDB requests, duplicate of a completed payment")}
    per_million: dict[str, tuple[float, float]] = {}
    total = 0.0
    originals = duplicates = 0
    for queue, messages in plan.items():
        fifo = queue == FIFO
        first = model.cost_per_million(ddb_operations_per_payment=first_writes, fifo=fifo)["total"]
        duplicate = model.cost_per_million(ddb_operations_per_payment=duplicate_writes, fifo=fifo)["total"]
        per_million[queue] = (first, duplicate)
        n_first = sum(1 for m in messages if m.kind == "original")
        originals += n_first
        duplicates += len(messages) - n_first
        total += (n_first * first + (len(messages) - n_first) * duplicate) / 1e6
    section = _section()

    assert f"**${total:.4f}**" in section
    assert f"the {originals:,} messages of `{payments}`" in section
    assert f"plus the {duplicates} duplicates" in section and f"{duplicates} extra messages" in section
    std, fifo_ = per_million["standard"], per_million["fifo"]
    assert f"${std[0]:.2f} per million payments on the standard queue, ${fifo_[0]:.2f} on FIFO" in section
    assert f"${std[1]:.2f} / ${fifo_[1]:.2f} per million" in section


def test_default_wait_is_the_one_report_computes_for_the_sandbox() -> None:
    template = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    queues = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r["Properties"]
    ]
    pipelines = {
        str(i): Pipeline(
            mapping=MappingConfig(
                label=str(i),
                queue_url="u",
                queue_arn="arn:aws:sqs:us-east-1:123456789012:q",
                batch_size=10,
                batching_window_seconds=0,
                visibility_timeout_seconds=q["VisibilityTimeout"],
                max_receive_count=q["RedrivePolicy"]["maxReceiveCount"],
                function_name="f",
                function_timeout_seconds=30,
                function_memory_mb=256,
                function_env={},
                handler="payments.handler.lambda_handler",
            ),
            mapping_uuid="x",
            dlq_url="d",
            idempotency_table="i",
            ledger_table="l",
        )
        for i, q in enumerate(queues)
    }
    visibility = {q["VisibilityTimeout"] for q in queues}
    receives = {q["RedrivePolicy"]["maxReceiveCount"] for q in queues}
    section = _section()

    assert len(queues) == 2 and len(visibility) == 1 and len(receives) == 1
    assert f"(so a {visibility.pop()} s visibility timeout), maxReceiveCount {receives.pop()}" in section
    assert f"{remote.drain_wait_seconds(pipelines):,} s with the defaults" in section
    assert f"read empty for {remote.SETTLE_SECONDS} s (`--settle`" in section


def test_alarm_dashboard_and_query_counts_are_the_sandbox_templates() -> None:
    template = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    count = {
        kind: sum(1 for r in template["Resources"].values() if r["Type"] == kind)
        for kind in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard", "AWS::Logs::QueryDefinition")
    }
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    section = _section()

    alarms, dashboards = count["AWS::CloudWatch::Alarm"], count["AWS::CloudWatch::Dashboard"]
    assert re.search(rf"the {alarms} CloudWatch alarms and\s+{dashboards} dashboards", section), (alarms, dashboards)
    # Per processor, and the five of the asynchronous entry (its IdempotentEventConsumer).
    events = sum(
        1 for logical_id in template["Resources"] if logical_id.startswith("PaymentEvents") and "Alarm" in logical_id
    )
    assert events == 5 and "five on the asynchronous entry" in section
    assert f"**Alarms**: {words[(alarms - events) // 2]} per processor" in section
    queries = [
        r["Properties"]["Name"] for r in template["Resources"].values() if r["Type"] == "AWS::Logs::QueryDefinition"
    ]
    assert len(queries) == 2 * 3
    for name in queries:
        assert name.rsplit("/", 1)[1] in section
