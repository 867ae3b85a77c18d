"""Effect results kept per record (issue 30, item 2): a declared effect that returned is never run again for its
record, whatever fails after it. Powertools deletes the record on any exception, so the runtime keeps a marker per
effect call in the idempotency table and answers the record's later runs from it: a ``PermanentError`` raised after
an effect (the DLQ on first sight, the on-failure queue; a redrive of it), a transient failure after it (the retry),
on every trigger."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from effectively_once_runtime import Consumer, PermanentError, names

from .conftest import IDEMPOTENCY_TABLE, REGION, FakeLambdaContext, failures, queue_bodies, redeliver, sqs_record
from .orders_domain import KEY_PREFIX, Orders, order
from .test_runtime_edges import _eventbridge


class Refused(PermanentError):
    """The orders domain's refusal after the confirmation (a fraud check that runs last)."""


def _consumer(orders: Orders, **options: Any) -> tuple[Consumer, list[str]]:
    """A consumer whose record function confirms, then fails as the order says (``refuse``, ``fail``: a transient
    failure on the first run only), logging where the test reads; the effect calls."""
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped", **options)
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    calls: list[str] = []
    runs: list[str] = []

    @consumer.effect
    def confirm(item: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        calls.append(idempotency_key)
        return {"confirmation": f"c-{len(calls)}", "total": item["total"]}

    @consumer.record
    def handle(body: dict[str, Any]) -> dict[str, Any]:
        item = body["order"]
        runs.append(item["id"])
        result = confirm(item)
        if item.get("refuse"):
            raise Refused(f"order {item['id']} refused after its confirmation")
        if item.get("fail") and runs.count(item["id"]) == 1:
            raise ConnectionError("ledger down")
        return result

    orders.consumer = consumer
    return consumer, calls


def _dead_letter_queue(orders: Orders, monkeypatch: pytest.MonkeyPatch, variable: str) -> str:
    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="refused")["QueueUrl"]
    monkeypatch.setenv(variable, url)
    orders.consumer.reset()
    return url


def _messages(orders: Orders) -> list[str]:
    return [line["message"] for line in orders.log_lines()]


