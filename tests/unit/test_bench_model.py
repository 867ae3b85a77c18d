"""The benchmark's cost model and table (issue 9): pure arithmetic, no timing."""

from __future__ import annotations

import pytest

from .helpers import load_benchmark

cost_model = load_benchmark("cost_model")
render = load_benchmark("render")
FIRST_DELIVERY = {"PutItem": 2, "UpdateItem": 1}


def test_default_batch_cost_is_the_sum_of_priced_requests_and_compute() -> None:
    cost = cost_model.cost_per_million(
        batch_size=10, ddb_operations_per_payment=FIRST_DELIVERY, ms_per_payment=30, overhead_ms=5, memory_mb=256
    )

    sqs = (100_000 + 2 * 100_000) / 1e6 * cost_model.SQS_STANDARD_PER_MILLION_REQUESTS
    lambda_requests = 100_000 / 1e6 * cost_model.LAMBDA_PER_MILLION_REQUESTS
    compute = 100_000 * 0.305 * 0.25 * cost_model.LAMBDA_PER_GB_SECOND["arm64"]  # the default architecture
    dynamodb = 3 * cost_model.DYNAMODB_PER_MILLION_WRU
    assert cost["sqs"] == pytest.approx(sqs, abs=1e-4)
    assert cost["lambda_requests"] == pytest.approx(lambda_requests, abs=1e-4)
    assert cost["lambda_compute"] == pytest.approx(compute, abs=1e-4)
    assert cost["dynamodb"] == pytest.approx(dynamodb, abs=1e-4)
    assert cost["total"] == pytest.approx(sqs + lambda_requests + compute + dynamodb, abs=1e-3)


def test_arm64_compute_is_priced_from_its_gb_second_price_and_x86_64_from_its_own() -> None:
    arm = cost_model.cost_per_million(ddb_operations_per_payment=FIRST_DELIVERY)
    x86 = cost_model.cost_per_million(ddb_operations_per_payment=FIRST_DELIVERY, architecture="x86_64")

    gb_seconds = 100_000 * arm["assumptions"]["billed_ms_per_invocation"] / 1000 * cost_model.MEMORY_MB / 1024
    assert arm["assumptions"]["architecture"] == "arm64"
    assert arm["lambda_compute"] == pytest.approx(gb_seconds * cost_model.LAMBDA_PER_GB_SECOND["arm64"], abs=1e-4)
    assert x86["lambda_compute"] == pytest.approx(gb_seconds * cost_model.LAMBDA_PER_GB_SECOND["x86_64"], abs=1e-4)
    assert arm["lambda_requests"] == x86["lambda_requests"] and arm["dynamodb"] == x86["dynamodb"]
    assert arm["lambda_compute"] < x86["lambda_compute"]


def test_every_price_names_its_source_page() -> None:
    assert set(cost_model.PRICE_SOURCES) == {"lambda", "sqs", "dynamodb"}
    assert all(url.startswith("https://aws.amazon.com/") for url in cost_model.PRICE_SOURCES.values())


def test_fails_on_an_architecture_without_a_price() -> None:
    with pytest.raises(ValueError, match="architecture='riscv64'"):
        cost_model.cost_per_million(ddb_operations_per_payment=FIRST_DELIVERY, architecture="riscv64")


def test_batch_size_one_pays_ten_times_the_lambda_requests() -> None:
    batched = cost_model.cost_per_million(batch_size=10, ddb_operations_per_payment=FIRST_DELIVERY)
    single = cost_model.cost_per_million(batch_size=1, ddb_operations_per_payment=FIRST_DELIVERY)

    assert single["lambda_requests"] == pytest.approx(10 * batched["lambda_requests"])
    assert single["assumptions"]["sqs_requests_per_payment"] == pytest.approx(2.1)
    assert single["dynamodb"] == batched["dynamodb"]


def test_fifo_queue_uses_the_fifo_request_price() -> None:
    cost = cost_model.cost_per_million(batch_size=10, ddb_operations_per_payment=FIRST_DELIVERY, fifo=True)

    assert cost["sqs"] == pytest.approx(0.3 * cost_model.SQS_FIFO_PER_MILLION_REQUESTS)


def test_request_units_count_writes_and_reads_apart() -> None:
    assert cost_model.request_units({"PutItem": 2, "UpdateItem": 1, "GetItem": 1}) == (3.0, 1.0)


def test_fails_batch_size_below_one() -> None:
    with pytest.raises(ValueError, match="batch_size=0"):
        cost_model.cost_per_million(batch_size=0, ddb_operations_per_payment=FIRST_DELIVERY)


def test_fails_unpriced_operation() -> None:
    with pytest.raises(ValueError, match="Scan"):
        cost_model.request_units({"Scan": 1})


def test_table_shows_value_and_target_per_measure() -> None:
    text = render.table({"ddb_requests_first_delivery": 3, "synth_ratio": 1.0234})

    assert "| DynamoDB requests, first delivery | 3 | <= 3 |" in text
    assert "| 1.023 | <= 1.10 |" in text
    assert "| n/a |" in text
