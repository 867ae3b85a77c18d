"""IdempotencyTable: documented defaults and the exact idempotency grant."""

from __future__ import annotations

import pytest
from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk.assertions import Annotations, Match, Template

from effectively_once import IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue
from effectively_once.limits import IDEMPOTENCY_TABLE_ACTIONS

from .helpers import actions_by_resource, find_one, function_role, inline_function, new_app, new_stack, role_statements


@pytest.fixture(scope="module")
def synth() -> dict:
    stack = new_stack()
    default = IdempotencyTable(stack, "Idempotency")
    IdempotencyTable(stack, "Destroyable", removal_policy=RemovalPolicy.DESTROY, table_name="idempotency")
    IdempotencyTable(
        stack,
        "Warm",
        table_name="warm",
        warm_throughput=dynamodb.WarmThroughput(write_units_per_second=8_000, read_units_per_second=24_000),
    )
    function = inline_function(stack, "Function")
    grant = default.grant_idempotency(function)
    template = Template.from_stack(stack)
    default_id = stack.resolve(default.table.table_name)["Ref"]
    return {
        "template": template,
        "default_id": default_id,
        "function": stack.resolve(function.function_name)["Ref"],
        "grant": grant,
    }


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


def test_warm_throughput_defaults_to_none_on_demands_initial_throughput(synth: dict) -> None:
    assert "WarmThroughput" not in _default(synth)["Properties"]


def test_warm_throughput_is_passed_to_the_table(synth: dict) -> None:
    _, table = find_one(synth["template"], "AWS::DynamoDB::Table", {"TableName": "warm"})
    assert table["Properties"]["WarmThroughput"] == {"WriteUnitsPerSecond": 8_000, "ReadUnitsPerSecond": 24_000}
    assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"


def test_fails_warm_throughput_of_another_type() -> None:
    with pytest.raises(ValueError, match=r"warm_throughput must be a dynamodb.WarmThroughput"):
        IdempotencyTable(new_stack(), "Warm", warm_throughput={"write_units_per_second": 8_000})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("units", "prop"),
    [
        ({"write_units_per_second": 0}, "write_units_per_second"),
        ({"read_units_per_second": -1}, "read_units_per_second"),
        ({"write_units_per_second": 4_000.5}, "write_units_per_second"),
    ],
)
def test_fails_warm_throughput_units_below_one_or_not_whole(units: dict, prop: str) -> None:
    with pytest.raises(
        ValueError, match=rf"warm_throughput.{prop} must be a whole number of at least 1.*CloudFormation"
    ):
        IdempotencyTable(new_stack(), "Warm", warm_throughput=dynamodb.WarmThroughput(**units))


# --- the table's identity reaches the runtime whole (issue 12 section 3) ---------------------------------------
FOREIGN_ARN = "arn:aws:dynamodb:us-east-1:999999999999:table/shared"
OTHER_REGION_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/regional"


@pytest.fixture(scope="module")
def identity() -> dict:
    """One consumer per kind of table, in account 123456789012 / us-east-1 (helpers.ENV)."""
    stack = new_stack()
    tables = {
        "own": IdempotencyTable(stack, "Own"),
        "by_name": IdempotencyTable.from_table_name(stack, "ByName", "mine"),
        "foreign": IdempotencyTable.from_table_arn(stack, "Shared", FOREIGN_ARN),
        "other_region": IdempotencyTable.from_table_arn(stack, "Regional", OTHER_REGION_ARN),
    }
    functions = {}
    for name, table in tables.items():
        functions[name] = inline_function(stack, f"{name}Function")
        IdempotentQueueConsumer(
            stack,
            f"{name}Consumer",
            queue=ProcessingQueue(stack, f"{name}Queue"),
            function=functions[name],
            table=table,
        )
    resources = Template.from_stack(stack).to_json()["Resources"]

    def environment(name: str) -> dict:
        function_id = stack.resolve(functions[name].function_name)["Ref"]
        return resources[function_id]["Properties"]["Environment"]["Variables"]

    return {"stack": stack, "tables": tables, "environment": environment, "annotations": Annotations.from_stack(stack)}


