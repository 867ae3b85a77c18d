"""IdempotentEventConsumer (issue 23): the function's one event invoke config, its on-failure queue, the idempotency
settings and grants, the alarms; the deprecation of IdempotentQueueConsumer(async_invocation=...); cdk-nag, cfn-lint
and a snapshot of the test stack."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import cfnlint.api
import pytest
from aws_cdk import Acknowledgment, App, Duration, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from syrupy.extensions.json import JSONSnapshotExtension

from effectively_once import (
    AsyncInvocationOptions,
    EventAlarmThresholds,
    IdempotencyTable,
    IdempotentEventConsumer,
    IdempotentQueueConsumer,
    ProcessingQueue,
)
from effectively_once._environment_size import function_variables
from effectively_once.limits import IDEMPOTENCY_TABLE_ACTIONS
from effectively_once.queue_consumer import ASYNC_INVOCATION_DEPRECATION
from effectively_once.testing import snapshot_template

from .helpers import (
    CONTEXT,
    ENV,
    acknowledged_rules,
    actions_by_resource,
    find_one,
    function_role,
    inline_function,
    new_stack,
    role_statements,
    user_function,
)

DAY = 24 * 3600
#: The default redrive horizon: the on-failure queue's 14 days plus Lambda's 6-hour maximum event age.
DEFAULT_EXPIRY = 14 * DAY + 6 * 3600
IMPORTED_ARN = "arn:aws:lambda:us-east-1:123456789012:function:payments"
TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:alarms"
CDK_SEND = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Stack ``Events``, synthesized once with both cdk-nag packs as validation plugins (a finding fails the synth)."""
    outdir = tmp_path_factory.mktemp("events")
    app = App(context=CONTEXT, outdir=str(outdir), builtin_cloud_formation_validation=False)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    stack = Stack(app, "Events", env=ENV)
    table = IdempotencyTable(stack, "Table")
    wired = {
        "default": IdempotentEventConsumer(stack, "Events", function=user_function(stack, "Function"), table=table)
    }
    given = sqs.Queue(
        stack,
        "GivenQueue",
        retention_period=Duration.days(4),
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
    )
    Validations.of(given.node.default_child).acknowledge(  # type: ignore[arg-type]
        *(
            _ack(rule, "The test's own on-failure queue: a destination of last resort, consumed by redrive only.")
            for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy")
        )
    )
    wired["given"] = IdempotentEventConsumer(
        stack,
        "GivenEvents",
        function=user_function(stack, "GivenFunction"),
        table=table,
        retry_attempts=0,
        max_event_age=Duration.hours(1),
        on_failure_queue=given,
        key_prefix="shop/payments",
        metrics_namespace="Shop",
        service_name="orders",
        alarms=False,
        log_group=logs.LogGroup(stack, "QueryLogGroup", retention=logs.RetentionDays.ONE_WEEK),
        direct_invocations_async=True,
    )
    # The same payments by SQS and by EventBridge: one function, one table, one record per business key.
    shared = user_function(stack, "SharedFunction")
    wired["queue"] = IdempotentQueueConsumer(
        stack, "SharedQueueConsumer", queue=ProcessingQueue(stack, "SharedQueue"), function=shared, table=table
    )
    wired["shared"] = IdempotentEventConsumer(stack, "SharedEvents", function=shared, table=table)
    # Canary: a bare queue both packs must flag, so a gate that silently stopped running fails.
    sqs.Queue(Stack(app, "Canary", env=ENV), "BareQueue")
    with pytest.raises(RuntimeError, match="validation-report.json"):
        app.synth()
    return {
        "app": app,
        "stack": stack,
        "template": Template.from_json(json.loads((outdir / "Events.template.json").read_text())),
        "report": json.loads((outdir / "validation-report.json").read_text()),
        "wired": wired,
        "table": table,
        "given": given,
    }


def _ack(rule: str, reason: str) -> Acknowledgment:
    return Acknowledgment(id=rule, reason=reason)


def _id(stack: Stack, token: str) -> str:
    resolved = stack.resolve(token)
    return str(resolved.get("Ref") or resolved["Fn::GetAtt"][0])


def _config(synth: dict, name: str) -> dict[str, Any]:
    consumer = synth["wired"][name]
    return find_one(
        synth["template"],
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": synth["stack"].resolve(consumer.function.function_name)},
    )[1]


