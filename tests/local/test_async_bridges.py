"""Lambda's asynchronous path in the local AWS (issue 23): the bridges that put an EventBridge rule's and an SNS
subscription's events in the function's inbox (``moto_async_bridges.eventbridge_lambda_targets``,
``sns_lambda_subscriptions``; docs/moto-bugs.md, reports 9 and 10), each shown with moto as is and fixed, and the
discovery of a deployed stack's asynchronous targets from its synthesized template
(``discovery.discover_async_targets``), on a small CDK stack with an ``IdempotentEventConsumer``, a rule on a custom bus
and an SNS lambda subscription."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.aws import async_inbox, moto_async_bridges
from effectively_once_local.aws import moto_patches as _moto_server
from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.aws.discovery import AsyncSource, disable, discover_async_targets
from effectively_once_local.traffic.producer import EVENT_ID_HEADER

from .conftest import PARTITION, source_env

ACCOUNT = "123456789012"
REGION = "us-east-1"
#: An event's ``time`` as EventBridge delivers it.
EVENT_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _moto_as_is(method: Any) -> Any:
    """moto's own method under a bridge of ``moto_async_bridges`` (the method itself when it is not bridged)."""
    return method.__wrapped__ if getattr(method, moto_async_bridges._BRIDGED, False) else method


