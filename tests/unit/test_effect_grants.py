"""EffectGrants on IdempotentQueueConsumer: each ``grant_effect_*`` method's exact actions and resources, the
prefix's rules, a function imported without its role, and cdk-nag and cfn-lint on the granted stack.

One synthesis for the module, in one app with both rule packs: stack ``EffectGrants`` (a consumer with a user
function, granted on the stores its effects write to, some under a customer-managed key), stack ``Stores`` (a bucket
of another stack) and stack ``Canary`` (a prefix grant made by hand, which cdk-nag must flag: the gate ran, and the
consumer's own prefix grants are clean because the library acknowledges them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cfnlint.api
import pytest
from aws_cdk import Acknowledgment, App, CfnParameter, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from constructs import Construct

from effectively_once import IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue
from effectively_once._effect_grants import MARKER_ACTIONS, EffectGrants, flatten_cfn_reference
from effectively_once.limits import IDEMPOTENCY_TABLE_ACTIONS

from .helpers import (
    CONTEXT,
    ENV,
    acknowledged_rules,
    actions_by_resource,
    function_role,
    inline_function,
    new_stack,
    role_statements,
    user_function,
)
from .test_consumer import CONSUME

CFN_LINT_ACCEPTED = {"W3005"}
PUT_GET_ITEM = ["dynamodb:GetItem", "dynamodb:PutItem"]
PUT_GET_OBJECT = ["s3:GetObject", "s3:PutObject"]
SENDER_KEY = ["kms:Decrypt", "kms:GenerateDataKey"]
IMPORTED_ARN = "arn:aws:lambda:us-east-1:123456789012:function:imported"
CANARY_FINDING = "AwsSolutions-IAM5[Resource::arn:aws:s3:::canary-bucket/canary/*]"


class _Effects(EffectGrants, Construct):
    """The mixin on a bare construct: anything with a ``function`` gets the methods."""

    def __init__(self, scope: Construct, id: str, function: lambda_.IFunction) -> None:
        super().__init__(scope, id)
        self.function = function


def _table(scope: Construct, id: str, key: kms.IKey | None = None) -> dynamodb.Table:
    return dynamodb.Table(
        scope,
        id,
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if key else dynamodb.TableEncryption.AWS_MANAGED,
        encryption_key=key,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
    )


def _bucket(scope: Construct, id: str, key: kms.IKey | None = None) -> s3.Bucket:
    bucket = s3.Bucket(
        scope,
        id,
        encryption=s3.BucketEncryption.KMS if key else s3.BucketEncryption.S3_MANAGED,
        encryption_key=key,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
    )
    # The user's own acknowledgement, as a user would state it (the fixture is about grants, not bucket logging).
    Validations.of(bucket.node.default_child).acknowledge(  # type: ignore[arg-type]
        Acknowledgment(id="AwsSolutions-S1", reason="A test fixture: its access logging is not what this test gates.")
    )
    return bucket


def _canary(app: App) -> None:
    """A prefix grant written by hand, without the library's acknowledgement: cdk-nag must report it."""
    stack = Stack(app, "Canary", env=ENV)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    bucket = s3.Bucket.from_bucket_name(stack, "Bucket", "canary-bucket")
    role.add_to_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects("canary/*")]))


