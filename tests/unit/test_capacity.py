"""The capacity model (issue 15, section 5): docs/capacity.md is exactly what benchmarks/capacity.py generates from
benchmarks/measured.json, every quota names its source, and the figures follow from the measured inputs."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest

from effectively_once import IdempotencyTable

from .helpers import load_benchmark

capacity = load_benchmark("capacity")
cost_model = capacity.cost_model
INPUTS = capacity.load()
ASSUMED = capacity.Assumptions()


def test_committed_document_is_what_the_script_generates_from_the_measured_inputs() -> None:
    assert capacity.OUTPUT.read_text(encoding="utf-8") == capacity.render(INPUTS), (
        "docs/capacity.md is out of date or was edited by hand: run `make capacity`"
    )


def test_every_quota_has_a_source_url_that_the_document_cites() -> None:
    text = capacity.OUTPUT.read_text(encoding="utf-8")
    for name, quota in capacity.QUOTAS.items():
        assert quota.source.startswith("https://"), name
        assert quota.source in text, name
    for url in cost_model.PRICE_SOURCES.values():
        assert url in text


@pytest.mark.parametrize("kind", capacity.KINDS)
def test_concurrency_is_invocations_per_second_times_the_measured_duration(kind: str) -> None:
    figures = capacity.model(INPUTS, 1_000, kind)
    invocations = 1_000 * (1 + ASSUMED.duplicate_rate) * INPUTS.invocations_per_payment

    assert figures["invocations_per_second"] == pytest.approx(invocations)
    assert figures["concurrency"] == pytest.approx(invocations * INPUTS.invocation_ms / 1000)
    slower = capacity.model(dataclasses.replace(INPUTS, invocation_ms=2 * INPUTS.invocation_ms), 1_000, kind)
    assert slower["concurrency"] == pytest.approx(2 * figures["concurrency"])


def test_dynamodb_units_per_table_follow_the_measured_requests() -> None:
    inputs = dataclasses.replace(
        INPUTS,
        ddb_by_table={
            "first_delivery": {"idempotency": {"PutItem": 1, "UpdateItem": 1}, "ledger": {"PutItem": 1}},
            "duplicate": {"idempotency": {"PutItem": 1, "GetItem": 1}},
        },
    )
    tables = capacity.model(inputs, 100, "standard")["dynamodb"]

    assert tables["idempotency"]["wru_per_second"] == pytest.approx(100 * 2 + 100 * ASSUMED.duplicate_rate * 1)
    assert tables["idempotency"]["rru_per_second"] == pytest.approx(100 * ASSUMED.duplicate_rate)
    assert tables["ledger"] == {"wru_per_second": 100, "rru_per_second": 0}


def test_monthly_cost_prices_arm64_duration_and_the_measured_requests() -> None:
    figures = capacity.model(INPUTS, 100, "fifo")
    cost = figures["monthly_cost_usd"]
    seconds = capacity.SECONDS_PER_MONTH
    gb_seconds = (
        figures["invocations_per_second"] * seconds * math.ceil(INPUTS.invocation_ms) / 1000 * (INPUTS.memory_mb / 1024)
    )

    assert cost["lambda_compute"] == pytest.approx(gb_seconds * cost_model.LAMBDA_PER_GB_SECOND["arm64"])
    assert cost["lambda_requests"] == pytest.approx(
        figures["invocations_per_second"] * seconds / 1e6 * cost_model.LAMBDA_PER_MILLION_REQUESTS
    )
    assert cost["sqs"] == pytest.approx(
        figures["sqs_calls_per_second_total"] * seconds / 1e6 * cost_model.SQS_FIFO_PER_MILLION_REQUESTS
    )
    assert cost["total"] == pytest.approx(sum(v for k, v in cost.items() if k != "total"))


def test_sqs_calls_per_action_are_the_measured_rates_against_the_fifo_limits() -> None:
    inputs = dataclasses.replace(INPUTS, sqs_by_action={"SendMessageBatch": 0.1, "ReceiveMessage": 0.2})
    figures = capacity.model(inputs, 10_000, "fifo")
    messages = 10_000 * (1 + ASSUMED.duplicate_rate)

    assert figures["sqs_calls_per_second"] == pytest.approx(
        {"SendMessageBatch": 0.1 * messages, "ReceiveMessage": 0.2 * messages}
    )
    (no_ht,) = [limit for limit in figures["limits"] if "no high throughput" in limit["what"]]
    assert no_ht["limit"] == 300 and no_ht["utilization"] == pytest.approx(0.2 * messages / 300)


@pytest.mark.parametrize("kind", capacity.KINDS)
def test_what_breaks_first_is_the_limit_reached_at_the_lowest_rate(kind: str) -> None:
    ordered = capacity.limit_rates(INPUTS, kind)
    first = ordered[0]

    at_that_rate = capacity.model(INPUTS, first["reached_at_rate"], kind)["limits"]
    (same,) = [limit for limit in at_that_rate if limit["what"] == first["what"]]
    assert same["utilization"] == pytest.approx(1.0)
    assert all(limit["utilization"] <= 1.0 + 1e-9 for limit in at_that_rate)
    whats = {limit["what"] for limit in ordered}
    assert any("account quota" in w for w in whats) and any("max_concurrency" in w for w in whats)
    if kind == "fifo":
        assert any("message groups" in w for w in whats)


def test_fails_on_an_unknown_queue_kind() -> None:
    with pytest.raises(ValueError, match="kind='lifo'"):
        capacity.model(INPUTS, 100, "lifo")


def test_provisioned_pollers_count_each_per_poller_limit_of_the_sqs_scaling_page() -> None:
    limits = capacity.limits
    figures = capacity.model(INPUTS, 1_000, "standard")
    receives = figures["sqs_calls_per_second"]["ReceiveMessage"]

    assert capacity.QUOTAS["provisioned_polls_per_poller"].value == limits.LAMBDA_SQS_POLLS_PER_POLLER == 10
    assert capacity.QUOTAS["provisioned_invokes_per_poller"].value == limits.LAMBDA_SQS_INVOKES_PER_POLLER
    for name in ("provisioned_invokes_per_poller", "provisioned_bytes_per_poller", "provisioned_polls_per_poller"):
        assert capacity.QUOTAS[name].source == capacity.SQS_SCALING_URL, name
    assert receives > 100  # 108.1 ReceiveMessage calls/s at the measured 0.103 per payment
    assert figures["provisioned_pollers"] == max(
        2,
        math.ceil(figures["concurrency"] / limits.LAMBDA_SQS_INVOKES_PER_POLLER),
        math.ceil(figures["messages_per_second"] * ASSUMED.payload_bytes / limits.LAMBDA_SQS_BYTES_PER_POLLER),
        math.ceil(receives / limits.LAMBDA_SQS_POLLS_PER_POLLER),
    )
    assert figures["provisioned_pollers"] >= 11
    assert "remktr.com" not in capacity.OUTPUT.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", capacity.KINDS)
def test_a_new_on_demand_table_initial_write_throughput_is_a_limit_per_table_moved_by_warm_throughput(
    kind: str,
) -> None:
    ordered = capacity.limit_rates(INPUTS, kind)
    initial = {limit["what"]: limit for limit in ordered if "initial throughput" in limit["what"]}
    tables = capacity.model(INPUTS, 1, kind)["dynamodb"]

    assert len(initial) == len(tables)
    (idempotency,) = [limit for what, limit in initial.items() if "idempotency" in what]
    wru_per_payment = tables["idempotency"]["wru_per_second"]
    assert wru_per_payment == pytest.approx(2 + ASSUMED.duplicate_rate)
    assert idempotency["limit"] == 4_000
    assert idempotency["reached_at_rate"] == pytest.approx(4_000 / wru_per_payment)  # about 1,951 payments/s
    assert "`IdempotencyTable(warm_throughput=" in idempotency["moves_it"]
    assert "warm_throughput" in inspect.signature(IdempotencyTable.__init__).parameters  # the prop the document names
    assert ordered[0] is idempotency  # what breaks first, on day one
    assert capacity.QUOTAS["dynamodb_new_table_initial_wru"].source.startswith("https://docs.aws.amazon.com/")


def test_half_full_batches_double_invocations_and_receives_but_not_sends() -> None:
    full = capacity.model(INPUTS, 1_000, "standard")
    half = capacity.model(INPUTS, 1_000, "standard", dataclasses.replace(ASSUMED, batch_fill=0.5))

    assert half["invocations_per_second"] == pytest.approx(2 * full["invocations_per_second"])
    for action in ("ReceiveMessage", "DeleteMessageBatch"):
        assert half["sqs_calls_per_second"][action] == pytest.approx(2 * full["sqs_calls_per_second"][action])
    assert half["sqs_calls_per_second"]["SendMessageBatch"] == pytest.approx(
        full["sqs_calls_per_second"]["SendMessageBatch"]
    )
    assert half["provisioned_pollers"] > full["provisioned_pollers"]
    text = capacity.OUTPUT.read_text(encoding="utf-8")
    assert "lower bound" in text and "`max_batching_window`" in text


def test_capacity_and_cost_model_price_the_same_measured_duration() -> None:
    batch10 = cost_model.invocation_ms(INPUTS.batch_size)

    assert batch10 == pytest.approx(INPUTS.invocation_ms)
    cost = cost_model.cost_per_million(ddb_operations_per_payment={"PutItem": 2, "UpdateItem": 1})
    assert cost["assumptions"]["billed_ms_per_invocation"] == math.ceil(INPUTS.invocation_ms)


def test_provisioned_mode_cost_is_named_as_not_included_next_to_the_pollers_row() -> None:
    text = capacity.OUTPUT.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| provisioned mode: pollers needed")]
    assert len(rows) == len(capacity.KINDS)
    assert all("not in the monthly cost" in row for row in rows)
    assert "Event Poller Unit" in text
