"""The ``redrive --on-failure`` leg: Lambda's destination records in an on-failure queue, each event invoked again.
Against AWS with ``Invoke(InvocationType="Event")`` (botocore's Stubber, no network), locally into the function's
inbox (moto in process); the queues found from the stack; the command's arguments. A body that is not a record,
and a record whose invoke failed, stay in the queue."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from effectively_once_local.aws.async_inbox import (
    REDRIVE,
    RETRIES_EXHAUSTED,
    SOURCE_ATTRIBUTE,
    destination_record,
    inbox_name,
    record_condition,
    refusal,
    request_payload,
)
from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.aws.discovery import StackDiscovery, discover
from effectively_once_local.cli import main as cli
from effectively_once_local.redrive import dlq_redrive as redrive_module
from effectively_once_local.redrive import on_failure_redrive as on_failure_module
from effectively_once_local.redrive.dlq_redrive import RedriveError, redrive
from effectively_once_local.redrive.on_failure_redrive import (
    OnFailureTarget,
    invoke_on_failure,
    local_redrive_on_failure,
    on_failure_targets,
    record_function,
)
from effectively_once_runtime import PermanentError
from effectively_once_runtime.on_failure import destination_record as runtime_record

REGION = "us-east-1"
ACCOUNT = "123456789012"


def _arn(function: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}"


def _event(i: int) -> dict[str, Any]:
    return {"id": f"evt-{i}", "source": "payments", "detail-type": "payment", "detail": {"payment_id": f"p-{i}"}}


def _record(event: Any, function: str | None = "pay-fn") -> str:
    record = destination_record(
        event,
        function_arn=_arn(function or "ignored"),
        condition=RETRIES_EXHAUSTED,
        approximate_invoke_count=3,
        error_type="ProviderDown",
        error_message="503",
    )
    if function is None:
        del record["requestContext"]["functionArn"]
    return json.dumps(record)


def _on_failure_queue(sqs: Any, bodies: list[str]) -> str:
    url = str(sqs.create_queue(QueueName="pay-fn-on-failure")["QueueUrl"])
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    return url


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get(
        "Messages", []
    ):
        for message in batch:
            out.append(message)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return out


def _stubbed_lambda() -> tuple[Any, Stubber]:
    lam = boto3.client("lambda", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return lam, Stubber(lam)


def _expect_invoke(stubber: Stubber, function: str, event: Any, status: int = 202) -> None:
    stubber.add_response(
        "invoke",
        {"StatusCode": status},
        {"FunctionName": function, "InvocationType": "Event", "Payload": json.dumps(event).encode("utf-8")},
    )


# --- against AWS: Invoke with InvocationType Event -------------------------------------------------------
def test_each_records_event_is_invoked_asynchronously_as_its_function_then_deleted() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = _on_failure_queue(sqs, [_record(_event(0)), _record(_event(1), function=None)])
        lam, stubber = _stubbed_lambda()
        _expect_invoke(stubber, _arn("pay-fn"), _event(0))  # the record's function, without :$LATEST
        _expect_invoke(stubber, "owner-fn", _event(1))  # a record naming none: the queue's function
        stubber.activate()
        sleeps: list[float] = []

        outcome = invoke_on_failure(lam, sqs, url, "owner-fn", max_per_second=4, sleep=sleeps.append)

        stubber.assert_no_pending_responses()
        assert (outcome.status, outcome.moved, outcome.left, outcome.ok) == ("COMPLETED", 2, 0, True)
        assert outcome.line() == "on-failure owner-fn: completed (Invoke, InvocationType Event), re-invoked 2, left 0"
        assert sleeps == [0.25, 0.25]
        assert _drain(sqs, url) == []


def test_a_failed_invoke_leaves_its_record_in_the_queue_and_is_reported() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        bodies = [_record(_event(i)) for i in range(3)]
        url = _on_failure_queue(sqs, bodies)
        lam, stubber = _stubbed_lambda()
        stubber.add_client_error("invoke", "ResourceNotFoundException", "Function not found: pay-fn", 404)
        _expect_invoke(stubber, _arn("pay-fn"), _event(1), status=200)  # not queued: not 202
        _expect_invoke(stubber, _arn("pay-fn"), _event(2))
        stubber.activate()

        outcome = invoke_on_failure(lam, sqs, url, "pay-fn")

        stubber.assert_no_pending_responses()
        assert (outcome.status, outcome.moved, outcome.left, outcome.ok) == ("FAILED", 1, 2, False)
        assert outcome.reason.startswith("2 not re-invoked: An error occurred (ResourceNotFoundException)")
        # left in place, and visible again at once (not after the receive's visibility timeout)
        assert sorted(m["Body"] for m in _drain(sqs, url)) == sorted(bodies[:2])


# --- locally: the function's inbox -----------------------------------------------------------------------
def test_locally_each_event_goes_to_its_functions_inbox_with_the_redrive_source() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        not_records = ["not JSON", json.dumps({"detail": {"payment_id": "p-x"}})]
        events = [_event(i) for i in range(12)]  # more than one receive
        url = _on_failure_queue(sqs, [not_records[0], *(_record(e) for e in events), not_records[1]])

        outcome = local_redrive_on_failure(sqs, url, "pay-fn")

        assert (outcome.status, outcome.moved, outcome.left) == ("FAILED", 12, 2)
        assert outcome.line() == (
            "on-failure pay-fn: failed (local: the function's inbox), re-invoked 12, left 2: 2 not a destination record"
        )
        inbox = sqs.get_queue_url(QueueName=inbox_name("pay-fn"))["QueueUrl"]  # created: it did not exist
        sent = _drain(sqs, inbox)
        assert sorted(json.loads(m["Body"])["id"] for m in sent) == sorted(e["id"] for e in events)
        assert all(json.loads(m["Body"]) in events for m in sent), "the event itself, not the record"
        assert {m["MessageAttributes"][SOURCE_ATTRIBUTE]["StringValue"] for m in sent} == {REDRIVE}
        assert sorted(m["Body"] for m in _drain(sqs, url)) == sorted(not_records)


def test_locally_an_existing_inbox_is_used_and_a_record_naming_no_function_goes_to_the_queues() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        inbox = sqs.create_queue(QueueName=inbox_name("other-fn"), Attributes={"VisibilityTimeout": "7"})["QueueUrl"]
        url = _on_failure_queue(sqs, [_record(_event(0), function="other-fn"), _record(_event(1), function=None)])

        outcome = local_redrive_on_failure(sqs, url, "pay-fn", label="on-failure PayFn")

        assert outcome.line() == "on-failure PayFn: completed (local: the function's inbox), re-invoked 2, left 0"
        attributes = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["VisibilityTimeout"])["Attributes"]
        assert attributes["VisibilityTimeout"] == "7"
        assert [json.loads(m["Body"]) for m in _drain(sqs, inbox)] == [_event(0)]
        own = sqs.get_queue_url(QueueName=inbox_name("pay-fn"))["QueueUrl"]
        assert [json.loads(m["Body"]) for m in _drain(sqs, own)] == [_event(1)]


def _refused(event: Any) -> str:
    """The runtime's own record of an event the app refused for good (``effectively_once_runtime.on_failure``)."""
    context = SimpleNamespace(invoked_function_arn=_arn("pay-fn"), function_version="$LATEST", aws_request_id="r-1")
    return json.dumps(runtime_record(event, PermanentError("an order needs a customer"), context))


