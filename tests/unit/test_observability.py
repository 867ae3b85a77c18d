"""Observability: the consumer's alarms, the query definitions, the processor's dashboard, the async path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from effectively_once import (
    AlarmThresholds,
    AsyncInvocationOptions,
    IdempotencyTable,
    IdempotentQueueConsumer,
    IdempotentQueueConsumerOptions,
    PaymentProcessor,
    ProcessingQueue,
)
from effectively_once.observability import (
    DUPLICATE_DELIVERIES_QUERY,
    EFFECTS_PER_KEY_QUERY,
    FAILED_RECORDS_METRIC,
    IDEMPOTENCY_REJECTIONS_QUERY,
)
from effectively_once_runtime import names

from .helpers import actions_by_resource, function_role, inline_function, new_stack, role_statements


@pytest.fixture(scope="module")
def synth() -> dict[str, Any]:
    stack = new_stack()
    table = IdempotencyTable(stack, "Table")
    wired: dict[str, Any] = {}
    # defaults: alarms on, log group taken from the function, async path with a new on-failure queue
    log_group = logs.LogGroup(stack, "LogGroup")
    wired["defaults"] = IdempotentQueueConsumer(
        stack,
        "Consumer",
        queue=ProcessingQueue(stack, "Queue"),
        table=table,
        function=inline_function(stack, "Function", log_group=log_group),
        async_invocation=AsyncInvocationOptions(),
    )
    # overrides: an SNS action, other thresholds, a log group given as a prop, a given on-failure queue
    topic = sns.Topic(stack, "Topic")
    explicit_group = logs.LogGroup(stack, "ExplicitLogGroup")
    given_queue = sqs.Queue(stack, "GivenOnFailure")
    wired["overrides"] = IdempotentQueueConsumer(
        stack,
        "Overridden",
        queue=ProcessingQueue(stack, "Queue2"),
        table=table,
        function=inline_function(stack, "Function2"),
        alarm_action=cloudwatch_actions.SnsAction(topic),
        alarm_thresholds=AlarmThresholds(
            dlq_depth=3, oldest_message_age=Duration.minutes(15), errors=2, throttles=4, failed_records=25
        ),
        log_group=explicit_group,
        metrics_namespace="Orders",
        service_name="orders",
        async_invocation=AsyncInvocationOptions(
            retry_attempts=0, max_event_age=Duration.seconds(60), on_failure=given_queue
        ),
    )
    # alarms off, a function without its own log group, no async path
    wired["bare"] = IdempotentQueueConsumer(
        stack,
        "Bare",
        queue=ProcessingQueue(stack, "Queue3"),
        table=table,
        function=inline_function(stack, "Function3"),
        alarms=False,
    )
    wired["processor"] = PaymentProcessor(stack, "Processor", service_name="shop", metrics_namespace="Shop")
    return {
        "stack": stack,
        "template": Template.from_stack(stack),
        "wired": wired,
        "topic": topic,
        "explicit_group": explicit_group,
        "given_queue": given_queue,
    }


def _ref(synth: dict, token: str) -> Any:
    return synth["stack"].resolve(token)


def _logical_id(synth: dict, token: str) -> str:
    resolved = _ref(synth, token)
    return resolved.get("Ref") or resolved["Fn::GetAtt"][0]


def _props(synth: dict, token: str) -> dict[str, Any]:
    return synth["template"].to_json()["Resources"][_logical_id(synth, token)]["Properties"]


def _alarm(synth: dict, name: str, attribute: str) -> dict[str, Any]:
    return _props(synth, getattr(synth["wired"][name], attribute).alarm_arn)


def _queue_name_dimension(synth: dict, queue: sqs.IQueue) -> list[dict[str, Any]]:
    return [{"Name": "QueueName", "Value": _ref(synth, queue.queue_name)}]


# --- alarms ------------------------------------------------------------------------------------------------
ALARMS = ("dlq_depth_alarm", "oldest_message_age_alarm", "errors_alarm", "throttles_alarm", "failed_records_alarm")


def test_dlq_depth_alarm_fires_on_any_message_in_the_dead_letter_queue(synth: dict) -> None:
    alarm = _alarm(synth, "defaults", "dlq_depth_alarm")
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == _queue_name_dimension(synth, synth["wired"]["defaults"].dead_letter_queue)
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["Statistic"]) == (
        0,
        "GreaterThanThreshold",
        "Maximum",
    )


def test_oldest_message_age_alarm_defaults_to_five_minutes_on_the_source_queue(synth: dict) -> None:
    alarm = _alarm(synth, "defaults", "oldest_message_age_alarm")
    assert alarm["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert alarm["Dimensions"] == _queue_name_dimension(synth, synth["wired"]["defaults"].queue)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (300, "GreaterThanThreshold")


@pytest.mark.parametrize(("attribute", "metric"), [("errors_alarm", "Errors"), ("throttles_alarm", "Throttles")])
def test_function_alarms_fire_on_any_error_or_throttle(synth: dict, attribute: str, metric: str) -> None:
    alarm = _alarm(synth, "defaults", attribute)
    function = synth["wired"]["defaults"].function
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Lambda", metric, "Sum")
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": _ref(synth, function.function_name)}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")


def test_failed_records_alarm_fires_on_five_minutes_of_more_than_ten_failed_records_a_minute(synth: dict) -> None:
    alarm = _alarm(synth, "defaults", "failed_records_alarm")
    assert FAILED_RECORDS_METRIC == "FailedRecords"
    # The runtime's default namespace and service (no metrics_namespace / service_name given).
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("EffectivelyOnce", "FailedRecords", "Sum")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "payments"}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (10, "GreaterThanThreshold")
    assert (alarm["Period"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (60, 5, 5)
    assert alarm["TreatMissingData"] == "notBreaching"


def test_given_namespace_and_service_are_set_on_the_function_and_read_by_the_failed_records_alarm(synth: dict) -> None:
    alarm = _alarm(synth, "overrides", "failed_records_alarm")
    assert (alarm["Namespace"], alarm["Dimensions"]) == ("Orders", [{"Name": "service", "Value": "orders"}])
    variables = _props(synth, synth["wired"]["overrides"].function.function_arn)["Environment"]["Variables"]
    assert (variables["POWERTOOLS_METRICS_NAMESPACE"], variables["POWERTOOLS_SERVICE_NAME"]) == ("Orders", "orders")


def test_namespace_and_service_left_unset_are_not_written_to_the_function(synth: dict) -> None:
    variables = _props(synth, synth["wired"]["defaults"].function.function_arn)["Environment"]["Variables"]
    assert not {"POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_SERVICE_NAME"} & set(variables)


def test_processor_failed_records_alarm_reads_its_namespace_and_service(synth: dict) -> None:
    alarm = _props(synth, synth["wired"]["processor"].consumer.failed_records_alarm.alarm_arn)
    assert (alarm["Namespace"], alarm["MetricName"]) == ("Shop", FAILED_RECORDS_METRIC)
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "shop"}]


def test_alarms_evaluate_one_minute_and_treat_missing_data_as_not_breaching(synth: dict) -> None:
    for attribute in ALARMS:
        alarm = _alarm(synth, "defaults", attribute)
        assert (alarm["Period"], alarm["TreatMissingData"]) == (60, "notBreaching")
        if attribute != "failed_records_alarm":
            assert alarm["EvaluationPeriods"] == 1
        assert "AlarmActions" not in alarm


def test_alarm_action_is_added_to_every_alarm(synth: dict) -> None:
    for attribute in ALARMS:
        assert _alarm(synth, "overrides", attribute)["AlarmActions"] == [_ref(synth, synth["topic"].topic_arn)]


def test_alarm_thresholds_can_be_overridden(synth: dict) -> None:
    thresholds = {attribute: _alarm(synth, "overrides", attribute)["Threshold"] for attribute in ALARMS}
    assert thresholds == {
        "dlq_depth_alarm": 3,
        "oldest_message_age_alarm": 900,
        "errors_alarm": 2,
        "throttles_alarm": 4,
        "failed_records_alarm": 25,
    }


def test_alarms_off_creates_no_alarm(synth: dict) -> None:
    bare = synth["wired"]["bare"]
    assert [getattr(bare, attribute) for attribute in ALARMS] == [None] * 5
    # 5 (defaults) + 5 (overrides) + 5 (processor)
    synth["template"].resource_count_is("AWS::CloudWatch::Alarm", 15)


def test_processor_exposes_its_consumers_alarms(synth: dict) -> None:
    consumer = synth["wired"]["processor"].consumer
    assert _props(synth, consumer.dlq_depth_alarm.alarm_arn)["Dimensions"] == _queue_name_dimension(
        synth, synth["wired"]["processor"].queue.dead_letter_queue
    )


# --- query definitions -------------------------------------------------------------------------------------
def _queries_on(synth: dict, log_group: logs.ILogGroup) -> list[dict[str, Any]]:
    found = synth["template"].find_resources(
        "AWS::Logs::QueryDefinition", {"Properties": {"LogGroupNames": [_ref(synth, log_group.log_group_name)]}}
    )
    return sorted((r["Properties"] for r in found.values()), key=lambda p: p["QueryString"])


def test_query_definitions_point_at_the_functions_own_log_group(synth: dict) -> None:
    consumer = synth["wired"]["defaults"]
    queries = _queries_on(synth, consumer.function.log_group)
    assert [q["QueryString"] for q in queries] == sorted(
        [DUPLICATE_DELIVERIES_QUERY, IDEMPOTENCY_REJECTIONS_QUERY, EFFECTS_PER_KEY_QUERY]
    )
    assert _props(synth, consumer.effects_per_key_query.ref)["QueryString"] == EFFECTS_PER_KEY_QUERY
    assert _props(synth, consumer.duplicate_deliveries_query.ref)["QueryString"] == DUPLICATE_DELIVERIES_QUERY


def test_processor_queries_read_the_stack_created_log_group(synth: dict) -> None:
    processor = synth["wired"]["processor"]
    assert processor.consumer.log_group is processor.log_group
    assert len(_queries_on(synth, processor.log_group)) == 3


def test_log_group_prop_is_the_one_the_queries_read(synth: dict) -> None:
    assert len(_queries_on(synth, synth["explicit_group"])) == 3


def test_no_log_group_means_no_query_definitions(synth: dict) -> None:
    bare = synth["wired"]["bare"]
    assert (bare.duplicate_deliveries_query, bare.idempotency_rejections_query, bare.effects_per_key_query) == (
        None,
        None,
        None,
    )
    synth["template"].resource_count_is("AWS::Logs::QueryDefinition", 9)


def test_effects_per_key_query_counts_the_runtimes_effect_line_per_key_seen_more_than_once() -> None:
    assert f'filter {names.FIELD_MESSAGE} = "{names.EFFECT_EXECUTED}"' in EFFECTS_PER_KEY_QUERY
    assert f"by {names.FIELD_IDEMPOTENCY_KEY}" in EFFECTS_PER_KEY_QUERY
    assert "filter effects > 1" in EFFECTS_PER_KEY_QUERY


def test_duplicate_query_counts_outcomes_per_correlation_id_seen_more_than_once() -> None:
    assert "by correlation_id" in DUPLICATE_DELIVERIES_QUERY
    assert "filter deliveries > 1" in DUPLICATE_DELIVERIES_QUERY


def test_query_names_are_unique_per_consumer(synth: dict) -> None:
    names = [r["Properties"]["Name"] for r in synth["template"].find_resources("AWS::Logs::QueryDefinition").values()]
    assert len(set(names)) == len(names) == 9


# --- dashboard ---------------------------------------------------------------------------------------------
def _dashboard_body(synth: dict, name: str = "processor") -> str:
    dashboard = synth["wired"][name].dashboard
    resources = synth["template"].to_json()["Resources"]
    return json.dumps(resources[_logical_id(synth, dashboard.dashboard_name)]["Properties"]["DashboardBody"])


# The Lambda Developer Guide's names (monitoring-metrics-types.html#event-source-mapping-metrics), spelled out here
# on purpose: the dashboard takes them from effectively_once._mapping_metrics.
MAPPING_EVENT_COUNTS = (
    "PolledEventCount",
    "InvokedEventCount",
    "FailedInvokeEventCount",
    "DeletedEventCount",
    "DroppedEventCount",
)


def _dashboard_metrics(synth: dict, name: str) -> list[list[Any]]:
    """Every metric line of the dashboard's graphs, a reference rendered as ``REF(<logical id>)``, any other
    intrinsic as ``INTRINSIC``."""
    dashboard = synth["wired"][name].dashboard
    body = synth["template"].to_json()["Resources"][_logical_id(synth, dashboard.dashboard_name)]["Properties"]
    parts = body["DashboardBody"]["Fn::Join"][1]
    rendered = "".join(
        part if isinstance(part, str) else f"REF({part['Ref']})" if "Ref" in part else "INTRINSIC" for part in parts
    )
    return [line for widget in json.loads(rendered)["widgets"] for line in widget["properties"].get("metrics", [])]


def test_dashboard_shows_the_mappings_event_counts_by_its_uuid(synth: dict) -> None:
    mapping = synth["wired"]["processor"].consumer.event_source_mapping
    uuid = f"REF({_logical_id(synth, mapping.event_source_mapping_id)})"
    lines = [line[:4] for line in _dashboard_metrics(synth, "processor") if line[0] == "AWS/Lambda"]
    for name in MAPPING_EVENT_COUNTS:
        assert ["AWS/Lambda", name, "EventSourceMappingUUID", uuid] in lines, name


@pytest.fixture(scope="module")
def quiet() -> dict[str, Any]:
    """A processor whose mapping publishes no event counts."""
    stack = new_stack(id="Quiet")
    processor = PaymentProcessor(
        stack, "Processor", consumer_options=IdempotentQueueConsumerOptions(event_source_mapping_metrics=False)
    )
    return {"stack": stack, "template": Template.from_stack(stack), "wired": {"processor": processor}}


def test_dashboard_without_mapping_metrics_shows_no_event_counts(quiet: dict) -> None:
    body = _dashboard_body(quiet)
    assert "EventSourceMappingUUID" not in body
    assert "ApproximateNumberOfMessagesVisible" in body
    (mapping,) = quiet["template"].find_resources("AWS::Lambda::EventSourceMapping").values()
    assert "MetricsConfig" not in mapping["Properties"]


def test_dashboard_shows_the_handlers_emf_metrics_with_the_service_dimension(synth: dict) -> None:
    body = _dashboard_body(synth)
    # The runtime's generic names (effectively_once_runtime.names.EMF_METRICS), spelled out here on purpose.
    for name in ("EffectsExecuted", "DuplicatesSuppressed", "InvalidRecords", "FailedRecords", "DeadLettered"):
        assert f'[\\"Shop\\",\\"{name}\\",\\"service\\",\\"shop\\"' in body


def test_dashboard_shows_queue_depth_dlq_depth_oldest_age_and_errors(synth: dict) -> None:
    body = _dashboard_body(synth)
    processor = synth["wired"]["processor"]
    for metric in ("ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "Errors"):
        assert f'\\"{metric}\\"' in body
    for queue in (processor.queue.queue, processor.queue.dead_letter_queue):
        assert json.dumps(_ref(synth, queue.queue_name)) in body
    assert _ref(synth, processor.dashboard.dashboard_name) == {
        "Ref": _logical_id(synth, processor.dashboard.dashboard_name)
    }


# --- asynchronous invocation -------------------------------------------------------------------------------
def _invoke_config(synth: dict, name: str) -> dict[str, Any]:
    function = synth["wired"][name].function
    found = synth["template"].find_resources(
        "AWS::Lambda::EventInvokeConfig", {"Properties": {"FunctionName": _ref(synth, function.function_name)}}
    )
    (config,) = found.values()
    return config["Properties"]


def test_async_invocation_defaults_to_two_retries_six_hours_and_a_new_on_failure_queue(synth: dict) -> None:
    consumer = synth["wired"]["defaults"]
    assert _invoke_config(synth, "defaults") == {
        "FunctionName": _ref(synth, consumer.function.function_name),
        "Qualifier": "$LATEST",
        "MaximumRetryAttempts": 2,
        "MaximumEventAgeInSeconds": 6 * 3600,
        "DestinationConfig": {"OnFailure": {"Destination": _ref(synth, consumer.on_failure_queue.queue_arn)}},
    }


def test_new_on_failure_queue_is_standard_encrypted_tls_only_with_14_day_retention(synth: dict) -> None:
    queue = synth["wired"]["defaults"].on_failure_queue
    props = _props(synth, queue.queue_arn)
    assert "FifoQueue" not in props
    assert (props["SqsManagedSseEnabled"], props["MessageRetentionPeriod"]) == (True, 14 * 24 * 3600)
    policies = synth["template"].find_resources(
        "AWS::SQS::QueuePolicy", {"Properties": {"Queues": [_ref(synth, queue.queue_url)]}}
    )
    (policy,) = policies.values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and statement["Effect"] == "Deny"


def test_new_on_failure_queue_follows_the_consumers_removal_policy(synth: dict) -> None:
    # Retained by default: it holds the only record of events that failed every attempt.
    resource = synth["template"].to_json()["Resources"][
        _logical_id(synth, synth["wired"]["defaults"].on_failure_queue.queue_arn)
    ]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")
    stack = new_stack()
    consumer = _consumer(stack, async_invocation=AsyncInvocationOptions(), removal_policy=RemovalPolicy.DESTROY)
    resource = Template.from_stack(stack).to_json()["Resources"][
        stack.resolve(consumer.on_failure_queue.queue_arn)["Fn::GetAtt"][0]
    ]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Delete", "Delete")


def test_function_may_send_to_its_on_failure_queue(synth: dict) -> None:
    consumer = synth["wired"]["defaults"]
    role = function_role(synth["template"], _logical_id(synth, consumer.function.function_name))
    granted = actions_by_resource(role_statements(synth["template"], role))
    assert "sqs:SendMessage" in granted[_logical_id(synth, consumer.on_failure_queue.queue_arn)]


def test_async_invocation_takes_given_retries_event_age_and_on_failure_queue(synth: dict) -> None:
    props = _invoke_config(synth, "overrides")
    assert (props["MaximumRetryAttempts"], props["MaximumEventAgeInSeconds"]) == (0, 60)
    assert props["DestinationConfig"]["OnFailure"]["Destination"] == _ref(synth, synth["given_queue"].queue_arn)
    assert synth["wired"]["overrides"].on_failure_queue is synth["given_queue"]


def test_no_async_invocation_option_means_no_event_invoke_config(synth: dict) -> None:
    bare = synth["wired"]["bare"]
    assert (bare.event_invoke_config, bare.on_failure_queue) == (None, None)
    synth["template"].resource_count_is("AWS::Lambda::EventInvokeConfig", 2)


# --- validation ----------------------------------------------------------------------------------------------
def _consumer(stack: Stack, **props: Any) -> IdempotentQueueConsumer:
    return IdempotentQueueConsumer(
        stack,
        "Consumer",
        queue=ProcessingQueue(stack, "Queue"),
        table=IdempotencyTable(stack, "Table"),
        function=inline_function(stack, "Function"),
        **props,
    )


def test_fails_fifo_on_failure_queue() -> None:
    stack = new_stack()
    fifo = sqs.Queue(stack, "Fifo", fifo=True)
    with pytest.raises(
        ValueError, match=r"async_invocation.on_failure must be a standard SQS queue .*asynchronous invocation"
    ):
        _consumer(stack, async_invocation=AsyncInvocationOptions(on_failure=fifo))


@pytest.mark.parametrize("attempts", [-1, 3])
def test_fails_retry_attempts_outside_zero_to_two(attempts: int) -> None:
    with pytest.raises(
        ValueError, match=rf"async_invocation.retry_attempts must be between 0 and 2, but {attempts} was given"
    ):
        _consumer(new_stack(), async_invocation=AsyncInvocationOptions(retry_attempts=attempts))


@pytest.mark.parametrize("age", [Duration.seconds(59), Duration.seconds(6 * 3600 + 1)])
def test_fails_max_event_age_outside_one_minute_to_six_hours(age: Duration) -> None:
    with pytest.raises(ValueError, match=r"async_invocation.max_event_age must be between 60 and 21600"):
        _consumer(new_stack(), async_invocation=AsyncInvocationOptions(max_event_age=age))


@pytest.mark.parametrize("prop", ["errors", "failed_records"])
def test_fails_negative_alarm_threshold(prop: str) -> None:
    with pytest.raises(ValueError, match=rf"alarm_thresholds.{prop} must be 0 or more, but -1 was given"):
        _consumer(new_stack(), alarm_thresholds=AlarmThresholds(**{prop: -1}))
