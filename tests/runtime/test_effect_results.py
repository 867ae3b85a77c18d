"""Effect results kept per record (issue 30, item 2; issue 55, item 8): a declared effect that returned is never run
again for its record when an exception escapes after it. Powertools deletes the record on any exception, so the
runtime releases the record with its effects' results instead of deleting it, and the run that claims it next is
answered from them: a ``PermanentError`` raised after an effect (the DLQ on first sight, the on-failure queue; a
redrive of it), a transient failure after it (the retry), a producer's resend, on every trigger. A first delivery
pays nothing for it: the claim, the effect and the completion, no read."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from botocore.exceptions import ClientError

from effectively_once_runtime import Consumer, PermanentError, names

from .conftest import (
    IDEMPOTENCY_TABLE,
    REGION,
    FakeLambdaContext,
    create_table,
    failures,
    queue_bodies,
    redeliver,
    sqs_record,
)
from .orders_domain import KEY_PREFIX, Killed, Orders, order
from .test_runtime_edges import _eventbridge


class Refused(PermanentError):
    """The orders domain's refusal after the confirmation (a fraud check that runs last)."""


def _logging_where_read(orders: Orders, key: str, **options: Any) -> Consumer:
    """A consumer keyed ``key`` (scoped effect keys), logging where the test reads, as ``orders.consumer``."""
    consumer = Consumer(key=key, key_prefix=KEY_PREFIX, service="orders", effect_key="scoped", **options)
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    orders.consumer = consumer
    return consumer


def _consumer(orders: Orders, **options: Any) -> tuple[Consumer, list[str]]:
    """A consumer whose record function confirms, then fails as the order says (``refuse``, ``fail``: a transient
    failure on the first run only), logging where the test reads; the effect calls."""
    consumer = _logging_where_read(orders, "order.id", **options)
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

    return consumer, calls


def _dead_letter_queue(orders: Orders, monkeypatch: pytest.MonkeyPatch, variable: str) -> str:
    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="refused")["QueueUrl"]
    monkeypatch.setenv(variable, url)
    orders.consumer.reset()
    return url


def _messages(orders: Orders) -> list[str]:
    return [line["message"] for line in orders.log_lines()]


def _records(orders: Orders) -> list[dict[str, Any]]:
    """Every item of the idempotency table (records; no marker items are written any more)."""
    return orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]  # type: ignore[no-any-return]


def _released(orders: Orders) -> dict[str, Any]:
    """The one record of the table, released with its results: ``INPROGRESS``, its in-progress expiry past."""
    [item] = _records(orders)
    assert item["status"]["S"] == "INPROGRESS"
    assert int(item["in_progress_expiration"]["N"]) < time.time() * 1000
    return {name: json.loads(value["S"]) for name, value in item[names.EFFECT_RESULTS_ATTR]["M"].items()}


def _count_requests(client: Any) -> Counter[str]:
    """The DynamoDB operations ``client`` sends from now on, counted by name (a botocore ``before-call`` hook)."""
    requests: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        requests[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-call.dynamodb", count)
    return requests


def test_a_first_delivery_costs_the_claim_the_effect_and_the_completion_and_no_read(orders: Orders) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    create_table(client, "ledger", "id")
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, effect_key="scoped")

    @consumer.effect
    def confirm(item: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        client.put_item(
            TableName="ledger", Item={"id": {"S": idempotency_key}}, ConditionExpression="attribute_not_exists(id)"
        )
        return {"confirmation": idempotency_key, "total": item["total"]}

    @consumer.record
    def handle(body: dict[str, Any]) -> dict[str, Any]:
        return confirm(body["order"])

    consumer.setup(persistence_store=DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=client))
    consumer.handler({"Records": [sqs_record(order("warm-up"))]}, FakeLambdaContext())
    requests = _count_requests(client)

    response = consumer.handler({"Records": [sqs_record(order(f"o-{i}")) for i in range(3)]}, FakeLambdaContext())

    assert failures(response) == set()
    # Per record: Powertools' claim (PutItem), the effect's own put (PutItem), the completion (UpdateItem).
    assert requests == {"PutItem": 2 * 3, "UpdateItem": 1 * 3}, "no read, no marker write"
    assert [item["status"]["S"] for item in _records(orders)] == ["COMPLETED"] * 4