@pytest.fixture
def aws(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto in process, with moto's EventBridge and SNS delivery as is (restored after the test), the EventBus Ref
    fix applied (report 8), and no endpoint or time scale from the environment."""
    from moto.awslambda import models as lambda_models
    from moto.events import models as events_models
    from moto.sns import models as sns_models

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setattr(lambda_models.LambdaBackend, "invoke", _moto_as_is(lambda_models.LambdaBackend.invoke))
    monkeypatch.delenv(async_inbox.TIME_SCALE_ENV, raising=False)
    monkeypatch.setattr(events_models.Rule, "send_to_targets", _moto_as_is(events_models.Rule.send_to_targets))
    monkeypatch.setattr(sns_models.Subscription, "publish", _moto_as_is(sns_models.Subscription.publish))
    if "physical_resource_id" not in vars(events_models.EventBus):
        _moto_server.event_bus_ref_is_its_name()
        request.addfinalizer(lambda: delattr(events_models.EventBus, "physical_resource_id"))
    with mock_aws():
        yield


def _bridge() -> None:
    for _ in (1, 2):  # a second call wraps nothing twice
        _moto_server.eventbridge_lambda_targets()
        _moto_server.sns_lambda_subscriptions()
        _moto_server.lambda_event_invocations()


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def bridged(request: pytest.FixtureRequest, aws: None) -> bool:
    """Whether the bridges are applied."""
    if request.param:
        _bridge()
    return bool(request.param)


@pytest.fixture
def with_bridges(aws: None) -> None:
    _bridge()


def _function(name: str = "pay", timeout: int = 4) -> str:
    """A function (never run: the bridges only queue its events); its ARN."""
    role = boto3.client("iam", region_name=REGION).create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")[
        "Role"
    ]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    return str(
        boto3.client("lambda", region_name=REGION).create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role,
            Handler="index.handler",
            Timeout=timeout,
            Code={"ZipFile": code.getvalue()},
        )["FunctionArn"]
    )


def _rule(function_arn: str, bus: str = "payments", **target: Any) -> None:
    events = boto3.client("events", region_name=REGION)
    events.create_event_bus(Name=bus)
    pattern = {"source": ["shop"], "detail-type": ["PaymentRequested"]}
    events.put_rule(Name="payments-to-fn", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="payments-to-fn", EventBusName=bus, Targets=[{"Id": "fn", "Arn": function_arn, **target}])


def _put(detail: dict[str, Any], bus: str = "payments", source: str = "shop", **entry: Any) -> str:
    answer = boto3.client("events", region_name=REGION).put_events(
        Entries=[
            {"Source": source, "DetailType": "PaymentRequested", "Detail": json.dumps(detail), "EventBusName": bus}
            | entry
        ]
    )
    assert answer["FailedEntryCount"] == 0
    return str(answer["Entries"][0]["EventId"])


def _inbox(function_name: str = "pay") -> list[tuple[Any, str]]:
    """The inbox's messages ``(body as JSON, source attribute)``; ``[]`` when it does not exist."""
    sqs = boto3.client("sqs", region_name=REGION)
    try:
        url = sqs.get_queue_url(QueueName=async_inbox.inbox_name(function_name))["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        return []
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    return [
        (json.loads(m["Body"]), m["MessageAttributes"][async_inbox.SOURCE_ATTRIBUTE]["StringValue"])
        for m in messages.get("Messages", [])
    ]


# --- EventBridge ---------------------------------------------------------------------------------------------


def test_put_events_on_a_custom_bus_reaches_the_inbox(bridged: bool) -> None:
    function_arn = _function()
    _rule(function_arn)

    if not bridged:
        with pytest.raises(NotImplementedError, match="Expr not defined"):
            _put({"payment_id": "p-1"})
        assert _inbox() == [], "moto as is: the reason for the fix (if this fails, moto delivers to Lambda now)"
        return
    event_id = _put({"payment_id": "p-1", "amount": 5}, Resources=["arn:x"])

    [(event, source)] = _inbox()
    assert source == async_inbox.EVENTBRIDGE
    assert list(event) == list(_moto_server.EVENT_FIELDS)
    assert {k: v for k, v in event.items() if k != "time"} == {
        "version": "0",
        "id": event_id,
        "detail-type": "PaymentRequested",
        "source": "shop",
        "account": ACCOUNT,
        "region": REGION,
        "resources": ["arn:x"],
        "detail": {"payment_id": "p-1", "amount": 5},
    }
    assert EVENT_TIME.fullmatch(event["time"])
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.get_queue_url(QueueName=async_inbox.inbox_name("pay"))["QueueUrl"]
    visibility = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    assert visibility == {"VisibilityTimeout": "9"}, "the function's 4 s timeout plus 5 s"


@pytest.mark.usefixtures("with_bridges")
def test_an_event_the_pattern_does_not_match_is_not_queued() -> None:
    _rule(_function())
    events = boto3.client("events", region_name=REGION)
    events.put_rule(Name="default-rule", EventPattern=json.dumps({"source": ["shop"]}))

    _put({"payment_id": "other-source"}, source="warehouse")
    _put({"payment_id": "other-bus"}, bus="default")  # the rule on the default bus has no target

    assert _inbox() == []
    _put({"payment_id": "p-1"})
    assert [event["detail"] for event, _ in _inbox()] == [{"payment_id": "p-1"}]


@pytest.mark.usefixtures("with_bridges")
def test_the_rules_other_targets_are_still_moto_s() -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="audit")["QueueUrl"]
    queue_arn = f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:audit"
    function_arn = _function()
    _rule(function_arn)
    boto3.client("events", region_name=REGION).put_targets(
        Rule="payments-to-fn", EventBusName="payments", Targets=[{"Id": "audit", "Arn": queue_arn}]
    )

    _put({"payment_id": "p-1"})

    assert [event["detail"] for event, _ in _inbox()] == [{"payment_id": "p-1"}]
    [audit] = sqs.receive_message(QueueUrl=url)["Messages"]
    assert json.loads(audit["Body"])["detail"] == {"payment_id": "p-1"}


@pytest.mark.usefixtures("with_bridges")
def test_an_input_transformer_is_applied() -> None:
    transformer = {
        "InputPathsMap": {"pid": "$.detail.payment_id", "when": "$.time"},
        "InputTemplate": '{"payment": "<pid>", "at": "<when>"}',
    }
    _rule(_function(), InputTransformer=transformer)

    _put({"payment_id": "p-1"})

    [(event, _)] = _inbox()
    assert event["payment"] == "p-1"
    assert EVENT_TIME.fullmatch(event["at"])


@pytest.mark.usefixtures("with_bridges")
@pytest.mark.parametrize(
    "target", [{"Input": '{"constant": 1}'}, {"InputPath": "$.detail"}], ids=["input", "input-path"]
)
def test_input_and_input_path_are_refused(target: dict[str, str]) -> None:
    _rule(_function(), **target)

    with pytest.raises(NotImplementedError, match=next(iter(target))):
        _put({"payment_id": "p-1"})
    assert _inbox() == []


# --- a direct Invoke with InvocationType Event (report 12) ------------------------------------------------------


def test_an_event_invocation_reaches_the_inbox(bridged: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.awslambda.models import LambdaFunction

    handed_to_docker: list[Any] = []  # moto as is runs it in its Docker-backed Lambda: recorded instead

    def run_in_docker(self: Any, *args: Any, **kwargs: Any) -> bytes:
        handed_to_docker.append(self.function_name)
        return b"error running docker"

    monkeypatch.setattr(LambdaFunction, "invoke", run_in_docker)
    _function()
    lam = boto3.client("lambda", region_name=REGION)

    answer = lam.invoke(FunctionName="pay", InvocationType="Event", Payload=b'{"payment_id": "p-1"}')

    assert answer["StatusCode"] == 202
    if not bridged:
        assert (handed_to_docker, _inbox()) == (["pay"], []), "moto as is: the reason for the fix"
        return
    assert handed_to_docker == [] and answer["Payload"].read() == b""
    event_id = answer["ResponseMetadata"]["HTTPHeaders"][EVENT_ID_HEADER]
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.get_queue_url(QueueName=async_inbox.inbox_name("pay"))["QueueUrl"]
    [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    attributes = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
    assert json.loads(message["Body"]) == {"payment_id": "p-1"}, "the payload as it is: the event"
    assert attributes == {async_inbox.SOURCE_ATTRIBUTE: async_inbox.INVOKE, async_inbox.EVENT_ID_ATTRIBUTE: event_id}
    # A request-response invocation is moto's own, as before.
    lam.invoke(FunctionName="pay", Payload=b"{}")
    assert handed_to_docker == ["pay"]


# --- SNS -----------------------------------------------------------------------------------------------------


def test_an_sns_publish_reaches_the_inbox(bridged: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.awslambda.models import LambdaBackend

    handed_to_docker: list[str] = []  # moto as is hands the message to its Docker-backed Lambda: recorded instead
    monkeypatch.setattr(LambdaBackend, "send_sns_message", lambda self, name, *a, **k: handed_to_docker.append(name))
    function_arn = _function()
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="payments")["TopicArn"]
    subscription = sns.subscribe(TopicArn=topic, Protocol="lambda", Endpoint=function_arn)["SubscriptionArn"]

    message_id = sns.publish(
        TopicArn=topic,
        Message=json.dumps({"default": "plain", "lambda": '{"payment_id": "p-1"}'}),
        MessageStructure="json",
        Subject="payment",
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "charge"}},
    )["MessageId"]

    if not bridged:
        assert (handed_to_docker, _inbox()) == (["pay"], []), "moto as is: the reason for the fix"
        return
    assert handed_to_docker == []
    [(event, source)] = _inbox()
    assert source == async_inbox.SNS
    [record] = event["Records"]
    assert {k: v for k, v in record.items() if k != "Sns"} == {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "EventSubscriptionArn": subscription,
    }
    sns_part = record["Sns"]
    assert set(sns_part) == {
        "Type",
        "MessageId",
        "TopicArn",
        "Subject",
        "Message",
        "Timestamp",
        "SignatureVersion",
        "Signature",
        "SigningCertUrl",
        "UnsubscribeUrl",
        "MessageAttributes",
    }
    assert (sns_part["Type"], sns_part["MessageId"], sns_part["TopicArn"]) == ("Notification", message_id, topic)
    assert (sns_part["Subject"], sns_part["Message"]) == ("payment", '{"payment_id": "p-1"}')
    assert sns_part["MessageAttributes"] == {"kind": {"Type": "String", "Value": "charge"}}
    assert sns_part["UnsubscribeUrl"].endswith(f"SubscriptionArn={subscription}")


@pytest.mark.usefixtures("with_bridges")
def test_an_sns_filter_policy_is_applied() -> None:
    function_arn = _function()
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="payments")["TopicArn"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="lambda",
        Endpoint=function_arn,
        Attributes={"FilterPolicy": json.dumps({"kind": ["charge"]})},
    )

    for kind in ("refund", "charge"):
        sns.publish(
            TopicArn=topic, Message=kind, MessageAttributes={"kind": {"DataType": "String", "StringValue": kind}}
        )

    assert [event["Records"][0]["Sns"]["Message"] for event, _ in _inbox()] == ["charge"]


