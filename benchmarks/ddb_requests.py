"""DynamoDB requests per payment, counted in process against moto (``moto.mock_aws``).

The handler (``payments.handler``) runs with both of its DynamoDB clients injected — the Powertools persistence
layer's (``DynamoDBPersistenceLayer(boto3_client=...)``) and the ledger gateway's (``LedgerGateway(client=...)``) —
and a botocore ``before-call.dynamodb`` hook counts every request that client makes. Scenarios:

- ``first_delivery``: a new payment (claim + ledger charge + completion);
  (these two are also counted per table, ``ddb_operations_by_table``: ``idempotency`` and ``ledger``)
- ``duplicate``: the same payment delivered again after it completed;
- ``crash_replay``: a charge, then a crash (a ``BaseException``) before the record completes, then a redelivery
  after the in-progress record expired; only the redelivery is counted.

Also measures the in-process wall time of one 10-record invocation (moto in process: no network round trips, so a
lower bound of the real duration; the cost model states its own duration).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "lambda_src"), str(ROOT)]

# The runtime tests' event builders and crash seam: the benchmark drives the handler exactly as they do.
from tests.runtime.conftest import (  # noqa: E402
    HANDLER_ENV,
    IDEMPOTENCY_TABLE,
    LEDGER_TABLE,
    REGION,
    FakeLambdaContext,
    payment,
    sqs_record,
)
from tests.runtime.test_handler import CrashAfterCharge, SimulatedCrash  # noqa: E402


def _record(payment_id: str, receive_count: int = 1) -> dict[str, Any]:
    return sqs_record(payment(payment_id), receive_count=receive_count)


@contextlib.contextmanager
def _environment() -> Iterator[None]:
    values = {**HANDLER_ENV, "POWERTOOLS_METRICS_NAMESPACE": "EffectivelyOnceBench"}
    saved = {name: os.environ.get(name) for name in [*values, "AWS_ENDPOINT_URL"]}
    os.environ.update(values)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def measure() -> dict[str, Any]:
    """Run the scenarios; return request counts per payment (by operation too) and the in-process batch time."""
    import boto3
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
    from moto import mock_aws

    with _environment(), mock_aws(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the crashed invocation flushes no metrics: Powertools warns
        from payments import handler as handler_module
        from payments.gateway import LedgerGateway
        from payments.settings import DEFAULT_KEY_PREFIX

        admin = boto3.client("dynamodb", region_name=REGION)
        for name, key in ((IDEMPOTENCY_TABLE, "id"), (LEDGER_TABLE, "charge_id")):
            admin.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        calls: Counter[str] = Counter()
        by_table: Counter[tuple[str, str]] = Counter()
        tables = {IDEMPOTENCY_TABLE: "idempotency", LEDGER_TABLE: "ledger"}

        def count(event_name: str, **_: Any) -> None:
            calls[event_name.rsplit(".", 1)[-1]] += 1

        def count_table(params: dict[str, Any], model: Any, **_: Any) -> None:
            by_table[(tables.get(params.get("TableName", ""), "other"), model.name)] += 1

        client = boto3.client("dynamodb", region_name=REGION)
        client.meta.events.register("before-call.dynamodb", count)
        client.meta.events.register("before-parameter-build.dynamodb", count_table)
        gateway = LedgerGateway(LEDGER_TABLE, client=client, key_prefix=DEFAULT_KEY_PREFIX)
        handler_module.reset()
        handler_module.consumer.setup(
            persistence_store=DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=client)
        )
        handler_module.set_gateway(gateway)

        def invoke(records: list[dict[str, Any]], remaining_ms: int = 30_000) -> dict[str, Any]:
            return handler_module.lambda_handler({"Records": records}, FakeLambdaContext(remaining_ms))  # type: ignore[no-any-return]

        per_table: dict[str, dict[str, dict[str, int]]] = {}

        def counted(
            records: list[dict[str, Any]], remaining_ms: int = 30_000, *, name: str = ""
        ) -> tuple[dict[str, int], dict[str, Any]]:
            calls.clear()
            by_table.clear()
            response = invoke(records, remaining_ms)
            if name:
                per_table[name] = {}
                for (table, operation), n in sorted(by_table.items()):
                    per_table[name].setdefault(table, {})[operation] = n
            return dict(calls), response

        try:
            invoke([_record("warm-up")])  # the first call pays client set-up; not counted
            first, response = counted([_record("p-first")], name="first_delivery")
            assert not response["batchItemFailures"], response
            duplicate, response = counted([_record("p-first", receive_count=2)], name="duplicate")
            assert not response["batchItemFailures"], response
            batch = [_record(f"p-batch-{i}") for i in range(10)]
            batch_calls, _ = counted(batch)

            handler_module.set_gateway(CrashAfterCharge(gateway))
            try:
                invoke([_record("p-crash")], remaining_ms=300)
            except SimulatedCrash:
                pass
            handler_module.set_gateway(gateway)
            time.sleep(0.5)  # the in-progress record expires with the crashed invocation's deadline
            replay, response = counted([_record("p-crash", receive_count=2)])
            assert not response["batchItemFailures"], response
            assert gateway.replays == 1, "the provider key must answer the re-execution"

            timings = []
            for run in range(7):
                records = [_record(f"p-time-{run}-{i}") for i in range(10)]
                start = time.perf_counter()
                invoke(records)
                timings.append((time.perf_counter() - start) * 1000)
        finally:
            handler_module.reset()
    return {
        "ddb_requests_first_delivery": sum(first.values()),
        "ddb_requests_duplicate": sum(duplicate.values()),
        "ddb_requests_crash_replay": sum(replay.values()),
        "ddb_requests_first_delivery_in_batch_of_10": sum(batch_calls.values()) / 10,
        "ddb_operations": {"first_delivery": first, "duplicate": duplicate, "crash_replay": replay},
        "ddb_operations_by_table": per_table,
        "handler_batch10_ms_inprocess": round(statistics.median(timings), 1),
    }


if __name__ == "__main__":
    # The handler's Logger holds the real stdout (bound at import): results go to a file when one is named.
    text = json.dumps(measure(), indent=2)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
