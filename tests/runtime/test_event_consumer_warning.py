"""The cold-start WARNING when the idempotency key is a delivery's own id (``id``, ``messageId``): a producer retry or
a second EventBridge put gets a new one, so the key must be a business id (issue 23)."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_runtime import Consumer
from effectively_once_runtime.consumer import MSG_KEY_IS_DELIVERY_ID

from .conftest import HANDLER_ENV, IDEMPOTENCY_TABLE, REGION, FakeLambdaContext, create_table


def _consumer(key: str, monkeypatch: pytest.MonkeyPatch, **options: Any) -> tuple[Consumer, io.StringIO]:
    """A consumer whose log lines go to the returned buffer, with the handler tests' environment."""
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    consumer = Consumer(key=key, key_prefix="tests/events", effect_key="scoped", **options)
    consumer.record(lambda body: body)
    stream = io.StringIO()
    monkeypatch.setattr(consumer.logger.registered_handler, "stream", stream)
    return consumer, stream


def _warnings(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("message") == MSG_KEY_IS_DELIVERY_ID]


@pytest.mark.parametrize("key", ["id", '"id"', "messageId"])
def test_a_delivery_id_key_logs_one_warning_at_set_up(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer, stream = _consumer(key, monkeypatch)

    consumer.warm()

    (line,) = _warnings(stream)
    assert line["level"] == "WARNING"
    assert f"key {key!r} names the delivery's own id" in line["reason"]
    assert "key on a business id" in line["reason"]


def test_the_warning_is_once_per_execution_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer, stream = _consumer("id", monkeypatch)
    consumer.warm()
    state = consumer.state

    # Later invocations reuse the state: no second line. A new environment (reset) logs it again.
    assert consumer.state is state and consumer.warm() is state
    assert len(_warnings(stream)) == 1
    consumer.reset()
    consumer.warm()
    assert len(_warnings(stream)) == 2


def test_the_warning_is_also_logged_when_the_first_invocation_builds_the_state(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer, stream = _consumer("id", monkeypatch)
    event = {"id": "evt-1", "detail-type": "Payment", "source": "shop", "detail": {"payment_id": "p-1"}}

    with mock_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), IDEMPOTENCY_TABLE, "id")
        first = consumer.handler(event, FakeLambdaContext())
        again = consumer.handler(event, FakeLambdaContext())

    assert first == again == event  # keyed on the event id: this very put is answered, a new put would not be
    assert len(_warnings(stream)) == 1


@pytest.mark.parametrize(
    ("key", "envelope"),
    [("payment_id", "auto"), ("detail.id", None), ("payment.messageId", None), ("ids", None), ("[id, order]", None)],
)
def test_a_business_key_logs_no_warning(key: str, envelope: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer, stream = _consumer(key, monkeypatch, envelope=envelope)

    assert consumer.warm() is not None
    assert _warnings(stream) == []
