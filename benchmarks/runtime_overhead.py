"""The runtime's CPU overhead: ``effectively_once_runtime.Consumer`` against a bare Powertools handler doing the
same work, in one process against moto (``moto.mock_aws``), timed with ``time.process_time`` (``python
benchmarks/runtime_overhead.py [out.json]``; ``make bench`` runs it, ``benchmarks/run.py --only runtime-overhead``
runs it alone in under a minute).

The work, per record (every side): a standard-queue SQS record whose body is a JSON object with an ``order_id``;
the idempotency layer (Powertools ``idempotent_function``, ``DynamoDBPersistenceLayer``, key ``order_id``, payload
validation ``[amount, currency]``, the same expiry) claims the key, runs one effect, a conditional ``PutItem``
(``attribute_not_exists(id)``) into an effects table, and completes the record. Every side uses the same moto
tables with its own DynamoDB client (persistence and effect) and new keys on every record.

- **runtime**: ``Consumer(key=..., key_prefix=..., validate=...)`` with one ``@consumer.effect`` (the put) called
  from its ``@consumer.record`` function, ``consumer.setup(persistence_store=...)``, ``consumer.handler``: public
  API only. What it does beyond the bare side is what is measured: strict JSON parsing, the key JMESPath for the log
  keys, a batch processor built per invocation, the effect wrapper, ``json_safe`` of the result.
- **bare**: what a developer writes with Powertools alone, as its docs show: one module-level ``BatchProcessor``
  and ``process_partial_response``, ``json.loads`` of the body, the record function under ``idempotent_function``,
  ``register_lambda_context`` per invocation, ``Logger.inject_lambda_context`` and ``Metrics.log_metrics``.
- **bare_silent** (a reference, no target): the bare side without Logger and Metrics; runtime / bare_silent
  shows what the lines and metrics cost.

Logging and metrics are the same on the runtime and bare sides, so their ratio measures the runtime, not the logging
volume: per record the log keys ``message_id``, ``receive_count``, ``idempotency_key`` and the correlation id, one
``effect executed`` line (``idempotency_key``, ``effect``) and one ``record processed`` line; one ``EffectsExecuted``
metric per effect, one ``FailedRecords`` per invocation, one EMF blob flushed per invocation. The one difference:
the runtime flushes the log handler after the effect line, the bare side does not (``logging.StreamHandler``
flushes after every line anyway, so it is a second, empty flush). Every Logger and the EMF output write to one null
sink (``sys.stdout`` redirected before any side is built).

Interleaved: in each round the sides take turns batch by batch (the first of each turn rotating), so machine load
hits them alike; each side's CPU time is summed over its batches and the round's figure is runtime / bare. One
warm-up batch per side is not counted. The figure is the median of the rounds' ratios. moto's DynamoDB runs in the
same process and its CPU time is counted on every side alike: on AWS the requests are network waits, not CPU, so
the runtime's share of a real invocation's CPU is larger than here (``runtime_overhead_cpu_ms_per_record`` gives
the absolute difference).
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lambda_src"))

#: Rounds, batches per side per round, records per batch (the SQS event source mapping's default batch size).
ROUNDS = 5
BATCHES = 35
BATCH_SIZE = 10
#: The target: the runtime costs at most 10 % more CPU than the bare handler. Reported, never enforced.
TARGET_RATIO = 1.10

REGION = "us-east-1"
IDEMPOTENCY_TABLE = "idempotency"
EFFECTS_TABLE = "effects"
KEY = "order_id"
VALIDATE = "[amount, currency]"
EXPIRY_SECONDS = 3600
SERVICES = {"runtime": "bench-runtime", "bare": "bench-bare"}
NAMESPACE = "EffectivelyOnceBench"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:123456789012:orders"
ENV = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "IDEMPOTENCY_TABLE_NAME": IDEMPOTENCY_TABLE,
    "IDEMPOTENCY_EXPIRY_SECONDS": str(EXPIRY_SECONDS),
    "POWERTOOLS_SERVICE_NAME": SERVICES["runtime"],
    "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
}
#: Unset while measuring: they would change what either side does (an endpoint, a DLQ, a prefix, idempotency off).
UNSET = (
    "AWS_ENDPOINT_URL",
    "DEAD_LETTER_QUEUE_URL",
    "IDEMPOTENCY_KEY_PREFIX",
    "POWERTOOLS_IDEMPOTENCY_DISABLED",
    "POWERTOOLS_DEV",
    "POWERTOOLS_LOG_LEVEL",
)

Handler = Callable[[dict[str, Any], Any], Any]


class _NullSink(io.TextIOBase):
    """Where both sides' log lines and EMF blobs go: accepted and dropped. One for the process, never closed (a
    Powertools Logger keeps the stream it was built with, also across calls of ``measure``)."""

    def write(self, s: str) -> int:
        return len(s)


NULL_SINK = _NullSink()


class _Context:
    """The parts of a Lambda context Powertools reads."""

    function_name = "orders"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:orders"
    log_group_name = "/aws/lambda/orders"
    log_stream_name = "bench"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def sqs_event(keys: list[str]) -> dict[str, Any]:
    """A standard-queue SQS event, one record per key, shaped as the event source mapping delivers it."""
    records = []
    for key in keys:
        body = json.dumps({KEY: key, "amount": 1000, "currency": "EUR", "account_id": "acct-1"})
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": f"AQEB{uuid.uuid4().hex}",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1764403200000",
                    "SenderId": "AIDAEXAMPLE",
                    "ApproximateFirstReceiveTimestamp": "1764403200100",
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": QUEUE_ARN,
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


def conditional_put(client: Any, order: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    """The one effect of both sides: write the order once (``attribute_not_exists``)."""
    client.put_item(
        TableName=EFFECTS_TABLE,
        Item={
            "id": {"S": idempotency_key},
            "amount": {"N": str(order["amount"])},
            "currency": {"S": order["currency"]},
        },
        ConditionExpression="attribute_not_exists(id)",
    )
    return {KEY: order[KEY], "status": "written"}


def runtime_handler(client: Any) -> tuple[Handler, Callable[[], None]]:
    """The runtime side: ``consumer.handler`` and ``consumer.reset``."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from effectively_once_runtime import Consumer

    consumer = Consumer(key=KEY, key_prefix="bench/runtime", validate=VALIDATE, effect_key="scoped")

    @consumer.effect
    def write_order(order: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        return conditional_put(client, order, idempotency_key)

    @consumer.record
    def handle(order: dict[str, Any]) -> Any:
        return write_order(order)

    consumer.setup(persistence_store=DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=client))
    return consumer.handler, consumer.reset