def _environment(synth: dict, name: str) -> dict[str, Any]:
    function_id = _id(synth["stack"], synth["wired"][name].function.function_name)
    return synth["template"].to_json()["Resources"][function_id]["Properties"]["Environment"]["Variables"]


# --- the event invoke config and its destination ------------------------------------------------------------------
def test_config_defaults_to_two_retries_six_hours_and_the_new_on_failure_queue(synth: dict) -> None:
    stack: Stack = synth["stack"]
    consumer = synth["wired"]["default"]
    assert _config(synth, "default")["Properties"] == {
        "FunctionName": stack.resolve(consumer.function.function_name),
        "Qualifier": "$LATEST",
        "MaximumRetryAttempts": 2,
        "MaximumEventAgeInSeconds": 6 * 3600,
        "DestinationConfig": {"OnFailure": {"Destination": stack.resolve(consumer.on_failure_queue.queue_arn)}},
    }
    assert consumer.on_failure_queue.node.path == "Events/Events/OnFailureQueue"
    assert (consumer.retry_attempts, consumer.max_event_age.to_seconds()) == (2, 6 * 3600)


def test_config_takes_the_given_retries_event_age_and_queue(synth: dict) -> None:
    props = _config(synth, "given")["Properties"]
    assert (props["MaximumRetryAttempts"], props["MaximumEventAgeInSeconds"]) == (0, 3600)
    assert props["DestinationConfig"]["OnFailure"]["Destination"] == synth["stack"].resolve(synth["given"].queue_arn)
    assert synth["wired"]["given"].on_failure_queue is synth["given"]


def test_config_waits_for_the_role_policy(synth: dict) -> None:
    template: Template = synth["template"]
    role = function_role(template, _id(synth["stack"], synth["wired"]["default"].function.function_name))
    policy_id = find_one(template, "AWS::IAM::Policy", {"Roles": [{"Ref": role}]})[0]
    assert policy_id in _config(synth, "default")["DependsOn"]


def test_on_failure_queue_is_standard_encrypted_retained_and_kept_fourteen_days(synth: dict) -> None:
    stack: Stack = synth["stack"]
    resources = synth["template"].to_json()["Resources"]
    queue = resources[_id(stack, synth["wired"]["default"].on_failure_queue.queue_arn)]
    assert queue["Properties"] == {"MessageRetentionPeriod": 14 * DAY, "SqsManagedSseEnabled": True}
    assert queue["DeletionPolicy"] == queue["UpdateReplacePolicy"] == "Retain"


def test_on_failure_queue_denies_requests_without_tls(synth: dict) -> None:
    queue_id = _id(synth["stack"], synth["wired"]["default"].on_failure_queue.queue_arn)
    policy = find_one(synth["template"], "AWS::SQS::QueuePolicy", {"Queues": [{"Ref": queue_id}]})[1]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_a_given_queue_is_used_as_it_is(synth: dict) -> None:
    # The default's and the shared function's on-failure queues, the given one, the shared queue and its DLQ.
    synth["template"].resource_count_is("AWS::SQS::Queue", 5)
    assert not any(c.node.id == "OnFailureQueue" for c in synth["wired"]["given"].node.children)


# --- grants and environment -------------------------------------------------------------------------------------
def test_role_gets_exactly_the_table_the_destination_and_its_log_group(synth: dict) -> None:
    stack: Stack = synth["stack"]
    template: Template = synth["template"]
    consumer = synth["wired"]["given"]
    role = function_role(template, _id(stack, consumer.function.function_name))
    assert actions_by_resource(role_statements(template, role)) == {
        _id(stack, synth["table"].table.table_arn): set(IDEMPOTENCY_TABLE_ACTIONS),
        _id(stack, synth["given"].queue_arn): CDK_SEND,
        _id(stack, consumer.function.log_group.log_group_arn): {"logs:CreateLogStream", "logs:PutLogEvents"},
    }


def test_environment_carries_table_arn_and_the_redrive_horizon_as_expiry(synth: dict) -> None:
    default = synth["wired"]["default"]
    assert _environment(synth, "default") == {
        "IDEMPOTENCY_TABLE_NAME": synth["stack"].resolve(synth["table"].table.table_arn),
        "IDEMPOTENCY_EXPIRY_SECONDS": str(DEFAULT_EXPIRY),
        "ON_FAILURE_QUEUE_URL": synth["stack"].resolve(default.on_failure_queue.queue_url),
    }
    assert default.idempotency_expiry.to_seconds() == DEFAULT_EXPIRY
    assert default.direct_invocations_async is False