def test_the_local_aws_server_bridges_eventbridge_and_sns(monkeypatch: pytest.MonkeyPatch) -> None:
    # The server the tooling starts (python -m effectively_once_local.aws.moto_patches, every patch applied).
    from effectively_once_local.aws.server import MotoServer, aws_env

    monkeypatch.delenv(async_inbox.TIME_SCALE_ENV, raising=False)
    with MotoServer() as server:
        for name, value in aws_env(server.endpoint).items():
            monkeypatch.setenv(name, value)
        function_arn = _function()
        _rule(function_arn)
        event_id = _put({"payment_id": "p-1"})
        sns = boto3.client("sns", region_name=REGION)
        topic = sns.create_topic(Name="payments")["TopicArn"]
        sns.subscribe(TopicArn=topic, Protocol="lambda", Endpoint=function_arn)
        sns.publish(TopicArn=topic, Message="p-2")

        received = sorted(_inbox(), key=lambda message: message[1])

    assert [(source, event.get("id")) for event, source in received] == [("eventbridge", event_id), ("sns", None)]
    assert received[1][0]["Records"][0]["Sns"]["Message"] == "p-2"


# --- discovery ---------------------------------------------------------------------------------------------

STACK = "AsyncTargets"


@pytest.fixture(scope="module")
def cdk_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthesized small stack: a function with an ``IdempotentEventConsumer`` (1 retry, 2 minutes, its
    on-failure queue), a rule on a custom bus and an SNS topic with a ``LambdaSubscription`` of it."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("async-stack")
    (root / "code").mkdir()
    (root / "code" / "index.py").write_text("def handler(event, context):\n    return None\n", encoding="utf-8")
    app = f"""
import aws_cdk as cdk
from aws_cdk import Duration, aws_events as events, aws_events_targets as targets, aws_lambda as lambda_
from aws_cdk import aws_sns as sns, aws_sns_subscriptions as subscriptions
from effectively_once import IdempotencyTable, IdempotentEventConsumer

app = cdk.App(outdir={str(root / "cdk.out")!r})
stack = cdk.Stack(app, {STACK!r}, synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
fn = lambda_.Function(stack, "Pay", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler",
                      code=lambda_.Code.from_asset({str(root / "code")!r}), timeout=Duration.seconds(7))
IdempotentEventConsumer(stack, "Events", function=fn, table=IdempotencyTable(stack, "Table"), retry_attempts=1,
                        max_event_age=Duration.minutes(2), alarms=False)
events.Rule(stack, "Payments", event_bus=events.EventBus(stack, "Bus", event_bus_name="payments"),
            event_pattern=events.EventPattern(source=["shop"], detail_type=["PaymentRequested"]),
            targets=[targets.LambdaFunction(fn)])
sns.Topic(stack, "Topic").add_subscription(subscriptions.LambdaSubscription(fn))
app.synth()
"""
    # A subprocess: aws-cdk-lib's jsii runtime stays out of the test process.
    subprocess.run([sys.executable, "-c", app], check=True, env=source_env(), timeout=300)
    return root / "cdk.out"