def test_the_runtimes_refused_records_are_kept_unless_asked_and_counted_apart() -> None:
    """Issue 30, item 2: a record of an event the app refused for good would only be refused again; the redrive
    leaves it in the queue (kept, not a failure), and ``include_refused`` re-invokes it."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        refused = [_refused(_event(i)) for i in range(2)]
        url = _on_failure_queue(sqs, [refused[0], _record(_event(5)), refused[1]])

        kept = local_redrive_on_failure(sqs, url, "pay-fn")

        assert (kept.status, kept.moved, kept.left, kept.kept, kept.ok) == ("COMPLETED", 1, 0, 2, True)
        assert (
            kept.line() == "on-failure pay-fn: completed (local: the function's inbox), re-invoked 1, left 0, kept 2: "
            "2 refused by the app for good (condition PermanentError) kept: --include-refused re-invokes them"
        )
        inbox = sqs.get_queue_url(QueueName=inbox_name("pay-fn"))["QueueUrl"]
        assert [json.loads(m["Body"]) for m in _drain(sqs, inbox)] == [_event(5)]

        again = local_redrive_on_failure(sqs, url, "pay-fn", include_refused=True)

        assert (again.status, again.moved, again.kept) == ("COMPLETED", 2, 0)
        assert sorted(json.loads(m["Body"])["id"] for m in _drain(sqs, inbox)) == ["evt-0", "evt-1"]
        assert _drain(sqs, url) == []


def test_the_runtimes_record_reads_as_a_refusal_with_its_reason() -> None:
    assert refusal(_refused(_event(0))) == {
        "error_type": "PermanentError",
        "message": "an order needs a customer",
        "condition": "PermanentError",
    }
    assert refusal(_record(_event(0))) is None and refusal("not JSON") is None
    assert record_condition(_record(_event(0))) == RETRIES_EXHAUSTED and record_condition("[]") is None
    assert request_payload(_refused(_event(3))) == _event(3)  # one reader takes both kinds


def test_cli_rejects_include_refused_without_on_failure(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["redrive", "--stack", "S", "--include-refused"]) == 2
    assert capsys.readouterr().err.startswith("error: argument --include-refused: only with --on-failure")


def test_the_record_names_its_function_without_the_latest_qualifier_only() -> None:
    def body(arn: str) -> str:
        return json.dumps({"requestContext": {"functionArn": arn}, "requestPayload": {}})

    assert record_function(body(_arn("f") + ":$LATEST")) == _arn("f")
    assert record_function(body(_arn("f") + ":live")) == _arn("f") + ":live"  # the alias the config is on
    assert record_function(json.dumps({"requestContext": {}, "requestPayload": {}})) is None


# --- the stack's on-failure queues -----------------------------------------------------------------------
TEMPLATE: dict[str, Any] = {
    "Resources": {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            },
        },
        "PayFn": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "python3.12",
                "Handler": "index.handler",
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Code": {"ZipFile": "def handler(event, context): pass"},
            },
        },
        "OnFailureQueue": {"Type": "AWS::SQS::Queue"},
        "Topic": {"Type": "AWS::SNS::Topic"},
        "PayFnConfig": {
            "Type": "AWS::Lambda::EventInvokeConfig",
            "Properties": {
                "FunctionName": {"Ref": "PayFn"},
                "Qualifier": "$LATEST",
                "MaximumRetryAttempts": 2,
                "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["OnFailureQueue", "Arn"]}}},
            },
        },
        "SnsConfig": {  # not a queue: not redriven here
            "Type": "AWS::Lambda::EventInvokeConfig",
            "Properties": {
                "FunctionName": {"Ref": "PayFn"},
                "Qualifier": "live",
                "DestinationConfig": {"OnFailure": {"Destination": {"Ref": "Topic"}}},
            },
        },
    }
}


def _deployed(session: Any, tmp_path: Path) -> tuple[str, str]:
    """The stack ``S`` (moto skips its EventInvokeConfigs) and its template in ``tmp_path``: (function, queue url)."""
    session.client("cloudformation").create_stack(StackName="S", TemplateBody=json.dumps(TEMPLATE))
    (tmp_path / "S.template.json").write_text(json.dumps(TEMPLATE), encoding="utf-8")
    resources = session.client("cloudformation").list_stack_resources(StackName="S")["StackResourceSummaries"]
    physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
    url = session.client("sqs").get_queue_url(QueueName=physical["OnFailureQueue"].split("/")[-1])["QueueUrl"]
    return physical["PayFn"], url


@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
def test_the_on_failure_queues_are_found_from_the_template_or_from_lambda(tmp_path: Path) -> None:
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        function, url = _deployed(session, tmp_path)
        arn = session.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
        expected = [OnFailureTarget("on-failure PayFn", url, arn["QueueArn"], function)]

        assert on_failure_targets(session, "S", tmp_path) == expected
        with pytest.raises(RedriveError, match="stack S has no on-failure queue .* give --cdk-out"):
            on_failure_targets(session, "S")  # the local AWS kept no EventInvokeConfig
        session.client("lambda").put_function_event_invoke_config(
            FunctionName=function, DestinationConfig={"OnFailure": {"Destination": arn["QueueArn"]}}
        )
        assert on_failure_targets(session, "S") == expected
        with pytest.raises(DeployError, match="no synthesized template"):
            on_failure_targets(session, "S", tmp_path / "elsewhere")


#: TEMPLATE with an SQS event source mapping of PayFn too, whose source queue names a DLQ.
MAPPED_TEMPLATE: dict[str, Any] = {
    "Resources": {
        **TEMPLATE["Resources"],
        "PayFn": {**TEMPLATE["Resources"]["PayFn"], "Metadata": {"aws:asset:path": "asset.pay"}},
        "Dlq": {"Type": "AWS::SQS::Queue"},
        "Source": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["Dlq", "Arn"]}, "maxReceiveCount": 3}
            },
        },
        "Mapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "EventSourceArn": {"Fn::GetAtt": ["Source", "Arn"]},
                "FunctionName": {"Ref": "PayFn"},
                "BatchSize": 5,
            },
        },
    }
}


def _mapped(session: Any, tmp_path: Path) -> dict[str, str]:
    """The stack ``S`` of MAPPED_TEMPLATE and its template in ``tmp_path``: the queues' URLs by logical id."""
    session.client("cloudformation").create_stack(StackName="S", TemplateBody=json.dumps(MAPPED_TEMPLATE))
    (tmp_path / "S.template.json").write_text(json.dumps(MAPPED_TEMPLATE), encoding="utf-8")
    (tmp_path / "asset.pay").mkdir()
    resources = session.client("cloudformation").list_stack_resources(StackName="S")["StackResourceSummaries"]
    sqs = session.client("sqs")
    return {
        r["LogicalResourceId"]: sqs.get_queue_url(QueueName=r["PhysicalResourceId"].split("/")[-1])["QueueUrl"]
        for r in resources
        if r["ResourceType"] == "AWS::SQS::Queue"
    }


