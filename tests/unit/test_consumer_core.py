"""The consumers' core (``_consumer_core.ConsumerCore``): both consumer constructs are built on it, and what it does
to a function is written once (neither construct brings back a copy of a step)."""

from __future__ import annotations

import pytest
from aws_cdk import CfnParameter, Duration

from effectively_once import IdempotentEventConsumer, IdempotentQueueConsumer
from effectively_once._consumer_core import ConsumerCore, expiry_value, per_minute
from effectively_once._effect_grants import EffectGrants
from effectively_once.observability import PERIOD

from .helpers import new_stack

CORE_STEPS = ("_grant_idempotency", "_set_runtime_environment", "_create_alarms", "_wire_queries")


@pytest.mark.parametrize("construct", [IdempotentQueueConsumer, IdempotentEventConsumer])
def test_both_consumers_are_built_on_the_core_with_the_effect_grants(construct: type) -> None:
    assert issubclass(construct, ConsumerCore)
    assert issubclass(construct, EffectGrants)


@pytest.mark.parametrize("construct", [IdempotentQueueConsumer, IdempotentEventConsumer])
def test_no_consumer_overrides_a_core_step(construct: type) -> None:
    overridden = [step for step in CORE_STEPS if step in vars(construct)]

    assert overridden == []


def test_expiry_value_is_whole_seconds() -> None:
    assert expiry_value(Duration.days(14)) == "1209600"
    assert expiry_value(Duration.minutes(90)) == "5400"


def test_expiry_value_of_a_seconds_token_is_the_token() -> None:
    stack = new_stack()
    seconds = CfnParameter(stack, "ExpirySeconds", type="Number")

    value = expiry_value(Duration.seconds(seconds.value_as_number))

    assert stack.resolve(value) == {"Ref": "ExpirySeconds"}


def test_fails_expiry_value_of_a_token_in_another_unit() -> None:
    stack = new_stack()
    days = CfnParameter(stack, "ExpiryDays", type="Number")

    with pytest.raises(ValueError, match="idempotency_expiry"):
        expiry_value(Duration.days(days.value_as_number))


def test_per_minute_defaults_give_way_to_the_callers_options() -> None:
    assert per_minute("Sum", {}) == {"statistic": "Sum", "period": PERIOD}
    assert per_minute("Sum", {"statistic": "Average"})["statistic"] == "Average"
