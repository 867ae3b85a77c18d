"""IdempotentQueueConsumer: the mapping, least-privilege grants, environment and visibility timeout."""

from __future__ import annotations

import pytest
from aws_cdk import CfnParameter, Duration, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Annotations, Match, Template

from effectively_once import IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue
from effectively_once.limits import IDEMPOTENCY_TABLE_ACTIONS, visibility_timeout_guidance_seconds

from .helpers import actions_by_resource, function_role, inline_function, new_stack, role_statements

CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}
IMPORTED_ARN = "arn:aws:lambda:us-east-1:123456789012:function:imported"


@pytest.fixture(scope="module")
def synth() -> dict:
    stack = new_stack()
    table = IdempotencyTable(stack, "Table")
    wired = {}
    # standard, batching window, function timeout 20 s
    queue = ProcessingQueue(stack, "Queue")
    function = inline_function(stack, "Function", timeout=Duration.seconds(20))
    wired["standard"] = IdempotentQueueConsumer(
        stack,
        "Consumer",
        queue=queue,
        function=function,
        table=table,
        max_batching_window=Duration.seconds(10),
        max_concurrency=5,
    )
    # FIFO with a customer-managed key, Lambda's default timeout, a key prefix
    key = kms.Key(stack, "Key")
    fifo_queue = ProcessingQueue(stack, "FifoQueue", fifo=True, encryption_key=key)
    fifo_function = inline_function(stack, "FifoFunction")
    wired["fifo"] = IdempotentQueueConsumer(
        stack,
        "FifoConsumer",
        queue=fifo_queue,
        function=fifo_function,
        table=table,
        idempotency_expiry=Duration.hours(1),
        key_prefix="shop/payments",
    )
    # imported function: accepted because the visibility timeout is given
    given_queue = ProcessingQueue(stack, "GivenQueue", visibility_timeout=Duration.minutes(15))
    imported = lambda_.Function.from_function_arn(stack, "Imported", IMPORTED_ARN)
    wired["imported"] = IdempotentQueueConsumer(
        stack, "ImportedConsumer", queue=given_queue, function=imported, table=table
    )
    # permanent failures left to SQS's receive count: no DLQ environment, no send grant
    wired["counting"] = IdempotentQueueConsumer(
        stack,
        "CountingConsumer",
        queue=ProcessingQueue(stack, "CountingQueue"),
        function=inline_function(stack, "CountingFunction"),
        table=table,
        dead_letter_on_first_sight=False,
    )
    # provisioned mode, and the mapping's event-count metrics turned off
    wired["provisioned"] = IdempotentQueueConsumer(
        stack,
        "ProvisionedConsumer",
        queue=ProcessingQueue(stack, "ProvisionedQueue"),
        function=inline_function(stack, "ProvisionedFunction"),
        table=table,
        provisioned_poller_config=lambda_.ProvisionedPollerConfig(minimum_pollers=3, maximum_pollers=40),
        event_source_mapping_metrics=False,
    )
    template = Template.from_stack(stack)
    return {"stack": stack, "template": template, "wired": wired, "key": key, "table": table}


def _logical_id(stack: Stack, token: str) -> str:
    resolved = stack.resolve(token)
    return resolved.get("Ref") or resolved["Fn::GetAtt"][0]


def _mapping(synth: dict, name: str) -> dict:
    stack: Stack = synth["stack"]
    consumer = synth["wired"][name]
    mappings = synth["template"].find_resources("AWS::Lambda::EventSourceMapping")
    found = [
        m for m in mappings.values() if m["Properties"]["EventSourceArn"] == stack.resolve(consumer.queue.queue_arn)
    ]
    assert len(found) == 1
    return found[0]["Properties"]


def _queue_props(synth: dict, name: str) -> dict:
    stack: Stack = synth["stack"]
    queue_id = _logical_id(stack, synth["wired"][name].queue.queue_arn)
    return synth["template"].to_json()["Resources"][queue_id]["Properties"]


def _environment(synth: dict, name: str) -> dict:
    stack: Stack = synth["stack"]
    function_id = _logical_id(stack, synth["wired"][name].function.function_name)
    return synth["template"].to_json()["Resources"][function_id]["Properties"]["Environment"]["Variables"]


