"""ProcessingQueue: documented defaults, FIFO shape, encryption, grants, metrics and bad props."""

from __future__ import annotations

import json

import pytest
from aws_cdk import CfnParameter, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match, Template

from effectively_once import ProcessingQueue

from .helpers import actions_by_resource, new_stack


@pytest.fixture(scope="module")
def synth() -> dict:
    stack = new_stack()
    queues = {
        "standard": ProcessingQueue(stack, "Standard"),
        "fifo": ProcessingQueue(stack, "Fifo", fifo=True),
        "fast": ProcessingQueue(stack, "Fast", fifo=True, high_throughput=True, content_based_deduplication=True),
        "named": ProcessingQueue(
            stack, "Named", fifo=True, queue_name="payments.fifo", visibility_timeout=Duration.minutes(2)
        ),
        "kms": ProcessingQueue(stack, "Kms", encryption_key=kms.Key(stack, "Key")),
        "destroyable": ProcessingQueue(stack, "Destroyable", removal_policy=RemovalPolicy.DESTROY),
    }
    producer = iam.Role(stack, "Producer", assumed_by=iam.AccountRootPrincipal())
    queues["kms"].grant_send(producer)
    template = Template.from_stack(stack)
    resources = template.to_json()["Resources"]

    def props(queue: sqs.IQueue) -> dict:
        return resources[stack.resolve(queue.queue_name)["Fn::GetAtt"][0]]

    return {"stack": stack, "template": template, "queues": queues, "props": props, "producer": producer}


def _source(synth: dict, name: str) -> dict:
    return synth["props"](synth["queues"][name].queue)


def _dlq(synth: dict, name: str) -> dict:
    return synth["props"](synth["queues"][name].dead_letter_queue)


def test_retention_defaults_to_four_days(synth: dict) -> None:
    assert _source(synth, "standard")["Properties"]["MessageRetentionPeriod"] == 4 * 24 * 3600