def test_a_transient_failure_after_an_effect_releases_the_record_and_the_retry_is_answered(orders: Orders) -> None:
    consumer, calls = _consumer(orders)
    record = sqs_record(order("o-1", fail=True))

    first = orders.invoke([record])
    released = _released(orders)
    again = orders.invoke([redeliver(record)])
    duplicate = consumer.handler(order("o-1", fail=True), FakeLambdaContext())

    assert failures(first) == {record["messageId"]} and failures(again) == set()
    assert released == {"confirm#1": {"confirmation": "c-1", "total": 100}}
    assert calls == [f"{KEY_PREFIX}#confirm#o-1"]
    assert duplicate == {"confirmation": "c-1", "total": 100}, "the kept result, stored with the record"
    lines = orders.log_lines()
    messages = [line["message"] for line in lines]
    assert names.MSG_EFFECT_REPEATED_AFTER_FAILURE not in messages
    [answered] = [line for line in lines if line["message"] == names.MSG_EFFECT_ANSWERED_FROM_MARKER]
    assert answered[names.FIELD_EFFECT_CALL] == "confirm#1" and answered[names.FIELD_EFFECT] == "confirm"
    assert messages.count(names.EFFECT_EXECUTED) == 1
    assert orders.result_markers() == [], "no marker item of its own"


def test_a_producers_resend_after_a_failure_is_answered_from_the_released_record(orders: Orders) -> None:
    _, calls = _consumer(orders)
    first = sqs_record(order("o-1", fail=True))
    resend = sqs_record(order("o-1", fail=True))  # a new message id, the same business key, received once

    assert failures(orders.invoke([first])) == {first["messageId"]}
    assert failures(orders.invoke([resend])) == set()

    assert resend["messageId"] != first["messageId"] and resend["attributes"]["ApproximateReceiveCount"] == "1"
    assert calls == [f"{KEY_PREFIX}#confirm#o-1"]
    assert _messages(orders).count(names.MSG_EFFECT_ANSWERED_FROM_MARKER) == 1


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
    assert _released(orders) == {"confirm#1": {"confirmation": "c-1", "total": 100}}, "released again, results kept"


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


def _notifying(
    orders: Orders, fail_runs: tuple[int, ...], kill_runs: tuple[int, ...] = ()
) -> tuple[Consumer, list[str]]:
    """A consumer whose record function notifies twice, then fails on the runs ``fail_runs`` (transiently) and is
    killed on ``kill_runs`` (1-based); the lines sent."""
    consumer = _logging_where_read(orders, "id")
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
        if len(runs) in kill_runs:
            raise Killed("killed after both")
        if len(runs) in fail_runs:
            raise ConnectionError("down after both")
        return answers

    return consumer, sent


def test_an_effect_called_twice_in_a_run_is_answered_call_by_call(orders: Orders) -> None:
    consumer, sent = _notifying(orders, fail_runs=(1,))
    record = sqs_record({"id": "k-1"})
    consumer.handler({"Records": [record]}, FakeLambdaContext())
    assert _released(orders) == {"notify#1": "sent first", "notify#2": "sent second"}
    consumer.handler({"Records": [redeliver(record)]}, FakeLambdaContext())

    assert sent == ["first", "second"]
    assert consumer.handler({"id": "k-1"}, FakeLambdaContext()) == ["sent first", "sent second"]
    answered = [line for line in orders.log_lines() if line["message"] == names.MSG_EFFECT_ANSWERED_FROM_MARKER]
    assert [line[names.FIELD_EFFECT_CALL] for line in answered] == ["notify#1", "notify#2"]