def test_the_runtime_gets_the_given_on_failure_queue_and_direct_invocations_when_asked(synth: dict) -> None:
    env = _environment(synth, "given")
    assert env["ON_FAILURE_QUEUE_URL"] == synth["stack"].resolve(synth["given"].queue_url)
    assert env["ON_FAILURE_DIRECT"] == "true" and synth["wired"]["given"].direct_invocations_async is True
    assert "ON_FAILURE_DIRECT" not in _environment(synth, "default")


def test_expiry_follows_a_given_queues_retention_and_event_age(synth: dict) -> None:
    env = _environment(synth, "given")
    assert env["IDEMPOTENCY_EXPIRY_SECONDS"] == str(4 * DAY + 3600)
    assert (env["IDEMPOTENCY_KEY_PREFIX"], env["POWERTOOLS_METRICS_NAMESPACE"], env["POWERTOOLS_SERVICE_NAME"]) == (
        "shop/payments",
        "Shop",
        "orders",
    )
    assert "DEAD_LETTER_QUEUE_URL" not in env


def test_a_function_with_a_queue_consumer_keeps_the_longer_expiry_and_one_config(synth: dict) -> None:
    env = _environment(synth, "shared")
    # The queue consumer's 4 days (its queue's retention) gave way to the redrive horizon; its DLQ URL stays.
    assert env["IDEMPOTENCY_EXPIRY_SECONDS"] == str(DEFAULT_EXPIRY)
    assert env["DEAD_LETTER_QUEUE_URL"] == synth["stack"].resolve(synth["wired"]["queue"].dead_letter_queue.queue_url)
    assert env["ON_FAILURE_QUEUE_URL"] == synth["stack"].resolve(synth["wired"]["shared"].on_failure_queue.queue_url)
    synth["template"].resource_count_is("AWS::Lambda::EventInvokeConfig", 3)


def test_the_function_dead_letter_finding_is_acknowledged_with_the_destination(synth: dict) -> None:
    assert ("Events/Function/Resource", "Serverless-LambdaDLQ") in acknowledged_rules(synth["app"])


# --- alarms, metrics, widgets, queries ----------------------------------------------------------------------------
ALARMS = {
    "on_failure_depth_alarm": ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 0),
    "on_failure_age_alarm": ("AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum", DAY),
    "async_events_dropped_alarm": ("AWS/Lambda", "AsyncEventsDropped", "Sum", 0),
    "async_event_age_alarm": ("AWS/Lambda", "AsyncEventAge", "Maximum", 5 * 60 * 1000),
    "destination_delivery_failures_alarm": ("AWS/Lambda", "DestinationDeliveryFailures", "Sum", 0),
}


@pytest.mark.parametrize("attribute", sorted(ALARMS))
def test_alarm_reads_its_metric_above_the_default_threshold(synth: dict, attribute: str) -> None:
    stack: Stack = synth["stack"]
    consumer = synth["wired"]["default"]
    namespace, metric, statistic, threshold = ALARMS[attribute]
    props = synth["template"].to_json()["Resources"][_id(stack, getattr(consumer, attribute).alarm_arn)]["Properties"]
    assert (props["Namespace"], props["MetricName"], props["Statistic"], props["Threshold"]) == (
        namespace,
        metric,
        statistic,
        threshold,
    )
    assert (props["Period"], props["EvaluationPeriods"], props["TreatMissingData"]) == (60, 1, "notBreaching")
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    dimension = {"AWS/SQS": consumer.on_failure_queue.queue_name, "AWS/Lambda": consumer.function.function_name}
    assert [stack.resolve(d["Value"]) for d in props["Dimensions"]] == [stack.resolve(dimension[namespace])]


def test_alarms_off_creates_none(synth: dict) -> None:
    consumer = synth["wired"]["given"]
    assert [getattr(consumer, attribute) for attribute in sorted(ALARMS)] == [None] * 5
    assert not [c for c in consumer.node.find_all() if isinstance(c, cloudwatch.CfnAlarm)]


