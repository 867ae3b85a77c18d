"""Misconfiguration fails at construction (ValueError) or warns (Annotations), one test per rule (issue 5).

Every rule is listed, with its source, in docs/validation.md. Raising tests build small stacks and never
synthesize; the warning tests share one synthesized stack per group (module-scoped fixtures).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk import App, CfnParameter, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Annotations, Match

from effectively_once import (
    AlarmThresholds,
    AsyncInvocationOptions,
    ExistingQueue,
    IdempotencyTable,
    IdempotentQueueConsumer,
    PaymentProcessor,
    ProcessingQueue,
    ProcessingQueueOptions,
)

from .helpers import ENV, inline_function, new_app, new_stack


def _consumer(
    stack: Stack,
    *,
    id: str = "Consumer",
    queue: dict[str, Any] | None = None,
    function_timeout: Duration | None = None,
    function_props: dict[str, Any] | None = None,
    **props: Any,
) -> IdempotentQueueConsumer:
    """A consumer of a new ProcessingQueue(**queue), with an inline function (**function_props) and a new table."""
    return IdempotentQueueConsumer(
        stack,
        id,
        queue=ProcessingQueue(stack, f"{id}Queue", **(queue or {})),
        function=inline_function(stack, f"{id}Function", timeout=function_timeout, **(function_props or {})),
        table=IdempotencyTable(stack, f"{id}Table"),
        **props,
    )


def _raises(*parts: str) -> Any:
    """``pytest.raises(ValueError)`` matching the message parts in order (literal text)."""
    return pytest.raises(ValueError, match=".*".join(re.escape(part) for part in parts))


def _token(stack: Stack, name: str, default: float | None = None) -> float:
    return CfnParameter(stack, name, type="Number", default=default).value_as_number


# --- visibility timeout vs function timeout ------------------------------------------------------------
def test_fails_visibility_timeout_below_function_timeout() -> None:
    with _raises(
        "queue visibility_timeout must be at least the function timeout (2 minutes)",
        "but 30 seconds was given",
        "(source: AWS Lambda Developer Guide, Using Lambda with Amazon SQS; aws/aws-cdk#20527)",
    ):
        _consumer(
            new_stack(), queue={"visibility_timeout": Duration.seconds(30)}, function_timeout=Duration.seconds(120)
        )


def test_fails_visibility_timeout_below_lambdas_default_timeout() -> None:
    with _raises(
        "queue visibility_timeout must be at least the function timeout (3 seconds)", "but 2 seconds was given"
    ):
        _consumer(new_stack(), queue={"visibility_timeout": Duration.seconds(2)})


def test_fails_visibility_timeout_above_twelve_hours() -> None:
    with _raises(
        "visibility_timeout must be between 0 and 43200 seconds",
        "but 13 hours was given",
        "CloudFormation AWS::SQS::Queue VisibilityTimeout",
    ):
        ProcessingQueue(new_stack(), "Q", visibility_timeout=Duration.hours(13))


# --- queue types and names -----------------------------------------------------------------------------
@pytest.mark.parametrize(("fifo", "kind"), [(True, "a FIFO queue"), (False, "a standard queue")])
def test_fails_dead_letter_queue_of_the_other_type(fifo: bool, kind: str) -> None:
    stack = new_stack()
    other = sqs.Queue(stack, "Dlq", fifo=not fifo or None)
    with _raises(
        f"dead_letter_queue must be {kind} like the source queue", "'Test/Dlq' was given", "Using dead-letter queues"
    ):
        ProcessingQueue(stack, "Q", fifo=fifo, dead_letter_queue=other)


def test_fails_fifo_name_without_suffix() -> None:
    with _raises("queue_name must end in '.fifo' for a FIFO queue, but 'payments' was given", "FIFO queues"):
        ProcessingQueue(new_stack(), "Q", fifo=True, queue_name="payments")


def test_fails_fifo_name_from_a_parameter_without_suffix() -> None:
    stack = new_stack()
    with _raises("queue_name must end in '.fifo' for a FIFO queue", "but a deploy-time token was given"):
        ProcessingQueue(stack, "Q", fifo=True, queue_name=CfnParameter(stack, "Name").value_as_string)


def test_fails_standard_name_with_fifo_suffix() -> None:
    with _raises("queue_name must not end in '.fifo' for a standard queue (fifo=False), but 'payments.fifo' was given"):
        ProcessingQueue(new_stack(), "Q", queue_name="payments.fifo")


@pytest.mark.parametrize(
    ("fifo", "name"),
    [
        (False, "pay ments"),
        (True, "pay.ments.fifo"),
        (False, "p" * 81),
        (False, "payments\n"),
        (True, "payments\n.fifo"),
    ],
)
def test_fails_queue_name_with_bad_characters_or_length(fifo: bool, name: str) -> None:
    with _raises(
        "queue_name must be 1 to 80 characters of letters, digits, '-' and '_'",
        f"{name!r} was given",
        "CreateQueue QueueName",
    ):
        ProcessingQueue(new_stack(), "Q", fifo=fifo, queue_name=name)


@pytest.mark.parametrize("prop", ["content_based_deduplication", "high_throughput"])
def test_fails_fifo_only_prop_on_standard_queue(prop: str) -> None:
    with _raises(f"{prop} is only allowed on a FIFO queue (fifo=True), but True was given", "FIFO queues"):
        ProcessingQueue(new_stack(), "Q", **{prop: True})


# --- retention and redrive -----------------------------------------------------------------------------
def test_fails_dead_letter_queue_retention_shorter_than_source_on_standard_queue() -> None:
    stack = new_stack()
    dlq = sqs.Queue(stack, "Dlq", retention_period=Duration.days(1))
    with _raises(
        "dead_letter_queue retention must be longer than retention_period (4 days) on a standard queue",
        "but 1 day was given",
        "Using dead-letter queues (message retention)",
    ):
        ProcessingQueue(stack, "Q", dead_letter_queue=dlq)


def test_fails_dead_letter_queue_at_sqs_default_retention_below_source() -> None:
    stack = new_stack()
    dlq = sqs.Queue(stack, "Dlq")  # no retention set: SQS keeps 4 days
    with _raises("dead_letter_queue retention must be longer than retention_period (7 days)", "but 4 days was given"):
        ProcessingQueue(stack, "Q", retention_period=Duration.days(7), dead_letter_queue=dlq)


def test_fifo_dead_letter_queue_retention_has_no_rule() -> None:
    stack = new_stack()
    dlq = sqs.Queue(stack, "Dlq", fifo=True, retention_period=Duration.days(1))
    assert ProcessingQueue(stack, "Q", fifo=True, dead_letter_queue=dlq).dead_letter_queue is dlq


@pytest.mark.parametrize(("retention", "shown"), [(Duration.seconds(30), "30 seconds"), (Duration.days(15), "15 days")])
def test_fails_retention_period_out_of_range(retention: Duration, shown: str) -> None:
    with _raises(
        "retention_period must be between 60 and 1209600 seconds",
        f"but {shown} was given",
        "CloudFormation AWS::SQS::Queue MessageRetentionPeriod",
    ):
        ProcessingQueue(new_stack(), "Q", retention_period=retention)


@pytest.mark.parametrize("count", [0, 1001])
def test_fails_max_receive_count_out_of_range(count: int) -> None:
    with _raises(f"max_receive_count must be between 1 and 1000, but {count} was given", "Using dead-letter queues"):
        ProcessingQueue(new_stack(), "Q", max_receive_count=count)


# --- event source mapping ------------------------------------------------------------------------------
def test_fails_batching_window_on_fifo_source() -> None:
    with _raises(
        "max_batching_window is not allowed on a FIFO source queue, but 5 seconds was given",
        "AWS::Lambda::EventSourceMapping MaximumBatchingWindowInSeconds",
    ):
        _consumer(new_stack(), queue={"fifo": True}, max_batching_window=Duration.seconds(5))


def test_fails_batching_window_above_five_minutes() -> None:
    with _raises("max_batching_window must be between 0 and 300, but 301 was given"):
        _consumer(new_stack(), max_batching_window=Duration.seconds(301))


def test_fails_batch_size_above_ten_without_batching_window() -> None:
    with _raises(
        "batch_size above 10 needs a max_batching_window on a standard queue, but 100 was given",
        "AWS::Lambda::EventSourceMapping BatchSize",
    ):
        _consumer(new_stack(), batch_size=100)


@pytest.mark.parametrize(
    ("fifo", "batch_size", "high"), [(False, 10_001, "10000"), (True, 11, "10"), (False, 0, "10000")]
)
def test_fails_batch_size_out_of_range(fifo: bool, batch_size: int, high: str) -> None:
    window = {} if fifo else {"max_batching_window": Duration.seconds(1)}
    with _raises(f"batch_size must be between 1 and {high}, but {batch_size} was given", "BatchSize"):
        _consumer(new_stack(), queue={"fifo": fifo}, batch_size=batch_size, **window)


@pytest.mark.parametrize("concurrency", [1, 1001])
def test_fails_max_concurrency_out_of_range(concurrency: int) -> None:
    with _raises(f"max_concurrency must be between 2 and 1000, but {concurrency} was given", "ScalingConfig"):
        _consumer(new_stack(), max_concurrency=concurrency)


# --- provisioned pollers (the SQS ranges of aws-cdk-lib's SqsEventSource) ------------------------------------
def _pollers(minimum: float | None = None, maximum: float | None = None) -> dict[str, Any]:
    return {
        "provisioned_poller_config": lambda_.ProvisionedPollerConfig(minimum_pollers=minimum, maximum_pollers=maximum)
    }


@pytest.mark.parametrize("minimum", [1, 201])
def test_fails_minimum_pollers_outside_two_to_two_hundred(minimum: int) -> None:
    with _raises(
        f"provisioned_poller_config.minimum_pollers must be between 2 and 200, but {minimum} was given",
        "ProvisionedPollerConfig",
    ):
        _consumer(new_stack(), **_pollers(minimum=minimum))


@pytest.mark.parametrize("maximum", [1, 2001])
def test_fails_maximum_pollers_outside_two_to_two_thousand(maximum: int) -> None:
    with _raises(
        f"provisioned_poller_config.maximum_pollers must be between 2 and 2000, but {maximum} was given",
        "ProvisionedPollerConfig",
    ):
        _consumer(new_stack(), **_pollers(maximum=maximum))


@pytest.mark.parametrize(("minimum", "maximum"), [(2, 2), (200, 2000), (2, None), (None, 2000)])
def test_pollers_at_the_ends_of_the_sqs_ranges_are_accepted(minimum: int | None, maximum: int | None) -> None:
    consumer = _consumer(new_stack(), **_pollers(minimum, maximum))
    assert consumer.event_source_mapping is not None


def test_fails_minimum_pollers_above_maximum() -> None:
    with _raises(
        "provisioned_poller_config.minimum_pollers must be at most maximum_pollers (10)",
        "but 11 was given",
        "ProvisionedPollerConfig",
    ):
        _consumer(new_stack(), **_pollers(minimum=11, maximum=10))


def test_fails_provisioned_pollers_with_max_concurrency() -> None:
    with _raises(
        "max_concurrency must not be given with provisioned_poller_config",
        "maximum_pollers",
        "but 5 was given",
        "Configuring scaling behavior for SQS event source mappings",
    ):
        _consumer(new_stack(), max_concurrency=5, **_pollers(minimum=2, maximum=10))


def test_fails_poller_group_name_on_an_sqs_mapping() -> None:
    config = lambda_.ProvisionedPollerConfig(minimum_pollers=2, poller_group_name="shared")
    with _raises("provisioned_poller_config.poller_group_name", "Kafka", "but 'shared' was given"):
        _consumer(new_stack(), provisioned_poller_config=config)


def test_token_pollers_are_skipped_and_written_to_the_template() -> None:
    stack = new_stack()
    minimum, maximum = _token(stack, "MinPollers"), _token(stack, "MaxPollers")
    consumer = _consumer(stack, **_pollers(minimum, maximum))
    cfn = consumer.event_source_mapping.node.default_child
    assert stack.resolve(cfn.provisioned_poller_config) == {  # type: ignore[union-attr]
        "minimumPollers": {"Ref": "MinPollers"},
        "maximumPollers": {"Ref": "MaxPollers"},
    }


# --- idempotency table and expiry ----------------------------------------------------------------------
def test_fails_in_progress_expiration_as_ttl_attribute() -> None:
    with _raises(
        "time_to_live_attribute must not be 'in_progress_expiration'",
        "epoch milliseconds",
        "but 'in_progress_expiration' was given",
        "Powertools for AWS Lambda (Python), Idempotency",
    ):
        IdempotencyTable(new_stack(), "T", time_to_live_attribute="in_progress_expiration")


def test_fails_ttl_attribute_other_than_expiration() -> None:
    with _raises("time_to_live_attribute must be 'expiration'", "but 'ttl' was given", "Idempotency"):
        IdempotencyTable(new_stack(), "T", time_to_live_attribute="ttl")


def test_fails_idempotency_expiry_below_one_second() -> None:
    with _raises("idempotency_expiry must be at least 1 second, but 0 seconds was given"):
        _consumer(new_stack(), idempotency_expiry=Duration.seconds(0))


# --- tokens are skipped --------------------------------------------------------------------------------
def test_unresolved_tokens_are_skipped() -> None:
    stack = new_stack()
    consumer = _consumer(
        stack,
        queue={
            "visibility_timeout": Duration.seconds(_token(stack, "Visibility")),
            "retention_period": Duration.seconds(_token(stack, "Retention")),
            "max_receive_count": _token(stack, "Receives"),
            "queue_name": CfnParameter(stack, "Name").value_as_string,
        },
        function_timeout=Duration.seconds(120),
        batch_size=_token(stack, "Batch"),
        max_concurrency=_token(stack, "Concurrency"),
        idempotency_expiry=Duration.seconds(_token(stack, "Expiry")),
    )
    assert consumer.event_source_mapping is not None


# --- the function timeout: 1 to 900 seconds -------------------------------------------------------------------------
TIMEOUT_SOURCE = "(source: CloudFormation AWS::Lambda::Function Timeout; AWS Lambda Developer Guide, Lambda quotas)"


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0 seconds"), (901, "15 minutes 1 second")], ids=["zero", "above 900 s"]
)
def test_fails_payment_processor_function_timeout_out_of_range(seconds: int, shown: str) -> None:
    with pytest.raises(ValueError) as raised:
        PaymentProcessor(new_stack(), "Processor", function_timeout=Duration.seconds(seconds))

    assert str(raised.value) == (
        f"function_timeout must be between 1 and 900 seconds, but {shown} was given {TIMEOUT_SOURCE}"
    )


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0 seconds"), (901, "15 minutes 1 second")], ids=["zero", "above 900 s"]
)
def test_fails_consumer_function_timeout_out_of_range(seconds: int, shown: str) -> None:
    with pytest.raises(ValueError) as raised:
        _consumer(new_stack(), function_timeout=Duration.seconds(seconds))

    assert str(raised.value) == (
        f"timeout of function Test/ConsumerFunction must be between 1 and 900 seconds, but {shown} was given "
        f"{TIMEOUT_SOURCE}"
    )


@pytest.mark.parametrize("seconds", [1, 900])
def test_function_timeout_at_the_ends_of_lambdas_range_is_accepted(seconds: int) -> None:
    PaymentProcessor(new_stack(), "Processor", function_timeout=Duration.seconds(seconds))


# --- where the consumer is created, and one consumer per function ---------------------------------------------------
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:orders"


def _queue_and_function_stacks() -> tuple[App, Stack, Stack]:
    app = new_app()
    return app, Stack(app, "Queues", env=ENV), Stack(app, "Functions", env=ENV)


def _given_visibility(scope: Stack, id: str) -> ProcessingQueue:
    """A queue an imported function can consume (its visibility timeout cannot be filled in from the function)."""
    return ProcessingQueue(scope, id, visibility_timeout=Duration.minutes(5))


def test_fails_consumer_in_another_stack_than_its_function() -> None:
    _, queues, functions = _queue_and_function_stacks()
    function = inline_function(functions, "Fn")

    with pytest.raises(ValueError) as raised:
        IdempotentQueueConsumer(
            queues,
            "Consumer",
            queue=ProcessingQueue(queues, "Q"),
            function=function,
            table=IdempotencyTable(queues, "T"),
        )

    assert str(raised.value) == (
        "scope of IdempotentQueueConsumer Queues/Consumer must be in the stack of its function Functions/Fn (stack "
        "Functions): create the consumer with scope=Stack.of(function) or a construct of that stack, or its event "
        "source mapping (naming the function) and the grants and environment it adds to the function (naming the "
        "queue and the table) make each stack depend on the other, and app.synth() fails with a DependencyCycle, but "
        "a scope in stack Queues was given (source: AWS CDK Developer Guide, Stacks (cross-stack references and stack "
        "dependencies))"
    )


def test_consumer_in_its_functions_stack_of_a_queue_in_another_stack_synthesizes() -> None:
    app, queues, functions = _queue_and_function_stacks()
    queue = ProcessingQueue(queues, "Q")
    function = inline_function(functions, "Fn")
    IdempotentQueueConsumer(functions, "Consumer", queue=queue, function=function, table=IdempotencyTable(queues, "T"))

    app.synth()


def test_consumer_of_a_function_imported_in_another_stack_synthesizes() -> None:
    app, queues, functions = _queue_and_function_stacks()
    function = lambda_.Function.from_function_arn(functions, "Fn", FUNCTION_ARN)
    IdempotentQueueConsumer(
        queues, "Consumer", queue=_given_visibility(queues, "Q"), function=function, table=IdempotencyTable(queues, "T")
    )

    app.synth()


def test_fails_second_consumer_on_one_function() -> None:
    stack = new_stack()
    function, table = inline_function(stack, "Fn"), IdempotencyTable(stack, "T")
    IdempotentQueueConsumer(stack, "First", queue=ProcessingQueue(stack, "A"), function=function, table=table)

    with pytest.raises(ValueError) as raised:
        IdempotentQueueConsumer(stack, "Second", queue=ProcessingQueue(stack, "B"), function=function, table=table)

    assert str(raised.value) == (
        "function must not be shared by two IdempotentQueueConsumers: the runtime reads one DEAD_LETTER_QUEUE_URL, "
        "IDEMPOTENCY_EXPIRY_SECONDS, IDEMPOTENCY_KEY_PREFIX per function, so this consumer would overwrite the first "
        "one's (its queue's poison messages would be copied to this queue's dead-letter queue); give each queue its "
        "own function (the same code and layers can back several), but function Test/Fn, already consumed by "
        "IdempotentQueueConsumer Test/First, was given (source: this library's contract "
        "(effectively_once_runtime.settings: one environment per function))"
    )


def test_fails_second_consumer_on_a_second_import_of_one_function_arn() -> None:
    stack = new_stack()
    table = IdempotencyTable(stack, "T")
    for id in ("First", "Second"):
        function = lambda_.Function.from_function_arn(stack, f"{id}Fn", FUNCTION_ARN)
        queue = _given_visibility(stack, f"{id}Queue")
        if id == "First":
            IdempotentQueueConsumer(stack, id, queue=queue, function=function, table=table)
            continue
        with _raises(
            "function must not be shared by two IdempotentQueueConsumers",
            "already consumed by IdempotentQueueConsumer Test/First",
        ):
            IdempotentQueueConsumer(stack, id, queue=queue, function=function, table=table)


# --- tokens in derived outputs: the output follows the token, or synth fails (never silently dropped) ----
def test_fails_token_function_timeout_without_visibility_timeout() -> None:
    stack = new_stack()
    with _raises(
        "visibility_timeout must be given when the function timeout (a deploy-time token (<token> seconds))",
        "6 x function timeout + max_batching_window",
        "CloudFormation has no arithmetic",
        "SQS keeps its 30-second default",
        "but None was given",
        "(source: AWS Lambda Developer Guide, Using Lambda with Amazon SQS",
    ):
        PaymentProcessor(stack, "Processor", function_timeout=Duration.seconds(_token(stack, "FunctionTimeout", 120)))


def test_fails_token_batching_window_without_visibility_timeout() -> None:
    stack = new_stack()
    with _raises(
        "visibility_timeout must be given when",
        "max_batching_window (a deploy-time token (<token> seconds)) is a deploy-time token",
        "but None was given",
    ):
        _consumer(stack, max_batching_window=Duration.seconds(_token(stack, "Window", 5)))


def test_token_function_timeout_with_a_given_visibility_timeout_is_accepted() -> None:
    stack = new_stack()
    processor = PaymentProcessor(
        stack,
        "Processor",
        function_timeout=Duration.seconds(_token(stack, "FunctionTimeout", 120)),
        queue_options=ProcessingQueueOptions(visibility_timeout=Duration.minutes(15)),
    )
    assert processor.consumer.visibility_timeout.to_seconds() == 15 * 60


def test_fails_filling_in_a_token_visibility_timeout() -> None:
    stack = new_stack()
    queue = ProcessingQueue(stack, "Q")
    with _raises("visibility_timeout must be a resolved Duration to be filled in", "but a deploy-time token"):
        queue.fill_visibility_timeout(Duration.seconds(_token(stack, "Visibility")))


def test_fails_token_idempotency_expiry_in_a_unit_other_than_seconds() -> None:
    stack = new_stack()
    with _raises(
        "idempotency_expiry must be Duration.seconds(...) when it is a deploy-time token",
        "but a deploy-time token (<token> hours) was given",
    ):
        _consumer(stack, idempotency_expiry=Duration.hours(_token(stack, "ExpiryHours")))


def test_token_alarm_threshold_and_event_age_follow_their_parameters() -> None:
    stack = new_stack()
    consumer = _consumer(
        stack,
        alarm_thresholds=AlarmThresholds(oldest_message_age=Duration.seconds(_token(stack, "AgeSeconds"))),
        async_invocation=AsyncInvocationOptions(max_event_age=Duration.seconds(_token(stack, "EventAgeSeconds"))),
    )
    alarm, config = (c.node.default_child for c in (consumer.oldest_message_age_alarm, consumer.event_invoke_config))
    assert stack.resolve(alarm.threshold) == {"Ref": "AgeSeconds"}  # type: ignore[union-attr]
    assert stack.resolve(config.maximum_event_age_in_seconds) == {"Ref": "EventAgeSeconds"}  # type: ignore[union-attr]


def test_fails_token_oldest_message_age_threshold_in_a_unit_other_than_seconds() -> None:
    stack = new_stack()
    with _raises(
        "alarm_thresholds.oldest_message_age must be Duration.seconds(...) when it is a deploy-time token",
        "but a deploy-time token (<token> minutes) was given",
    ):
        _consumer(stack, alarm_thresholds=AlarmThresholds(oldest_message_age=Duration.minutes(_token(stack, "Age"))))


# --- warnings ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def warnings() -> Annotations:
    stack = new_stack(id="Warn")
    minute2 = Duration.seconds(120)
    _consumer(stack, id="Visibility120", queue={"visibility_timeout": minute2}, function_timeout=minute2)
    _consumer(stack, id="Visibility720", queue={"visibility_timeout": Duration.seconds(720)}, function_timeout=minute2)
    _consumer(
        stack,
        id="VisibilityWindow",
        queue={"visibility_timeout": Duration.seconds(720)},
        function_timeout=minute2,
        max_batching_window=Duration.seconds(10),
    )
    _consumer(stack, id="ShortExpiry", idempotency_expiry=Duration.hours(1))
    _consumer(stack, id="FewReceives", queue={"max_receive_count": 3})
    _consumer(stack, id="EqualRetention", queue={"retention_period": Duration.days(14)})
    _consumer(stack, id="FifoEqualRetention", queue={"fifo": True, "retention_period": Duration.days(14)})
    reserved = {"reserved_concurrent_executions": 2}
    _consumer(stack, id="FewReserved", function_props=reserved, max_concurrency=5)
    _consumer(stack, id="EnoughReserved", function_props={"reserved_concurrent_executions": 5}, max_concurrency=5)
    _consumer(stack, id="ReservedWithoutMax", function_props=reserved)
    _consumer(stack, id="MaxWithoutReserved", max_concurrency=5)
    _consumer(
        stack,
        id="TokenReserved",
        function_props={"reserved_concurrent_executions": _token(stack, "Reserved")},
        max_concurrency=5,
    )
    # provisioned mode: each poller drives up to 10 concurrent invokes, so the ceiling is 10 x maximum_pollers
    _consumer(stack, id="FewReservedPollers", function_props={"reserved_concurrent_executions": 50}, **_pollers(2, 10))
    _consumer(
        stack, id="EnoughReservedPollers", function_props={"reserved_concurrent_executions": 100}, **_pollers(2, 10)
    )
    _consumer(stack, id="DefaultMaxPollers", function_props={"reserved_concurrent_executions": 1000}, **_pollers(2))
    _consumer(
        stack,
        id="TokenMaxPollers",
        function_props={"reserved_concurrent_executions": 5},
        **_pollers(2, _token(stack, "MaxPollers")),
    )
    # two mappings on one function: the guidance is about their total. A function has one consumer (a second is a
    # ValueError), so the other mapping is the user's own
    shared = inline_function(stack, "SharedFunction", reserved_concurrent_executions=5)
    table = IdempotencyTable(stack, "SharedTable")
    lambda_.EventSourceMapping(
        stack,
        "SharedFirst",
        target=shared,
        event_source_arn=ProcessingQueue(stack, "SharedFirstQueue").queue.queue_arn,
        max_concurrency=3,
    )
    IdempotentQueueConsumer(
        stack,
        "SharedSecond",
        queue=ProcessingQueue(stack, "SharedSecondQueue"),
        function=shared,
        table=table,
        max_concurrency=3,
    )
    # one on-demand and one provisioned mapping on one function: both ceilings count
    mixed = inline_function(stack, "MixedFunction", reserved_concurrent_executions=50)
    lambda_.EventSourceMapping(
        stack,
        "MixedOnDemand",
        target=mixed,
        event_source_arn=ProcessingQueue(stack, "MixedOnDemandQueue").queue.queue_arn,
        max_concurrency=10,
    )
    IdempotentQueueConsumer(
        stack,
        "MixedProvisioned",
        queue=ProcessingQueue(stack, "MixedProvisionedQueue"),
        function=mixed,
        table=table,
        **_pollers(2, 5),
    )
    return Annotations.from_stack(stack)


def _warnings_under(annotations: Annotations, path: str) -> list[str]:
    return [
        str(found.entry.data)
        for found in annotations.find_warning("*", Match.any_value())
        if found.id == path or found.id.startswith(path + "/")
    ]


def test_warns_visibility_timeout_below_six_function_timeouts(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/Visibility120",
        Match.string_like_regexp(
            re.escape(
                "queue visibility_timeout should be at least 6 x function timeout (2 minutes) + max_batching_window "
                "(0 seconds) = 720 seconds"
            )
            + ".*but 2 minutes was given.*aws/aws-cdk#20527.*effectively-once:visibilityTimeoutBelowGuidance"
        ),
    )


def test_visibility_timeout_of_six_function_timeouts_is_clean(warnings: Annotations) -> None:
    assert _warnings_under(warnings, "/Warn/Visibility720") == []


def test_warns_visibility_timeout_without_room_for_the_batching_window(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/VisibilityWindow",
        Match.string_like_regexp(
            re.escape("+ max_batching_window (10 seconds) = 730 seconds") + ".*but 12 minutes was given"
        ),
    )


def test_warns_idempotency_expiry_shorter_than_retention(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/ShortExpiry",
        Match.string_like_regexp(
            re.escape("idempotency_expiry should be at least the queue's retention_period (4 days)")
            + ".*charged, twice.*but 1 hour was given.*docs/validation.md"
        ),
    )


def test_warns_max_receive_count_below_five(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/FewReceives",
        Match.string_like_regexp(
            re.escape("queue max_receive_count should be at least 5 on a queue consumed by Lambda")
            + ".*but 3 was given.*Using Lambda with Amazon SQS"
        ),
    )


def test_warns_dead_letter_queue_retention_equal_to_source_on_standard_queue(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/EqualRetentionQueue",
        Match.string_like_regexp(
            re.escape("retention_period should be shorter than the dead-letter queue's retention (14 days)")
            + ".*but 14 days was given.*message retention"
        ),
    )


def test_fifo_queue_with_equal_retention_is_clean(warnings: Annotations) -> None:
    assert _warnings_under(warnings, "/Warn/FifoEqualRetention") == []


def test_warns_reserved_concurrency_below_max_concurrency(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/FewReserved",
        Match.string_like_regexp(
            re.escape(
                "function reserved_concurrent_executions should be at least the maximum concurrency of the SQS event "
                "source mappings that invoke it (max_concurrency 5 here; 5 in total over 1 mapping)"
            )
            + ".*throttle.*receive counts climb toward the dead-letter queue.*but 2 was given"
            + ".*Configuring scaling behavior for SQS event source mappings.*"
            + "effectively-once:reservedConcurrencyBelowMaxConcurrency"
        ),
    )


@pytest.mark.parametrize("path", ["EnoughReserved", "ReservedWithoutMax", "MaxWithoutReserved", "TokenReserved"])
def test_reserved_concurrency_at_least_max_concurrency_or_unset_is_clean(warnings: Annotations, path: str) -> None:
    assert _warnings_under(warnings, f"/Warn/{path}") == []


def test_warns_reserved_concurrency_below_ten_invokes_per_provisioned_poller(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/FewReservedPollers",
        Match.string_like_regexp(
            re.escape(
                "function reserved_concurrent_executions should be at least the maximum concurrency of the SQS event "
                "source mappings that invoke it (provisioned mode: 10 concurrent invokes per poller x maximum_pollers "
                "10 = 100 here; 100 in total over 1 mapping)"
            )
            + ".*but 50 was given.*each event poller.*10 concurrent invokes.*"
            + "effectively-once:reservedConcurrencyBelowMaxConcurrency"
        ),
    )


def test_warns_reserved_concurrency_below_the_default_maximum_pollers(warnings: Annotations) -> None:
    warnings.has_warning(
        "/Warn/DefaultMaxPollers",
        Match.string_like_regexp(
            re.escape("maximum_pollers 200 (unset: the default) = 2000 here") + ".*but 1000 was given"
        ),
    )


def test_warns_reserved_concurrency_below_on_demand_and_provisioned_mappings_together(warnings: Annotations) -> None:
    assert _warnings_under(warnings, "/Warn/MixedOnDemand") == []
    warnings.has_warning(
        "/Warn/MixedProvisioned",
        Match.string_like_regexp(re.escape("= 50 here; 60 in total over 2 mappings)") + ".*but 50 was given"),
    )


@pytest.mark.parametrize("path", ["EnoughReservedPollers", "TokenMaxPollers"])
def test_reserved_concurrency_covering_the_pollers_or_a_token_is_clean(warnings: Annotations, path: str) -> None:
    assert _warnings_under(warnings, f"/Warn/{path}") == []


def test_warns_reserved_concurrency_below_the_total_of_a_functions_mappings(warnings: Annotations) -> None:
    assert _warnings_under(warnings, "/Warn/SharedFirst") == []
    warnings.has_warning(
        "/Warn/SharedSecond",
        Match.string_like_regexp(
            re.escape("(max_concurrency 3 here; 6 in total over 2 mappings)") + ".*but 5 was given"
        ),
    )


# --- the library's defaults ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def defaults() -> Annotations:
    stack = new_stack(id="Defaults")
    PaymentProcessor(stack, "Standard")
    PaymentProcessor(stack, "Fifo", queue_options=ProcessingQueueOptions(fifo=True))
    _consumer(stack)
    _consumer(stack, id="FifoConsumer", queue={"fifo": True})
    return Annotations.from_stack(stack)


def test_defaults_produce_no_warning(defaults: Annotations) -> None:
    defaults.has_no_warning("*", Match.any_value())


def test_defaults_produce_no_error(defaults: Annotations) -> None:
    defaults.has_no_error("*", Match.any_value())


# --- wrong types and values the runtime would reject fail at synth, naming the prop ---------------------------------
def _wired(stack: Stack, **overrides: Any) -> IdempotentQueueConsumer:
    props: dict[str, Any] = {
        "queue": ProcessingQueue(stack, "Q"),
        "function": inline_function(stack, "Fn"),
        "table": IdempotencyTable(stack, "T"),
    }
    props.update(overrides)
    return IdempotentQueueConsumer(stack, "C", **props)


@pytest.mark.parametrize(
    ("make", "prop"),
    [
        (lambda s: {"queue": sqs.Queue(s, "Plain")}, "queue"),
        (lambda s: {"table": "idempotency"}, "table"),
        (lambda s: {"key_prefix": "a b"}, "key_prefix"),
        (lambda s: {"key_prefix": "orders\n"}, "key_prefix"),
        (lambda s: {"key_prefix": ""}, "key_prefix"),
        (lambda s: {"provisioned_poller_config": {"minimum_pollers": 2}}, "provisioned_poller_config"),
        (lambda s: {"event_source_mapping_metrics": "yes"}, "event_source_mapping_metrics"),
    ],
    ids=[
        "plain sqs.Queue",
        "table name string",
        "key prefix with a space",
        "key prefix with a newline",
        "empty prefix",
        "poller config as a dict",
        "metrics flag as a string",
    ],
)
def test_fails_consumer_prop_of_the_wrong_kind_naming_it(make: Any, prop: str) -> None:
    stack = new_stack()

    with pytest.raises(ValueError, match=rf"^{prop} must be"):
        _wired(stack, **make(stack))


def test_key_prefix_the_runtime_accepts_passes() -> None:
    _wired(new_stack(), key_prefix="shop/orders-v2")


def test_key_prefix_of_2015_bytes_passes() -> None:
    _wired(new_stack(), key_prefix="p" * 2015)


@pytest.mark.parametrize("key_prefix", ["p" * 2100, "\u00e9" * 1050], ids=["ascii", "two-byte characters"])
def test_fails_key_prefix_longer_than_a_partition_key_allows(key_prefix: str) -> None:
    with pytest.raises(ValueError) as raised:
        _wired(new_stack(), key_prefix=key_prefix)

    assert str(raised.value) == (
        "key_prefix must be at most 2015 bytes in UTF-8: every stored idempotency key is <key_prefix>#<32 hex "
        "characters of MD5>, and a DynamoDB partition key holds at most 2048 bytes, but a 2100-byte value was given "
        "(source: Amazon DynamoDB Developer Guide, Service, account, and table quotas in Amazon DynamoDB (partition "
        "key value length: 1 to 2048 bytes); Powertools for AWS Lambda (Python), Idempotency (key_prefix#hash))"
    )


@pytest.mark.parametrize(
    ("fields", "prop"),
    [
        ({"queue": None}, "ExistingQueue queue"),
        ({"visibility_timeout": 180}, "ExistingQueue visibility_timeout"),
        ({"retention_period": 345600}, "ExistingQueue retention_period"),
        ({"max_receive_count": "5"}, "ExistingQueue max_receive_count"),
        ({"dead_letter_queue": "arn:aws:sqs:us-east-1:123456789012:dlq"}, "ExistingQueue dead_letter_queue"),
    ],
    ids=["no queue", "visibility in seconds", "retention in seconds", "count as text", "dlq as an ARN"],
)
def test_fails_existing_queue_fact_of_the_wrong_type_naming_it(fields: dict[str, Any], prop: str) -> None:
    stack = new_stack()
    queue = sqs.Queue.from_queue_arn(stack, "Imported", "arn:aws:sqs:us-east-1:123456789012:orders")

    with pytest.raises(ValueError, match=rf"^{prop} must be"):
        ExistingQueue(**{"queue": queue, **fields})


@pytest.mark.parametrize("prop", ["fifo", "content_based_deduplication", "high_throughput"])
def test_fails_processing_queue_flag_that_is_not_a_bool(prop: str) -> None:
    with pytest.raises(ValueError, match=rf"^{prop} must be True or False, but 'yes' was given"):
        ProcessingQueue(new_stack(), "Q", **{prop: "yes"})


# --- integer props: a float, NaN, infinity, a bool or a string fails naming the prop; a token is skipped ---------
def _imported(stack: Stack, name: str) -> sqs.IQueue:
    return sqs.Queue.from_queue_arn(stack, name, f"arn:aws:sqs:us-east-1:123456789012:{name}")


def _existing(stack: Stack, count: Any) -> ExistingQueue:
    return ExistingQueue(
        queue=_imported(stack, "orders"), dead_letter_queue=_imported(stack, "orders-dlq"), max_receive_count=count
    )


#: Every integer prop of the library: (the prop as messages name it, the source they cite, a builder giving it v).
INTEGER_PROPS: list[tuple[str, str, Any]] = [
    ("batch_size", "BatchSize", lambda s, v: _consumer(s, batch_size=v)),
    ("max_concurrency", "ScalingConfig", lambda s, v: _consumer(s, max_concurrency=v)),
    (
        "provisioned_poller_config.minimum_pollers",
        "ProvisionedPollerConfig",
        lambda s, v: _consumer(s, **_pollers(minimum=v)),
    ),
    (
        "provisioned_poller_config.maximum_pollers",
        "ProvisionedPollerConfig",
        lambda s, v: _consumer(s, **_pollers(maximum=v)),
    ),
    ("max_receive_count", "Using dead-letter queues", lambda s, v: ProcessingQueue(s, "Q", max_receive_count=v)),
    ("ExistingQueue max_receive_count", "Using dead-letter queues", _existing),
    (
        "async_invocation.retry_attempts",
        "MaximumRetryAttempts",
        lambda s, v: _consumer(s, async_invocation=AsyncInvocationOptions(retry_attempts=v)),
    ),
    *(
        (
            f"alarm_thresholds.{name}",
            "PutMetricAlarm",
            lambda s, v, name=name: _consumer(s, alarm_thresholds=AlarmThresholds(**{name: v})),
        )
        for name in ("dlq_depth", "errors", "throttles", "failed_records")
    ),
    ("memory_size", "MemorySize", lambda s, v: PaymentProcessor(s, "Processor", memory_size=v)),
]
#: Not an int: each would otherwise be synthesized as is (2.5, 3.0, True), crash the jsii kernel (NaN, infinity:
#: JSONDecodeError) or fail a comparison with a TypeError.
NOT_INTEGERS = [2.5, 3.0, float("nan"), float("inf"), True, "3"]


@pytest.mark.parametrize(("prop", "source", "make"), INTEGER_PROPS, ids=[p[0] for p in INTEGER_PROPS])
@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_fails_integer_prop_that_is_not_an_int_naming_it(prop: str, source: str, make: Any, value: Any) -> None:
    if prop.startswith("provisioned_poller_config") and isinstance(value, str):
        pytest.skip("lambda.ProvisionedPollerConfig itself raises a TypeError for a string (jsii's type check)")
    with _raises(f"{prop} must be an int (", f"but {value!r} was given (source: ", source):
        make(new_stack(), value)


def test_integer_tokens_are_skipped_and_written_to_the_template() -> None:
    stack = new_stack()
    thresholds = {name: _token(stack, f"Threshold{name}") for name in ("dlq_depth", "errors", "throttles")}
    consumer = IdempotentQueueConsumer(
        stack,
        "Consumer",
        queue=_existing(stack, _token(stack, "Receives")),
        function=inline_function(stack, "Function", memory_size=_token(stack, "Memory")),
        table=IdempotencyTable(stack, "Table"),
        alarm_thresholds=AlarmThresholds(failed_records=_token(stack, "FailedRecords"), **thresholds),
        async_invocation=AsyncInvocationOptions(retry_attempts=_token(stack, "Retries")),
    )
    config = consumer.event_invoke_config.node.default_child  # type: ignore[union-attr]
    assert stack.resolve(config.maximum_retry_attempts) == {"Ref": "Retries"}  # type: ignore[union-attr]
    errors = consumer.errors_alarm.node.default_child  # type: ignore[union-attr]
    assert stack.resolve(errors.threshold) == {"Ref": "Thresholderrors"}  # type: ignore[union-attr]


def test_token_memory_size_is_skipped() -> None:
    stack = new_stack()
    processor = PaymentProcessor(stack, "Processor", memory_size=_token(stack, "Memory"))
    function = processor.function.node.default_child
    assert stack.resolve(function.memory_size) == {"Ref": "Memory"}  # type: ignore[union-attr]
