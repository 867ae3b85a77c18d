"""The runtime off the happy path (issue 20): failures after the side effect, declared permanent errors, scoped
effect keys, one persistence layer per consumer, a log line for every failed record, and deadline-aware batches."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from botocore.exceptions import ClientError

from effectively_once_runtime import Consumer, names
from effectively_once_runtime.effect_keys import MAX_EFFECT_KEY_CHARS
from payments import handler as handler_module

from .conftest import (
    IDEMPOTENCY_TABLE,
    Env,
    FakeLambdaContext,
    failures,
    is_record,
    payment,
    redeliver,
    sqs_record,
    use_dead_letter_queue,
)
from .orders_domain import KEY_PREFIX, Orders, build_consumer, order


def _metric(lines: list[dict[str, Any]], name: str) -> list[float]:
    """The values of the EMF metric ``name`` in ``lines`` (each EMF line holds a list of values)."""
    return [value for line in lines if name in line and "_aws" in line for value in line[name]]


def _emf(orders: Orders) -> list[dict[str, Any]]:
    out = orders.capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _rebuild(orders: Orders, **options: Any) -> Consumer:
    """The orders consumer again, with ``options``, logging where the test reads."""
    consumer = build_consumer(orders.confirmed, **options)
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    orders.consumer = consumer
    return consumer


class _Throttled(ClientError):
    def __init__(self) -> None:
        super().__init__({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "UpdateItem")


def _failing_updates(orders: Orders, monkeypatch: pytest.MonkeyPatch, fails: int) -> list[int]:
    """Make the first ``fails`` completions (``_update_record``) of the orders consumer's layer raise throttling."""
    store = orders.consumer.state.persistence_store
    real = store._update_record
    calls: list[int] = []

    def update(data_record: Any) -> None:
        calls.append(1)
        if len(calls) <= fails:
            raise _Throttled()
        real(data_record=data_record)

    monkeypatch.setattr(store, "_update_record", update)
    return calls


# --- after the side effect, nothing runs twice -----------------------------------------------------------------------
@pytest.fixture
def big_orders(orders: Orders) -> Orders:
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped")
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream

    @consumer.effect
    def ship(item: dict[str, Any], *, idempotency_key: str) -> str:
        orders.confirmed.append(idempotency_key)
        return "x" * (450 * 1024)  # over DynamoDB's 400 KB item

    @consumer.record
    def handle(body: dict[str, Any]) -> dict[str, Any]:
        return {"label": ship(body["order"])}

    orders.consumer = consumer
    return orders


def test_a_result_too_large_to_store_completes_the_record_and_duplicates_get_the_marker(big_orders: Orders) -> None:
    record = sqs_record(order("o-big"))

    first = big_orders.invoke([record])
    again = [big_orders.invoke([redeliver(record)]) for _ in range(3)]
    duplicate = big_orders.invoke_direct(order("o-big"))

    assert failures(first) == set() and all(failures(r) == set() for r in again)
    assert len(big_orders.confirmed) == 1, "the effect ran once"
    [item] = big_orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert item["status"]["S"] == "COMPLETED"
    assert duplicate == {names.RESULT_NOT_STORED_FIELD: names.RESULT_NOT_STORED, "bytes": 450 * 1024 + 13}


def test_a_result_too_large_to_store_is_logged_once_and_the_first_caller_gets_it(big_orders: Orders) -> None:
    result = big_orders.invoke_direct(order("o-big2"))
    lines = big_orders.log_lines()

    assert len(result["label"]) == 450 * 1024
    assert [line["message"] for line in lines if line["message"] == names.MSG_RESULT_NOT_STORED] == [
        names.MSG_RESULT_NOT_STORED
    ]
    assert [line["message"] for line in lines].index(names.MSG_RESULT_NOT_STORED) < [
        line["message"] for line in lines
    ].index(names.MSG_RECORD_PROCESSED)