def test_alarm_thresholds_and_action_are_props() -> None:
    stack = new_stack()
    topic = sns.Topic.from_topic_arn(stack, "Alarms", TOPIC_ARN)
    consumer = IdempotentEventConsumer(
        stack,
        "E",
        function=inline_function(stack, "F"),
        table=IdempotencyTable(stack, "T"),
        alarm_action=cloudwatch_actions.SnsAction(topic),
        alarm_thresholds=EventAlarmThresholds(on_failure_depth=3, async_event_age=Duration.seconds(90)),
    )
    depth, age = (c.node.default_child for c in (consumer.on_failure_depth_alarm, consumer.async_event_age_alarm))
    assert (stack.resolve(depth.threshold), stack.resolve(age.threshold)) == (3, 90_000)  # type: ignore[union-attr]
    assert stack.resolve(depth.alarm_actions) == [TOPIC_ARN]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("method", "namespace", "metric", "statistic"),
    [
        ("metric_async_events_received", "AWS/Lambda", "AsyncEventsReceived", "Sum"),
        ("metric_async_event_age", "AWS/Lambda", "AsyncEventAge", "Maximum"),
        ("metric_async_events_dropped", "AWS/Lambda", "AsyncEventsDropped", "Sum"),
        ("metric_destination_delivery_failures", "AWS/Lambda", "DestinationDeliveryFailures", "Sum"),
        (
            "metric_on_failure_approximate_number_of_messages_visible",
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "Maximum",
        ),
        ("metric_on_failure_approximate_age_of_oldest_message", "AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum"),
    ],
)
def test_metric_methods_are_named_after_their_metric(
    synth: dict, method: str, namespace: str, metric: str, statistic: str
) -> None:
    found = getattr(synth["wired"]["default"], method)()
    assert (found.namespace, found.metric_name, found.statistic, found.period.to_seconds()) == (
        namespace,
        metric,
        statistic,
        60,
    )
    assert getattr(synth["wired"]["default"], method)(statistic="Average").statistic == "Average"


def test_dashboard_widgets_graph_every_metric(synth: dict) -> None:
    stack: Stack = synth["stack"]
    widgets = synth["wired"]["default"].dashboard_widgets()
    rendered = json.dumps(stack.resolve([widget.to_json() for widget in widgets]))
    assert len(widgets) == 4 and sum(widget.width for widget in widgets) == 24
    for metric in (
        "AsyncEventsReceived",
        "AsyncEventsDropped",
        "AsyncEventAge",
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "DestinationDeliveryFailures",
    ):
        assert f'"{metric}"' in rendered, metric


def test_query_definitions_only_with_a_log_group(synth: dict) -> None:
    assert synth["wired"]["given"].effects_per_key_query is not None
    assert synth["wired"]["default"].effects_per_key_query is None


# --- the one config per function, and the checks ------------------------------------------------------------------
def _event_consumer(stack: Stack, **props: Any) -> IdempotentEventConsumer:
    defaults: dict[str, Any] = {"function": inline_function(stack, "Fn"), "table": IdempotencyTable(stack, "T")}
    return IdempotentEventConsumer(stack, "Events", **{**defaults, **props})


@pytest.mark.parametrize("attempts", [3, -1])
def test_fails_retry_attempts_outside_zero_to_two(attempts: int) -> None:
    with pytest.raises(ValueError, match=rf"retry_attempts must be between 0 and 2, but {attempts} was given"):
        _event_consumer(new_stack(), retry_attempts=attempts)


def test_fails_direct_invocations_async_that_is_not_a_bool() -> None:
    stack = new_stack()
    with pytest.raises(ValueError, match="direct_invocations_async must be a bool"):
        _event_consumer(stack, direct_invocations_async="yes")


def test_fails_retry_attempts_that_are_not_an_int() -> None:
    with pytest.raises(ValueError, match=r"retry_attempts must be an int .*but 1.0 was given"):
        _event_consumer(new_stack(), retry_attempts=1.0)


@pytest.mark.parametrize("age", [Duration.seconds(59), Duration.seconds(6 * 3600 + 1)])
def test_fails_max_event_age_outside_a_minute_to_six_hours(age: Duration) -> None:
    with pytest.raises(
        ValueError, match=r"max_event_age must be between 60 and 21600 seconds.*Configuring error handling"
    ):
        _event_consumer(new_stack(), max_event_age=age)


def test_fails_a_fifo_on_failure_queue() -> None:
    stack = new_stack()
    fifo = sqs.Queue(stack, "Fifo", fifo=True)
    with pytest.raises(ValueError, match=r"on_failure_queue must be a standard SQS queue .*but 'Test/Fifo' was given"):
        _event_consumer(stack, on_failure_queue=fifo)