def test_one_mapping_per_consumer_with_report_batch_item_failures(synth: dict) -> None:
    synth["template"].resource_count_is("AWS::Lambda::EventSourceMapping", 5)
    for name in synth["wired"]:
        assert _mapping(synth, name)["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_batch_size_defaults_to_ten(synth: dict) -> None:
    assert _mapping(synth, "fifo")["BatchSize"] == 10


def test_batching_window_and_concurrency_default_to_unset(synth: dict) -> None:
    props = _mapping(synth, "fifo")
    assert "MaximumBatchingWindowInSeconds" not in props
    assert "ScalingConfig" not in props


def test_batching_window_and_concurrency_are_passed_on(synth: dict) -> None:
    props = _mapping(synth, "standard")
    assert props["MaximumBatchingWindowInSeconds"] == 10
    assert props["ScalingConfig"] == {"MaximumConcurrency": 5}


def test_event_count_metrics_are_on_by_default(synth: dict) -> None:
    for name in ("standard", "fifo", "imported", "counting"):
        assert _mapping(synth, name)["MetricsConfig"] == {"Metrics": ["EventCount"]}


def test_event_count_metrics_can_be_turned_off(synth: dict) -> None:
    assert "MetricsConfig" not in _mapping(synth, "provisioned")


def test_provisioned_pollers_are_passed_on_without_a_scaling_config(synth: dict) -> None:
    props = _mapping(synth, "provisioned")
    assert props["ProvisionedPollerConfig"] == {"MinimumPollers": 3, "MaximumPollers": 40}
    assert "ScalingConfig" not in props
    assert "ProvisionedPollerConfig" not in _mapping(synth, "standard")


@pytest.mark.parametrize(
    ("method", "metric"),
    [
        ("metric_polled_event_count", "PolledEventCount"),
        ("metric_filtered_out_event_count", "FilteredOutEventCount"),
        ("metric_invoked_event_count", "InvokedEventCount"),
        ("metric_failed_invoke_event_count", "FailedInvokeEventCount"),
        ("metric_deleted_event_count", "DeletedEventCount"),
        ("metric_dropped_event_count", "DroppedEventCount"),
    ],
)
def test_metric_methods_read_the_mappings_event_counts(synth: dict, method: str, metric: str) -> None:
    stack: Stack = synth["stack"]
    consumer = synth["wired"]["standard"]
    found = getattr(consumer, method)()
    assert (found.namespace, found.metric_name, found.statistic) == ("AWS/Lambda", metric, "Sum")
    assert found.period.to_seconds() == 60
    mapping_id = _logical_id(stack, consumer.event_source_mapping.event_source_mapping_id)
    assert stack.resolve(found.dimensions["EventSourceMappingUUID"]) == {"Ref": mapping_id}
    assert synth["template"].to_json()["Resources"][mapping_id]["Type"] == "AWS::Lambda::EventSourceMapping"


def test_metric_methods_take_metric_options(synth: dict) -> None:
    found = synth["wired"]["standard"].metric_polled_event_count(period=Duration.minutes(5), statistic="Maximum")
    assert (found.period.to_seconds(), found.statistic) == (300, "Maximum")


def test_visibility_timeout_is_six_function_timeouts_plus_the_window(synth: dict) -> None:
    assert _queue_props(synth, "standard")["VisibilityTimeout"] == 6 * 20 + 10
    assert synth["wired"]["standard"].visibility_timeout.to_seconds() == 130


def test_visibility_timeout_uses_lambdas_default_timeout(synth: dict) -> None:
    assert _queue_props(synth, "fifo")["VisibilityTimeout"] == 6 * 3


def test_given_visibility_timeout_is_kept(synth: dict) -> None:
    assert _queue_props(synth, "imported")["VisibilityTimeout"] == 15 * 60


def test_visibility_timeout_guidance_is_capped_at_twelve_hours() -> None:
    assert visibility_timeout_guidance_seconds(900, 300) == 5700
    assert visibility_timeout_guidance_seconds(10_000, 0) == 12 * 3600


def test_environment_carries_table_and_expiry(synth: dict) -> None:
    stack: Stack = synth["stack"]
    env = _environment(synth, "standard")
    assert env == {
        # The ARN, never the bare name (which would address the function's own account and Region).
        "IDEMPOTENCY_TABLE_NAME": stack.resolve(synth["table"].table.table_arn),
        "IDEMPOTENCY_EXPIRY_SECONDS": str(4 * 24 * 3600),
        # where the runtime sends a permanent failure on first sight: the queue's own DLQ
        "DEAD_LETTER_QUEUE_URL": stack.resolve(synth["wired"]["standard"].dead_letter_queue.queue_url),
        # issue 31: the queue's receive budget and visibility timeout, keyed by its ARN (the records' eventSourceARN)
        "SOURCE_QUEUES": _source_queues(stack, synth["wired"]["standard"], 5),
    }


def _source_queues(stack: Stack, consumer: IdempotentQueueConsumer, max_receive_count: int) -> dict:
    """``SOURCE_QUEUES`` as the template holds it: the JSON object joined around the queue's ARN."""
    timeout = int(consumer.visibility_timeout.to_seconds())
    facts = f'":{{"maxReceiveCount":{max_receive_count},"visibilityTimeout":{timeout}}}}}'
    return {"Fn::Join": ["", ['{"', stack.resolve(consumer.queue.queue_arn), facts]]}


def test_dead_letter_on_first_sight_off_sets_no_dead_letter_queue_url(synth: dict) -> None:
    assert "DEAD_LETTER_QUEUE_URL" not in _environment(synth, "counting")
    assert "IDEMPOTENCY_TABLE_NAME" in _environment(synth, "counting")


def test_idempotency_expiry_and_key_prefix_are_props(synth: dict) -> None:
    env = _environment(synth, "fifo")
    assert env["IDEMPOTENCY_EXPIRY_SECONDS"] == "3600"
    assert env["IDEMPOTENCY_KEY_PREFIX"] == "shop/payments"


def _expected_and_granted(synth: dict, name: str, *, send_to_dlq: bool = True) -> tuple[dict, dict]:
    """(consume + idempotency (+ send on the DLQ) actions per resource, what the role's statements grant)."""
    stack: Stack = synth["stack"]
    template: Template = synth["template"]
    consumer = synth["wired"][name]
    role = function_role(template, _logical_id(stack, consumer.function.function_name))
    expected = {
        _logical_id(stack, consumer.queue.queue_arn): CONSUME,
        _logical_id(stack, synth["table"].table.table_arn): set(IDEMPOTENCY_TABLE_ACTIONS),
    }
    if send_to_dlq:
        # SendMessage only: not GetQueueAttributes/GetQueueUrl, which CDK's grant_send_messages adds
        expected[_logical_id(stack, consumer.dead_letter_queue.queue_arn)] = {"sqs:SendMessage"}
    return expected, actions_by_resource(role_statements(template, role))


def test_role_gets_exactly_consume_idempotency_and_send_on_the_dead_letter_queue(synth: dict) -> None:
    expected, granted = _expected_and_granted(synth, "standard")
    assert granted == expected


def test_dead_letter_on_first_sight_off_grants_nothing_on_the_dead_letter_queue(synth: dict) -> None:
    expected, granted = _expected_and_granted(synth, "counting", send_to_dlq=False)
    assert granted == expected


def test_customer_managed_key_adds_decrypt_and_generate_data_key(synth: dict) -> None:
    # kms:Decrypt to receive; kms:GenerateDataKey (and Decrypt) to send to the DLQ encrypted with the same key
    expected, granted = _expected_and_granted(synth, "fifo")
    assert granted == {
        **expected,
        _logical_id(synth["stack"], synth["key"].key_arn): {"kms:Decrypt", "kms:GenerateDataKey"},
    }


def test_mapping_waits_for_the_role_policy(synth: dict) -> None:
    stack: Stack = synth["stack"]
    template: Template = synth["template"]
    mapping = [
        m
        for m in template.find_resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == stack.resolve(synth["wired"]["standard"].queue.queue_arn)
    ][0]
    policy_ids = set(template.find_resources("AWS::IAM::Policy"))
    assert policy_ids & set(mapping.get("DependsOn", []))


def test_imported_function_is_mapped_by_name(synth: dict) -> None:
    assert _mapping(synth, "imported")["FunctionName"] == "imported"


def test_imported_function_without_role_gets_a_warning_instead_of_grants(synth: dict) -> None:
    Annotations.from_stack(synth["stack"]).has_warning(
        "/Test/ImportedConsumer", Match.string_like_regexp("function was imported without its role")
    )


# --- imported functions (the configuration rules: test_validation.py) --------------------------------
def test_fails_imported_function_without_visibility_timeout() -> None:
    stack = new_stack()
    with pytest.raises(
        ValueError, match=r"function must be a lambda\.Function when the queue's visibility_timeout is not given"
    ):
        IdempotentQueueConsumer(
            stack,
            "C",
            queue=ProcessingQueue(stack, "Q"),
            table=IdempotencyTable(stack, "T"),
            function=lambda_.Function.from_function_arn(stack, "F", IMPORTED_ARN),
        )


# --- deploy-time tokens: derived settings follow them (issue 12) --------------------------------------
@pytest.fixture(scope="module")
def parameters() -> dict:
    """Consumers whose retention period and idempotency expiry are CloudFormation parameters."""
    stack = new_stack(id="Parameters")
    table = IdempotencyTable(stack, "Table")
    retention = CfnParameter(stack, "RetentionSeconds", type="Number", default=345600)
    expiry = CfnParameter(stack, "ExpirySeconds", type="Number", default=86400)
    wired = {
        "retention": IdempotentQueueConsumer(
            stack,
            "Retention",
            queue=ProcessingQueue(stack, "Queue", retention_period=Duration.seconds(retention.value_as_number)),
            function=inline_function(stack, "Function"),
            table=table,
        ),
        "expiry": IdempotentQueueConsumer(
            stack,
            "Expiry",
            queue=ProcessingQueue(stack, "Queue2"),
            function=inline_function(stack, "Function2"),
            table=table,
            idempotency_expiry=Duration.seconds(expiry.value_as_number),
        ),
    }
    return {"stack": stack, "template": Template.from_stack(stack), "wired": wired}


def test_default_expiry_follows_a_retention_parameter(parameters: dict) -> None:
    assert _queue_props(parameters, "retention")["MessageRetentionPeriod"] == {"Ref": "RetentionSeconds"}
    assert _environment(parameters, "retention")["IDEMPOTENCY_EXPIRY_SECONDS"] == {"Ref": "RetentionSeconds"}


def test_given_expiry_parameter_is_the_environment_value(parameters: dict) -> None:
    assert _environment(parameters, "expiry")["IDEMPOTENCY_EXPIRY_SECONDS"] == {"Ref": "ExpirySeconds"}