def test_a_completion_that_fails_once_is_retried_and_logged_processed_after_the_save(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _failing_updates(orders, monkeypatch, fails=2)

    response = orders.invoke([sqs_record(order("o-1"))])
    lines = orders.log_lines()

    assert failures(response) == set()
    assert len(calls) == 3
    [item] = [i for i in orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] if is_record(i)]
    assert item["status"]["S"] == "COMPLETED"
    assert [line["message"] for line in lines].count(names.MSG_RECORD_PROCESSED) == 1
    assert names.MSG_COMPLETION_FAILED not in [line["message"] for line in lines]


def test_a_completion_that_keeps_failing_fails_the_record_logged_and_counted_and_never_repeats_the_effect(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_updates(orders, monkeypatch, fails=1000)
    record = sqs_record(order("o-1"))

    first = orders.invoke([record])
    lines = _emf(orders)
    again = [orders.invoke([redeliver(record)]) for _ in range(3)]

    assert failures(first) == {record["messageId"]}
    assert all(failures(r) == {record["messageId"]} for r in again)
    assert orders.confirmed == ["o-1"], "the in-progress record holds every redelivery back"
    messages = [line.get("message") for line in lines]
    assert names.MSG_RECORD_PROCESSED not in messages
    [failed] = [line for line in lines if line.get("message") == names.MSG_COMPLETION_FAILED]
    assert failed[names.FIELD_ERROR_TYPE] == "_Throttled" and failed[names.FIELD_ATTEMPTS] == 5
    assert _metric(lines, names.METRIC_COMPLETION_FAILURES) == [1.0]
    items = orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert [item["status"]["S"] for item in items if is_record(item)] == ["INPROGRESS"]


def test_completion_retries_stay_within_the_remaining_time(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_updates(orders, monkeypatch, fails=1000)
    started = time.monotonic()

    orders.invoke([sqs_record(order("o-1"))], FakeLambdaContext(remaining_ms=1050))

    assert len(calls) == 1, "1.05 s left and a 1 s margin leave no room for the first retry's 0.1 s"
    assert time.monotonic() - started < 1.0


def test_a_failure_after_an_effect_whose_result_was_not_kept_is_logged_as_effect_repeated_after_failure(
    orders: Orders,
) -> None:
    """An effect whose result is not JSON keeps no marker (``effect result not kept``): after a failure the record's
    next run calls it again, and the failure's line says so."""
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped")
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    calls: list[str] = []

    @consumer.effect
    def deposit(item: dict[str, Any], *, idempotency_key: str) -> object:
        calls.append(idempotency_key)
        return object()  # not JSON: no result marker

    @consumer.effect
    def notify(item: dict[str, Any], *, idempotency_key: str) -> None:
        raise ConnectionError("notifications down")

    @consumer.record
    def handle(body: dict[str, Any]) -> None:
        deposit(body["order"])
        notify(body["order"])

    orders.consumer = consumer
    record = sqs_record(order("o-1"))
    orders.invoke([record])
    orders.invoke([redeliver(record)])
    lines = orders.messages(names.MSG_EFFECT_REPEATED_AFTER_FAILURE)

    assert calls == [f"{KEY_PREFIX}#deposit#o-1"] * 2, "Powertools deleted the record: the effect repeated"
    assert [(line[names.FIELD_EFFECTS], line[names.FIELD_ERROR_TYPE]) for line in lines] == [
        (["deposit"], "ConnectionError")
    ] * 2


# --- permanent errors, declared --------------------------------------------------------------------------------------
class Refused(RuntimeError):
    pass


def test_a_declared_permanent_error_in_the_cause_chain_goes_to_the_dlq_on_first_sight(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = Consumer(
        key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped", permanent=(Refused,)
    )
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream

    @consumer.record
    def handle(body: dict[str, Any]) -> None:
        try:
            raise Refused("the provider refused the key")
        except Refused as exc:
            raise RuntimeError("charge failed") from exc

    sqs, url = use_dead_letter_queue(monkeypatch, fifo=False, consumer=consumer)
    record = sqs_record(order("o-1"))

    response = consumer.handler({"Records": [record]}, FakeLambdaContext())

    assert failures(response) == set(), "dead-lettered on first sight, reported done"
    [copy] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    reason = json.loads(copy["MessageAttributes"][names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])
    assert reason["error_type"] == "RuntimeError" and reason["message"] == "charge failed"


def test_fails_permanent_that_is_not_an_exception_type() -> None:
    with pytest.raises(TypeError, match="permanent must be a tuple of exception types, but 'x' was given"):
        Consumer(key="k", key_prefix="p", effect_key="scoped", permanent=("x",))  # type: ignore[arg-type]


def test_a_reused_payment_id_refused_by_the_provider_goes_to_the_dlq_on_first_sight_with_one_provider_call(
    aws: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.invoke([sqs_record(payment("pay-exp", 1000))])
    # The record expired (DynamoDB deletes expired items; here it is gone): the id is free again, the key is not.
    [item] = aws.idempotency_items()
    aws.dynamodb.delete_item(TableName=IDEMPOTENCY_TABLE, Key={"id": item["id"]})
    sqs, url = use_dead_letter_queue(monkeypatch, fifo=False)
    calls = aws.gateway.calls

    response = aws.invoke([sqs_record(payment("pay-exp", 2000))])

    assert failures(response) == set()
    [copy] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    reason = json.loads(copy["MessageAttributes"][names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])
    assert reason["error_type"] == "ProviderKeyMismatch"
    assert aws.gateway.calls - calls == 1, "one provider call, no retries until maxReceiveCount"
    assert aws.charges_for("pay-exp") == 1


# --- scoped effect keys ----------------------------------------------------------------------------------------------
def test_scoped_effect_keys_differ_by_prefix_and_effect(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    for prefix in ("shop/deposit", "shop/balance"):
        consumer = Consumer(key="order.id", key_prefix=prefix, effect_key="scoped")

        @consumer.effect(name="post")
        def post(item: dict[str, Any], *, idempotency_key: str) -> None:
            seen.append(idempotency_key)

        consumer.record(lambda body, post=post: post(body["order"]))
        consumer.handler(order(42), FakeLambdaContext())

    assert seen == ["shop/deposit#post#42", "shop/balance#post#42"]


def test_a_long_or_unusual_effect_key_becomes_a_readable_head_plus_a_sha256(orders: Orders) -> None:
    consumer = _rebuild(orders, effect_key="scoped")

    consumer.handler(order("é" * 200), FakeLambdaContext())
    [key] = orders.confirmed

    assert len(key) == MAX_EFFECT_KEY_CHARS
    assert key.startswith(f"{KEY_PREFIX}#confirm#__") and all("!" <= c <= "~" for c in key)


def test_business_effect_keys_hand_the_idempotency_key_itself(orders: Orders) -> None:
    consumer = _rebuild(orders, effect_key="business")

    consumer.handler(order("o-7"), FakeLambdaContext())

    assert orders.confirmed == ["o-7"]


def test_the_default_effect_key_is_business_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="effect_key='scoped'"):
        consumer = Consumer(key="k", key_prefix="p")
    assert consumer.effect_key == "business"


def test_fails_two_effects_with_one_name() -> None:
    consumer = Consumer(key="k", key_prefix="p", effect_key="scoped")
    consumer.effect(lambda *, idempotency_key: None, name="send")
    with pytest.raises(ValueError, match="effect name 'send' is declared twice on this Consumer"):
        consumer.effect(lambda *, idempotency_key: None, name="send")


def test_fails_an_unknown_effect_key_mode() -> None:
    with pytest.raises(ValueError, match=r"effect_key must be one of \('scoped', 'business'\), but 'raw' was given"):
        Consumer(key="k", key_prefix="p", effect_key="raw")


def test_the_effect_line_names_the_effect_key(orders: Orders) -> None:
    consumer = _rebuild(orders, effect_key="scoped")

    consumer.handler(order("o-9"), FakeLambdaContext())
    [line] = orders.messages(names.EFFECT_EXECUTED)

    assert line[names.FIELD_IDEMPOTENCY_KEY] == "o-9"
    assert line[names.FIELD_EFFECT_KEY] == f"{KEY_PREFIX}#confirm#o-9"


def test_a_charge_made_before_the_switch_to_scoped_keys_is_not_charged_again_after_it(aws: Env) -> None:
    # Today's code before the switch: the provider saw the bare payment id, and a crash left the record unfinished.
    before = handler_module.consumer.effect_key
    handler_module.consumer.effect_key = "business"
    try:
        aws.invoke_direct(payment("pay-mig", 1500))
    finally:
        handler_module.consumer.effect_key = before
    [item] = aws.idempotency_items()
    aws.dynamodb.delete_item(TableName=IDEMPOTENCY_TABLE, Key={"id": item["id"]})
    assert [i["charge_id"]["S"] for i in aws.ledger()] == ["pay-mig"]

    result = aws.invoke_direct(payment("pay-mig", 1500))

    assert aws.charges_for("pay-mig") == 1
    assert result["charge_id"] == "pay-mig" and aws.gateway.replays == 1
    assert aws.gateway.calls == 2, "no extra request: the scoped key met the old item in one conditional put"


def test_the_sample_hands_the_provider_its_scoped_key_and_the_ledger_keeps_one_item_for_both_forms(aws: Env) -> None:
    aws.invoke([sqs_record(payment("pay-s"))])

    [item] = aws.ledger()
    assert item["idempotency_key"]["S"] == "effectively-once/payments#charge#pay-s"
    assert item["charge_id"]["S"] == "pay-s"


def test_the_ledger_stores_other_keys_as_given(aws: Env) -> None:
    from payments.model import Payment

    aws.gateway.charge(Payment("pay-o", "acct-1", 100, "EUR"), idempotency_key="elsewhere#charge#pay-o")

    assert [i["charge_id"]["S"] for i in aws.ledger()] == ["elsewhere#charge#pay-o"]


# --- one persistence layer per consumer ------------------------------------------------------------------------------
def test_fails_a_persistence_layer_shared_by_two_consumers(orders: Orders) -> None:
    layer = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE)
    orders_consumer = Consumer(key="order_id", key_prefix="shop/orders", effect_key="scoped")
    refunds = Consumer(key="refund_id", key_prefix="shop/refunds", effect_key="scoped")
    orders_consumer.setup(persistence_store=layer)

    with pytest.raises(ValueError, match="already serves the Consumer with key prefix 'shop/orders'; the Consumer "):
        refunds.setup(persistence_store=layer)
    with pytest.raises(ValueError, match="key prefix 'shop/refunds' needs its own"):
        refunds.setup(persistence_store=layer)


def test_a_consumer_may_set_up_its_own_layer_again(orders: Orders) -> None:
    layer = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE)
    consumer = Consumer(key="order_id", key_prefix="shop/orders", effect_key="scoped")

    consumer.setup(persistence_store=layer)
    consumer.setup(persistence_store=layer)
    consumer.reset()

    Consumer(key="refund_id", key_prefix="shop/refunds", effect_key="scoped").setup(persistence_store=layer)


# --- every failed record logged --------------------------------------------------------------------------------------
def test_a_transient_failure_is_one_record_failed_line(orders: Orders) -> None:
    record = sqs_record(order("o-1", fail=True))
    other = sqs_record(order("o-2"))

    response = orders.invoke([record, other])
    [line] = orders.messages(names.MSG_RECORD_FAILED)

    assert failures(response) == {record["messageId"]}
    assert line["level"] == "WARNING"
    assert line[names.FIELD_MESSAGE_ID] == record["messageId"]
    assert line[names.FIELD_IDEMPOTENCY_KEY] == "o-1"
    assert line[names.FIELD_ERROR_TYPE] == "RuntimeError"
    assert line[names.FIELD_REASON] == "confirmation service unavailable for o-1"


def test_a_fifo_record_skipped_behind_a_failure_names_its_group_and_the_failing_message(orders: Orders) -> None:
    failing = sqs_record(order("o-1", fail=True), fifo_group="g1", sequence=1)
    skipped = sqs_record(order("o-2"), fifo_group="g1", sequence=2)
    other = sqs_record(order("o-3"), fifo_group="g2", sequence=3)

    response = orders.invoke([failing, skipped, other])
    lines = orders.messages(names.MSG_RECORD_FAILED)

    assert failures(response) == {failing["messageId"], skipped["messageId"]}
    assert [line[names.FIELD_MESSAGE_ID] for line in lines] == [failing["messageId"], skipped["messageId"]]
    assert lines[1][names.FIELD_MESSAGE_GROUP_ID] == "g1"
    assert lines[1][names.FIELD_BLOCKED_BY] == failing["messageId"]


def test_a_direct_invocation_that_raises_is_one_record_failed_line(orders: Orders) -> None:
    with pytest.raises(RuntimeError):
        orders.invoke_direct(order("o-1", fail=True))
    [line] = orders.messages(names.MSG_RECORD_FAILED)

    assert line[names.FIELD_ERROR_TYPE] == "RuntimeError" and line[names.FIELD_TRIGGER] == "direct"


# --- deadline-aware batches ------------------------------------------------------------------------------------------
class DeadlineContext(FakeLambdaContext):
    """A context whose remaining time runs out with the wall clock."""

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


@pytest.fixture
def slow_orders(orders: Orders) -> tuple[Orders, list[tuple[float, float]]]:
    consumer = Consumer(
        key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped", deadline_margin=0.4
    )
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    spans: list[tuple[float, float]] = []

    @consumer.record
    def handle(body: dict[str, Any]) -> None:
        start = time.monotonic()
        time.sleep(0.2)
        spans.append((start, time.monotonic()))

    orders.consumer = consumer
    consumer.warm()  # the cold start's clients are built before a test's deadline starts
    return orders, spans


def test_no_record_starts_that_cannot_finish_before_the_deadline(
    slow_orders: tuple[Orders, list[tuple[float, float]]],
) -> None:
    orders, spans = slow_orders
    records = [sqs_record(order(f"o-{i}")) for i in range(10)]
    context = DeadlineContext(1500)

    response = orders.invoke(records, context)
    lines = _emf(orders)

    # A record starts with at least the floor (0.4 s) left, twice what one takes (0.2 s).
    assert all(end <= context.deadline for _, end in spans), "a record ran into the timeout"
    done = len(spans)
    assert 2 <= done <= 7
    assert failures(response) == {r["messageId"] for r in records[done:]}
    [info] = [line for line in lines if line.get("message") == names.MSG_RECORDS_DEFERRED]
    assert info["level"] == "INFO" and info[names.FIELD_DEFERRED] == 10 - done
    assert _metric(lines, names.METRIC_RECORDS_DEFERRED) == [float(10 - done)]
    assert _metric(lines, names.METRIC_FAILED_RECORDS) == [0.0], "deferred records are not failures"
    assert not [line for line in lines if line.get("message") == names.MSG_RECORD_FAILED]


def test_the_first_record_always_starts(slow_orders: tuple[Orders, list[tuple[float, float]]]) -> None:
    orders, spans = slow_orders
    records = [sqs_record(order(f"o-{i}")) for i in range(3)]

    response = orders.invoke(records, DeadlineContext(100))

    assert len(spans) == 1
    assert failures(response) == {r["messageId"] for r in records[1:]}


def test_on_fifo_every_record_after_the_stop_point_is_deferred(
    slow_orders: tuple[Orders, list[tuple[float, float]]],
) -> None:
    orders, spans = slow_orders
    records = [sqs_record(order(f"o-{i}"), fifo_group=f"g{i % 3}", sequence=i) for i in range(6)]

    response = orders.invoke(records, DeadlineContext(800))
    lines = _emf(orders)

    done = len(spans)
    assert 1 <= done < 6
    assert failures(response) == {r["messageId"] for r in records[done:]}
    assert _metric(lines, names.METRIC_RECORDS_DEFERRED) == [float(6 - done)]
    assert not [line for line in lines if line.get("message") == names.MSG_RECORD_FAILED]


def test_fails_a_negative_deadline_margin() -> None:
    with pytest.raises(ValueError, match="deadline_margin must be 0 seconds or more, but -1 was given"):
        Consumer(key="k", key_prefix="p", effect_key="scoped", deadline_margin=-1)


# --- event shapes through the handler --------------------------------------------------------------------------------
def _sns_envelope(message: dict[str, Any]) -> dict[str, Any]:
    """The SQS body of an SNS notification with raw delivery off (the keys SNS writes)."""
    return {
        "Type": "Notification",
        "MessageId": "5e1f8a3c-0000-4000-8000-000000000001",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
        "Message": json.dumps(message),
        "Timestamp": "2026-12-01T21:00:00.000Z",
        "SignatureVersion": "1",
        "Signature": "c2ln",
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
    }


def _sns_record(message: dict[str, Any], message_id: str = "sns-1") -> dict[str, Any]:
    envelope = {**_sns_envelope(message), "MessageId": message_id, "MessageAttributes": {}}
    return {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:orders:sub",
        "Sns": envelope,
    }


def _eventbridge(detail: dict[str, Any], event_id: str = "eb-1") -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "OrderPlaced",
        "source": "shop.orders",
        "account": "123456789012",
        "time": "2026-12-01T21:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
    }


def test_a_powertools_json_key_behind_sns_keys_every_record(orders: Orders) -> None:
    consumer = Consumer(key="powertools_json(Message).order.id", key_prefix=KEY_PREFIX, effect_key="scoped")
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    seen: list[str] = []

    @consumer.effect
    def confirm(envelope: dict[str, Any], *, idempotency_key: str) -> None:
        seen.append(idempotency_key)

    consumer.record(lambda envelope: confirm(envelope))
    record = sqs_record(json.dumps(_sns_envelope(order("o-sns"))))

    first = consumer.handler({"Records": [record]}, FakeLambdaContext())
    again = consumer.handler({"Records": [redeliver(record)]}, FakeLambdaContext())

    assert failures(first) == failures(again) == set()
    assert seen == [f"{KEY_PREFIX}#confirm#o-sns"]


def test_the_sns_envelope_keys_on_the_message_behind_sqs_and_behind_a_direct_sns_trigger(orders: Orders) -> None:
    consumer = _rebuild(orders, effect_key="scoped", envelope="sns")

    queued = consumer.handler({"Records": [sqs_record(json.dumps(_sns_envelope(order("o-1"))))]}, FakeLambdaContext())
    direct = consumer.handler({"Records": [_sns_record(order("o-1")), _sns_record(order("o-2"))]}, FakeLambdaContext())

    assert failures(queued) == set()
    assert [r["confirmation"] for r in direct] == [f"c-{KEY_PREFIX}#confirm#o-1", f"c-{KEY_PREFIX}#confirm#o-2"]
    assert orders.confirmed == [f"{KEY_PREFIX}#confirm#o-1", f"{KEY_PREFIX}#confirm#o-2"], "o-1 ran once"


def test_a_direct_sns_record_that_fails_is_raised_after_the_others_ran(orders: Orders) -> None:
    consumer = _rebuild(orders, effect_key="scoped", envelope="sns")

    with pytest.raises(RuntimeError, match="confirmation service unavailable"):
        consumer.handler(
            {"Records": [_sns_record(order("o-1", fail=True)), _sns_record(order("o-2"))]}, FakeLambdaContext()
        )

    assert orders.confirmed == [f"{KEY_PREFIX}#confirm#o-2"]
    [line] = orders.messages(names.MSG_RECORD_FAILED)
    assert line[names.FIELD_TRIGGER] == "sns" and line[names.FIELD_MESSAGE_ID] == "sns-1"


def test_an_s3_notification_is_keyed_over_its_record(orders: Orders) -> None:
    consumer = Consumer(key="[s3.object.key, s3.object.sequencer]", key_prefix=KEY_PREFIX, effect_key="scoped")
    seen: list[str] = []

    @consumer.effect
    def index(record: dict[str, Any], *, idempotency_key: str) -> None:
        seen.append(idempotency_key)

    consumer.record(lambda record: index(record))
    s3 = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": "2026-12-01T21:00:00.000Z",
        "eventName": "ObjectCreated:Put",
        "s3": {
            "s3SchemaVersion": "1.0",
            "bucket": {"name": "uploads", "arn": "arn:aws:s3:::uploads"},
            "object": {"key": "in/a.csv", "size": 10, "sequencer": "0A1B2C3D4E5F678901"},
        },
    }

    for _ in range(2):
        consumer.handler({"Records": [s3]}, FakeLambdaContext())

    assert seen == [f'{KEY_PREFIX}#index#["in/a.csv","0A1B2C3D4E5F678901"]']


