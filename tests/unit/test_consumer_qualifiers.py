"""Issue 33, item 6: a consumer on an alias or a version of a function is refused at synth with a ``ValueError``
naming it. Before, ``IdempotentEventConsumer(function=alias)`` wrote ``FunctionName <fn>:live`` with ``Qualifier
$LATEST`` and set no runtime variables on the function behind the alias; ``IdempotentQueueConsumer`` set none
either. No synth: each check fails before the first resource."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from effectively_once import IdempotencyTable, IdempotentEventConsumer, IdempotentQueueConsumer, ProcessingQueue

from .helpers import inline_function, new_stack

QUALIFIED_ARN = "arn:aws:lambda:us-east-1:123456789012:function:payments:live"


def _event(stack: Stack, function: lambda_.IFunction) -> Any:
    return IdempotentEventConsumer(stack, "Events", function=function, table=IdempotencyTable(stack, "T"))


def _queue(stack: Stack, function: lambda_.IFunction) -> Any:
    queue = ProcessingQueue(stack, "Q", visibility_timeout=Duration.seconds(180))
    return IdempotentQueueConsumer(stack, "C", queue=queue, function=function, table=IdempotencyTable(stack, "T"))


CONSUMERS: dict[str, Callable[[Stack, lambda_.IFunction], Any]] = {
    "IdempotentEventConsumer": _event,
    "IdempotentQueueConsumer": _queue,
}


def _alias(stack: Stack) -> lambda_.IFunction:
    function = inline_function(stack, "Fn", timeout=Duration.seconds(30))
    return lambda_.Alias(stack, "Live", alias_name="live", version=function.current_version)


def _version(stack: Stack) -> lambda_.IFunction:
    return inline_function(stack, "Fn", timeout=Duration.seconds(30)).current_version


def _imported_alias(stack: Stack) -> lambda_.IFunction:
    function = inline_function(stack, "Fn", timeout=Duration.seconds(30))
    version = lambda_.Version.from_version_arn(stack, "V", f"{function.function_arn}:7")
    return lambda_.Alias.from_alias_attributes(stack, "ImportedLive", alias_name="live", alias_version=version)


def _qualified_arn(stack: Stack) -> lambda_.IFunction:
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/payments")
    return lambda_.Function.from_function_attributes(stack, "Imported", function_arn=QUALIFIED_ARN, role=role)


@pytest.mark.parametrize("kind", CONSUMERS)
@pytest.mark.parametrize(
    ("make", "named"),
    [
        (_alias, r"alias 'live' \(Test/Live\)"),
        (_version, r"version '.*' \(Test/Fn/CurrentVersion\)"),
        (_imported_alias, r"alias 'live' \(Test/ImportedLive\)"),
        (_qualified_arn, rf"the qualified ARN {QUALIFIED_ARN}"),
    ],
    ids=["alias", "version", "imported-alias", "qualified-arn"],
)
def test_a_consumer_on_an_alias_or_a_version_is_refused_naming_it(kind: str, make: Any, named: str) -> None:
    stack = new_stack()
    target = make(stack)

    with pytest.raises(ValueError) as raised:
        CONSUMERS[kind](stack, target)

    assert re.match(rf"function must be the function itself, not an alias or a version: {kind} ", str(raised.value))
    assert re.search(rf"but {named} was given", str(raised.value))


@pytest.mark.parametrize("kind", CONSUMERS)
def test_the_function_behind_the_alias_is_taken(kind: str) -> None:
    """The control: the same stack with the function itself passes, and the error's advice works."""
    stack = new_stack()
    alias = _alias(stack)

    consumer = CONSUMERS[kind](stack, alias.version.lambda_)  # type: ignore[attr-defined]

    assert consumer.function is alias.version.lambda_  # type: ignore[attr-defined]
