"""At synth: a consumer's function environment against Lambda's 4 KB limit (docs/validation.md, limits.py).

A validation (``node.add_validation``), not a check at construction: variables added to the function after the
consumer (by the user or by other constructs) count as well. ``app.synth()`` fails with the message when the
environment is too large even without its deploy-time values; it warns when only their upper bounds make it so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import jsii
from aws_cdk import CfnResource, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IValidation

from effectively_once_runtime import names

from . import limits
from ._validation import Described, message, warn

_TABLE_ARN = ("a DynamoDB table ARN", limits.DYNAMODB_TABLE_ARN_MAX_LENGTH)
_QUEUE_URL = ("an SQS queue URL", limits.SQS_QUEUE_URL_MAX_LENGTH)
#: ``{"Ref": ...}`` of a resource type or a pseudo parameter: what it is, and its longest value.
_REF_BOUNDS: dict[str, tuple[str, int]] = {
    "AWS::DynamoDB::Table": ("a DynamoDB table name", limits.DYNAMODB_MAX_TABLE_NAME_LENGTH),
    "AWS::SQS::Queue": _QUEUE_URL,
    "AWS::Region": ("a Region name", limits.AWS_MAX_REGION_LENGTH),
    "AWS::AccountId": ("an account id", limits.AWS_ACCOUNT_ID_LENGTH),
    "AWS::Partition": ("a partition", limits.AWS_MAX_PARTITION_LENGTH),
    "AWS::URLSuffix": ("a DNS suffix", limits.AWS_MAX_URL_SUFFIX_LENGTH),
}
#: ``{"Fn::GetAtt": [..., attribute]}`` of a resource type.
_ATTRIBUTE_BOUNDS: dict[tuple[str, str], tuple[str, int]] = {
    ("AWS::DynamoDB::Table", "Arn"): _TABLE_ARN,
    ("AWS::SQS::Queue", "Arn"): ("an SQS queue ARN", limits.SQS_QUEUE_ARN_MAX_LENGTH),
    ("AWS::SQS::Queue", "QueueUrl"): _QUEUE_URL,
    ("AWS::SQS::Queue", "QueueName"): ("an SQS queue name", limits.SQS_MAX_QUEUE_NAME_LENGTH),
}
#: The consumer's own variables: what they hold whatever the token (an import from another stack, a parameter).
_VARIABLE_BOUNDS = {names.ENV_TABLE_NAME: _TABLE_ARN, names.ENV_DEAD_LETTER_QUEUE_URL: _QUEUE_URL}


@dataclass
class _Size:
    """One value's size: its literal bytes, and what its deploy-time parts add at most."""

    literal: int = 0
    bound: int = 0
    bounded: list[str] = field(default_factory=list)
    unmeasured: int = 0


def function_variables(function: lambda_.Function) -> dict[str, Any]:
    """The environment variables set on ``function`` so far, resolved: literals as strings, references as
    intrinsics (``{"Fn::GetAtt": [...]}``, ``{"Ref": ...}``); ``{}`` for none."""
    # CfnFunction.environment is a Lazy that the Python binding reads as an empty struct; the L1's protected
    # cfn_properties hands the Lazy itself to resolve.
    cfn: Any = function.node.default_child
    environment = Stack.of(function).resolve(cfn._cfn_properties.get("environment")) or {}
    return dict(environment.get("variables") or {})


@jsii.implements(IValidation)
class EnvironmentSize:
    """Validation of ``consumer``: the environment of ``function`` (a ``lambda.Function``) fits Lambda's 4 KB."""

    def __init__(self, consumer: Construct, function: lambda_.Function) -> None:
        self._consumer = consumer
        self._function = function

    def validate(self) -> list[str]:
        stack = Stack.of(self._function)
        measured = _Environment.of(function_variables(self._function), _resource_types(stack))
        prop = f"environment of function {self._function.node.path}"
        rule = (
            f"be at most {limits.LAMBDA_MAX_ENVIRONMENT_BYTES} bytes as Lambda measures it (its variables as one "
            "compact JSON object: keys, values, quotes, colons and commas, in UTF-8; here "
            f"{measured.count} variables, the largest {measured.largest()})"
        )
        if measured.fixed > limits.LAMBDA_MAX_ENVIRONMENT_BYTES:
            without = " without its deploy-time values" if measured.tokens else ""
            return [
                message(
                    prop,
                    Described(f"{measured.fixed} bytes{without}"),
                    f"must {rule}: CreateFunction refuses it; move large values out (an SSM parameter or a secret "
                    "read at cold start)",
                    limits.LAMBDA_ENVIRONMENT_DOC,
                )
            ]
        if measured.upper > limits.LAMBDA_MAX_ENVIRONMENT_BYTES:
            warn(
                self._consumer,
                "functionEnvironmentMayExceedLimit",
                prop,
                Described(f"up to {measured.upper} bytes ({measured.fixed} without its deploy-time values)"),
                f"should {rule}, with each deploy-time value at its upper bound ({measured.bounds()}): "
                "CreateFunction refuses it if the deployed values are that long",
                limits.LAMBDA_ENVIRONMENT_DOC,
            )
        return []


