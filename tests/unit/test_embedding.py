"""Bring your own: a user's function, an imported table (by name or ARN), an imported function, and two
processors in one stack."""

from __future__ import annotations

import pytest
from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from effectively_once import (
    IdempotencyTable,
    IdempotentQueueConsumer,
    PaymentProcessor,
    ProcessingQueue,
    ProcessingQueueOptions,
)
from effectively_once.limits import IDEMPOTENCY_TABLE_ACTIONS

from .helpers import actions_by_resource, function_role, inline_function, new_stack, role_statements

TABLE_ARN = "arn:aws:dynamodb:eu-west-1:210987654321:table/shared-idempotency"
ROLE_ARN = "arn:aws:iam::123456789012:role/orders-consumer"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:orders"


@pytest.fixture(scope="module")
def synth() -> dict:
    stack = new_stack()
    first = PaymentProcessor(stack, "First", queue_options=ProcessingQueueOptions(fifo=True))
    second = PaymentProcessor(stack, "Second", queue_options=ProcessingQueueOptions(fifo=True))
    # the user's own function and an imported table by name
    by_name = IdempotencyTable.from_table_name(stack, "ByName", "my-idempotency")
    own = inline_function(stack, "Own", timeout=Duration.seconds(10))
    IdempotentQueueConsumer(stack, "OwnConsumer", queue=ProcessingQueue(stack, "OwnQueue"), function=own, table=by_name)
    # an imported function (with its role) and an imported table by ARN
    by_arn = IdempotencyTable.from_table_arn(stack, "ByArn", TABLE_ARN)
    imported = lambda_.Function.from_function_attributes(
        stack, "Imported", function_arn=FUNCTION_ARN, role=iam.Role.from_role_arn(stack, "ImportedRole", ROLE_ARN)
    )
    given = ProcessingQueue(stack, "GivenQueue", visibility_timeout=Duration.minutes(5))
    IdempotentQueueConsumer(stack, "ImportedConsumer", queue=given, function=imported, table=by_arn)
    return {
        "stack": stack,
        "template": Template.from_stack(stack),
        "processors": (first, second),
        "own": own,
        "by_name": by_name,
        "by_arn": by_arn,
    }


def _ref(synth: dict, token: str) -> str:
    resolved = synth["stack"].resolve(token)
    return resolved.get("Ref") or resolved["Fn::GetAtt"][0]


def _policy_actions(synth: dict, role_logical_id: str) -> dict[str, set[str]]:
    return actions_by_resource(role_statements(synth["template"], role_logical_id))


def test_every_processing_queue_gets_a_distinct_queue_name(synth: dict) -> None:
    # Two FIFO processors (source + DLQ each) and two standard source queues (their DLQs keep generated names).
    names = [
        q["Properties"]["QueueName"]
        for q in synth["template"].find_resources("AWS::SQS::Queue").values()
        if "QueueName" in q["Properties"]
    ]
    assert len(names) == 6
    assert len(set(names)) == 6


def test_two_processors_each_use_their_own_table_and_queue(synth: dict) -> None:
    first, second = synth["processors"]
    resolve = synth["stack"].resolve
    assert resolve(first.table.table_name) != resolve(second.table.table_name)
    for processor in (first, second):
        role = function_role(synth["template"], _ref(synth, processor.function.function_name))
        assert set(_policy_actions(synth, role)) == {
            _ref(synth, processor.queue.queue.queue_arn),
            _ref(synth, processor.queue.dead_letter_queue.queue_arn),  # its own DLQ (permanent failures)
            _ref(synth, processor.table.table.table_arn),
            _ref(synth, processor.ledger.table_arn),
            _ref(synth, processor.log_group.log_group_arn),  # its own log group only (no managed policy)
        }


def test_imported_tables_create_no_table(synth: dict) -> None:
    synth["template"].resource_count_is("AWS::DynamoDB::Table", 4)  # two processors: idempotency + ledger each
    assert isinstance(synth["by_name"], IdempotencyTable) and isinstance(synth["by_arn"], IdempotencyTable)


def test_users_function_gets_the_idempotency_environment(synth: dict) -> None:
    function = synth["template"].to_json()["Resources"][_ref(synth, synth["own"].function_name)]
    assert function["Properties"]["Environment"]["Variables"]["IDEMPOTENCY_TABLE_NAME"] == (
        "arn:aws:dynamodb:us-east-1:123456789012:table/my-idempotency"
    )


def test_table_imported_by_name_is_granted_the_four_actions(synth: dict) -> None:
    role = function_role(synth["template"], _ref(synth, synth["own"].function_name))
    table_grants = {k: v for k, v in _policy_actions(synth, role).items() if "my-idempotency" in k}
    assert list(table_grants.values()) == [set(IDEMPOTENCY_TABLE_ACTIONS)]


def test_imported_function_role_is_granted_the_four_actions_on_the_table_arn(synth: dict) -> None:
    assert _policy_actions(synth, "orders-consumer")[TABLE_ARN] == set(IDEMPOTENCY_TABLE_ACTIONS)


def test_users_function_gets_its_queues_dead_letter_queue_url(synth: dict) -> None:
    function = synth["template"].to_json()["Resources"][_ref(synth, synth["own"].function_name)]
    own_queue = synth["stack"].node.find_child("OwnQueue")
    assert function["Properties"]["Environment"]["Variables"]["DEAD_LETTER_QUEUE_URL"] == synth["stack"].resolve(
        own_queue.dead_letter_queue.queue_url
    )


def test_imported_function_role_is_granted_send_on_the_dead_letter_queue(synth: dict) -> None:
    # An imported function's environment is the caller's to set; its role still gets the send grant.
    given = synth["stack"].node.find_child("GivenQueue")
    assert _policy_actions(synth, "orders-consumer")[_ref(synth, given.dead_letter_queue.queue_arn)] == {
        "sqs:SendMessage"
    }
