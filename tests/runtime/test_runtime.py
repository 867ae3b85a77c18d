"""The generic runtime (``effectively_once_runtime.Consumer``) with a record function and effect that are not the
payment sample's: orders keyed on a nested JMESPath, confirmed once each."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

from effectively_once_runtime import Consumer, InvalidRecord, PermanentError, names

from .conftest import (
    FakeLambdaContext,
    failures,
    redeliver,
    sqs_record,
)
from .orders_domain import Orders, _stored_key, build_consumer, order

# --- bad input: one clear line, a batch item failure of that record alone -----------------------------------------


@pytest.mark.parametrize(
    "body",
    [{"order": {"total": 5, "currency": "EUR"}}, order(None), order(""), {"id": "o-1"}, {}],
    ids=["no id", "id null", "id empty", "id at the top level", "empty object"],
)
def test_body_where_the_key_finds_nothing_fails_alone(orders: Orders, body: dict[str, Any]) -> None:
    bad, good = sqs_record(body), sqs_record(order("o-good"))

    response = orders.invoke([bad, good])

    assert failures(response) == {bad["messageId"]}
    assert orders.confirmed == ["o-good"]
    assert orders.stored_keys() == [_stored_key("o-good")]
    (line,) = orders.messages(names.MSG_INVALID_RECORD)
    assert "no idempotency key: 'order.id' found nothing" in line[names.FIELD_REASON]
    assert line[names.FIELD_MESSAGE_ID] == bad["messageId"]


def test_key_guard_can_be_turned_off_and_then_processes_unguarded(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    confirmed: list[str | None] = []
    consumer = build_consumer(confirmed, raise_on_no_idempotency_key=False)
    body = {"order": {"total": 5, "currency": "EUR"}}

    with pytest.warns(UserWarning, match="No idempotency key value found"):
        response = consumer.handler({"Records": [sqs_record(body)]}, FakeLambdaContext())

    assert failures(response) == set()
    assert confirmed == [None]
    assert orders.stored_keys() == []


@pytest.mark.parametrize(
    "raw",
    [
        '{"order": {"id": "o-1", ',
        "not json",
        '{"order": {"id": "o-1"}, "order": {"id": "o-2"}}',
        '{"n": NaN}',
        "[1]",
        "null",
    ],
    ids=["cut", "text", "repeated key", "NaN", "array", "null"],
)
def test_body_that_is_not_a_strict_json_object_fails_alone(orders: Orders, raw: str) -> None:
    bad, good = sqs_record(raw), sqs_record(order("o-good"))

    response = orders.invoke([bad, good])

    assert failures(response) == {bad["messageId"]}
    assert orders.confirmed == ["o-good"]
    (line,) = orders.messages(names.MSG_INVALID_RECORD)
    assert line[names.FIELD_REASON].startswith("body ")


def test_same_key_with_another_payload_fails_validation_without_a_second_effect(orders: Orders) -> None:
    assert failures(orders.invoke([sqs_record(order("o-1", total=100))])) == set()
    changed, other = sqs_record(order("o-1", total=999)), sqs_record(order("o-2"))

    response = orders.invoke([changed, other])

    assert failures(response) == {changed["messageId"]}
    assert orders.confirmed == ["o-1", "o-2"]
    (line,) = orders.messages(names.MSG_IDEMPOTENCY_REJECTED)
    assert line[names.FIELD_IDEMPOTENCY_ERROR] == "IdempotencyValidationError"
    assert line[names.FIELD_CORRELATION_ID] == "o-1"


def test_permanent_error_from_the_record_function_fails_alone_and_leaves_no_record(orders: Orders) -> None:
    bad, good = sqs_record(order("o-bad", unfulfillable=True)), sqs_record(order("o-good"))

    response = orders.invoke([bad, good])

    assert failures(response) == {bad["messageId"]}
    assert orders.stored_keys() == [_stored_key("o-good")], "a failed record must be retryable, not stored"
    (line,) = orders.messages(names.MSG_INVALID_RECORD)
    assert line[names.FIELD_REASON] == "order o-bad cannot be fulfilled"
    assert line[names.FIELD_CORRELATION_ID] == "o-bad"


# --- processors, context, direct invocation -------------------------------------------------------------------------


def _group(fail_second: bool) -> list[dict[str, Any]]:
    return [
        sqs_record(order("g1-a"), fifo_group="g1", sequence=1),
        sqs_record(order("g1-b", fail=fail_second), fifo_group="g1", sequence=2),
        sqs_record(order("g1-c"), fifo_group="g1", sequence=3),
        sqs_record(order("g2-a"), fifo_group="g2", sequence=4),
    ]


def test_fifo_source_arn_chooses_the_fifo_processor_that_skips_the_rest_of_the_group(orders: Orders) -> None:
    batch = _group(fail_second=True)
    assert all(r["eventSourceARN"].endswith(".fifo") for r in batch)

    response = orders.invoke(batch)

    assert failures(response) == {batch[1]["messageId"], batch[2]["messageId"]}
    assert orders.confirmed == ["g1-a", "g2-a"]


def test_standard_source_arn_processes_every_record_on_its_own(orders: Orders) -> None:
    batch = _group(fail_second=True)
    for record in batch:
        record["eventSourceARN"] = record["eventSourceARN"].removesuffix(".fifo")

    response = orders.invoke(batch)

    assert failures(response) == {batch[1]["messageId"]}
    assert orders.confirmed == ["g1-a", "g1-c", "g2-a"]


def test_a_batch_where_every_record_fails_is_answered_not_raised(orders: Orders) -> None:
    batch = [sqs_record("not json"), sqs_record(order(None)), sqs_record(order("o-x", fail=True))]

    response = orders.invoke(batch)

    assert failures(response) == {r["messageId"] for r in batch}


def test_lambda_context_is_registered_on_every_invocation(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[Any] = []
    original = IdempotencyConfig.register_lambda_context

    def spy(self: IdempotencyConfig, lambda_context: Any) -> None:
        registered.append(lambda_context)
        original(self, lambda_context)

    monkeypatch.setattr(IdempotencyConfig, "register_lambda_context", spy)
    contexts = [FakeLambdaContext(), FakeLambdaContext(), FakeLambdaContext()]

    orders.invoke([sqs_record(order("o-1"))], contexts[0])
    orders.invoke([sqs_record(order("o-1"))], contexts[1])
    orders.invoke_direct(order("o-2"), contexts[2])

    assert registered == contexts
    assert orders.consumer.state.config.lambda_context is contexts[2]


def test_direct_invocation_returns_the_result_and_shares_records_with_sqs(orders: Orders) -> None:
    first = orders.invoke_direct(order("o-direct", total=42))
    again = orders.invoke_direct(order("o-direct", total=42))
    response = orders.invoke([sqs_record(order("o-direct", total=42))])

    assert first == again == {"confirmation": "c-o-direct", "total": 42}
    assert failures(response) == set()
    assert orders.confirmed == ["o-direct"]


@pytest.mark.parametrize(
    "event", [order(None), ["o-1"], order("o-x", unfulfillable=True)], ids=["no key", "array", "permanent"]
)
def test_direct_invocation_of_bad_input_raises(orders: Orders, event: Any) -> None:
    with pytest.raises(PermanentError):
        orders.invoke_direct(event)

    assert orders.confirmed == []
    assert orders.stored_keys() == []


def test_direct_invocation_without_a_key_raises_invalid_record(orders: Orders) -> None:
    with pytest.raises(InvalidRecord, match="no idempotency key"):
        orders.invoke_direct(order(None))


# --- logs: correlation id, effect lines ----------------------------------------------------------------------------


def test_correlation_id_is_the_idempotency_key_on_every_line_of_a_record(orders: Orders) -> None:
    record = sqs_record(order("o-corr"))
    orders.invoke([record])

    lines = [line for line in orders.log_lines() if line.get(names.FIELD_MESSAGE_ID) == record["messageId"]]

    assert {line["message"] for line in lines} >= {names.EFFECT_EXECUTED, names.MSG_RECORD_PROCESSED}
    assert {line[names.FIELD_CORRELATION_ID] for line in lines} == {"o-corr"}
    assert {line[names.FIELD_IDEMPOTENCY_KEY] for line in lines} == {"o-corr"}


def test_a_non_string_key_is_logged_and_passed_as_compact_json(orders: Orders) -> None:
    orders.invoke([sqs_record(order(1234))])

    (line,) = orders.messages(names.EFFECT_EXECUTED)

    assert orders.confirmed == ["1234"]
    assert line[names.FIELD_CORRELATION_ID] == line[names.FIELD_IDEMPOTENCY_KEY] == "1234"
    assert orders.stored_keys() == [_stored_key(1234)]  # type: ignore[arg-type]


def test_one_effect_line_per_executed_effect_and_none_for_a_suppressed_duplicate(orders: Orders) -> None:
    record = sqs_record(order("o-1"))
    orders.invoke([record, sqs_record(order("o-2"))])
    orders.invoke([redeliver(record)])
    orders.invoke([sqs_record(order("o-1"))])  # a producer resend: a new message id

    lines = orders.log_lines()
    effects = [line for line in lines if line.get("message") == names.EFFECT_EXECUTED]

    assert [(e[names.FIELD_IDEMPOTENCY_KEY], e[names.FIELD_EFFECT]) for e in effects] == [
        ("o-1", "confirm"),
        ("o-2", "confirm"),
    ]
    assert [line["message"] for line in lines if line.get("message") in names.OUTCOME_MESSAGES] == [
        names.MSG_RECORD_PROCESSED,
        names.MSG_RECORD_PROCESSED,
        names.MSG_DUPLICATE_SUPPRESSED,
        names.MSG_DUPLICATE_SUPPRESSED,
    ]
    assert orders.confirmed == ["o-1", "o-2"]


def test_an_effect_that_raises_writes_no_effect_line_and_the_record_is_retried(orders: Orders) -> None:
    record = sqs_record(order("o-1", fail=True))

    assert failures(orders.invoke([record])) == {record["messageId"]}

    assert orders.messages(names.EFFECT_EXECUTED) == []
    assert orders.stored_keys() == []


def test_an_effect_called_outside_a_record_function_is_refused(orders: Orders) -> None:
    consumer = Consumer(key="id", key_prefix="x")

    @consumer.effect
    def send(*, idempotency_key: str) -> None: ...

    with pytest.raises(RuntimeError, match="effect 'send' was called outside"):
        send()


# --- the key prefix: stable across function names, byte-identical stored keys ----------------------------------


def test_stored_key_is_the_prefix_and_the_hash_of_the_key(orders: Orders) -> None:
    orders.invoke([sqs_record(order("o-0001"))])

    assert orders.stored_keys() == [_stored_key("o-0001")]
    assert orders.stored_keys() == ["shop/orders#" + hashlib.md5(b'"o-0001"').hexdigest()]


def test_prefix_from_the_environment_wins_over_the_consumers_default(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(names.ENV_KEY_PREFIX, "shop/orders-v2")
    orders.consumer.reset()

    orders.invoke([sqs_record(order("o-1"))])

    assert orders.stored_keys() == [_stored_key("o-1", "shop/orders-v2")]


def test_a_renamed_function_still_answers_the_resend_from_its_record(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Powertools' default prefix is built from AWS_LAMBDA_FUNCTION_NAME: a replaced function would orphan every record.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-blue")
    orders.consumer.reset()
    orders.invoke([sqs_record(order("o-1"))])

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-green")
    orders.consumer.reset()  # a new execution environment of the replacement function
    response = orders.invoke([sqs_record(order("o-1"))])

    assert failures(response) == set()
    assert orders.confirmed == ["o-1"]