def test_a_permanent_error_after_an_effect_never_runs_the_effect_again_on_a_redrive(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer, calls = _consumer(orders)
    dlq = _dead_letter_queue(orders, monkeypatch, names.ENV_DEAD_LETTER_QUEUE_URL)
    record = sqs_record(order("o-1", refuse=True))

    first = orders.invoke([record])
    redriven = orders.invoke([redeliver(record)])  # the DLQ's copy, moved back to the source

    assert failures(first) == failures(redriven) == set(), "dead-lettered on first sight, both times"
    assert calls == [f"{KEY_PREFIX}#confirm#o-1"]
    assert len(queue_bodies(boto3.client("sqs", region_name=REGION), dlq)) == 2
    messages = _messages(orders)
    assert messages.count(names.MSG_EFFECT_ANSWERED_FROM_MARKER) == 1
    assert messages.count(names.MSG_INVALID_RECORD) == 2
    assert names.MSG_EFFECT_REPEATED_AFTER_FAILURE not in messages
    assert orders.stored_keys() == [], "Powertools deleted the record both times"
    assert orders.result_markers() == [f"{KEY_PREFIX}#effect-result#confirm#1#o-1"]


def test_an_event_refused_after_its_effect_is_refused_again_without_the_effect_when_redriven(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer, calls = _consumer(orders, envelope="eventbridge")
    queue = _dead_letter_queue(orders, monkeypatch, names.ENV_ON_FAILURE_QUEUE_URL)

    assert consumer.handler(_eventbridge(order("o-1", refuse=True)), FakeLambdaContext()) is None
    [record] = [json.loads(body) for body in queue_bodies(boto3.client("sqs", region_name=REGION), queue)]
    assert consumer.handler(record["requestPayload"], FakeLambdaContext()) is None  # the redrive

    assert calls == [f"{KEY_PREFIX}#confirm#o-1"]
    assert record["responsePayload"]["errorType"] == "Refused"
    assert _messages(orders).count(names.MSG_RECORD_SENT_ON_FAILURE) == 2


def test_a_transient_failure_after_an_effect_is_answered_from_its_marker_on_the_retry(orders: Orders) -> None:
    consumer, calls = _consumer(orders)
    record = sqs_record(order("o-1", fail=True))

    first = orders.invoke([record])
    again = orders.invoke([redeliver(record)])
    duplicate = consumer.handler(order("o-1", fail=True), FakeLambdaContext())

    assert failures(first) == {record["messageId"]} and failures(again) == set()
    assert calls == [f"{KEY_PREFIX}#confirm#o-1"]
    assert duplicate == {"confirmation": "c-1", "total": 100}, "the kept result, stored with the record"
    messages = _messages(orders)
    assert names.MSG_EFFECT_REPEATED_AFTER_FAILURE not in messages
    assert messages.count(names.MSG_EFFECT_ANSWERED_FROM_MARKER) == 1
    assert messages.count(names.EFFECT_EXECUTED) == 1


def test_an_effect_called_twice_in_a_run_is_answered_call_by_call(orders: Orders) -> None:
    consumer = Consumer(key="id", key_prefix=KEY_PREFIX, effect_key="scoped")
    sent: list[str] = []
    runs: list[int] = []

    @consumer.effect
    def notify(line: str, *, idempotency_key: str) -> str:
        sent.append(line)
        return f"sent {line}"

    @consumer.record
    def handle(body: dict[str, Any]) -> list[str]:
        runs.append(1)
        answers = [notify("first"), notify("second")]
        if len(runs) == 1:
            raise ConnectionError("down after both")
        return answers

    record = sqs_record({"id": "k-1"})
    consumer.handler({"Records": [record]}, FakeLambdaContext())
    consumer.handler({"Records": [redeliver(record)]}, FakeLambdaContext())

    assert sent == ["first", "second"]
    assert consumer.handler({"id": "k-1"}, FakeLambdaContext()) == ["sent first", "sent second"]


def test_a_control_run_without_idempotency_keeps_no_results(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
    _, calls = _consumer(orders)
    record = sqs_record(order("o-1", fail=True))

    orders.invoke([record])
    orders.invoke([redeliver(record)])

    assert len(calls) == 2 and orders.result_markers() == []


def test_a_marker_that_cannot_be_read_fails_the_record_before_the_effect(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer, calls = _consumer(orders)
    client = consumer.state.markers.client  # type: ignore[union-attr]

    def throttled(**request: Any) -> Any:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "GetItem")

    monkeypatch.setattr(client, "get_item", throttled)
    record = sqs_record(order("o-1"))

    assert failures(orders.invoke([record])) == {record["messageId"]}
    assert calls == []


def test_an_expired_marker_counts_as_absent(orders: Orders) -> None:
    _, calls = _consumer(orders)
    record = sqs_record(order("o-1", fail=True))
    orders.invoke([record])
    [marker] = orders.result_markers()
    orders.dynamodb.update_item(
        TableName=IDEMPOTENCY_TABLE,
        Key={"id": {"S": marker}},
        UpdateExpression="SET expiration = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )

    orders.invoke([redeliver(record)])

    assert len(calls) == 2


def test_a_marker_that_cannot_be_written_is_logged_and_the_record_goes_on(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer, calls = _consumer(orders)
    client = consumer.state.markers.client  # type: ignore[union-attr]
    real = client.put_item

    def refuse_markers(**request: Any) -> Any:
        if "#effect-result#" in request["Item"]["id"]["S"]:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "PutItem")
        return real(**request)

    monkeypatch.setattr(client, "put_item", refuse_markers)
    record = sqs_record(order("o-1"))

    assert failures(orders.invoke([record])) == set()
    [line] = [ln for ln in orders.log_lines() if ln["message"] == names.MSG_EFFECT_RESULT_NOT_KEPT]
    assert "AccessDeniedException" in line[names.FIELD_REASON] and line[names.FIELD_EFFECT] == "confirm"
    assert calls == [f"{KEY_PREFIX}#confirm#o-1"] and orders.result_markers() == []