def test_results_carried_forward_survive_a_kill_of_the_run_that_received_them(orders: Orders) -> None:
    consumer, sent = _notifying(orders, fail_runs=(1,), kill_runs=(2,))
    record = sqs_record({"id": "k-1"})
    client = consumer.state.persistence_store.client  # type: ignore[attr-defined]

    consumer.handler({"Records": [record]}, FakeLambdaContext())  # fails after both: released with both results
    requests = _count_requests(client)
    with pytest.raises(Killed):
        consumer.handler({"Records": [redeliver(record)]}, FakeLambdaContext())  # answered, then killed
    [claim] = _records(orders)
    assert claim["status"]["S"] == "INPROGRESS" and names.EFFECT_RESULTS_ATTR in claim, "carried onto its claim"
    assert requests == {"PutItem": 1, "UpdateItem": 1}, "the claim, and the results carried onto it"
    orders.dynamodb.update_item(  # the killed invocation's in-progress expiry passes
        TableName=IDEMPOTENCY_TABLE,
        Key={"id": claim["id"]},
        UpdateExpression="SET in_progress_expiration = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time() * 1000) - 1000)}},
    )
    third = consumer.handler({"Records": [redeliver(redeliver(record))]}, FakeLambdaContext())

    assert failures(third) == set()
    assert sent == ["first", "second"], "neither effect ran again after the kill"
    assert _messages(orders).count(names.MSG_EFFECT_ANSWERED_FROM_MARKER) == 4
    assert consumer.handler({"id": "k-1"}, FakeLambdaContext()) == ["sent first", "sent second"]


def test_a_kill_before_the_completion_leaves_no_results(orders: Orders) -> None:
    consumer, sent = _notifying(orders, fail_runs=(), kill_runs=(1,))
    record = sqs_record({"id": "k-1"})

    with pytest.raises(Killed):
        consumer.handler({"Records": [record]}, FakeLambdaContext())

    [claim] = _records(orders)
    assert claim["status"]["S"] == "INPROGRESS" and names.EFFECT_RESULTS_ATTR not in claim
    assert sent == ["first", "second"], "the window between an effect and the completion is its own key's"


def test_a_result_that_is_not_storable_or_finds_no_room_is_not_kept_and_runs_again(orders: Orders) -> None:
    consumer = _logging_where_read(orders, "id")
    sent: list[int] = []
    runs: list[int] = []

    @consumer.effect
    def export(part: int, *, idempotency_key: str) -> Any:
        sent.append(part)
        return {"too": "x" * (65 * 1024)} if part == 0 else "y" * (60 * 1024)  # 64 KB at most each, 256 KB in all

    @consumer.record
    def handle(body: dict[str, Any]) -> int:
        runs.append(1)
        for part in range(6):
            export(part)
        if len(runs) == 1:
            raise ConnectionError("down after the export")
        return len(runs)

    record = sqs_record({"id": "k-1"})
    consumer.handler({"Records": [record]}, FakeLambdaContext())
    not_kept = [line for line in orders.log_lines() if line["message"] == names.MSG_EFFECT_RESULT_NOT_KEPT]
    kept = _released(orders)
    consumer.handler({"Records": [redeliver(record)]}, FakeLambdaContext())

    assert [line[names.FIELD_EFFECT_CALL] for line in not_kept] == ["export#1", "export#6"]
    assert "not JSON of at most 65536 bytes" in not_kept[0][names.FIELD_REASON]
    assert "no room left" in not_kept[1][names.FIELD_REASON]
    assert sorted(kept) == [f"export#{n}" for n in range(2, 6)]
    assert sent == [0, 1, 2, 3, 4, 5, 0, 5], "the two not kept run again, the others are answered"


