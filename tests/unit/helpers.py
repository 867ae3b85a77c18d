"""Shared helpers of the construct tests: apps that carry cdk.json's context, template queries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from constructs import Construct

REPO = Path(__file__).resolve().parents[2]
CONTEXT: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]
ENV = Environment(account="123456789012", region="us-east-1")


def new_app(**context: Any) -> App:
    """An app with cdk.json's context (feature flags included), so templates match `cdk synth`.

    The built-in CloudFormation validation is OFF here for speed (about 3.8 s and 350 MiB per synth,
    shared/LOCAL_AWS.md; templates are byte-identical): test_sandbox.py keeps it on in one compliance test.
    """
    return App(context={**CONTEXT, **context}, builtin_cloud_formation_validation=False)


def new_stack(app: App | None = None, id: str = "Test") -> Stack:
    return Stack(app or new_app(), id, env=ENV)


def inline_function(scope: Construct, id: str, **props: Any) -> lambda_.Function:
    """A cheap function (no asset) to wire constructs to."""
    return lambda_.Function(
        scope,
        id,
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
        **props,
    )


def find_one(template: Template, type_: str, props: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The single resource of ``type_`` whose properties match ``props``: (logical id, resource)."""
    found = template.find_resources(type_, {"Properties": props} if props else None)
    assert len(found) == 1, f"expected one {type_} matching {props}, found {sorted(found)}"
    return next(iter(found.items()))


def _resource_key(resource: Any) -> str:
    """A statement resource as a key: the logical id it points at (plus suffix), or the literal."""
    if isinstance(resource, str):
        return resource
    if "Fn::GetAtt" in resource:
        return resource["Fn::GetAtt"][0]
    if "Ref" in resource:
        return resource["Ref"]
    if "Fn::Join" in resource:
        return "".join(_resource_key(part) for part in resource["Fn::Join"][1])
    return json.dumps(resource, sort_keys=True)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(template: Template, role_logical_id: str) -> list[dict[str, Any]]:
    """Every Allow/Deny statement of the inline policies attached to the role (logical id, or name if imported)."""
    policies = template.find_resources("AWS::IAM::Policy")
    statements: list[dict[str, Any]] = []
    for policy in policies.values():
        # A role imported by ARN is referenced by its literal name.
        roles = [r.get("Ref") if isinstance(r, dict) else r for r in policy["Properties"].get("Roles", [])]
        if role_logical_id in roles:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def actions_by_resource(statements: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """Gather Allow statements into {resource key: set of actions}."""
    result: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        for resource in _as_list(statement["Resource"]):
            result.setdefault(_resource_key(resource), set()).update(_as_list(statement["Action"]))
    return result


def function_role(template: Template, function_logical_id: str) -> str:
    """Logical id of the function's execution role."""
    function = template.to_json()["Resources"][function_logical_id]
    return function["Properties"]["Role"]["Fn::GetAtt"][0]
