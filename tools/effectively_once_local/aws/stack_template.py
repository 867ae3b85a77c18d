"""A deployed stack beside its synthesized template (``<cdk_out>/<stack>.template.json``): the stack's resources as
CloudFormation lists them (physical ids by logical id), the template's resources and properties, and what a template
value names (a resource of the stack, a function, an SQS queue). What ``aws/discovery.py`` reads a stack with.

The template is read only when asked for, and only once: a stack discovered without a ``cdk.out`` (e.g. in a real
account) lists its resources from CloudFormation alone.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from .deploy import DeployError

SQS_QUEUE = "AWS::SQS::Queue"
LAMBDA_FUNCTION = "AWS::Lambda::Function"


def code_dir(cdk_out: Path, stack: str, logical_id: str) -> Path:
    """The code folder of function ``logical_id`` in ``cdk_out``.

    :raises DeployError: the template or the folder is missing, or the function's code is not an asset.
    """
    template_path = cdk_out / f"{stack}.template.json"
    if not template_path.is_file():
        raise DeployError(f"no synthesized template {template_path} (was the stack deployed from {cdk_out}?)")
    resource = json.loads(template_path.read_text(encoding="utf-8"))["Resources"].get(logical_id, {})
    asset = resource.get("Metadata", {}).get("aws:asset:path")
    if not asset:
        key = resource.get("Properties", {}).get("Code", {}).get("S3Key")
        asset = f"asset.{key.split('.')[0]}" if isinstance(key, str) else None
    folder: Path | None = cdk_out / asset if asset else None
    if folder is None or not folder.is_dir():
        raise DeployError(f"function {logical_id} of {stack}: no asset folder in {cdk_out} (inline or image code?)")
    return folder


class DeployedStack:
    """The deployed stack ``name`` and, when ``cdk_out`` is given, its synthesized template there. Each is read on
    first use, once."""

    def __init__(self, session: Any, name: str, cdk_out: Path | None) -> None:
        self.session = session
        self.name = name
        self.cdk_out = cdk_out

    @cached_property
    def resources(self) -> list[dict[str, Any]]:
        """The stack's resource summaries (CloudFormation ``ListStackResources``)."""
        cfn = self.session.client("cloudformation")
        return [
            summary
            for page in cfn.get_paginator("list_stack_resources").paginate(StackName=self.name)
            for summary in page["StackResourceSummaries"]
        ]

    @cached_property
    def physical(self) -> dict[str, str]:
        """Each resource's physical id by its logical id (``""`` when CloudFormation lists none)."""
        return {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in self.resources}

    @cached_property
    def template(self) -> dict[str, Any]:
        """The synthesized template's ``Resources``.

        :raises DeployError: no ``cdk_out``, or no template of the stack in it.
        """
        if self.cdk_out is None:
            raise DeployError(f"stack {self.name}: no cdk.out to read the synthesized template from")
        path = self.cdk_out / f"{self.name}.template.json"
        if not path.is_file():
            raise DeployError(f"no synthesized template {path} (was the stack deployed from {self.cdk_out}?)")
        resources: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")).get("Resources", {})
        return resources

    def of_type(self, resource_type: str) -> list[tuple[str, dict[str, Any]]]:
        """``(logical id, properties)`` of the template's resources of ``resource_type``, by logical id."""
        return [
            (logical, resource.get("Properties") or {})
            for logical, resource in sorted(self.template.items())
            if resource.get("Type") == resource_type
        ]

    def type_of(self, logical: str) -> str | None:
        """The template's type of resource ``logical``; ``None`` when it has none."""
        resource = self.template.get(logical)
        return resource.get("Type") if isinstance(resource, dict) else None

    def deployed(self, logical: str, what: str) -> str:
        """The physical id of the template's resource ``logical`` (``what`` it is, for the error).

        :raises DeployError: the stack did not deploy it.
        """
        physical = self.physical.get(logical)
        if not physical:
            raise DeployError(f"{what} {logical} of {self.name} is in the template but not deployed")
        return physical


def logical_id(value: Any) -> str | None:
    """The resource a template value names: ``{"Ref": id}``, ``{"Fn::GetAtt": [id, attribute]}`` or
    ``{"Fn::GetAtt": "id.attribute"}``; ``None`` for anything else (a literal, another intrinsic)."""
    if isinstance(value, dict) and len(value) == 1:
        [(name, arg)] = value.items()
        if name == "Ref" and isinstance(arg, str):
            return arg
        if name == "Fn::GetAtt" and isinstance(arg, list) and arg and isinstance(arg[0], str):
            return arg[0]
        if name == "Fn::GetAtt" and isinstance(arg, str):
            return arg.split(".")[0]
    return None


def function_name(value: Any, stack: DeployedStack) -> tuple[str | None, str | None]:
    """``(logical id, function name)`` of a template value naming a function: a ``Ref``/``GetAtt`` of the stack's
    function, or a literal name or ARN (``(None, name)``); ``(None, None)`` for anything else."""
    logical = logical_id(value)
    if logical is not None:
        if stack.type_of(logical) != LAMBDA_FUNCTION:
            return None, None
        return logical, stack.deployed(logical, "function").split(":")[-1]
    if isinstance(value, str) and value and not value.startswith("arn:"):
        return None, value
    parts = value.split(":") if isinstance(value, str) else []
    if len(parts) in (7, 8) and parts[2] == "lambda" and parts[5] == "function":
        return None, parts[6]
    return None, None


def sqs_destination(destination: Any, stack: DeployedStack) -> tuple[str, str] | None:
    """``(queue name, owner account or "")`` of a destination that is an SQS queue: a ``Ref``/``GetAtt`` of the
    stack's ``AWS::SQS::Queue`` (owner ``""``) or a queue's ARN; ``None`` for any other (SNS, Lambda, EventBridge,
    S3, another intrinsic).

    :raises DeployError: the stack's queue is in the template but not deployed.
    """
    logical = logical_id(destination)
    if logical is not None:
        if stack.type_of(logical) != SQS_QUEUE:
            return None
        # The queue's physical id is its URL on AWS; take the name, whatever form the emulator keeps.
        return stack.deployed(logical, "queue").rstrip("/").split("/")[-1].split(":")[-1], ""
    parts = destination.split(":") if isinstance(destination, str) else []
    return (parts[5], parts[4]) if len(parts) == 6 and parts[2] == "sqs" else None


def template_int(config: str, props: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """The template's integer property ``name`` of ``config`` (``default`` when absent), in ``low..high``.

    :raises DeployError: not a number, or out of the range.
    """
    value = props.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise DeployError(f"{config}: {name} must be a number in the synthesized template, not {value!r}") from None
    if not low <= number <= high:
        raise DeployError(
            f"{config}: {name} must be {low}..{high}, not {number} (CloudFormation AWS::Lambda::EventInvokeConfig)"
        )
    return number
