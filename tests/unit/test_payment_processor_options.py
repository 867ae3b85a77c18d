"""``PaymentProcessor(queue_options=..., consumer_options=...)``, and the deprecated keywords they replace: each still
works with a ``DeprecationWarning`` naming the option object; given beside the same field, a ``ValueError``."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest
from aws_cdk import Duration
from aws_cdk.assertions import Template

from effectively_once import AlarmThresholds, IdempotentQueueConsumerOptions, PaymentProcessor, ProcessingQueueOptions
from effectively_once._deprecated_props import DeprecatedProps

from .helpers import new_stack

QUEUE = {"fifo": True, "max_receive_count": 7, "retention_period": Duration.days(2)}
CONSUMER = {"batch_size": 5, "key_prefix": "shop/payments", "alarms": False}


def _processor(**props: Any) -> tuple[PaymentProcessor, dict[str, Any]]:
    stack = new_stack()
    processor = PaymentProcessor(stack, "Payments", **props)
    return processor, Template.from_stack(stack).to_json()


@pytest.fixture(scope="module")
def with_options() -> tuple[PaymentProcessor, dict[str, Any]]:
    return _processor(
        queue_options=ProcessingQueueOptions(**QUEUE), consumer_options=IdempotentQueueConsumerOptions(**CONSUMER)
    )


@pytest.fixture(scope="module")
def with_keywords() -> tuple[PaymentProcessor, list[warnings.WarningMessage], dict[str, Any]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        processor, template = _processor(**QUEUE, **CONSUMER)
    return processor, caught, template


def test_option_objects_reach_the_queue_and_the_consumer(with_options: tuple[PaymentProcessor, Any]) -> None:
    processor, template = with_options
    queues = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SQS::Queue"]
    source = next(q for q in queues if "RedrivePolicy" in q)

    assert processor.queue.fifo and processor.queue.max_receive_count == 7
    assert source["MessageRetentionPeriod"] == 2 * 86400
    assert processor.consumer.dlq_depth_alarm is None
    mapping = next(r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["BatchSize"] == 5


def test_deprecated_keywords_build_the_same_template(with_options: tuple[Any, Any], with_keywords: Any) -> None:
    assert with_keywords[2] == with_options[1]


def test_deprecated_keywords_warn_naming_the_option_objects(with_keywords: Any) -> None:
    messages = sorted(str(w.message) for w in with_keywords[1] if str(w.message).startswith("PaymentProcessor("))

    assert messages == [
        "PaymentProcessor(batch_size=..., key_prefix=..., alarms=...) is deprecated and will be removed in 0.4.0: "
        "pass consumer_options=IdempotentQueueConsumerOptions(batch_size=..., key_prefix=..., alarms=...) instead",
        "PaymentProcessor(fifo=..., retention_period=..., max_receive_count=...) is deprecated and will be removed in "
        "0.4.0: pass queue_options=ProcessingQueueOptions(fifo=..., retention_period=..., max_receive_count=...) "
        "instead",
    ]


def test_deprecation_warning_points_at_the_caller() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        PaymentProcessor(new_stack(), "Payments", batch_size=5)

    assert [w.filename for w in caught if str(w.message).startswith("PaymentProcessor(")] == [__file__]


def test_deprecated_keyword_combines_with_the_other_fields() -> None:
    with pytest.warns(DeprecationWarning, match="queue_options=ProcessingQueueOptions"):
        processor = PaymentProcessor(
            new_stack(), "Payments", max_receive_count=7, queue_options=ProcessingQueueOptions(fifo=True)
        )

    assert processor.queue.fifo and processor.queue.max_receive_count == 7


def test_fails_a_deprecated_keyword_beside_the_same_field() -> None:
    with pytest.raises(ValueError) as raised:
        PaymentProcessor(
            new_stack(), "Payments", batch_size=5, consumer_options=IdempotentQueueConsumerOptions(batch_size=10)
        )

    assert str(raised.value) == (
        "batch_size must not be given beside consumer_options.batch_size (10): the batch_size keyword is deprecated; "
        "give it once, as consumer_options=IdempotentQueueConsumerOptions(batch_size=...), but 5 was given"
    )


def test_fails_an_object_keyword_beside_the_same_field() -> None:
    options = IdempotentQueueConsumerOptions(alarm_thresholds=AlarmThresholds(errors=1))

    with pytest.raises(ValueError, match=r"beside consumer_options.alarm_thresholds \(AlarmThresholds\(dlq_depth=0"):
        PaymentProcessor(new_stack(), "Payments", alarm_thresholds=AlarmThresholds(), consumer_options=options)


def test_fails_an_unknown_keyword() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        PaymentProcessor(new_stack(), "Payments", batchsize=5)  # type: ignore[call-arg]


def test_fails_options_of_the_wrong_type() -> None:
    with pytest.raises(
        ValueError, match=r"queue_options must be a ProcessingQueueOptions or None, but IdempotentQueueC"
    ):
        PaymentProcessor(
            new_stack(),
            "Payments",
            queue_options=IdempotentQueueConsumerOptions(),  # type: ignore[arg-type]
        )


def test_deprecated_keywords_are_exactly_the_option_fields() -> None:
    fields = [
        f.name for cls in (ProcessingQueueOptions, IdempotentQueueConsumerOptions) for f in dataclasses.fields(cls)
    ]

    assert sorted(DeprecatedProps.__annotations__) == sorted(fields)
