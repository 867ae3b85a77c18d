"""The local AWS serves Powertools' public layer parameters for the installed release (the bridge in
``effectively_once_local/aws/moto_powertools.py``), so a stack resolving its layer from SSM deploys locally; and the
local runner builds no ARN on an assumed partition (issue 12, section 1)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from effectively_once_local.aws.server import REGION, MotoServer, aws_env
from effectively_once_local.runner.mapping_runner import LocalLambdaContext

from .conftest import mapping_config

REPO = Path(__file__).resolve().parents[2]
RELEASE = version("aws-lambda-powertools")


def _name(arch: str, release: str = RELEASE) -> str:
    return f"/aws/service/powertools/python/{arch}/python3.14/{release}"


@pytest.fixture(scope="module")
def session() -> Iterator[tuple[boto3.Session, str]]:
    """A local AWS (moto server on loopback, with the project's bridges) and a session for it."""
    with MotoServer() as aws:
        env = aws_env(aws.endpoint)
        boto = boto3.Session(
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=env["AWS_SESSION_TOKEN"],
            region_name=REGION,
        )
        yield boto, aws.endpoint


def _client(session: Any, service: str) -> Any:
    boto, endpoint = session
    return boto.client(service, endpoint_url=endpoint)


def test_installed_release_is_the_pinned_one() -> None:
    pins = dict(line.split("==") for line in (REPO / "requirements.txt").read_text().splitlines() if "==" in line)
    assert RELEASE == pins["aws-lambda-powertools"]


@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_parameter_of_the_installed_release_names_a_local_layer_carrying_it(session: Any, arch: str) -> None:
    arn = _client(session, "ssm").get_parameter(Name=_name(arch))["Parameter"]["Value"]
    name, number = arn.split(":")[6:8]  # moto 5.2 has no GetLayerVersionByArn
    layer = _client(session, "lambda").get_layer_version(LayerName=name, VersionNumber=int(number))
    assert layer["LayerVersionArn"] == arn and name == f"AWSLambdaPowertoolsPythonV3-python314-{arch}"
    assert RELEASE in layer["Description"] and layer["CompatibleArchitectures"] == [arch]
    assert layer["CompatibleRuntimes"] == ["python3.14"]


def test_other_releases_stay_missing(session: Any) -> None:
    with pytest.raises(ClientError, match="ParameterNotFound"):
        _client(session, "ssm").get_parameter(Name=_name("x86_64", "3.0.0"))


def test_put_parameter_under_aws_is_still_refused(session: Any) -> None:
    with pytest.raises(ClientError, match="AccessDenied"):
        _client(session, "ssm").put_parameter(Name=_name("x86_64", "9.9.9"), Value="x", Type="String")


def test_cloudformation_resolves_the_layer_parameter_at_create(session: Any) -> None:
    template = {
        "Parameters": {"Layer": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": _name("arm64")}},
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"LayerArn": {"Value": {"Ref": "Layer"}}},
    }
    cfn = _client(session, "cloudformation")
    cfn.create_stack(StackName="PowertoolsParameter", TemplateBody=json.dumps(template))
    deadline = time.monotonic() + 30
    while (stack := cfn.describe_stacks(StackName="PowertoolsParameter")["Stacks"][0])["StackStatus"].endswith(
        "_IN_PROGRESS"
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    (output,) = stack["Outputs"]
    assert output["OutputValue"] == _client(session, "ssm").get_parameter(Name=_name("arm64"))["Parameter"]["Value"]


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_local_lambda_context_keeps_the_queue_partition(partition: str) -> None:
    mapping = mapping_config(queue_arn=f"arn:{partition}:sqs:xx-test-1:210987654321:q")
    context = LocalLambdaContext(mapping, deadline=time.monotonic() + 1)
    assert context.invoked_function_arn == f"arn:{partition}:lambda:xx-test-1:210987654321:function:f"
