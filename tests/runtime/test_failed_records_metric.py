"""The handler counts the records each SQS invocation reports as failed (EMF), under the very metric the
consumer's failed-records alarm reads (issue 12, section 4)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from effectively_once import IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue, observability
from effectively_once_runtime import names
from payments import handler as handler_module

from .conftest import Env, failures, payment, sqs_record


@pytest.fixture
def emf(capsys: pytest.CaptureFixture[str]) -> Any:
    """The EMF documents the handler printed since the last call (Powertools Metrics prints them to stdout)."""

    def read() -> list[dict[str, Any]]:
        docs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        return [doc for doc in docs if "_aws" in doc]

    return read


def _metric(doc: dict[str, Any], name: str) -> tuple[str, list[list[str]], float]:
    """(namespace, dimension sets, summed value) of metric ``name`` in one EMF document."""
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert {"Name": name, "Unit": "Count"} in directive["Metrics"], doc
    value = doc[name]  # Powertools writes a list of values
    return directive["Namespace"], directive["Dimensions"], sum(value) if isinstance(value, list) else value


def test_failed_records_counts_each_invocations_batch_item_failures(aws: Env, emf: Any) -> None:
    name = observability.FAILED_RECORDS_METRIC
    clean = aws.invoke([sqs_record(payment("ok-1"))])
    partial = aws.invoke([sqs_record("not json"), sqs_record(payment("ok-2"))])
    every = aws.invoke([sqs_record("not json"), sqs_record({"amount": 1}), sqs_record("[]")])

    values = [_metric(doc, name)[2] for doc in emf()]

    assert [len(failures(r)) for r in (clean, partial, every)] == [0, 1, 3]
    assert values == [0, 1, 3], "one data point per invocation, zero included, so the alarm sees a healthy minute"


def test_direct_invocations_emit_no_failed_records(aws: Env, emf: Any) -> None:
    aws.invoke_direct(payment("direct-1"))

    (doc,) = emf()

    assert observability.FAILED_RECORDS_METRIC not in doc


def test_runtime_defaults_are_the_ones_the_construct_side_reads() -> None:
    assert (names.DEFAULT_METRICS_NAMESPACE, names.DEFAULT_SERVICE_NAME) == (
        observability.DEFAULT_METRICS_NAMESPACE,
        observability.DEFAULT_SERVICE_NAME,
    )


def test_failed_records_alarm_reads_the_metric_the_handler_emits(aws: Env, emf: Any) -> None:
    # The consumer told the namespace and service the function runs with (the handler read them at import).
    namespace, service = handler_module.metrics.namespace, handler_module.metrics.service
    stack = Stack(App(builtin_cloud_formation_validation=False), "Test")
    function = lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
    )
    consumer = IdempotentQueueConsumer(
        stack,
        "Consumer",
        queue=ProcessingQueue(stack, "Queue"),
        table=IdempotencyTable(stack, "Table"),
        function=function,
        metrics_namespace=namespace,
        service_name=service,
    )
    (alarm,) = [
        r["Properties"]
        for r in Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm").values()
        if r["Properties"].get("Namespace") == namespace
    ]
    assert consumer.failed_records_alarm is not None

    aws.invoke([sqs_record("not json")])
    (doc,) = emf()

    namespace, dimension_sets, value = _metric(doc, alarm["MetricName"])
    assert namespace == alarm["Namespace"]
    assert [[d["Name"] for d in alarm["Dimensions"]]] == dimension_sets
    assert {d["Name"]: doc[d["Name"]] for d in alarm["Dimensions"]} == {
        d["Name"]: d["Value"] for d in alarm["Dimensions"]
    }
    assert value == 1