def test_auto_gives_a_payment_by_sqs_and_by_eventbridge_one_record(orders: Orders) -> None:
    consumer = _rebuild(orders, effect_key="scoped", envelope="auto")

    consumer.handler({"Records": [sqs_record(order("o-1"))]}, FakeLambdaContext())
    consumer.handler(_eventbridge(order("o-1")), FakeLambdaContext())
    consumer.handler(_eventbridge(order("o-1"), event_id="eb-2"), FakeLambdaContext())

    assert orders.confirmed == [f"{KEY_PREFIX}#confirm#o-1"]
    assert len(orders.stored_keys()) == 1


def test_a_permanent_error_on_a_direct_trigger_is_raised(orders: Orders) -> None:
    consumer = _rebuild(orders, effect_key="scoped", envelope="eventbridge")

    with pytest.raises(names_error := __import__("effectively_once_runtime").PermanentError):
        consumer.handler(_eventbridge(order("o-1", unfulfillable=True)), FakeLambdaContext())
    assert names_error.__name__ == "PermanentError"
    [line] = orders.messages(names.MSG_RECORD_FAILED)
    assert line[names.FIELD_TRIGGER] == "eventbridge" and line[names.FIELD_MESSAGE_ID] == "eb-1"


@pytest.mark.parametrize(
    ("event", "what"),
    [
        ({"Records": []}, "Records is empty"),
        ({"Records": [{"eventSource": "aws:kinesis", "kinesis": {}}]}, "Records from aws:kinesis"),
        ({"Records": [{"eventSource": "aws:dynamodb", "dynamodb": {}}]}, "Records from aws:dynamodb"),
        ({"eventSource": "aws:kafka", "bootstrapServers": "b:9092", "records": {}}, "Kafka records from aws:kafka"),
        ({"Records": [{"eventSource": "aws:sqs", "body": "{}"}]}, "Records[0] from aws:sqs has no messageId string"),
    ],
)
def test_fails_an_unsupported_event_with_one_line_naming_what_was_expected(
    orders: Orders, event: dict[str, Any], what: str
) -> None:
    with pytest.raises(ValueError) as raised:
        orders.consumer.handler(event, FakeLambdaContext())

    message = str(raised.value)
    assert "\n" not in message
    assert message == (
        f"unsupported event: {what}; this handler takes SQS (standard or FIFO), SNS and S3 notification records, "
        "EventBridge events and direct invocations"
    )
    [line] = orders.messages(names.MSG_RECORD_FAILED)
    assert line[names.FIELD_ERROR_TYPE] == "UnsupportedEvent"


