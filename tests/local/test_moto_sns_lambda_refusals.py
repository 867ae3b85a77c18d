"""The local AWS refuses what AWS refuses (issue 58, item 1c: SNS and Lambda). docs/local-aws-limits.md lists the
rules, each with its source; docs/moto-bugs.md has each gap moto 5.2.5 leaves as an upstream report (reports 19 and
20).

Each rule is shown with boto3 against moto in process, as it is and with the local AWS's refusals
(``moto_sns_lambda_refusals.apply_sns_lambda_refusals``): a gap is answered by moto as it is otherwise than AWS (the
reason for its patch: if such a test fails, moto fixed it) and with AWS's error code and HTTP status once patched; a
rule moto already refuses is refused either way. The last test sends every refused request to the server the tooling
starts (every patch of ``moto_patches.apply``)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from effectively_once_local.aws import async_inbox, moto_async_bridges, moto_sns_lambda_refusals

from ..sqs_answers import refuse_as_aws

REGION = "us-east-1"
#: AWS's 1 MB limit of an asynchronous invocation's payload, in bytes.
MIB = 1_048_576
#: A FIFO topic's publish without a group id, as SNS answers it (and moto answers it in PublishBatch).
GROUP_ID_REQUIRED = "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"
#: moto's answer to a deduplication id on a standard topic.
DEDUP_ON_STANDARD = (
    "Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is "
    "not valid for this topic type"
)
#: moto's answer to a FIFO topic's message without a deduplication id, the topic without content-based deduplication.
NO_DEDUP_ID = (
    "The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"
)


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def refusing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the refusals are applied (moto's classes are restored after the test)."""
    for cls, name in moto_sns_lambda_refusals.patched_attributes():
        monkeypatch.setattr(cls, name, getattr(cls, name))
    if request.param:
        refuse_as_aws(monkeypatch)
        moto_sns_lambda_refusals.apply_sns_lambda_refusals()  # a second call wraps nothing twice
    return bool(request.param)


@pytest.fixture
def sns() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sns", region_name=REGION)


def refused(call: Callable[[], Any]) -> tuple[str, int, str]:
    """The error code, HTTP status and message of ``call``'s refusal."""
    with pytest.raises(ClientError) as caught:
        call()
    answer = caught.value.response
    return answer["Error"]["Code"], answer["ResponseMetadata"]["HTTPStatusCode"], answer["Error"]["Message"]


