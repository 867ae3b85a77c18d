"""The local AWS's limits, named (issue 43, item 6): a stack deployed with resources the local AWS skipped is told so
with their types before the first message, apart from the skipped types that do not matter to a run; a deploy that
fails on a reference to one names it. On the project's local AWS (``MotoServer``), with CloudFormation templates
written here; the end-to-end run on ``examples/plain`` with an HTTP API is ``tests/e2e/test_proof_plain.py``'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from effectively_once_local.aws.server import MotoServer, local_endpoint, local_session
from effectively_once_local.aws.skipped_resources import (
    DOCS_PAGE,
    failure_hint,
    skipped_line,
    skipped_resources,
    unsupported_in_log,
)
from effectively_once_local.aws.stack_template import DeployedStack

API = {"Type": "AWS::ApiGatewayV2::Api", "Properties": {"Name": "intake", "ProtocolType": "HTTP"}}
RESOURCES: dict[str, Any] = {
    "Orders": {"Type": "AWS::SQS::Queue", "Properties": {}},
    "HttpApi": API,
    "Secret": {"Type": "AWS::SecretsManager::Secret", "Properties": {}},
    "OrdersPolicy": {
        "Type": "AWS::SQS::QueuePolicy",
        "Properties": {"Queues": [{"Ref": "Orders"}], "PolicyDocument": {"Statement": []}},
    },
    "Metadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2"}},
    "Maybe": {"Type": "AWS::ApiGatewayV2::Stage", "Condition": "IsProd", "Properties": {}},
}


@pytest.fixture(scope="module")
def local_aws(tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("aws") / "moto.log"
    with MotoServer(log_path=log) as aws:
        yield aws.endpoint, log


def test_a_stack_deployed_with_parts_skipped_names_their_types(local_aws: Any, tmp_path: Path) -> None:
    endpoint, _ = local_aws
    template = {"Conditions": {"IsProd": {"Fn::Equals": ["a", "b"]}}, "Resources": RESOURCES}
    (tmp_path / "Intake.template.json").write_text(json.dumps(template))
    cfn = local_session(endpoint).client("cloudformation", endpoint_url=endpoint)
    cfn.create_stack(StackName="Intake", TemplateBody=json.dumps(template))
    with local_endpoint(endpoint):
        stack = DeployedStack(local_session(endpoint), "Intake", tmp_path)
        skipped = skipped_resources(stack.template, set(stack.physical))

    assert skipped.types == {"AWS::ApiGatewayV2::Api": ["HttpApi"], "AWS::SecretsManager::Secret": ["Secret"]}
    assert skipped.harmless == {"AWS::CDK::Metadata": ["Metadata"], "AWS::SQS::QueuePolicy": ["OrdersPolicy"]}
    line = skipped_line("Intake", skipped)
    assert line is not None and line.startswith(
        "stack Intake deployed without 2 resources the local AWS skipped (it has no model for their types):"
        " AWS::ApiGatewayV2::Api (HttpApi); AWS::SecretsManager::Secret (Secret)."
    )
    assert DOCS_PAGE in line and "context flag" in line
    assert skipped_line("Intake", skipped_resources({"Orders": RESOURCES["Orders"]}, {"Orders"})) is None


def test_a_deploy_that_fails_on_a_reference_to_a_skipped_resource_names_it(local_aws: Any, tmp_path: Path) -> None:
    endpoint, log = local_aws
    # the API's id in a queue's name, as a sample's integration names it
    named = {"Fn::Join": ["-", [{"Fn::GetAtt": ["HttpApi", "ApiId"]}, "intake"]]}
    template = {
        "Resources": {"Intake": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": named}}, "HttpApi": API}
    }
    path = tmp_path / "Broken.template.json"
    path.write_text(json.dumps(template))
    cfn = local_session(endpoint).client("cloudformation", endpoint_url=endpoint)
    with pytest.raises(ClientError, match="references undefined resource HttpApi"):
        cfn.create_stack(StackName="Broken", TemplateBody=json.dumps(template))

    assert "AWS::ApiGatewayV2::Api" in unsupported_in_log(log)
    hint = failure_hint(path, log)
    assert hint is not None and hint.startswith(
        "the local AWS skipped these resources of the stack (it has no model for their types):"
        " AWS::ApiGatewayV2::Api (HttpApi); a reference to one"
    )
    assert failure_hint(path, tmp_path / "no.log") is None and failure_hint(tmp_path / "none.json", log) is None
