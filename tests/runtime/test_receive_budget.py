"""The receive budget (issue 31, item 2): a valid record on its queue's last receive (``ApproximateReceiveCount`` at the
``maxReceiveCount`` of ``SOURCE_QUEUES``) is never deferred for time; it runs first in its batch, but never ahead of
its own FIFO group. With the count unknown it is ordered and deferred as any other. Against moto's DynamoDB in
process; the batch's time is short enough that every record after the first would be deferred."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_runtime import Consumer, names
from effectively_once_runtime.settings import QueueFacts
from effectively_once_runtime.sqs_batch import is_last_receive, prioritised, protected

from .conftest import (
    FIFO_ARN,
    IDEMPOTENCY_TABLE,
    REGION,
    STANDARD_ARN,
    FakeLambdaContext,
    _CurrentStdout,
    create_table,
    failures,
    runtime_env,
    sqs_record,
)

MAX_RECEIVES = 5
QUEUES = {arn: QueueFacts(MAX_RECEIVES, 60) for arn in (STANDARD_ARN, FIFO_ARN)}
#: Less than the default margin (1 s): every record after the first does not fit.
SHORT_MS = 500


def record(order_id: str, count: int, *, group: str | None = None, sequence: int = 1) -> dict[str, Any]:
    made = sqs_record(
        {"order_id": order_id}, message_id=order_id, receive_count=count, fifo_group=group, sequence=sequence
    )
    made["eventSourceARN"] = FIFO_ARN if group else STANDARD_ARN
    return made


@dataclass
class Budget:
    consumer: Consumer
    ran: list[str] = field(default_factory=list)

    def invoke(self, records: list[dict[str, Any]]) -> set[str]:
        response = self.consumer.handler({"Records": records}, FakeLambdaContext(remaining_ms=SHORT_MS))
        return {message_id for message_id in failures(response)}


def _consumer(monkeypatch: pytest.MonkeyPatch, source_queues: dict[str, Any] | None) -> Iterator[Budget]:
    runtime_env(monkeypatch)
    if source_queues is not None:
        monkeypatch.setenv(names.ENV_SOURCE_QUEUES, json.dumps(source_queues))
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), IDEMPOTENCY_TABLE, "id")
        consumer = Consumer(key="order_id", key_prefix="test/budget", effect_key="scoped", service="budget")
        monkeypatch.setattr(consumer.logger.registered_handler, "stream", _CurrentStdout())
        budget = Budget(consumer)

        @consumer.record
        def handle(body: dict[str, Any]) -> dict[str, Any]:
            budget.ran.append(body["order_id"])
            return {"ok": body["order_id"]}

        yield budget


@pytest.fixture
def budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[Budget]:
    known = {arn: {"maxReceiveCount": MAX_RECEIVES, "visibilityTimeout": 60} for arn in (STANDARD_ARN, FIFO_ARN)}
    yield from _consumer(monkeypatch, known)


@pytest.fixture
def unknown(monkeypatch: pytest.MonkeyPatch) -> Iterator[Budget]:
    yield from _consumer(monkeypatch, None)


def test_last_receive_needs_the_queue_s_count() -> None:
    assert is_last_receive(record("a", 5), QUEUES)
    assert is_last_receive(record("a", 7), QUEUES)  # past it (a redrive policy lowered since)
    assert not is_last_receive(record("a", 4), QUEUES)
    assert not is_last_receive(record("a", 5), {})  # unknown queue
    assert not is_last_receive(record("a", 5), {STANDARD_ARN: QueueFacts(None, 60)})  # no redrive policy known


def test_standard_last_receive_runs_first_and_is_never_deferred(budget: Budget) -> None:
    batch = [record("fresh-1", 1), record("fresh-2", 1), record("last-1", 5), record("last-2", 5)]
    returned = budget.invoke(batch)
    # Both last receives run, the second although the time is short; the fresh ones go back for another receive.
    assert budget.ran == ["last-1", "last-2"]
    assert returned == {"fresh-1", "fresh-2"}


def test_fifo_last_receive_runs_first_but_not_ahead_of_its_group(budget: Budget) -> None:
    batch = [
        record("g1-a", 1, group="g1", sequence=1),
        record("g2-a", 4, group="g2", sequence=2),
        record("g2-b", 5, group="g2", sequence=3),
        record("g2-c", 5, group="g2", sequence=4),
    ]
    ordered = [r["messageId"] for r in prioritised(batch, fifo=True, queues=QUEUES)]
    assert ordered == ["g2-a", "g2-b", "g2-c", "g1-a"]
    assert protected(prioritised(batch, fifo=True, queues=QUEUES), QUEUES) == {"g2-a", "g2-b", "g2-c"}
    returned = budget.invoke(batch)
    # g2-a is not on its last receive, but g2-b cannot run before it: the whole of g2 runs, in order.
    assert budget.ran == ["g2-a", "g2-b", "g2-c"]
    assert returned == {"g1-a"}


def test_with_the_count_unknown_a_record_is_deferred_as_any_other(unknown: Budget) -> None:
    batch = [record("old-1", 5), record("old-2", 5)]
    returned = unknown.invoke(batch)
    assert unknown.ran == ["old-1"]  # the first always starts; the second does not fit
    assert returned == {"old-2"}