@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
def test_one_discovery_names_the_dlq_and_the_on_failure_queue_each_under_its_own_name(tmp_path: Path) -> None:
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        urls = _mapped(session, tmp_path)
        found = discover(session, "S", tmp_path)

        [mapping] = found.mappings
        assert (mapping.label, mapping.dlq_url, mapping.on_failure_url) == ("Source", urls["Dlq"], None)
        assert mapping.failure_queue_url == urls["Dlq"]
        assert (mapping.mapping.batch_size, mapping.mapping.max_receive_count) == (5, 3)
        assert mapping.code_dir == tmp_path / "asset.pay"
        [dlq] = found.dlqs
        assert (dlq.url, dlq.source) == (urls["Dlq"], mapping)
        [on_failure] = found.on_failure_queues
        assert (on_failure.url, on_failure.function_id) == (urls["OnFailureQueue"], "PayFn")
        assert on_failure.url not in {d.url for d in found.dlqs}
        # Without a cdk.out the same mapping and DLQ are found; the on-failure queue from Lambda (moto kept none).
        bare = discover(session, "S")
        assert [d.url for d in bare.dlqs] == [urls["Dlq"]] and bare.on_failure_queues == ()


@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
@pytest.mark.parametrize("on_failure", [False, True])
def test_the_command_discovers_the_stack_once_for_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], on_failure: bool
) -> None:
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        urls = _mapped(session, tmp_path)
        calls: list[StackDiscovery] = []

        def counted(*args: Any) -> StackDiscovery:
            calls.append(discover(*args))
            return calls[-1]

        monkeypatch.setattr(redrive_module, "discover", counted)
        monkeypatch.setattr(redrive_module, "is_local", lambda client: True)  # moto in process answers on amazonaws.com
        monkeypatch.setattr(on_failure_module, "is_local", lambda client: True)

        cdk_out = tmp_path if on_failure else None
        assert redrive("S", None, None, session=session, on_failure=on_failure, cdk_out=cdk_out) == 0

        assert len(calls) == 1
        queue = urls["OnFailureQueue"] if on_failure else urls["Dlq"]
        arn = session.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
        label = "on-failure PayFn: re-invoking the records of" if on_failure else "standard: redriving"
        assert capsys.readouterr().out.splitlines()[0].startswith(f"{label} {arn['QueueArn']}")