def _topics(sns: Any) -> tuple[str, str, str]:
    """A standard topic, a FIFO topic, and a FIFO topic with content-based deduplication: their ARNs."""
    standard = sns.create_topic(Name="payments")["TopicArn"]
    fifo = sns.create_topic(Name="payments.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    content = {"FifoTopic": "true", "ContentBasedDeduplication": "true"}
    by_content = sns.create_topic(Name="by-content.fifo", Attributes=content)["TopicArn"]
    return str(standard), str(fifo), str(by_content)


# --- SNS ------------------------------------------------------------------------------------------------------------


def test_a_fifo_publish_without_a_group_id_is_an_invalid_parameter(refusing: bool, sns: Any) -> None:
    _, fifo, _ = _topics(sns)

    answer = refused(lambda: sns.publish(TopicArn=fifo, Message="m", MessageDeduplicationId="pay-1"))

    if not refusing:
        assert answer == ("MissingParameter", 400, "The request must contain the parameter MessageGroupId.")
        return
    assert answer == ("InvalidParameter", 400, GROUP_ID_REQUIRED)


def test_a_fifo_batch_entry_without_a_group_id_is_refused(refusing: bool, sns: Any) -> None:
    # moto refuses it as SNS does: the whole request.
    _, fifo, _ = _topics(sns)
    entries = [{"Id": "1", "Message": "m", "MessageDeduplicationId": "pay-1"}]

    assert refused(lambda: sns.publish_batch(TopicArn=fifo, PublishBatchRequestEntries=entries)) == (
        "InvalidParameter",
        400,
        GROUP_ID_REQUIRED,
    )


def test_a_fifo_publish_without_a_deduplication_id_is_refused(refusing: bool, sns: Any) -> None:
    # moto refuses it as SNS does; with content-based deduplication the id is the body's hash: accepted.
    _, fifo, by_content = _topics(sns)

    assert refused(lambda: sns.publish(TopicArn=fifo, Message="m", MessageGroupId="g")) == (
        "InvalidParameter",
        400,
        NO_DEDUP_ID,
    )
    assert sns.publish(TopicArn=by_content, Message="m", MessageGroupId="g")["MessageId"]
    batch = sns.publish_batch(
        TopicArn=fifo, PublishBatchRequestEntries=[{"Id": "1", "Message": "m", "MessageGroupId": "g"}]
    )
    assert (batch["Successful"], batch["Failed"]) == (
        [],
        [{"Id": "1", "Code": "InvalidParameter", "Message": NO_DEDUP_ID, "SenderFault": True}],
    )


def test_a_deduplication_id_on_a_standard_topic_is_refused(refusing: bool, sns: Any) -> None:
    # moto refuses it as SNS does ("This parameter applies only to FIFO (first-in-first-out) topics").
    standard, _, _ = _topics(sns)

    assert refused(lambda: sns.publish(TopicArn=standard, Message="m", MessageDeduplicationId="pay-1")) == (
        "InvalidParameter",
        400,
        DEDUP_ON_STANDARD,
    )
    entries = [{"Id": "1", "Message": "m", "MessageDeduplicationId": "pay-1"}]
    batch = sns.publish_batch(TopicArn=standard, PublishBatchRequestEntries=entries)
    assert (batch["Successful"], batch["Failed"]) == (
        [],
        [{"Id": "1", "Code": "InvalidParameter", "Message": DEDUP_ON_STANDARD, "SenderFault": True}],
    )


def test_a_group_id_on_a_standard_topic_is_accepted(refusing: bool, sns: Any) -> None:
    # A standard topic takes a MessageGroupId (delivered to a fair queue's subscribers as its tenant).
    standard, _, _ = _topics(sns)

    assert sns.publish(TopicArn=standard, Message="m", MessageGroupId="tenant-1")["MessageId"]
    entries = [{"Id": "1", "Message": "m", "MessageGroupId": "tenant-1"}]
    assert [
        e["Id"] for e in sns.publish_batch(TopicArn=standard, PublishBatchRequestEntries=entries)["Successful"]
    ] == ["1"]


# --- Lambda ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def lam(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto in process with the local AWS's bridge of an ``Event`` invocation (report 12; restored after the test),
    and a function ``pay``."""
    from moto.awslambda import models as lambda_models

    monkeypatch.setattr(lambda_models.LambdaBackend, "invoke", lambda_models.LambdaBackend.invoke)
    moto_async_bridges.lambda_event_invocations()
    with mock_aws():
        role = boto3.client("iam", region_name=REGION).create_role(RoleName="r", AssumeRolePolicyDocument="{}")
        client = boto3.client("lambda", region_name=REGION)
        _create_function(client, role["Role"]["Arn"])
        yield client


def _create_function(client: Any, role: str) -> None:
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    client.create_function(
        FunctionName="pay", Runtime="python3.12", Role=role, Handler="index.handler", Code={"ZipFile": code.getvalue()}
    )


def _inbox_sizes(region: str = REGION) -> list[int]:
    sqs = boto3.client("sqs", region_name=region)
    try:
        url = sqs.get_queue_url(QueueName=async_inbox.inbox_name("pay"))["QueueUrl"]
    except ClientError:
        return []
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [len(m["Body"].encode("utf-8")) for m in messages]


def _json_string_of(size: int) -> bytes:
    """A JSON payload (a string) of ``size`` bytes."""
    return b'"' + b"x" * (size - 2) + b'"'


def test_an_event_payload_over_one_mib_is_refused(refusing: bool, lam: Any) -> None:
    over = _json_string_of(MIB + 1)
    # MIB + 2 bytes in UTF-8, half as many characters: what moto's SQS counts of the inbox's message.
    over_in_bytes = ('"' + "\u00e9" * (MIB // 2) + '"').encode("utf-8")

    if not refusing:
        # moto as is (with the bridge): the inbox's SQS limit refuses the first with SQS's error, and takes the second.
        assert refused(lambda: lam.invoke(FunctionName="pay", InvocationType="Event", Payload=over)) == (
            "InvalidParameterValue",
            400,
            f"One or more parameters are invalid. Reason: Message must be shorter than {MIB} bytes.",
        ), "moto as is: the reason for the fix"
        answer = lam.invoke(FunctionName="pay", InvocationType="Event", Payload=over_in_bytes)
        assert (answer["StatusCode"], _inbox_sizes()) == (202, [MIB + 2]), "moto as is: the reason for the fix"
        return
    for payload in (over, over_in_bytes):
        assert refused(lambda body=payload: lam.invoke(FunctionName="pay", InvocationType="Event", Payload=body)) == (
            "RequestEntityTooLargeException",
            413,
            f"{len(payload)} byte payload is too large for the Event invocation type (limit {MIB} bytes)",
        )
    assert _inbox_sizes() == [], "refused before the bridge: nothing in the inbox"


def test_an_event_payload_of_one_mib_is_accepted(refusing: bool, lam: Any) -> None:
    answer = lam.invoke(FunctionName="pay", InvocationType="Event", Payload=_json_string_of(MIB))

    assert (answer["StatusCode"], _inbox_sizes()) == (202, [MIB])


# --- the server the tooling starts ----------------------------------------------------------------------------------


def test_the_local_aws_server_refuses_what_sns_and_lambda_refuse() -> None:
    # python -m effectively_once_local.aws.moto_patches: every patch applied, requests over HTTP.
    from effectively_once_local.aws.server import MotoServer, aws_env

    with MotoServer() as aws:
        env = aws_env(aws.endpoint)
        keys = {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]}

        def client(name: str) -> Any:
            return boto3.client(name, endpoint_url=aws.endpoint, region_name=REGION, **keys)

        sns, lam = client("sns"), client("lambda")
        standard, fifo, _ = _topics(sns)
        sns.publish(TopicArn=standard, Message="m", MessageGroupId="tenant-1")  # accepted
        _create_function(lam, client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"])
        calls: dict[str, Callable[[], Any]] = {
            "fifo, no group id": lambda: sns.publish(TopicArn=fifo, Message="m", MessageDeduplicationId="d"),
            "fifo, no dedup id": lambda: sns.publish(TopicArn=fifo, Message="m", MessageGroupId="g"),
            "dedup id on a standard topic": lambda: sns.publish(
                TopicArn=standard, Message="m", MessageDeduplicationId="d"
            ),
            "event over 1 MiB": lambda: lam.invoke(
                FunctionName="pay", InvocationType="Event", Payload=_json_string_of(MIB + 1)
            ),
        }
        answers = {name: refused(call)[:2] for name, call in calls.items()}
        inbox = client("sqs").list_queues(QueueNamePrefix=async_inbox.inbox_name("pay")).get("QueueUrls", [])

    assert answers == {
        "fifo, no group id": ("InvalidParameter", 400),
        "fifo, no dedup id": ("InvalidParameter", 400),
        "dedup id on a standard topic": ("InvalidParameter", 400),
        "event over 1 MiB": ("RequestEntityTooLargeException", 413),
    }
    assert inbox == [], "the refused event never reached an inbox"
