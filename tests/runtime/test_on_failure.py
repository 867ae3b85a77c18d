"""Events refused on first sight on the asynchronous path (issue 30, item 2): with ``ON_FAILURE_QUEUE_URL`` a
permanent failure of an EventBridge event or an SNS or S3 record is recorded by the runtime on the on-failure queue,
in the shape of Lambda's own destination records, and the invocation succeeds, so Lambda's retries never run it
again. A direct invocation only with ``ON_FAILURE_DIRECT``; a transient failure is always raised."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from effectively_once_runtime import Consumer, PermanentError, names
from effectively_once_runtime.on_failure import destination_record, qualified_arn
from effectively_once_runtime.settings import RuntimeSettings

from .conftest import REGION, FakeLambdaContext, queue_bodies
from .orders_domain import KEY_PREFIX, Orders, Unfulfillable, build_consumer, order
from .test_runtime_edges import _eventbridge, _sns_record


def _refusing(orders: Orders, monkeypatch: pytest.MonkeyPatch, *, direct: str | None = None, **options: Any) -> str:
    """An on-failure queue in moto, its URL in ``ON_FAILURE_QUEUE_URL`` (and ``ON_FAILURE_DIRECT``), and the orders
    consumer built again to read them; the queue's URL."""
    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="order-events-on-failure")["QueueUrl"]
    monkeypatch.setenv(names.ENV_ON_FAILURE_QUEUE_URL, url)
    if direct is not None:
        monkeypatch.setenv(names.ENV_ON_FAILURE_DIRECT, direct)
    consumer = build_consumer(orders.confirmed, effect_key="scoped", **options)
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    orders.consumer = consumer
    return url


def _records(url: str) -> list[dict[str, Any]]:
    return [json.loads(body) for body in queue_bodies(boto3.client("sqs", region_name=REGION), url)]


