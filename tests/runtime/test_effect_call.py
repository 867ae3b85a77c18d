"""The per-call context a declared effect runs in (``effects.EffectCall``): what the runtime hands its adapters, and
that it is ``None`` outside a declared effect."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from effectively_once_runtime import Consumer
from effectively_once_runtime.effects import EffectCall, MarkerTable, current

from .conftest import IDEMPOTENCY_TABLE, FakeLambdaContext, sqs_record


def _seen_consumer(seen: list[EffectCall | None], **options: Any) -> Consumer:
    consumer = Consumer(key="order_id", key_prefix="shop/calls", effect_key="scoped", **options)

    @consumer.effect(name="charge")
    def charge(order: dict[str, Any], *, idempotency_key: str) -> str:
        seen.append(current())
        return idempotency_key

    @consumer.record
    def handle(order: dict[str, Any]) -> Any:
        return charge(order)

    return consumer


@pytest.mark.usefixtures("aws")
def test_an_effect_gets_its_names_keys_markers_logger_and_metrics() -> None:
    seen: list[EffectCall | None] = []
    consumer = _seen_consumer(seen)

    result = consumer.handler({"order_id": "o-1"}, FakeLambdaContext())

    [call] = seen
    assert call is not None
    assert (call.effect, call.effect_key, call.record_key) == ("charge", result, "o-1")
    assert result == "shop/calls#charge#o-1"
    assert isinstance(call.markers, MarkerTable)
    assert (call.markers.table_name, call.markers.key_prefix) == (IDEMPOTENCY_TABLE, "shop/calls")
    assert call.markers.client is consumer.state.persistence_store.client  # type: ignore[attr-defined]
    assert call.logger is consumer.logger and call.metrics is consumer.metrics


@pytest.mark.usefixtures("aws")
def test_the_deadline_is_the_invocations_end_less_the_margin_on_the_monotonic_clock() -> None:
    seen: list[EffectCall | None] = []
    consumer = _seen_consumer(seen, deadline_margin=2.0)

    before = time.monotonic()
    consumer.handler({"Records": [sqs_record({"order_id": "o-2"})]}, FakeLambdaContext(remaining_ms=5000))
    after = time.monotonic()

    [call] = seen
    assert call is not None and call.deadline is not None
    assert before + 3.0 <= call.deadline <= after + 3.0
    left = call.seconds_left()
    assert left is not None and left <= 3.0


@pytest.mark.usefixtures("aws")
def test_the_default_margin_is_10_percent_of_the_time_at_the_invocations_start() -> None:
    seen: list[EffectCall | None] = []
    consumer = _seen_consumer(seen)

    before = time.monotonic()
    consumer.handler({"order_id": "o-3"}, FakeLambdaContext(remaining_ms=20_000))

    [call] = seen
    assert call is not None and call.deadline is not None
    assert before + 18.0 <= call.deadline <= time.monotonic() + 18.0


@pytest.mark.usefixtures("aws")
def test_there_is_no_deadline_outside_an_invocation() -> None:
    seen: list[EffectCall | None] = []
    consumer = _seen_consumer(seen)

    consumer.process({"order_id": "o-4"})  # what a test or a tool calls, without a Lambda context

    [call] = seen
    assert call is not None and call.deadline is None and call.seconds_left() is None


def test_outside_a_declared_effect_there_is_no_context() -> None:
    assert current() is None


def test_a_context_built_outside_a_consumer_has_no_deadline_markers_logger_or_metrics() -> None:
    call = EffectCall("receipt", "k-1")

    assert (call.record_key, call.deadline, call.markers, call.logger, call.metrics) == (None, None, None, None, None)


def test_fails_to_change_a_context() -> None:
    call = EffectCall("receipt", "k-1")

    with pytest.raises(dataclasses.FrozenInstanceError):
        call.deadline = 1.0  # type: ignore[misc]