def test_table_imported_from_another_account_reaches_the_function_as_its_arn(identity: dict) -> None:
    # A bare name would address the consumer's own account at runtime: every record would fail into the DLQ.
    assert identity["environment"]("foreign")["IDEMPOTENCY_TABLE_NAME"] == FOREIGN_ARN


def test_table_imported_from_another_region_reaches_the_function_as_its_arn(identity: dict) -> None:
    assert identity["environment"]("other_region")["IDEMPOTENCY_TABLE_NAME"] == OTHER_REGION_ARN


def test_own_table_reaches_the_function_as_its_arn(identity: dict) -> None:
    own = identity["tables"]["own"]
    table_id = identity["stack"].resolve(own.table.table_name)["Ref"]
    assert identity["environment"]("own")["IDEMPOTENCY_TABLE_NAME"] == {"Fn::GetAtt": [table_id, "Arn"]}
    assert identity["stack"].resolve(own.table_arn) == {"Fn::GetAtt": [table_id, "Arn"]}


def test_table_imported_by_name_is_an_arn_in_the_stacks_account_and_region(identity: dict) -> None:
    variable = identity["environment"]("by_name")["IDEMPOTENCY_TABLE_NAME"]
    assert variable == "arn:aws:dynamodb:us-east-1:123456789012:table/mine"


def test_table_arn_attribute_is_the_imported_arn(identity: dict) -> None:
    assert identity["tables"]["foreign"].table_arn == FOREIGN_ARN
    assert identity["tables"]["foreign"].table_name == "shared"


def test_table_in_another_region_is_a_warning_naming_the_region(identity: dict) -> None:
    warnings = identity["annotations"].find_warning(
        "*", Match.string_like_regexp("effectively-once:tableInOtherRegion")
    )
    assert len(warnings) == 1
    (warning,) = warnings
    assert warning.id == "/Test/other_regionConsumer"
    assert "eu-west-1" in warning.entry.data and "us-east-1" in warning.entry.data


def test_table_in_another_account_is_a_warning_about_its_resource_policy(identity: dict) -> None:
    warnings = identity["annotations"].find_warning(
        "*", Match.string_like_regexp("effectively-once:tableInOtherAccount")
    )
    assert [w.id for w in warnings] == ["/Test/foreignConsumer"]
    assert "999999999999" in warnings[0].entry.data and "resource-based policy" in warnings[0].entry.data


def test_tables_in_the_stacks_account_and_region_warn_nothing(identity: dict) -> None:
    for name in ("own", "by_name"):
        assert identity["annotations"].find_warning(f"/Test/{name}Consumer", Match.any_value()) == []


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:sqs:us-east-1:123456789012:shared",
        "arn:aws:dynamodb:us-east-1:123456789012:table",
        "arn:aws:dynamodb:us-east-1:123456789012:stream/shared",
        "shared",
    ],
)
def test_fails_from_table_arn_without_a_table_arn(arn: str) -> None:
    with pytest.raises(
        ValueError, match=r"table_arn must be a DynamoDB table ARN.*but '.*' was given \(source: Amazon DynamoDB"
    ):
        IdempotencyTable.from_table_arn(new_stack(), "Shared", arn)


def test_table_imported_by_name_in_an_environment_agnostic_stack_is_an_arn_of_the_deploy_account() -> None:
    stack = Stack(new_app(), "Agnostic")
    function = inline_function(stack, "Function")
    IdempotentQueueConsumer(
        stack,
        "Consumer",
        queue=ProcessingQueue(stack, "Queue"),
        function=function,
        table=IdempotencyTable.from_table_name(stack, "ByName", "mine"),
    )
    template = Template.from_stack(stack)
    variables = template.to_json()["Resources"][stack.resolve(function.function_name)["Ref"]]["Properties"][
        "Environment"
    ]["Variables"]
    assert variables["IDEMPOTENCY_TABLE_NAME"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":dynamodb:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":table/mine",
            ],
        ]
    }
    assert Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("tableInOther")) == []