def test_fails_an_on_failure_queue_that_is_no_queue() -> None:
    stack = new_stack()
    with pytest.raises(ValueError, match=r"on_failure_queue must be an sqs.IQueue .*but <.*ProcessingQueue"):
        _event_consumer(stack, on_failure_queue=ProcessingQueue(stack, "Q"))


def test_imported_function_with_its_role_gets_the_config_and_the_grants() -> None:
    stack = new_stack()
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/payments")
    imported = lambda_.Function.from_function_attributes(stack, "Imported", function_arn=IMPORTED_ARN, role=role)
    _event_consumer(stack, function=imported)
    template = Template.from_stack(stack)
    assert find_one(template, "AWS::Lambda::EventInvokeConfig")[1]["Properties"]["FunctionName"] == "payments"
    granted = actions_by_resource(role_statements(template, "payments"))
    assert set(IDEMPOTENCY_TABLE_ACTIONS) in granted.values() and CDK_SEND in granted.values()


def test_fails_an_imported_function_without_its_role() -> None:
    stack = new_stack()
    imported = lambda_.Function.from_function_arn(stack, "Imported", IMPORTED_ARN)
    with pytest.raises(ValueError, match=r"function must have its execution role: .*from_function_attributes"):
        _event_consumer(stack, function=imported)


def test_fails_a_second_event_consumer_on_one_function_naming_it() -> None:
    stack = new_stack()
    first = _event_consumer(stack)
    with pytest.raises(
        ValueError,
        match=r"function must have one event invoke config for \$LATEST.*but function Test/Fn, which has the event "
        r"invoke config Test/Events/EventInvokeConfig/Resource, was given",
    ):
        IdempotentEventConsumer(stack, "Again", function=first.function, table=first.table)


def test_fails_an_event_consumer_after_a_deprecated_async_invocation_on_one_function() -> None:
    stack = new_stack()
    queue_consumer = _queue_consumer(stack, async_invocation=AsyncInvocationOptions())
    with pytest.raises(ValueError, match=r"one event invoke config .*Test/Consumer/EventInvokeConfig/Resource"):
        IdempotentEventConsumer(stack, "Events", function=queue_consumer.function, table=queue_consumer.table)


def test_fails_a_deprecated_async_invocation_after_an_event_consumer_on_one_function() -> None:
    stack = new_stack()
    events = _event_consumer(stack)
    with pytest.raises(ValueError, match=r"one event invoke config .*Test/Events/EventInvokeConfig/Resource"):
        _queue_consumer(stack, function=events.function, table=events.table, async_invocation=AsyncInvocationOptions())


def test_fails_at_synth_when_a_config_is_added_to_the_function_later() -> None:
    stack = new_stack()
    events = _event_consumer(stack)
    events.function.configure_async_invoke(retry_attempts=0)
    with pytest.raises(RuntimeError, match=r"Test/Fn/EventInvokeConfig/Resource"):
        Template.from_stack(stack)


def test_fails_another_table_or_key_prefix_already_on_the_function() -> None:
    stack = new_stack()
    queue_consumer = _queue_consumer(stack, key_prefix="shop/queued")
    with pytest.raises(ValueError, match=r"IDEMPOTENCY_TABLE_NAME of function Test/Fn .*set by another construct"):
        IdempotentEventConsumer(stack, "E1", function=queue_consumer.function, table=IdempotencyTable(stack, "T2"))
    with pytest.raises(ValueError, match=r"IDEMPOTENCY_KEY_PREFIX of function Test/Fn .*'shop/events'"):
        IdempotentEventConsumer(
            stack, "E2", function=queue_consumer.function, table=queue_consumer.table, key_prefix="shop/events"
        )


def test_fails_a_function_of_another_stack() -> None:
    stack = new_stack()
    other = new_stack(stack.node.root, "Other")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"scope of IdempotentEventConsumer Other/Events must be in the stack"):
        IdempotentEventConsumer(
            other, "Events", function=inline_function(stack, "Fn"), table=IdempotencyTable(other, "T")
        )