def test_a_release_refused_by_another_claims_token_leaves_the_record_to_that_claim(orders: Orders) -> None:
    consumer = _logging_where_read(orders, "order.id")
    calls: list[str] = []

    @consumer.effect
    def confirm(item: dict[str, Any], *, idempotency_key: str) -> str:
        calls.append(idempotency_key)
        return "confirmed"

    @consumer.record
    def handle(body: dict[str, Any]) -> str:
        result = confirm(body["order"])
        if len(calls) == 1:
            [item] = _records(orders)  # another attempt's claim took the record meanwhile
            orders.dynamodb.update_item(
                TableName=IDEMPOTENCY_TABLE,
                Key={"id": item["id"]},
                UpdateExpression="SET attempt_token = :other",
                ExpressionAttributeValues={":other": {"S": "another-claim"}},
            )
            raise ConnectionError("down after the confirmation")
        return result

    record = sqs_record(order("o-1"))
    first = orders.invoke([record])
    logged = orders.log_lines()
    [line] = [ln for ln in logged if ln["message"] == names.MSG_EFFECT_RESULT_NOT_KEPT]
    [again_line] = [ln for ln in logged if ln["message"] == names.MSG_EFFECT_REPEATED_AFTER_FAILURE]
    [held] = _records(orders)

    assert failures(first) == {record["messageId"]}
    assert "ConditionalCheckFailedException" in line[names.FIELD_REASON] and line[names.FIELD_EFFECTS] == ["confirm#1"]
    assert "left to it" in line[names.FIELD_REASON] and again_line[names.FIELD_EFFECTS] == ["confirm"]
    # Not deleted: that would free the other run's live claim for a third run at the same time (Powertools' delete).
    assert held["attempt_token"] == {"S": "another-claim"} and held["status"] == {"S": "INPROGRESS"}
    assert calls == [f"{KEY_PREFIX}#confirm#o-1"]


def test_a_release_that_fails_is_logged_and_the_record_is_deleted(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer, calls = _consumer(orders)
    client = consumer.state.persistence_store.client  # type: ignore[attr-defined]
    real = client.put_item

    def refuse_releases(**request: Any) -> Any:
        if names.EFFECT_RESULTS_ATTR in request["Item"]:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "PutItem")
        return real(**request)

    monkeypatch.setattr(client, "put_item", refuse_releases)
    record = sqs_record(order("o-1", fail=True))

    assert failures(orders.invoke([record])) == {record["messageId"]}
    [line] = [ln for ln in orders.log_lines() if ln["message"] == names.MSG_EFFECT_RESULT_NOT_KEPT]
    assert "AccessDeniedException" in line[names.FIELD_REASON] and line[names.FIELD_EFFECTS] == ["confirm#1"]
    assert _records(orders) == []
    assert failures(orders.invoke([redeliver(record)])) == set()
    assert len(calls) == 2


def test_a_control_run_without_idempotency_keeps_no_results(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
    _, calls = _consumer(orders)
    record = sqs_record(order("o-1", fail=True))

    orders.invoke([record])
    orders.invoke([redeliver(record)])

    assert len(calls) == 2 and _records(orders) == []


def test_an_expired_released_record_answers_nothing(orders: Orders) -> None:
    _, calls = _consumer(orders)
    record = sqs_record(order("o-1", fail=True))
    orders.invoke([record])
    [item] = _records(orders)
    orders.dynamodb.update_item(
        TableName=IDEMPOTENCY_TABLE,
        Key={"id": item["id"]},
        UpdateExpression="SET expiration = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )

    orders.invoke([redeliver(record)])

    assert len(calls) == 2


def test_another_payload_under_the_same_key_is_not_answered_from_the_released_record(orders: Orders) -> None:
    _, calls = _consumer(orders, validate="order.total")

    orders.invoke([sqs_record(order("o-1", fail=True))])
    orders.invoke([sqs_record(order("o-1", total=250))])

    assert len(calls) == 2, "the results of another payload's run answer nothing"
    assert names.MSG_EFFECT_ANSWERED_FROM_MARKER not in _messages(orders)