class _Session:
    """moto's clients, but a stubbed Lambda: the AWS path end to end without network."""

    def __init__(self, lam: Any) -> None:
        self._session, self._lambda = boto3.session.Session(region_name=REGION), lam

    def client(self, name: str) -> Any:
        return self._lambda if name == "lambda" else self._session.client(name)


@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
def test_the_command_re_invokes_the_stacks_on_failure_records_against_aws(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mock_aws():
        lam, stubber = _stubbed_lambda()
        session = _Session(lam)
        function, url = _deployed(session._session, tmp_path)
        sqs = session.client("sqs")
        sqs.send_message(QueueUrl=url, MessageBody=_record(_event(0), function=function))
        sqs.send_message(QueueUrl=url, MessageBody="not a record")
        _expect_invoke(stubber, _arn(function), _event(0))
        stubber.activate()

        assert redrive("S", None, None, session=session, on_failure=True, cdk_out=tmp_path) == 1

        stubber.assert_no_pending_responses()
        assert capsys.readouterr().out.splitlines()[1] == (
            "on-failure PayFn: failed (Invoke, InvocationType Event), re-invoked 1, left 1: 1 not a destination record"
        )


@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
def test_the_command_sends_the_stacks_on_failure_records_to_the_inbox_locally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        function, url = _deployed(session, tmp_path)
        sqs = session.client("sqs")
        sqs.send_message(QueueUrl=url, MessageBody=_record(_event(0), function=function))
        monkeypatch.setattr(on_failure_module, "is_local", lambda client: True)  # moto answers on amazonaws.com

        assert redrive("S", None, None, session=session, on_failure=True, cdk_out=tmp_path) == 0

        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith(f"on-failure PayFn: re-invoking the records of arn:aws:sqs:{REGION}:")
        assert out[1] == "on-failure PayFn: completed (local: the function's inbox), re-invoked 1, left 0"
        inbox = sqs.get_queue_url(QueueName=inbox_name(function))["QueueUrl"]
        assert [json.loads(m["Body"]) for m in _drain(sqs, inbox)] == [_event(0)]


# --- the command's arguments -----------------------------------------------------------------------------
def test_cli_passes_on_failure_and_cdk_out_to_the_redrive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def record(*args: Any, **kwargs: Any) -> int:
        calls.append((*args, kwargs))
        return 0

    monkeypatch.setattr(redrive_module, "redrive", record)

    argv = ["redrive", "--stack", "S", "--on-failure", "--cdk-out", str(tmp_path), "--max-per-second", "5"]
    assert cli.main(argv) == 0
    assert cli.main(["redrive", "--stack", "S"]) == 0

    assert cli.main(["redrive", "--stack", "S", "--on-failure", "--include-refused"]) == 0

    assert calls == [
        ("S", None, 5, {"session": None, "on_failure": True, "cdk_out": tmp_path, "include_refused": False}),
        ("S", None, None, {"session": None, "on_failure": False, "cdk_out": None, "include_refused": False}),
        ("S", None, None, {"session": None, "on_failure": True, "cdk_out": None, "include_refused": True}),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--on-failure", "--queue", "fifo"], "error: argument --queue: not allowed with argument --on-failure"),
        (["--on-failure", "--cdk-out", "no/such/folder"], "error: argument --cdk-out: no/such/folder does not exist"),
    ],
)
def test_cli_rejects_bad_on_failure_arguments_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["redrive", *argv])
    assert exit_.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(message)


def test_cli_rejects_cdk_out_without_on_failure_before_any_aws_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_aws() -> Any:
        raise AssertionError("no AWS session before the arguments are checked")

    monkeypatch.setattr(redrive_module, "aws_session", no_aws)

    assert cli.main(["redrive", "--cdk-out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: argument --cdk-out: only with --on-failure")


def test_cli_help_names_the_on_failure_leg(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["redrive", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--on-failure" in text
    assert "--cdk-out" in text
    assert "InvocationType Event" in text
