"""Shared helpers of the construct tests: apps that carry cdk.json's context, template queries."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from aws_cdk import Acknowledgment, App, Duration, Environment, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template
from constructs import Construct, IConstruct

REPO = Path(__file__).resolve().parents[2]
CONTEXT: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]
DOCS = REPO / "docs"


def docs_page(name: str) -> str:
    """The text of the docs site's page ``docs/<name>`` (what was the README's section of that name)."""
    return (DOCS / name).read_text(encoding="utf-8")


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module (the folder is scripts, not a package), registered as ``bench_<name>``."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ENV = Environment(account="123456789012", region="us-east-1")


def new_app(**context: Any) -> App:
    """An app with cdk.json's context (feature flags included), so templates match `cdk synth`.

    The built-in CloudFormation validation is OFF here for speed (about 3.8 s and 350 MiB per synth,
    shared/LOCAL_AWS.md; templates are byte-identical): test_sandbox.py keeps it on in one compliance test.
    """
    return App(context={**CONTEXT, **context}, builtin_cloud_formation_validation=False)


def new_stack(app: App | None = None, id: str = "Test") -> Stack:
    return Stack(app or new_app(), id, env=ENV)


def inline_function(
    scope: Construct, id: str, *, runtime: lambda_.Runtime = lambda_.Runtime.PYTHON_3_13, **props: Any
) -> lambda_.Function:
    """A cheap function (no asset) to wire constructs to: ``runtime`` (default Python 3.13) and any other
    ``lambda_.Function`` props."""
    return lambda_.Function(
        scope,
        id,
        runtime=runtime,
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


def user_function(scope: Construct, id: str) -> lambda_.Function:
    """A user's own consumer function, configured as the rule packs expect of it.

    Newest runtime, explicit memory and timeout, a stack-created log group and a role that may write only to
    it (no AWSLambdaBasicExecutionRole). Its two acknowledgements are the user's, stated here like a user would.
    """
    log_group = logs.LogGroup(scope, f"{id}LogGroup", retention=logs.RetentionDays.ONE_WEEK)
    role = iam.Role(scope, f"{id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    log_group.grant_write(role)
    function = lambda_.Function(
        scope,
        id,
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
        memory_size=256,
        timeout=Duration.seconds(30),
        log_group=log_group,
        role=role,
    )
    Validations.of(function.node.default_child).acknowledge(  # type: ignore[arg-type]
        Acknowledgment(id="Serverless-LambdaDLQ", reason="Invoked only by its SQS event source mapping (synchronous)."),
        Acknowledgment(id="Serverless-LambdaTracing", reason="Tracing is opt-in; it needs xray:* on Resource '*'."),
    )
    return function


def constructs_stack(app: App, *, producers: bool = False) -> dict[str, Any]:
    """Stack ``Constructs``: each construct on its own (the compliance and IAM gates' second template).

    IdempotencyTable; standard and FIFO ProcessingQueues with a customer-managed key; an
    IdempotentQueueConsumer of the standard queue with a user function; a PaymentProcessor. With
    ``producers``: roles granted ``grant_send`` on the CMK queue and on an SQS-managed queue.
    """
    # Imported here: helpers is imported by tests that do not need the library's public API.
    from effectively_once import IdempotencyTable, IdempotentQueueConsumer, PaymentProcessor, ProcessingQueue

    stack = Stack(app, "Constructs", env=ENV)
    built: dict[str, Any] = {"stack": stack}
    built["table"] = IdempotencyTable(stack, "Table")
    built["key"] = kms.Key(stack, "Key", enable_key_rotation=True)
    built["queue"] = ProcessingQueue(stack, "Queue", encryption_key=built["key"])
    built["fifo_queue"] = ProcessingQueue(stack, "FifoQueue", fifo=True, encryption_key=built["key"])
    built["function"] = user_function(stack, "Function")
    built["consumer"] = IdempotentQueueConsumer(
        stack, "Consumer", queue=built["queue"], function=built["function"], table=built["table"]
    )
    built["processor"] = PaymentProcessor(stack, "Processor")
    if producers:
        built["sse_queue"] = ProcessingQueue(stack, "SqsManagedQueue")
        for name in ("queue", "sse_queue"):
            role = iam.Role(stack, f"{name}Producer", assumed_by=iam.AccountRootPrincipal())
            built[name].grant_send(role)
            built[f"{name}_producer"] = role
    return built


def acknowledged_rules(scope: IConstruct) -> set[tuple[str, str]]:
    """Every rule acknowledged in the tree under ``scope``: {(construct path, rule id)}."""
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    found: set[tuple[str, str]] = set()
    for construct in scope.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == key and entry.data:
                found.update((construct.node.path, re.sub(r"(?i)^annotation::", "", id)) for id in entry.data)
    return found


def acknowledgement_reasons(scope: IConstruct) -> list[str]:
    """The reasons of every acknowledgement under ``scope``."""
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    return [
        reason
        for construct in scope.node.find_all()
        for entry in construct.node.metadata
        if entry.type == key and entry.data
        for reason in entry.data.values()
    ]