def _bare_parts(client: Any) -> tuple[Any, Any, Any]:
    """The bare sides' batch processor (one, at module level as Powertools' docs show), idempotency config and
    persistence layer: the runtime's settings."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    config = IdempotencyConfig(
        event_key_jmespath=KEY, payload_validation_jmespath=VALIDATE, expires_after_seconds=EXPIRY_SECONDS
    )
    return processor, config, DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=client)


def bare_handler(client: Any) -> Handler:
    """The bare side: the same work, log lines and metrics written with Powertools alone."""
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.metrics import MetricUnit
    from aws_lambda_powertools.utilities.batch import process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.idempotency import idempotent_function

    from effectively_once_runtime import names

    logger = Logger(service=SERVICES["bare"])
    metrics = Metrics(namespace=NAMESPACE, service=SERVICES["bare"])
    processor, config, store = _bare_parts(client)
    record_keys = [names.FIELD_MESSAGE_ID, names.FIELD_RECEIVE_COUNT, names.FIELD_IDEMPOTENCY_KEY]

    @idempotent_function(
        data_keyword_argument="record", persistence_store=store, config=config, key_prefix="bench/bare"
    )
    def process(record: dict[str, Any]) -> Any:
        result = conditional_put(client, record, record[KEY])
        logger.info(
            names.EFFECT_EXECUTED, extra={names.FIELD_IDEMPOTENCY_KEY: record[KEY], names.FIELD_EFFECT: "write_order"}
        )
        metrics.add_metric(name=names.METRIC_EFFECTS_EXECUTED, unit=MetricUnit.Count, value=1)
        logger.info(names.MSG_RECORD_PROCESSED)
        return result

    def record_handler(record: SQSRecord) -> Any:
        body = json.loads(record.body)
        logger.set_correlation_id(body[KEY])
        logger.append_keys(
            **{
                names.FIELD_MESSAGE_ID: record.message_id,
                names.FIELD_RECEIVE_COUNT: int(record.attributes.approximate_receive_count),
                names.FIELD_IDEMPOTENCY_KEY: body[KEY],
            }
        )
        return process(record=body)

    @metrics.log_metrics
    @logger.inject_lambda_context(log_event=False)
    def handler(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        try:
            response = process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )
            metrics.add_metric(
                name=names.METRIC_FAILED_RECORDS, unit=MetricUnit.Count, value=len(response["batchItemFailures"])
            )
            return response
        finally:
            logger.remove_keys(record_keys)
            logger.set_correlation_id(None)

    return handler  # type: ignore[no-any-return]


def silent_handler(client: Any) -> Handler:
    """The reference side: the bare side without its Logger and Metrics (what the lines and metrics cost)."""
    from aws_lambda_powertools.utilities.batch import process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.idempotency import idempotent_function

    processor, config, store = _bare_parts(client)

    @idempotent_function(
        data_keyword_argument="record", persistence_store=store, config=config, key_prefix="bench/silent"
    )
    def process(record: dict[str, Any]) -> Any:
        return conditional_put(client, record, record[KEY])

    def record_handler(record: SQSRecord) -> Any:
        return process(record=json.loads(record.body))

    def handler(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )

    return handler


def _create_tables(client: Any) -> None:
    for name in (IDEMPOTENCY_TABLE, EFFECTS_TABLE):
        client.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )


def _invoke(handler: Handler, keys: list[str]) -> float:
    """CPU seconds of one invocation (the event is built first, outside the timing)."""
    event, context = sqs_event(keys), _Context()
    start = time.process_time()
    response = handler(event, context)
    cpu = time.process_time() - start
    if response["batchItemFailures"]:
        raise RuntimeError(f"the benchmark's batch failed: {response}")
    return cpu


def _round(handlers: dict[str, Handler], tag: str, batches: int, batch_size: int) -> dict[str, float]:
    """One round: the sides take turns batch by batch, the first of each turn rotating; CPU seconds per side."""
    cpu = dict.fromkeys(handlers, 0.0)
    sides = list(handlers)
    for batch in range(batches):
        turn = batch % len(sides)
        for side in sides[turn:] + sides[:turn]:
            cpu[side] += _invoke(handlers[side], [f"{side}-{tag}-{batch}-{i}" for i in range(batch_size)])
    return cpu


def _measure_rounds(rounds: int, batches: int, batch_size: int) -> list[dict[str, float]]:
    """Build the three sides against fresh moto tables, warm them up, run the rounds; check every record's effect
    was written once."""
    import boto3
    from moto import mock_aws

    reset: Callable[[], None] = lambda: None  # noqa: E731 - replaced once the runtime side is built
    with mock.patch.dict(os.environ, ENV), mock_aws(), contextlib.redirect_stdout(NULL_SINK):
        for name in UNSET:
            os.environ.pop(name, None)
        admin = boto3.client("dynamodb", region_name=REGION)
        _create_tables(admin)
        try:
            runtime, reset = runtime_handler(boto3.client("dynamodb", region_name=REGION))
            handlers = {
                "runtime": runtime,
                "bare": bare_handler(boto3.client("dynamodb", region_name=REGION)),
                "bare_silent": silent_handler(boto3.client("dynamodb", region_name=REGION)),
            }
            _round(handlers, "warm-up", 1, batch_size)  # first calls pay lazy imports and client set-up
            per_round = []
            for index in range(rounds):
                gc.collect()
                per_round.append(_round(handlers, str(index), batches, batch_size))
        finally:
            reset()
        effects = admin.scan(TableName=EFFECTS_TABLE, Select="COUNT")["Count"]
    expected = len(handlers) * (rounds * batches + 1) * batch_size
    if effects != expected:
        raise RuntimeError(f"the effects table holds {effects} items, {expected} expected: a side skipped its work")
    return per_round


def measure(*, rounds: int = ROUNDS, batches: int = BATCHES, batch_size: int = BATCH_SIZE) -> dict[str, Any]:
    """Run the rounds. Returns (``runtime_overhead_`` keys): ``ratio``, the median of the rounds' runtime / bare
    CPU ratios, with its ``target`` and whether it is ``met``; ``round_ratios``; ``ratio_vs_silent`` and its
    ``round_ratios_vs_silent`` (runtime / bare without Logger and Metrics); ``cpu_seconds`` per side per round;
    ``cpu_ms_per_record`` per side (median round); ``setup`` (the scale, the 1-minute load average before and
    after, the time).

    :raises RuntimeError: a batch reported failures, or the effects table does not hold one item per record.
    """
    load_before = os.getloadavg()[0]
    per_round = _measure_rounds(rounds, batches, batch_size)
    ratios = {
        reference: [cpu["runtime"] / cpu[reference] for cpu in per_round] for reference in ("bare", "bare_silent")
    }
    median = statistics.median(ratios["bare"])
    records = batches * batch_size
    sides = list(per_round[0])
    return {
        "runtime_overhead_ratio": round(median, 3),
        "runtime_overhead_ratio_target": TARGET_RATIO,
        "runtime_overhead_ratio_target_met": median <= TARGET_RATIO,
        "runtime_overhead_round_ratios": [round(r, 3) for r in ratios["bare"]],
        "runtime_overhead_ratio_vs_silent": round(statistics.median(ratios["bare_silent"]), 3),
        "runtime_overhead_round_ratios_vs_silent": [round(r, 3) for r in ratios["bare_silent"]],
        "runtime_overhead_cpu_seconds": {side: [round(cpu[side], 3) for cpu in per_round] for side in sides},
        "runtime_overhead_cpu_ms_per_record": {
            side: round(statistics.median(cpu[side] for cpu in per_round) / records * 1000, 3) for side in sides
        },
        "runtime_overhead_setup": {
            "rounds": rounds,
            "batches_per_side_per_round": batches,
            "records_per_batch": batch_size,
            "load_average_1m_before": round(load_before, 2),
            "load_average_1m_after": round(os.getloadavg()[0], 2),
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    }


if __name__ == "__main__":
    text = json.dumps(measure(), indent=2)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