def _create_stack(cdk_out: Path, stack: str = STACK) -> None:
    """CreateStack of the synthesized template, its function code published where the template points (the CDK
    CLI's asset publishing)."""
    template = json.loads((cdk_out / f"{stack}.template.json").read_text(encoding="utf-8"))
    s3 = boto3.client("s3", region_name=REGION)
    for resource in template["Resources"].values():
        code = resource.get("Properties", {}).get("Code", {})
        if resource["Type"] != "AWS::Lambda::Function" or "S3Key" not in code:
            continue
        bucket = code["S3Bucket"]["Fn::Sub"].replace("${AWS::AccountId}", ACCOUNT).replace("${AWS::Region}", REGION)
        if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
            s3.create_bucket(Bucket=bucket)
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zipped:
            for path in (cdk_out / f"asset.{code['S3Key'].split('.')[0]}").rglob("*"):
                zipped.write(path, path.name)
        s3.put_object(Bucket=bucket, Key=code["S3Key"], Body=archive.getvalue())
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName=stack, TemplateBody=json.dumps(template), Capabilities=["CAPABILITY_IAM"]
    )


def _physical(logical_prefix: str, resource_type: str) -> str:
    """The physical id of the stack's one resource of ``resource_type`` whose logical id starts with
    ``logical_prefix``."""
    resources = boto3.client("cloudformation", region_name=REGION).list_stack_resources(StackName=STACK)
    [physical] = [
        r["PhysicalResourceId"]
        for r in resources["StackResourceSummaries"]
        if r["LogicalResourceId"].startswith(logical_prefix) and r["ResourceType"] == resource_type
    ]
    return str(physical)