def test_fails_a_key_with_an_unknown_function_at_construction() -> None:
    with pytest.raises(ValueError, match=r"key must be a JMESPath expression with known functions, but 'nope\(x\)'"):
        Consumer(key="nope(x)", key_prefix="p", effect_key="scoped")


def test_a_key_search_error_is_that_records_invalid_record_logged_with_the_expression(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = _rebuild(orders, effect_key="scoped")
    key_path = __import__("effectively_once_runtime.events").events.compile_expression(
        "key", "powertools_json(order.id)"
    )
    consumer._execution.rules = dataclasses.replace(consumer._execution.rules, key_path=key_path)
    bad = sqs_record(order("not json"))
    good = sqs_record(order('"o-2"'))

    response = consumer.handler({"Records": [bad, good]}, FakeLambdaContext())
    [line] = orders.messages(names.MSG_INVALID_RECORD)

    assert failures(response) == {bad["messageId"]}
    assert "powertools_json(order.id)" in line[names.FIELD_REASON]


def test_one_slow_record_long_ago_no_longer_decides_the_deadline(
    slow_orders: tuple[Orders, list[tuple[float, float]]],
) -> None:
    orders, spans = slow_orders
    batch = orders.consumer._batch
    batch.recent_ms.extend([5000.0] + [200.0] * 19)  # one outlier among the last 20 records
    assert batch.slowest_ms == 5000.0
    batch.recent_ms.append(200.0)  # the outlier leaves the window

    # 4 s left throughout (a context whose remaining time stands still): the decision rests on the window alone, not
    # on the machine's speed. With the outlier in it no second record would start (5 s + closing work > 3.6 s usable);
    # without it the window's slowest is a real record's time. A wall-clock deadline failed here under make test's
    # load twice (1.5 s on 2026-12-05; 4 s on 2026-12-07, a record's claim and completion on moto taking seconds).
    response = orders.invoke([sqs_record(order(f"o-{i}")) for i in range(3)], FakeLambdaContext(4000))

    assert failures(response) == set() and len(spans) == 3


def test_the_record_nearest_the_dlq_goes_first_when_time_runs_short(
    slow_orders: tuple[Orders, list[tuple[float, float]]],
) -> None:
    orders, spans = slow_orders
    fresh = [sqs_record(order(f"o-{i}")) for i in range(3)]
    returned = sqs_record(order("o-old"), receive_count=4)

    response = orders.invoke([*fresh, returned], DeadlineContext(100))

    assert len(spans) == 1
    assert failures(response) == {r["messageId"] for r in fresh}, "the fourth receive was processed first"


def test_a_fifo_batch_puts_the_group_nearest_the_dlq_first_and_keeps_each_groups_order() -> None:
    from effectively_once_runtime.sqs_batch import prioritised

    a1, a2 = sqs_record(order("a1"), fifo_group="a", sequence=1), sqs_record(order("a2"), fifo_group="a", sequence=2)
    b1 = sqs_record(order("b1"), fifo_group="b", sequence=3, receive_count=3)
    b2 = sqs_record(order("b2"), fifo_group="b", sequence=4)

    ordered = prioritised([a1, a2, b1, b2], fifo=True)

    assert [r["messageId"] for r in ordered] == [r["messageId"] for r in (b1, b2, a1, a2)]
    assert prioritised([a1, b2, a2], fifo=True) == [a1, b2, a2], "equal ranks keep the batch's order"