def test_dead_letter_queue_keeps_messages_fourteen_days(synth: dict) -> None:
    for name in ("standard", "fifo"):
        assert _dlq(synth, name)["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_removal_policy_defaults_to_retain_on_both_queues(synth: dict) -> None:
    # A destroyed queue takes every message still waiting (source) or kept for inspection (DLQ) with it.
    for name in ("standard", "fifo"):
        for resource in (_source(synth, name), _dlq(synth, name)):
            assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_removal_policy_is_a_prop_applied_to_both_queues(synth: dict) -> None:
    for resource in (_source(synth, "destroyable"), _dlq(synth, "destroyable")):
        assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Delete", "Delete")


def test_max_receive_count_defaults_to_five(synth: dict) -> None:
    assert _source(synth, "standard")["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 5


def test_redrive_targets_its_own_dead_letter_queue(synth: dict) -> None:
    stack: Stack = synth["stack"]
    target = _source(synth, "standard")["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]
    assert target == stack.resolve(synth["queues"]["standard"].dead_letter_queue.queue_arn)


def test_sse_defaults_to_sqs_managed_on_both_queues(synth: dict) -> None:
    for resource in (_source(synth, "standard"), _dlq(synth, "standard")):
        assert resource["Properties"]["SqsManagedSseEnabled"] is True
        assert "KmsMasterKeyId" not in resource["Properties"]


def test_customer_managed_key_encrypts_both_queues(synth: dict) -> None:
    key_arn = synth["stack"].resolve(synth["queues"]["kms"].encryption_key.key_arn)
    for resource in (_source(synth, "kms"), _dlq(synth, "kms")):
        assert resource["Properties"]["KmsMasterKeyId"] == key_arn
        assert "SqsManagedSseEnabled" not in resource["Properties"]


def test_both_queues_deny_requests_without_tls(synth: dict) -> None:
    stack: Stack = synth["stack"]
    policies = synth["template"].find_resources(
        "AWS::SQS::QueuePolicy",
        {
            "Properties": {
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                    )
                }
            }
        },
    )
    protected = {ref["Ref"] for p in policies.values() for ref in p["Properties"]["Queues"]}
    queue = synth["queues"]["standard"]
    assert {
        stack.resolve(queue.queue.queue_url)["Ref"],
        stack.resolve(queue.dead_letter_queue.queue_url)["Ref"],
    } <= protected


def test_standard_queues_carry_no_fifo_key(synth: dict) -> None:
    for resource in (_source(synth, "standard"), _dlq(synth, "standard")):
        assert "FifoQueue" not in resource["Properties"]
        assert "ContentBasedDeduplication" not in resource["Properties"]


def test_fifo_source_and_dead_letter_queue_are_both_fifo(synth: dict) -> None:
    for resource in (_source(synth, "fifo"), _dlq(synth, "fifo")):
        assert resource["Properties"]["FifoQueue"] is True
        name = resource["Properties"]["QueueName"]
        assert name.endswith(".fifo") and len(name) <= 80


def test_fifo_names_are_generated_deterministically(synth: dict) -> None:
    # Built from the construct path (stack name included): unique per stack, stable across synths.
    assert _source(synth, "fifo")["Properties"]["QueueName"] == "TestFifo3E395012.fifo"
    assert _dlq(synth, "fifo")["Properties"]["QueueName"] == "TestFifo3E395012-dlq.fifo"


def test_generated_fifo_names_stay_within_eighty_characters() -> None:
    stack = new_stack(id="S" * 120)
    queue = ProcessingQueue(stack, "Q" * 120, fifo=True)
    names = [q.node.default_child.queue_name for q in (queue.queue, queue.dead_letter_queue)]
    assert all(n.endswith(".fifo") and len(n) <= 80 for n in names), names
    assert names[0] != names[1]


def test_standard_source_names_are_generated_deterministically(synth: dict) -> None:
    # The same naming as FIFO (construct path, stack name included), so the DLQ's redrive allow policy can name
    # the source's ARN without referring to the resource (which would be a CloudFormation cycle).
    assert _source(synth, "standard")["Properties"]["QueueName"] == "TestStandard0C585EF4"
    assert "QueueName" not in _dlq(synth, "standard")["Properties"]


def test_generated_standard_names_stay_within_eighty_characters_and_differ_per_construct() -> None:
    stack = new_stack(id="S" * 120)
    names = [ProcessingQueue(stack, f"{'Q' * 120}{i}").queue.node.default_child.queue_name for i in range(2)]  # type: ignore[union-attr]
    assert all(len(n) <= 80 and not n.endswith(".fifo") for n in names), names
    assert names[0] != names[1]


def _arn_of(name: str) -> dict:
    # The stack's env is known (us-east-1, account 123456789012), and so is the partition: a literal ARN.
    return f"arn:aws:sqs:us-east-1:123456789012:{name}"


@pytest.mark.parametrize("name", ["standard", "fifo", "named", "kms"])
def test_each_created_dead_letter_queue_allows_redrive_only_from_its_own_source(synth: dict, name: str) -> None:
    source_name = _source(synth, name)["Properties"]["QueueName"]
    assert _dlq(synth, name)["Properties"]["RedriveAllowPolicy"] == {
        "redrivePermission": "byQueue",
        "sourceQueueArns": [_arn_of(source_name)],
    }


def test_redrive_allow_policy_does_not_refer_to_the_source_resource(synth: dict) -> None:
    # A Ref/GetAtt of the source from its DLQ is a cycle (cfn-lint E3004): the source already refers to the DLQ.
    stack: Stack = synth["stack"]
    for name in ("standard", "fifo"):
        source_id = stack.resolve(synth["queues"][name].queue.queue_arn)["Fn::GetAtt"][0]
        assert source_id not in json.dumps(_dlq(synth, name))


def test_redrive_allow_policy_follows_a_queue_name_parameter() -> None:
    stack = new_stack()
    queue = ProcessingQueue(stack, "Q", queue_name=CfnParameter(stack, "QueueName").value_as_string)
    policy = stack.resolve(queue.dead_letter_queue.node.default_child.redrive_allow_policy)  # type: ignore[union-attr]
    assert policy["sourceQueueArns"] == [
        {"Fn::Join": ["", ["arn:aws:sqs:us-east-1:123456789012:", {"Ref": "QueueName"}]]}
    ]


def test_given_fifo_name_is_kept_and_names_the_dead_letter_queue(synth: dict) -> None:
    assert _source(synth, "named")["Properties"]["QueueName"] == "payments.fifo"
    assert _dlq(synth, "named")["Properties"]["QueueName"] == "payments-dlq.fifo"


def test_fifo_deduplication_defaults_to_explicit_ids_and_queue_scope(synth: dict) -> None:
    props = _source(synth, "fifo")["Properties"]
    for key in ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"):
        assert key not in props


def test_high_throughput_scopes_deduplication_and_throughput_to_the_message_group(synth: dict) -> None:
    props = _source(synth, "fast")["Properties"]
    assert props["DeduplicationScope"] == "messageGroup"
    assert props["FifoThroughputLimit"] == "perMessageGroupId"
    assert props["ContentBasedDeduplication"] is True


def test_visibility_timeout_is_left_open_by_default(synth: dict) -> None:
    assert "VisibilityTimeout" not in _source(synth, "standard")["Properties"]
    assert synth["queues"]["standard"].visibility_timeout is None


def test_given_visibility_timeout_is_set(synth: dict) -> None:
    assert _source(synth, "named")["Properties"]["VisibilityTimeout"] == 120
    assert synth["queues"]["named"].visibility_timeout_given


def test_grant_send_includes_the_key_for_producers(synth: dict) -> None:
    stack: Stack = synth["stack"]
    role_id = stack.resolve(synth["producer"].role_name)["Ref"]
    statements = [
        s
        for p in synth["template"].find_resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_resource = actions_by_resource(statements)
    queue_id = stack.resolve(synth["queues"]["kms"].queue.queue_arn)["Fn::GetAtt"][0]
    assert by_resource[queue_id] == {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    key_actions = {a for r, acts in by_resource.items() if r != queue_id for a in acts}
    assert {"kms:Encrypt", "kms:GenerateDataKey*"} <= key_actions


@pytest.mark.parametrize(
    ("method", "metric_name", "queue_attr"),
    [
        (
            "metric_dlq_approximate_number_of_messages_visible",
            "ApproximateNumberOfMessagesVisible",
            "dead_letter_queue",
        ),
        ("metric_approximate_number_of_messages_visible", "ApproximateNumberOfMessagesVisible", "queue"),
        ("metric_approximate_age_of_oldest_message", "ApproximateAgeOfOldestMessage", "queue"),
    ],
)
def test_metrics_are_named_after_the_cloudwatch_metric(
    synth: dict, method: str, metric_name: str, queue_attr: str
) -> None:
    queue = synth["queues"]["standard"]
    metric = getattr(queue, method)(period=Duration.minutes(1))
    assert metric.metric_name == metric_name
    assert metric.namespace == "AWS/SQS"
    assert metric.period.to_seconds() == 60
    stack: Stack = synth["stack"]
    assert stack.resolve(metric.dimensions["QueueName"]) == stack.resolve(getattr(queue, queue_attr).queue_name)


# --- existing dead-letter queue and filling the visibility timeout (rules: test_validation.py) ---------
def test_existing_dead_letter_queue_is_used() -> None:
    stack = new_stack()
    dlq = sqs.Queue(stack, "Dlq")
    queue = ProcessingQueue(stack, "Q", dead_letter_queue=dlq)
    assert queue.dead_letter_queue is dlq
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SQS::Queue", 2)
    # The removal policy covers the queues ProcessingQueue creates; a given DLQ keeps its owner's.
    resources = template.to_json()["Resources"]
    assert resources[stack.resolve(queue.queue.queue_name)["Fn::GetAtt"][0]]["DeletionPolicy"] == "Retain"
    assert resources[stack.resolve(dlq.queue_name)["Fn::GetAtt"][0]]["DeletionPolicy"] == "Delete"
    # Its policy is its owner's too: no redrive allow policy is written on it.
    assert "RedriveAllowPolicy" not in resources[stack.resolve(dlq.queue_name)["Fn::GetAtt"][0]].get("Properties", {})


def test_fill_visibility_timeout_refuses_a_given_timeout(synth: dict) -> None:
    with pytest.raises(ValueError, match="visibility_timeout was given at construction"):
        synth["queues"]["named"].fill_visibility_timeout(Duration.seconds(10))


def test_fifo_dead_letter_queue_name_follows_a_queue_name_parameter() -> None:
    stack = new_stack()
    queue = ProcessingQueue(
        stack, "Q", fifo=True, queue_name=f"{CfnParameter(stack, 'QueueName').value_as_string}.fifo"
    )
    names = [q.node.default_child.queue_name for q in (queue.queue, queue.dead_letter_queue)]  # type: ignore[union-attr]
    assert [stack.resolve(name) for name in names] == [
        {"Fn::Join": ["", [{"Ref": "QueueName"}, ".fifo"]]},
        {"Fn::Join": ["", [{"Ref": "QueueName"}, "-dlq.fifo"]]},
    ]