def _queue_consumer(stack: Stack, **props: Any) -> IdempotentQueueConsumer:
    defaults: dict[str, Any] = {
        "queue": ProcessingQueue(stack, "Queue"),
        "function": props.get("function") or inline_function(stack, "Fn"),
        "table": props.get("table") or IdempotencyTable(stack, "T"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return IdempotentQueueConsumer(stack, "Consumer", **{**defaults, **props})


# --- warnings: the expiry, and the deprecation -----------------------------------------------------------------------
def _warnings(stack: Stack, path: str) -> list[str]:
    return [str(w.entry.data) for w in Annotations.from_stack(stack).find_warning(path, Match.any_value())]


def test_warns_an_expiry_shorter_than_the_redrive_horizon() -> None:
    stack = new_stack()
    _event_consumer(stack, idempotency_expiry=Duration.days(14))
    (found,) = _warnings(stack, "/Test/Events")
    assert re.search(
        r"idempotency_expiry should be at least the on-failure queue's retention plus max_event_age \(.*\).*charges, "
        r"twice.*but 14 days was given.*effectively-once:eventIdempotencyExpiryBelowRedriveHorizon",
        found,
    ), found


def test_an_expiry_of_the_horizon_or_more_and_the_default_are_clean() -> None:
    stack = new_stack()
    _event_consumer(stack, idempotency_expiry=Duration.seconds(DEFAULT_EXPIRY))
    assert _warnings(stack, "/Test/Events") == []
    other = new_stack()
    _event_consumer(other)
    assert _warnings(other, "*") == []


def test_warns_at_synth_when_a_later_queue_consumer_shortens_the_expiry() -> None:
    stack = new_stack()
    events = _event_consumer(stack)
    _queue_consumer(stack, function=events.function, table=events.table)
    (found,) = _warnings(stack, "/Test/Events")
    assert "IDEMPOTENCY_EXPIRY_SECONDS of function Test/Fn (set by another construct) should be at least" in found
    assert "but 4 days was given" in found


def test_async_invocation_on_a_queue_consumer_is_deprecated_in_python_and_at_synth() -> None:
    stack = new_stack()
    with pytest.warns(DeprecationWarning) as caught:
        IdempotentQueueConsumer(
            stack,
            "Consumer",
            queue=ProcessingQueue(stack, "Queue"),
            function=inline_function(stack, "Fn"),
            table=IdempotencyTable(stack, "T"),
            async_invocation=AsyncInvocationOptions(),
        )
    (deprecation,) = [w for w in caught if "async_invocation" in str(w.message)]
    assert str(deprecation.message) == ASYNC_INVOCATION_DEPRECATION
    consumer = stack.node.find_child("Consumer")
    variables = function_variables(consumer.function)
    # The same shape as IdempotentEventConsumer: the runtime records a refused event on the on-failure queue.
    assert variables["ON_FAILURE_QUEUE_URL"] == stack.resolve(consumer.on_failure_queue.queue_url)
    assert deprecation.filename == __file__  # the line that built the consumer
    assert "removed in 0.4.0: use IdempotentEventConsumer(" in ASYNC_INVOCATION_DEPRECATION
    (found,) = _warnings(stack, "/Test/Consumer")
    assert found.startswith(ASYNC_INVOCATION_DEPRECATION) and "asyncInvocationDeprecated" in found


def test_a_queue_consumer_without_async_invocation_is_not_deprecated() -> None:
    stack = new_stack()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        _queue_consumer(stack)
    assert _warnings(stack, "/Test/Consumer") == []


# --- compliance and snapshot -------------------------------------------------------------------------------------
def test_cdk_nag_ran_and_found_nothing_but_the_canary(synth: dict) -> None:
    findings = sorted(
        f"{violation['ruleName']} at {construct['constructPath']}"
        for plugin in synth["report"]["pluginReports"]
        for violation in plugin.get("violations", [])
        for construct in violation["violatingConstructs"]
    )
    assert findings == [
        "AwsSolutions-SQS3 at Canary/BareQueue/Resource",
        "AwsSolutions-SQS4 at Canary/BareQueue/Resource",
        "Serverless-SQSRedrivePolicy at Canary/BareQueue/Resource",
    ]


def test_cfn_lint_finds_nothing_but_w3005(synth: dict) -> None:
    template = json.dumps(synth["template"].to_json())
    assert [str(m) for m in cfnlint.api.lint(template, regions=[ENV.region]) if m.rule.id != "W3005"] == []


def test_snapshot(synth: dict, snapshot: Any) -> None:
    assert snapshot_template(synth["template"]) == snapshot.use_extension(JSONSnapshotExtension)