@pytest.mark.usefixtures("with_bridges")
def test_discovery_reads_the_template_creates_the_subscription_and_the_sources_deliver(cdk_out: Path) -> None:
    _create_stack(cdk_out)
    session = boto3.Session(region_name=REGION)
    sns = session.client("sns")
    topic_arn = _physical("Topic", "AWS::SNS::Topic")
    assert sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"] == [], "moto skips the resource"

    [target] = discover_async_targets(session, STACK, cdk_out)

    function = session.client("lambda").get_function_configuration(
        FunctionName=_physical("Pay", "AWS::Lambda::Function")
    )
    on_failure_url = session.client("sqs").get_queue_url(
        QueueName=_physical("EventsOnFailureQueue", "AWS::SQS::Queue").split("/")[-1]
    )
    assert target.label == target.mapping.label and target.label.startswith("async-Pay")
    assert (target.fifo, target.mapping_uuid, target.dlq_url) == (False, "", None)  # its on-failure queue is not a DLQ
    assert target.on_failure_url == target.failure_queue_url == on_failure_url["QueueUrl"]
    config = target.mapping.async_config
    assert config is not None
    assert (config.function_arn, config.max_retry_attempts, config.max_event_age_seconds) == (
        function["FunctionArn"],
        1,
        120,
    )
    assert (config.on_failure_queue_url, config.time_scale) == (target.on_failure_url, async_inbox.DEFAULT_TIME_SCALE)
    mapping = target.mapping
    assert target.queue_name == async_inbox.inbox_name(function["FunctionName"])
    assert mapping.queue_url.endswith(f"/{target.queue_name}") and mapping.queue_arn.endswith(f":{target.queue_name}")
    assert (mapping.batch_size, mapping.batching_window_seconds, mapping.max_receive_count) == (1, 0, 0)
    assert (mapping.function_timeout_seconds, mapping.visibility_timeout_seconds) == (7, 12)
    inbox = session.client("sqs").get_queue_attributes(QueueUrl=mapping.queue_url, AttributeNames=["VisibilityTimeout"])
    assert inbox["Attributes"]["VisibilityTimeout"] == "12"
    assert (mapping.handler, mapping.function_name) == ("index.handler", function["FunctionName"])
    assert "IDEMPOTENCY_TABLE_NAME" in mapping.function_env
    assert target.code_dir is not None and (target.code_dir / "index.py").is_file()
    [subscription] = sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"]
    assert (subscription["Protocol"], subscription["Endpoint"]) == ("lambda", function["FunctionArn"])
    assert target.sources == (
        AsyncSource(
            kind="eventbridge",
            bus_name="payments",
            rule_name=_physical("Payments", "AWS::Events::Rule"),
            source="shop",
            detail_type="PaymentRequested",
        ),
        AsyncSource(kind="sns", topic_arn=topic_arn, subscription_arn=subscription["SubscriptionArn"]),
    )

    assert discover_async_targets(session, STACK, cdk_out) == [target], "again: the same, nothing created twice"
    assert len(sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"]) == 1
    disable(session, [target])  # no mapping to switch off: nothing asked of Lambda

    rule, topic = target.sources
    assert rule.bus_name and rule.source and rule.detail_type and topic.topic_arn
    _put({"payment_id": "p-1"}, bus=rule.bus_name, source=rule.source, DetailType=rule.detail_type)
    sns.publish(TopicArn=topic.topic_arn, Message="p-2")
    delivered = session.client("sqs").receive_message(QueueUrl=mapping.queue_url, MaxNumberOfMessages=10)
    assert len(delivered["Messages"]) == 2


# A hand-written stack around one EventInvokeConfig, for the template's defaults and what discovery refuses.


def _config_stack(tmp_path: Path, config: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
    """CreateStack of a function (inline code; its code folder named by ``aws:asset:path``) with an
    ``EventInvokeConfig`` of ``config``'s properties; the template written where a ``cdk.out`` has it."""
    cdk_out = tmp_path / "cdk.out"
    (cdk_out / "asset.code").mkdir(parents=True)
    template = {
        "Resources": {
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Metadata": {"aws:asset:path": "asset.code"},
                "Properties": {
                    "Runtime": "python3.12",
                    "Handler": "index.handler",
                    "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                    "Code": {"ZipFile": "def handler(event, context):\n    return None\n"},
                },
            },
            "Config": {
                "Type": "AWS::Lambda::EventInvokeConfig",
                "Properties": {"FunctionName": {"Ref": "Fn"}, "Qualifier": "$LATEST", **config},
            },
            **(extra or {}),
        }
    }
    (cdk_out / "Hand.template.json").write_text(json.dumps(template), encoding="utf-8")
    boto3.client("cloudformation", region_name=REGION).create_stack(StackName="Hand", TemplateBody=json.dumps(template))
    return cdk_out


@pytest.mark.usefixtures("with_bridges")
def test_a_config_without_settings_has_lambdas_defaults(tmp_path: Path) -> None:
    cdk_out = _config_stack(tmp_path, {})

    [target] = discover_async_targets(boto3.Session(region_name=REGION), "Hand", cdk_out)

    assert target.mapping.async_config is not None
    config = target.mapping.async_config
    assert (config.max_retry_attempts, config.max_event_age_seconds, config.on_failure_queue_url) == (2, 21600, None)
    assert (target.on_failure_url, target.sources, target.mapping.visibility_timeout_seconds) == (None, (), 8)


@pytest.mark.usefixtures("with_bridges")
@pytest.mark.parametrize(
    ("config", "extra", "error"),
    [
        (
            {"DestinationConfig": {"OnFailure": {"Destination": {"Ref": "Topic"}}}},
            {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {}}},
            r"the on-failure destination Topic \(AWS::SNS::Topic\) is not an SQS queue",
        ),
        (
            {"DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["Fifo", "Arn"]}}}},
            {"Fifo": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": True, "QueueName": "failed.fifo"}}},
            r"failed\.fifo is FIFO",
        ),
        ({"MaximumRetryAttempts": 3}, None, r"MaximumRetryAttempts must be 0\.\.2, not 3"),
        ({"MaximumEventAgeInSeconds": 30}, None, r"MaximumEventAgeInSeconds must be 60\.\.21600, not 30"),
    ],
    ids=["sns-destination", "fifo-destination", "retries", "age"],
)
def test_discovery_refuses_what_lambda_refuses(
    tmp_path: Path, config: dict[str, Any], extra: dict[str, Any] | None, error: str
) -> None:
    cdk_out = _config_stack(tmp_path, config, extra)

    with pytest.raises(DeployError, match=error):
        discover_async_targets(boto3.Session(region_name=REGION), "Hand", cdk_out)


@pytest.mark.usefixtures("aws")
def test_a_stack_without_an_event_invoke_config_has_no_async_targets(tmp_path: Path) -> None:
    template = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {}}}}
    (tmp_path / "Plain.template.json").write_text(json.dumps(template), encoding="utf-8")
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="Plain", TemplateBody=json.dumps(template)
    )

    assert discover_async_targets(boto3.Session(region_name=REGION), "Plain", tmp_path) == []


@pytest.mark.usefixtures("aws")
def test_a_stack_with_nothing_to_drive_is_refused_naming_its_functions(tmp_path: Path) -> None:
    """Neither an SQS mapping nor an asynchronous target (issue 30, item 1): one line naming what the stack has."""
    from effectively_once_local.aws.discovery import discover_targets

    template = {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {"AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []}},
            },
            "Worker": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Runtime": "python3.12",
                    "Handler": "app.handler",
                    "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                    "Code": {"ZipFile": "def handler(event, context): pass"},
                },
            },
        }
    }
    (tmp_path / "Idle.template.json").write_text(json.dumps(template), encoding="utf-8")
    boto3.client("cloudformation", region_name=REGION).create_stack(StackName="Idle", TemplateBody=json.dumps(template))

    with pytest.raises(DeployError, match=r"^stack Idle has nothing to drive: .*; its functions: Worker\Z"):
        discover_targets(boto3.Session(region_name=REGION), "Idle", tmp_path)
