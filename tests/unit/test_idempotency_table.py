"""IdempotencyTable: documented defaults and the exact idempotency grant."""

from __future__ import annotations

import pytest
from aws_cdk import RemovalPolicy
from aws_cdk.assertions import Match, Template

from effectively_once import IdempotencyTable
from effectively_once.limits import IDEMPOTENCY_TABLE_ACTIONS

from .helpers import actions_by_resource, find_one, function_role, inline_function, new_stack, role_statements


@pytest.fixture(scope="module")
def synth() -> dict:
    stack = new_stack()
    default = IdempotencyTable(stack, "Idempotency")
    IdempotencyTable(stack, "Destroyable", removal_policy=RemovalPolicy.DESTROY, table_name="idempotency")
    function = inline_function(stack, "Function")
    grant = default.grant_idempotency(function)
    template = Template.from_stack(stack)
    default_id = stack.resolve(default.table.table_name)["Ref"]
    return {"template": template, "default_id": default_id, "function": stack.resolve(function.function_name)["Ref"], "grant": grant}


def _default(synth: dict) -> dict:
    return synth["template"].to_json()["Resources"][synth["default_id"]]


def test_partition_key_is_id_string(synth: dict) -> None:
    props = _default(synth)["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "id", "AttributeType": "S"}]


def test_ttl_attribute_is_expiration(synth: dict) -> None:
    assert _default(synth)["Properties"]["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}


def test_billing_is_on_demand(synth: dict) -> None:
    assert _default(synth)["Properties"]["BillingMode"] == "PAY_PER_REQUEST"


def test_encryption_is_explicit(synth: dict) -> None:
    assert _default(synth)["Properties"]["SSESpecification"] == {"SSEEnabled": True}


def test_point_in_time_recovery_is_on(synth: dict) -> None:
    assert _default(synth)["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_removal_policy_defaults_to_retain(synth: dict) -> None:
    resource = _default(synth)
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"


def test_removal_policy_and_name_are_props(synth: dict) -> None:
    synth["template"].has_resource(
        "AWS::DynamoDB::Table",
        {"Properties": Match.object_like({"TableName": "idempotency"}), "DeletionPolicy": "Delete"},
    )


def test_grant_idempotency_is_exactly_the_four_item_actions(synth: dict) -> None:
    template = synth["template"]
    by_resource = actions_by_resource(role_statements(template, function_role(template, synth["function"])))
    assert by_resource == {synth["default_id"]: set(IDEMPOTENCY_TABLE_ACTIONS)}
    assert set(IDEMPOTENCY_TABLE_ACTIONS) == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    }


def test_grant_idempotency_returns_a_successful_grant(synth: dict) -> None:
    assert synth["grant"].success


def test_table_has_no_other_attributes_or_indexes(synth: dict) -> None:
    props = _default(synth)["Properties"]
    assert "GlobalSecondaryIndexes" not in props
    assert "LocalSecondaryIndexes" not in props
    find_one(synth["template"], "AWS::DynamoDB::Table", {"TableName": "idempotency"})