def test_a_refused_eventbridge_event_is_recorded_in_lambdas_shape_and_the_invocation_succeeds(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _refusing(orders, monkeypatch, envelope="eventbridge")
    event = _eventbridge(order("o-1", unfulfillable=True))
    context = FakeLambdaContext()

    assert orders.invoke_direct(event, context) is None

    [record] = _records(url)
    assert record["version"] == "1.0" and record["timestamp"].endswith("Z")
    assert record["requestContext"] == {
        "requestId": context.aws_request_id,
        "functionArn": f"{context.invoked_function_arn}:$LATEST",
        "condition": "PermanentError",
        "approximateInvokeCount": 1,
    }
    assert record["requestPayload"] == event
    assert record["responsePayload"] == {"errorType": "Unfulfillable", "errorMessage": "order o-1 cannot be fulfilled"}
    lines = orders.log_lines()
    [sent] = [ln for ln in lines if ln["message"] == names.MSG_RECORD_SENT_ON_FAILURE]
    assert sent[names.FIELD_TRIGGER] == "eventbridge" and sent[names.FIELD_ERROR_TYPE] == "Unfulfillable"
    assert sent[names.FIELD_ON_FAILURE_MESSAGE_ID]
    assert [ln["message"] for ln in lines].count(names.MSG_INVALID_RECORD) == 1
    assert not [ln for ln in lines if ln["message"] == names.MSG_RECORD_FAILED], "reported done, not failed"
    assert orders.confirmed == []


def test_an_event_without_its_key_is_refused_on_first_sight(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _refusing(orders, monkeypatch, envelope="eventbridge")

    assert orders.invoke_direct(_eventbridge({"order": {"total": 100}})) is None

    [record] = _records(url)
    assert record["responsePayload"]["errorType"] == "InvalidRecord"
    assert "order.id" in record["responsePayload"]["errorMessage"]


def test_a_refused_sns_record_is_recorded_alone_and_the_others_run(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _refusing(orders, monkeypatch, envelope="sns")
    refused, good = _sns_record(order("o-1", unfulfillable=True), "sns-1"), _sns_record(order("o-2"), "sns-2")

    results = orders.invoke_direct({"Records": [refused, good]})

    assert results[0] is None and results[1]["confirmation"] == f"c-{KEY_PREFIX}#confirm#o-2"
    [record] = _records(url)
    assert record["requestPayload"] == {"Records": [refused]}
    assert orders.confirmed == [f"{KEY_PREFIX}#confirm#o-2"]


def test_a_transient_failure_is_still_raised_for_lambdas_retries(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _refusing(orders, monkeypatch, envelope="eventbridge")

    with pytest.raises(RuntimeError, match="confirmation service unavailable"):
        orders.invoke_direct(_eventbridge(order("o-1", fail=True)))

    assert _records(url) == []
    [line] = orders.messages(names.MSG_RECORD_FAILED)
    assert line[names.FIELD_TRIGGER] == "eventbridge"


@pytest.mark.parametrize("direct", [None, "", "false", "False"])
def test_a_direct_invocation_is_raised_to_its_caller_without_on_failure_direct(
    orders: Orders, monkeypatch: pytest.MonkeyPatch, direct: str | None
) -> None:
    url = _refusing(orders, monkeypatch, direct=direct)

    with pytest.raises(Unfulfillable):
        orders.invoke_direct(order("o-1", unfulfillable=True))

    assert _records(url) == []


def test_a_direct_invocation_is_refused_on_first_sight_with_on_failure_direct(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _refusing(orders, monkeypatch, direct="TRUE")
    event = order("o-1", unfulfillable=True)

    assert orders.invoke_direct(event) is None

    [record] = _records(url)
    assert record["requestPayload"] == event and record["requestContext"]["condition"] == "PermanentError"


def test_a_record_that_cannot_be_sent_raises_the_original_failure(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refusing(orders, monkeypatch, envelope="eventbridge")
    monkeypatch.setenv(names.ENV_ON_FAILURE_QUEUE_URL, f"https://sqs.{REGION}.amazonaws.com/123456789012/gone")
    orders.consumer.reset()

    with pytest.raises(Unfulfillable):
        orders.invoke_direct(_eventbridge(order("o-1", unfulfillable=True)))

    lines = orders.log_lines()
    [failed] = [ln for ln in lines if ln["message"] == names.MSG_ON_FAILURE_SEND_FAILED]
    assert "NonExistentQueue" in failed[names.FIELD_REASON] or "does not exist" in failed[names.FIELD_REASON]
    assert [ln for ln in lines if ln["message"] == names.MSG_RECORD_FAILED]


def test_fails_a_malformed_on_failure_queue_url_at_cold_start(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    _refusing(orders, monkeypatch, envelope="eventbridge")
    monkeypatch.setenv(names.ENV_ON_FAILURE_QUEUE_URL, "order-events-on-failure")
    orders.consumer.reset()

    with pytest.raises(ValueError, match="ON_FAILURE_QUEUE_URL must be an SQS queue URL"):
        orders.invoke_direct(_eventbridge(order("o-1")))


def test_fails_an_on_failure_direct_that_is_not_true_or_false() -> None:
    env = {names.ENV_TABLE_NAME: "t", names.ENV_ON_FAILURE_DIRECT: "yes"}
    with pytest.raises(ValueError, match="ON_FAILURE_DIRECT must be true or false, but 'yes' was given"):
        RuntimeSettings.from_env(default_key_prefix="p", env=env)


def test_the_record_keeps_a_qualified_arn_and_cuts_a_long_reason() -> None:
    arn = "arn:aws:lambda:us-east-1:123456789012:function:orders"
    context = FakeLambdaContext()
    context.invoked_function_arn = f"{arn}:live"

    record = destination_record({"a": 1}, PermanentError("x" * 5000), context)

    assert record["requestContext"]["functionArn"] == f"{arn}:live"
    assert qualified_arn(arn, None) == f"{arn}:$LATEST" and qualified_arn(arn, "7") == f"{arn}:7"
    message = record["responsePayload"]["errorMessage"]
    assert message.endswith("...") and len(message) < 5000


def test_a_consumer_without_the_variable_raises_as_before(orders: Orders) -> None:
    consumer: Consumer = orders.consumer
    assert consumer.state.on_failure is None
    with pytest.raises(Unfulfillable):
        consumer.handler(order("o-1", unfulfillable=True), FakeLambdaContext())
    with pytest.raises(PermanentError):
        consumer.handler(_eventbridge(order("o-2")), FakeLambdaContext())  # no key at order.id of the whole event