@dataclass
class _Environment:
    """A resolved environment measured: literal values as they are, each token at its upper bound."""

    literal: dict[str, str]
    tokens: dict[str, _Size]

    @classmethod
    def of(cls, variables: dict[str, Any], types: dict[str, str]) -> _Environment:
        literal, tokens = {}, {}
        for name, value in variables.items():
            if isinstance(value, str):
                literal[name] = value
                continue
            tokens[name] = size = _size(value, types)
            if size.unmeasured and name in _VARIABLE_BOUNDS:
                what, bound = _VARIABLE_BOUNDS[name]
                size.bounded.append(f"{what}, up to {bound} bytes")
                size.bound += bound
                size.unmeasured = 0
        return cls(literal, tokens)

    @property
    def count(self) -> int:
        return len(self.literal) + len(self.tokens)

    @property
    def fixed(self) -> int:
        """Bytes without the deploy-time values: a token's key, quotes and literal parts still count."""
        emptied = {**self.literal, **dict.fromkeys(self.tokens, "")}
        return _measured(emptied) + sum(size.literal for size in self.tokens.values())

    @property
    def upper(self) -> int:
        """Bytes with every deploy-time value at its upper bound (an unmeasured one counts 0)."""
        return self.fixed + sum(size.bound for size in self.tokens.values())

    def largest(self, count: int = 3) -> str:
        """``A (n bytes), B (m bytes)``: the variables with the longest literal values."""
        ranked = sorted(self.literal.items(), key=lambda item: (-len(item[1].encode("utf-8")), item[0]))[:count]
        return ", ".join(f"{name} ({len(value.encode('utf-8'))} bytes)" for name, value in ranked) or "none literal"

    def bounds(self) -> str:
        """``NAME: what, up to n bytes; ...`` for every bounded token."""
        return "; ".join(
            f"{name}: {', '.join(size.bounded)}" for name, size in sorted(self.tokens.items()) if size.bounded
        )


def _measured(variables: dict[str, str]) -> int:
    """What Lambda measures: the compact JSON object, in UTF-8 bytes."""
    return len(json.dumps(variables, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _resource_types(stack: Stack) -> dict[str, str]:
    """Logical id -> CloudFormation type of every resource of ``stack`` (what a ``Ref`` or ``Fn::GetAtt`` names)."""
    return {
        stack.resolve(construct.logical_id): construct.cfn_resource_type
        for construct in stack.node.find_all()
        if isinstance(construct, CfnResource) and Stack.of(construct) is stack
    }


def _size(value: Any, types: dict[str, str]) -> _Size:
    """The size of a resolved template value: a string, a ``Ref``/``Fn::GetAtt`` with a known bound, an
    ``Fn::Join`` of those; anything else (a parameter, an import, ``Fn::Select``) is counted as unmeasured."""
    if isinstance(value, str):
        # json.dumps escapes quotes and backslashes: measure the string as the JSON holds it, without its quotes.
        return _Size(literal=len(json.dumps(value, ensure_ascii=False).encode("utf-8")) - 2)
    known = None
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            known = _REF_BOUNDS.get(types.get(argument) or str(argument))
        elif function == "Fn::GetAtt" and isinstance(argument, list) and len(argument) == 2:
            known = _ATTRIBUTE_BOUNDS.get((types.get(argument[0], ""), argument[1]))
        elif function == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
            separator, parts = argument
            if isinstance(separator, str) and isinstance(parts, list):
                total = _Size(literal=len(separator.encode("utf-8")) * max(len(parts) - 1, 0))
                for part in parts:
                    size = _size(part, types)
                    total.literal += size.literal
                    total.bound += size.bound
                    total.bounded += size.bounded
                    total.unmeasured += size.unmeasured
                return total
    if known is None:
        return _Size(unmeasured=1)
    what, bound = known
    return _Size(bound=bound, bounded=[f"{what}, up to {bound} bytes"])