def _grant_all(stack: Stack, consumer: IdempotentQueueConsumer, receipts: s3.IBucket) -> dict[str, Any]:
    """The stores of stack ``EffectGrants`` and one grant on each; returns them by name, with the grants."""
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    stores: dict[str, Any] = {
        "key": key,
        "ledger": _table(stack, "Ledger"),
        "keyed_ledger": _table(stack, "KeyedLedger", key),
        "bucket": _bucket(stack, "Bucket", key),
        "receipts": receipts,
        "fifo_outbox": ProcessingQueue(stack, "FifoOutbox", fifo=True, encryption_key=key).queue,
        "outbox": ProcessingQueue(stack, "Outbox").queue,
        "topic": sns.Topic(stack, "Topic", master_key=key, enforce_ssl=True),
        "aws_managed_topic": sns.Topic(
            stack,
            "AwsManagedTopic",
            master_key=kms.Alias.from_alias_name(stack, "SnsKey", "alias/aws/sns"),
            enforce_ssl=True,
        ),
    }
    stores["grants"] = {
        "table": consumer.grant_effect_table(stores["ledger"]),
        "keyed_table": consumer.grant_effect_table(stores["keyed_ledger"], transactions=True),
        "bucket": consumer.grant_effect_bucket(stores["bucket"], prefix="orders/"),
        "receipts": consumer.grant_effect_bucket(receipts),
        "fifo_queue": consumer.grant_effect_queue(stores["fifo_outbox"]),
        "queue": consumer.grant_effect_queue(stores["outbox"]),
        "topic": consumer.grant_effect_topic(stores["topic"]),
        "aws_managed_topic": consumer.grant_effect_topic(stores["aws_managed_topic"]),
    }
    return stores


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    outdir = tmp_path_factory.mktemp("effect-grants")
    app = App(context=CONTEXT, outdir=str(outdir), builtin_cloud_formation_validation=False)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    receipts = _bucket(Stack(app, "Stores", env=ENV), "Receipts")
    stack = Stack(app, "EffectGrants", env=ENV)
    function = user_function(stack, "Function")
    table = IdempotencyTable(stack, "Table")
    consumer = IdempotentQueueConsumer(
        stack, "Consumer", queue=ProcessingQueue(stack, "Queue"), function=function, table=table
    )
    built = _grant_all(stack, consumer, receipts)
    _canary(app)
    error = None
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings (the canary's): "ValidationFailed ... validation-report.json"
        error = str(exc)
    report_file = outdir / "validation-report.json"
    return {
        **built,
        "app": app,
        "stack": stack,
        "consumer": consumer,
        "function": function,
        "table": table,
        "outdir": outdir,
        "error": error,
        "report": json.loads(report_file.read_text()) if report_file.exists() else {"pluginReports": []},
        "template": json.loads((outdir / "EffectGrants.template.json").read_text()),
    }


def _statements(stack: Stack, grant: iam.Grant) -> list[tuple[list[str], Any]]:
    """The grant's identity-policy statements, resolved: (sorted actions, resource)."""
    resolved = [stack.resolve(statement.to_statement_json()) for statement in grant.principal_statements]
    for statement in resolved:
        assert statement["Effect"] == "Allow" and set(statement) == {"Effect", "Action", "Resource"}, statement
    return [(sorted(_as_list(s["Action"])), s["Resource"]) for s in resolved]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _key(stack: Stack, token: str) -> str:
    """A resource as ``actions_by_resource`` keys it."""
    resource = stack.resolve(token)
    return next(iter(actions_by_resource([{"Effect": "Allow", "Action": [], "Resource": resource}])))


def _granted(synth: dict) -> dict[str, set[str]]:
    """{resource key: actions} of every statement on the consumer function's role, from the template."""
    stack = synth["stack"]
    template = Template.from_json(synth["template"])
    role = function_role(template, stack.resolve(synth["function"].function_name)["Ref"])
    return actions_by_resource(role_statements(template, role))


def _findings(report: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (violation["ruleName"], resource["constructPath"])
        for plugin in report["pluginReports"]
        for violation in plugin.get("violations", [])
        for resource in violation["violatingConstructs"]
    )


# --- each grant: its exact actions and resources ---------------------------------------------------------
def test_every_method_returns_a_successful_grant(synth: dict) -> None:
    for name, grant in synth["grants"].items():
        assert isinstance(grant, iam.Grant) and grant.success, name


def test_table_grant_is_put_and_get_item_on_the_table_arn_only(synth: dict) -> None:
    stack = synth["stack"]
    assert _statements(stack, synth["grants"]["table"]) == [(PUT_GET_ITEM, stack.resolve(synth["ledger"].table_arn))]


def test_transactional_table_grant_adds_condition_check_and_decrypt_on_its_customer_managed_key(synth: dict) -> None:
    stack = synth["stack"]
    assert _statements(stack, synth["grants"]["keyed_table"]) == [
        (["dynamodb:ConditionCheckItem", *PUT_GET_ITEM], stack.resolve(synth["keyed_ledger"].table_arn)),
        (["kms:Decrypt"], stack.resolve(synth["key"].key_arn)),
    ]


def test_bucket_grant_is_put_and_get_object_under_the_prefix_plus_the_sender_key_actions(synth: dict) -> None:
    stack = synth["stack"]
    bucket_id = stack.get_logical_id(synth["bucket"].node.default_child)
    assert _statements(stack, synth["grants"]["bucket"]) == [
        (PUT_GET_OBJECT, {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/orders/*"]]}),
        (SENDER_KEY, stack.resolve(synth["key"].key_arn)),
    ]


def test_bucket_of_another_stack_without_prefix_is_granted_on_all_its_objects_and_no_key(synth: dict) -> None:
    stack = synth["stack"]
    [(actions, resource)] = _statements(stack, synth["grants"]["receipts"])
    assert actions == PUT_GET_OBJECT
    [reference, suffix] = resource["Fn::Join"][1]
    assert reference["Fn::GetStackOutput"]["StackName"] == "Stores" and suffix == "/*"


@pytest.mark.parametrize(("grant", "queue", "key"), [("fifo_queue", "fifo_outbox", True), ("queue", "outbox", False)])
def test_queue_grant_is_send_message_only_plus_the_sender_key_actions(
    synth: dict, grant: str, queue: str, key: bool
) -> None:
    stack = synth["stack"]
    key_statement = [(SENDER_KEY, stack.resolve(synth["key"].key_arn))] if key else []
    assert _statements(stack, synth["grants"][grant]) == [
        (["sqs:SendMessage"], stack.resolve(synth[queue].queue_arn)),
        *key_statement,
    ]


@pytest.mark.parametrize(("grant", "key"), [("topic", True), ("aws_managed_topic", False)])
def test_topic_grant_is_publish_only_plus_the_sender_key_actions_on_a_customer_managed_key(
    synth: dict, grant: str, key: bool
) -> None:
    # An AWS managed key (alias/aws/sns) needs no grant; CDK's grant on that alias would be on every key (key/*).
    stack = synth["stack"]
    topic = synth["topic" if key else "aws_managed_topic"]
    key_statement = [(SENDER_KEY, stack.resolve(synth["key"].key_arn))] if key else []
    assert _statements(stack, synth["grants"][grant]) == [
        (["sns:Publish"], stack.resolve(topic.topic_arn)),
        *key_statement,
    ]


def test_function_role_holds_the_consumer_grants_and_the_effect_grants_and_nothing_else(synth: dict) -> None:
    stack = synth["stack"]
    consumer = synth["consumer"]
    bucket_objects = stack.resolve(synth["bucket"].arn_for_objects("orders/*"))
    receipts_objects = synth["grants"]["receipts"].principal_statements[0].resources[0]
    assert _granted(synth) == {
        # the consumer's own grants, unchanged
        _key(stack, consumer.queue.queue_arn): CONSUME,
        _key(stack, synth["table"].table_arn): set(IDEMPOTENCY_TABLE_ACTIONS),
        _key(stack, consumer.dead_letter_queue.queue_arn): {"sqs:SendMessage"},
        _key(stack, synth["function"].log_group.log_group_arn): {"logs:CreateLogStream", "logs:PutLogEvents"},
        # the effect grants (the key's statements merged: Decrypt for the table, both for the senders)
        _key(stack, synth["ledger"].table_arn): set(PUT_GET_ITEM),
        _key(stack, synth["keyed_ledger"].table_arn): {"dynamodb:ConditionCheckItem", *PUT_GET_ITEM},
        _key(stack, synth["key"].key_arn): set(SENDER_KEY),
        _key(stack, bucket_objects): set(PUT_GET_OBJECT),
        _key(stack, receipts_objects): set(PUT_GET_OBJECT),
        _key(stack, synth["fifo_outbox"].queue_arn): {"sqs:SendMessage"},
        _key(stack, synth["outbox"].queue_arn): {"sqs:SendMessage"},
        _key(stack, synth["topic"].topic_arn): {"sns:Publish"},
        _key(stack, synth["aws_managed_topic"].topic_arn): {"sns:Publish"},
    }


def test_markers_are_covered_by_the_consumers_idempotency_table_grant(synth: dict) -> None:
    granted = _granted(synth)[_key(synth["stack"], synth["table"].table_arn)]
    assert set(MARKER_ACTIONS) <= granted
    assert set(MARKER_ACTIONS) == {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:DeleteItem"}


# --- cdk-nag and cfn-lint ----------------------------------------------------------------------------------
def test_cdk_nag_ran_and_flagged_the_canarys_unacknowledged_prefix_grant(synth: dict) -> None:
    assert "validation-report.json" in synth["error"]
    canary = [finding for finding in _findings(synth["report"]) if finding[1].startswith("Canary/")]
    assert canary == [(CANARY_FINDING, "Canary/Role/DefaultPolicy/Resource")]


def test_no_cdk_nag_finding_outside_the_canary(synth: dict) -> None:
    assert [finding for finding in _findings(synth["report"]) if not finding[1].startswith("Canary/")] == []


def test_only_each_prefix_grants_own_wildcard_finding_is_acknowledged(synth: dict) -> None:
    stack = synth["stack"]
    bucket_id = stack.get_logical_id(synth["bucket"].node.default_child)
    [(_, receipts)] = _statements(stack, synth["grants"]["receipts"])
    # cdk-nag flattens a cross-stack reference (Fn::GetStackOutput) as its compact JSON
    reference = json.dumps(receipts["Fn::Join"][1][0], separators=(",", ":"))
    role = synth["function"].role.node.path
    assert {rule for path, rule in acknowledged_rules(synth["app"]) if path == role} == {
        f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/orders/*]",
        f"AwsSolutions-IAM5[Resource::{reference}/*]",
    }


def test_cfn_lint_finds_nothing_but_w3005(synth: dict) -> None:
    findings = []
    for path in sorted(Path(synth["outdir"]).glob("*.template.json")):
        if path.name.startswith("Canary"):
            continue
        for match in cfnlint.api.lint(path.read_text(), regions=[ENV.region]):
            if match.rule.id not in CFN_LINT_ACCEPTED:
                findings.append(f"{path.name}: {match}")
    assert findings == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket1", "Arn"]}, "/a/*"]]}, "<Bucket1.Arn>/a/*"),
        ({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::b/*"]]}, "arn:<AWS::Partition>:s3:::b/*"),
        ({"Fn::Sub": "arn:${AWS::Partition}:s3:::b/*"}, "arn:<AWS::Partition>:s3:::b/*"),
        ({"Fn::ImportValue": "Other:Export"}, "Other:Export"),
        ({"Fn::Select": [0, ["a"]]}, '{"Fn::Select":[0,["a"]]}'),
    ],
)
def test_flatten_gives_cdk_nags_finding_form(value: Any, expected: str) -> None:
    assert flatten_cfn_reference(value) == expected


# --- validation, tokens, and a function without its role (a bare construct: no synth of the module's app) --------
@pytest.fixture
def effects() -> _Effects:
    stack = new_stack()
    return _Effects(stack, "Effects", inline_function(stack, "Function"))


@pytest.mark.parametrize(
    ("prefix", "shown", "rule"),
    [
        ("orders/*", "'orders/*'", "must not contain '*' or '?'"),
        ("order?/", "'order?/'", "must not contain '*' or '?'"),
        ("${aws:username}/", "'${aws:username}/'", "or '${' (a policy variable)"),
        ("/orders/", "'/orders/'", "must not start with '/'"),
        ("x" * 1025, "a 1025-byte prefix", "must be at most 1024 bytes of UTF-8"),
        ("é" * 513, "a 1026-byte prefix", "must be at most 1024 bytes of UTF-8"),
        (7, "7", "must be a string"),
    ],
)
def test_fails_on_a_bad_prefix_naming_the_prop_the_value_and_the_rule(
    effects: _Effects, prefix: Any, shown: str, rule: str
) -> None:
    bucket = s3.Bucket.from_bucket_name(effects, "Bucket", "effects")
    with pytest.raises(ValueError) as error:
        effects.grant_effect_bucket(bucket, prefix=prefix)
    assert str(error.value).startswith("prefix ")
    assert rule in str(error.value) and f"but {shown} was given" in str(error.value)
    assert not effects.function.role.node.try_find_child("DefaultPolicy")  # type: ignore[union-attr]


def test_a_prefix_of_1024_bytes_and_a_deploy_time_prefix_are_granted(effects: _Effects) -> None:
    stack = Stack.of(effects)
    bucket = s3.Bucket.from_bucket_name(effects, "Bucket", "effects")
    long = effects.grant_effect_bucket(bucket, prefix="x" * 1024)
    token = effects.grant_effect_bucket(bucket, prefix=CfnParameter(stack, "Prefix").value_as_string)
    [(_, long_resource)] = _statements(stack, long)
    [(_, token_resource)] = _statements(stack, token)
    assert long_resource == "arn:aws:s3:::effects/" + "x" * 1024 + "*"
    assert {"Ref": "Prefix"} in token_resource["Fn::Join"][1]


def test_fails_on_transactions_that_is_not_a_bool(effects: _Effects) -> None:
    table = dynamodb.Table.from_table_name(effects, "Table", "effects")
    with pytest.raises(ValueError, match=r"^transactions must be a bool, but 'yes' was given"):
        effects.grant_effect_table(table, transactions="yes")  # type: ignore[arg-type]


def test_imported_function_without_role_gets_a_dropped_grant_and_a_warning_naming_what_to_grant() -> None:
    stack = new_stack()
    effects = _Effects(stack, "Effects", lambda_.Function.from_function_arn(stack, "Imported", IMPORTED_ARN))
    key = kms.Key(stack, "Key")
    grant = effects.grant_effect_queue(
        ProcessingQueue(stack, "Outbox", encryption_key=key).queue  # a customer-managed key: named too
    )
    assert grant.success is False and grant.principal_statements == []
    warnings = Annotations.from_stack(stack).find_warning(
        "/Test/Effects",
        Match.string_like_regexp(
            r"function was imported without its role: grant it sqs:SendMessage on .*OutboxQueue.*, and "
            r"kms:GenerateDataKey, kms:Decrypt on its customer-managed key yourself"
        ),
    )
    assert len(warnings) == 1
    assert not [r for r in Stack.of(effects).node.find_all() if isinstance(r, iam.CfnPolicy)]


def test_the_event_consumer_grants_the_same_effect_actions() -> None:
    """Both consumer constructs carry the grants (issue 24, item 7): IdempotentEventConsumer's, checked on its role."""
    from effectively_once import IdempotentEventConsumer

    stack = new_stack()
    fn = user_function(stack, "Events")
    consumer = IdempotentEventConsumer(stack, "EventConsumer", function=fn, table=IdempotencyTable(stack, "Table"))
    outbox = dynamodb.Table(
        stack, "Outbox", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    receipts = s3.Bucket(stack, "Receipts")

    grants = [consumer.grant_effect_table(outbox), consumer.grant_effect_bucket(receipts, prefix="receipts/")]

    assert all(isinstance(g, iam.Grant) and g.success for g in grants)
    template = Template.from_stack(stack)
    role = function_role(template, stack.resolve(fn.node.default_child.logical_id))
    granted = actions_by_resource(role_statements(template, role))
    assert sorted(granted[stack.resolve(outbox.table_arn)["Fn::GetAtt"][0]]) == PUT_GET_ITEM
    bucket = stack.resolve(receipts.bucket_arn)["Fn::GetAtt"][0]
    assert sorted(granted[f"{bucket}/receipts/*"]) == PUT_GET_OBJECT
