"""How events reach an asynchronous target of a deployed stack, and where the local runner takes them from: the
stack's EventBridge rules with a target naming the function and its SNS topics with a ``lambda`` subscription of it
(each subscription created when missing: moto skips ``AWS::SNS::Subscription``), and the function's inbox queue
(``async_inbox.inbox_name``). Read by ``aws/discovery.py`` (``StackDiscovery.async_targets``), which runs every finder
of :data:`SOURCE_FINDERS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from effectively_once_runtime.events import EVENTBRIDGE, SNS

from . import async_inbox
from .deploy import DeployError
from .stack_template import DeployedStack
from .stack_template import function_name as _function_name
from .stack_template import logical_id as _logical_id


@dataclass(frozen=True)
class AsyncSource:
    """One way events reach an asynchronous target: an EventBridge rule or an SNS subscription of the stack.

    :ivar kind: the runtime's trigger of the events it delivers (``effectively_once_runtime.events``): ``eventbridge``
        or ``sns``; a key of :data:`SOURCE_FINDERS`.
    :ivar bus_name: the rule's event bus (``"default"`` for the default bus); ``None`` for SNS.
    :ivar rule_name: the deployed rule's name; ``None`` for SNS.
    :ivar source: the first ``source`` value of the rule's event pattern, when it is a plain string (what a
        ``PutEvents`` entry's ``Source`` must be to match); ``None`` otherwise and for SNS.
    :ivar detail_type: the same for ``detail-type`` (a ``PutEvents`` entry's ``DetailType``).
    :ivar topic_arn: the topic's ARN; ``None`` for EventBridge.
    :ivar subscription_arn: the ``lambda`` subscription's ARN; ``None`` for EventBridge.
    """

    kind: str
    bus_name: str | None = None
    rule_name: str | None = None
    source: str | None = None
    detail_type: str | None = None
    topic_arn: str | None = None
    subscription_arn: str | None = None


def function_inbox(sqs: Any, function_name: str, visibility: int) -> tuple[str, str, str]:
    """``(name, URL, ARN)`` of the function's inbox, created with ``visibility`` (seconds), or set to it when a bridge
    created it first."""
    from botocore.exceptions import ClientError

    name = async_inbox.inbox_name(function_name)
    attributes = {"VisibilityTimeout": str(visibility)}
    try:
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("QueueAlreadyExists", "QueueNameExists"):
            raise
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return name, str(url), str(arn)


def _first(pattern: dict[str, Any], field: str) -> str | None:
    values = pattern.get(field)
    return values[0] if isinstance(values, list) and values and isinstance(values[0], str) else None


def rules(events: Any, stack: DeployedStack, function_logical: str, function_name: str) -> list[AsyncSource]:
    """The stack's rules with a target naming the function, as deployed (bus, name, pattern)."""
    found: list[AsyncSource] = []
    for logical, props in stack.of_type("AWS::Events::Rule"):
        if not any(
            _function_name(target.get("Arn"), stack) in ((function_logical, function_name), (None, function_name))
            for target in props.get("Targets") or []
        ):
            continue
        bus: Any = props.get("EventBusName", "default")
        bus_logical = _logical_id(bus)
        if bus_logical is not None:
            bus = stack.deployed(bus_logical, "event bus")
        bus_name = str(bus).split("event-bus/")[-1]
        # CloudFormation's physical id of a rule on a custom bus is "<bus>|<rule>" on AWS; moto's is the name.
        rule_name = stack.deployed(logical, "rule").split("|")[-1]
        rule = events.describe_rule(Name=rule_name, EventBusName=bus_name)
        pattern = json.loads(rule.get("EventPattern") or "{}")
        found.append(
            AsyncSource(
                kind=EVENTBRIDGE,
                bus_name=bus_name,
                rule_name=rule_name,
                source=_first(pattern, "source"),
                detail_type=_first(pattern, "detail-type"),
            )
        )
    return found


def _subscribe(sns: Any, topic_arn: str, function_arn: str, props: dict[str, Any]) -> str:
    """The ARN of the topic's ``lambda`` subscription of the function: the existing one, else a new one with the
    template's filter policy and its scope."""
    for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic_arn):
        for sub in page["Subscriptions"]:
            if sub["Protocol"] == "lambda" and sub["Endpoint"] == function_arn:
                return str(sub["SubscriptionArn"])
    attributes = {}
    if props.get("FilterPolicy") is not None:
        attributes["FilterPolicy"] = json.dumps(props["FilterPolicy"])
    if props.get("FilterPolicyScope") is not None:
        attributes["FilterPolicyScope"] = str(props["FilterPolicyScope"])
    return str(
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="lambda",
            Endpoint=function_arn,
            Attributes=attributes,
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
    )


def topics(
    sns: Any, stack: DeployedStack, function_logical: str, function_name: str, function_arn: str
) -> list[AsyncSource]:
    """The stack's ``lambda`` subscriptions of the function (``AWS::SNS::Subscription``, and a topic's own
    ``Subscription`` list), each created when missing."""
    wanted = ((function_logical, function_name), (None, function_name))
    subscriptions: list[tuple[Any, dict[str, Any]]] = [
        (props.get("TopicArn"), props)
        for _, props in stack.of_type("AWS::SNS::Subscription")
        if props.get("Protocol") == "lambda" and _function_name(props.get("Endpoint"), stack) in wanted
    ]
    subscriptions += [
        ({"Ref": logical}, {})
        for logical, props in stack.of_type("AWS::SNS::Topic")
        for inline in props.get("Subscription") or []
        if inline.get("Protocol") == "lambda" and _function_name(inline.get("Endpoint"), stack) in wanted
    ]
    found: list[AsyncSource] = []
    for topic, props in subscriptions:
        topic_logical = _logical_id(topic)
        topic_arn = stack.deployed(topic_logical, "topic") if topic_logical is not None else topic
        if not isinstance(topic_arn, str) or ":sns:" not in topic_arn:
            raise DeployError(f"a lambda subscription of {function_logical} names no topic ARN: {topic!r}")
        found.append(
            AsyncSource(
                kind=SNS,
                topic_arn=topic_arn,
                subscription_arn=_subscribe(sns, topic_arn, function_arn, props),
            )
        )
    return found


def _rules(
    events: Any, stack: DeployedStack, function_logical: str, function_name: str, _arn: str
) -> list[AsyncSource]:
    """:func:`rules` as a finder of :data:`SOURCE_FINDERS` (the function's ARN unused)."""
    return rules(events, stack, function_logical, function_name)


@dataclass(frozen=True)
class SourceFinder:
    """How one kind of asynchronous source is found in a deployed stack.

    :ivar service: the boto3 client ``find`` reads with (``"events"``, ``"sns"``).
    :ivar find: given that client, the stack, the function's logical id, name and ARN: the sources of this kind that
        send the function events, in the template's order (each made ready to deliver: an SNS subscription created
        when missing).
    """

    service: str
    find: Callable[[Any, DeployedStack, str, str, str], list[AsyncSource]]


#: Every kind of asynchronous source the local tooling finds, by kind (the runtime's trigger, as
#: ``traffic.source_kinds.SOURCE_SENDERS``), in the order a target's ``sources`` list them: EventBridge rules
#: (:func:`rules`), then SNS subscriptions (:func:`topics`).
SOURCE_FINDERS: dict[str, SourceFinder] = {
    EVENTBRIDGE: SourceFinder("events", _rules),
    SNS: SourceFinder("sns", topics),
}
