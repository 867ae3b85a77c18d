"""Least privilege: every IAM policy of every template, the payment function's exact grants, KMS grants.

One synthesis for the module: the sandbox stack and the ``Constructs`` stack (with producers granted
``grant_send`` on a customer-managed-key queue and on an SQS-managed one).
"""

from __future__ import annotations

from typing import Any

import pytest
from app import PaymentsSandboxStack
from aws_cdk import Stack
from aws_cdk.assertions import Template

from .helpers import ENV, actions_by_resource, constructs_stack, function_role, new_app, role_statements

#: Statements allowed to use Resource "*", each with the reason. Empty: no statement needs one (no X-Ray, no
#: AWSLambdaBasicExecutionRole; KMS key policies are resource policies, not IAM policies, and are not walked).
RESOURCE_STAR_EXCEPTIONS: dict[str, str] = {}

SEND = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
#: What CDK's grantEncryptDecrypt gives a sender on a customer-managed key (SendMessage needs
#: kms:GenerateDataKey and kms:Decrypt: Amazon SQS Developer Guide, "Key management").
KMS_SEND = {"kms:Decrypt", "kms:Encrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"}


@pytest.fixture(scope="module")
def synth() -> dict[str, Any]:
    app = new_app()
    sandbox = PaymentsSandboxStack(app, "PaymentsSandbox", env=ENV)
    built = constructs_stack(app, producers=True)
    return {
        "sandbox": sandbox,
        "built": built,
        "templates": {stack.stack_name: Template.from_stack(stack) for stack in (sandbox, built["stack"])},
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(template: Template) -> list[dict[str, Any]]:
    """Every statement of every identity policy: inline policies, managed policies, roles' own policies."""
    statements: list[dict[str, Any]] = []
    for type_ in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for policy in template.find_resources(type_).values():
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    for role in template.find_resources("AWS::IAM::Role").values():
        for policy in role["Properties"].get("Policies", []):
            statements.extend(policy["PolicyDocument"]["Statement"])
    return statements


def _id(stack: Stack, token: str) -> str:
    resolved = stack.resolve(token)
    return resolved.get("Ref") or resolved["Fn::GetAtt"][0]


def _granted(template: Template, stack: Stack, function_or_role_arn: str, *, function: bool) -> dict[str, set[str]]:
    role = function_role(template, _id(stack, function_or_role_arn)) if function else _id(stack, function_or_role_arn)
    return actions_by_resource(role_statements(template, role))


# --- every policy in every template ------------------------------------------------------------------
def test_every_template_has_policies_to_walk(synth: dict) -> None:
    for name, template in synth["templates"].items():
        assert len(_statements(template)) >= 4, name


def test_no_wildcard_action(synth: dict) -> None:
    for name, template in synth["templates"].items():
        for statement in _statements(template):
            for action in _as_list(statement["Action"]):
                assert action != "*" and not action.endswith(":*"), (name, statement)


def test_no_resource_star_beyond_the_documented_exceptions(synth: dict) -> None:
    for name, template in synth["templates"].items():
        for statement in _statements(template):
            if "*" in _as_list(statement["Resource"]):
                assert statement.get("Sid") in RESOURCE_STAR_EXCEPTIONS, (name, statement)


def test_no_role_carries_a_managed_policy(synth: dict) -> None:
    # AWSLambdaBasicExecutionRole allows logs:CreateLogGroup/CreateLogStream/PutLogEvents on Resource "*";
    # our functions get the last two on their own log group only.
    for name, template in synth["templates"].items():
        for role in template.find_resources("AWS::IAM::Role").values():
            assert "ManagedPolicyArns" not in role["Properties"], name


# --- the payment function: exact action set per resource ---------------------------------------------
@pytest.mark.parametrize("kind", ["Standard", "Fifo"])
def test_payment_function_gets_exactly_the_expected_actions_per_resource(synth: dict, kind: str) -> None:
    stack = synth["sandbox"]
    processor = stack.processors[kind]
    granted = _granted(synth["templates"]["PaymentsSandbox"], stack, processor.function.function_name, function=True)
    assert granted == {
        _id(stack, processor.queue.queue.queue_arn): {
            "sqs:ReceiveMessage",
            "sqs:ChangeMessageVisibility",
            "sqs:GetQueueUrl",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
        },
        _id(stack, processor.table.table.table_arn): {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        },
        _id(stack, processor.ledger.table_arn): {"dynamodb:PutItem", "dynamodb:GetItem"},
        _id(stack, processor.log_group.log_group_arn): {"logs:CreateLogStream", "logs:PutLogEvents"},
        # permanent failures sent to the DLQ on first sight: SendMessage only (SQS-managed SSE: no KMS action)
        _id(stack, processor.queue.dead_letter_queue.queue_arn): {"sqs:SendMessage"},
        # The sandbox's event consumer on Standard: its on-failure destination (SqsDestination's grant).
        **(
            {
                _id(stack, stack.payment_events.on_failure_queue.queue_arn): {
                    "sqs:SendMessage",
                    "sqs:GetQueueAttributes",
                    "sqs:GetQueueUrl",
                }
            }
            if kind == "Standard"
            else {}
        ),
    }


# --- KMS -----------------------------------------------------------------------------------------------
def test_consumer_gets_only_decrypt_and_generate_data_key_on_the_customer_managed_key(synth: dict) -> None:
    # kms:Decrypt to receive from the queue; kms:GenerateDataKey (with Decrypt) to send to its DLQ under the same
    # key (Amazon SQS Developer Guide, "Key management"); not CDK's grantEncryptDecrypt (Encrypt, ReEncrypt*).
    built = synth["built"]
    stack = built["stack"]
    granted = _granted(synth["templates"]["Constructs"], stack, built["function"].function_name, function=True)
    kms = {resource: actions for resource, actions in granted.items() if any(a.startswith("kms:") for a in actions)}
    assert kms == {_id(stack, built["key"].key_arn): {"kms:Decrypt", "kms:GenerateDataKey"}}


def test_consumer_gets_only_send_message_on_its_dead_letter_queue(synth: dict) -> None:
    built = synth["built"]
    stack = built["stack"]
    granted = _granted(synth["templates"]["Constructs"], stack, built["function"].function_name, function=True)
    assert granted[_id(stack, built["queue"].dead_letter_queue.queue_arn)] == {"sqs:SendMessage"}


def test_grant_send_on_a_customer_managed_key_queue_gets_what_sending_needs(synth: dict) -> None:
    built = synth["built"]
    stack = built["stack"]
    granted = _granted(synth["templates"]["Constructs"], stack, built["queue_producer"].role_arn, function=False)
    assert granted == {_id(stack, built["queue"].queue.queue_arn): SEND, _id(stack, built["key"].key_arn): KMS_SEND}


def test_grant_send_on_an_sqs_managed_queue_gets_no_kms_statement(synth: dict) -> None:
    built = synth["built"]
    stack = built["stack"]
    granted = _granted(synth["templates"]["Constructs"], stack, built["sse_queue_producer"].role_arn, function=False)
    assert granted == {_id(stack, built["sse_queue"].queue.queue_arn): SEND}


@pytest.mark.parametrize("kind", ["Standard", "Fifo"])
def test_sqs_managed_encryption_gives_the_consumer_no_kms_statement(synth: dict, kind: str) -> None:
    stack = synth["sandbox"]
    granted = _granted(
        synth["templates"]["PaymentsSandbox"], stack, stack.processors[kind].function.function_name, function=True
    )
    assert not [a for actions in granted.values() for a in actions if a.startswith("kms:")]
