"""Read back every SQS event source mapping of a deployed stack, whatever the app: what the local runner needs to
play each mapping (queue, batch size, window, function handler, timeout, memory, environment, code folder) and what
the report reads (the DLQ from the queue's redrive policy). The payments profile's view of them is
``profiles/payments_view.py``. And every asynchronous target (:func:`discover_async_targets`): a function with an
``AWS::Lambda::EventInvokeConfig``, read from the synthesized template (moto skips that resource), with its inbox and
the EventBridge rules and SNS subscriptions that send it events (moto skips ``AWS::SNS::Subscription``: they are
created here).

The code folder comes from the synthesized template in the deploy's ``cdk.out``: the function's ``aws:asset:path``
metadata (the CDK CLI writes it), else the ``asset.<hash>`` folder named by its ``Code.S3Key`` (shared/LOCAL_AWS.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectively_once.limits import (
    ASYNC_DESTINATION_DOC,
    ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
    ASYNC_MAX_RETRY_ATTEMPTS,
    ASYNC_MIN_MAX_EVENT_AGE_SECONDS,
    ASYNC_MIN_RETRY_ATTEMPTS,
)

from ..runner import async_inbox
from ..runner.mapping_runner import AsyncConfig, MappingConfig
from .deploy import DeployError
from .moto_patches import inbox_visibility_timeout


@dataclass(frozen=True)
class AsyncSource:
    """One way events reach an asynchronous target: an EventBridge rule or an SNS subscription of the stack.

    :ivar kind: ``async_inbox.EVENTBRIDGE`` or ``async_inbox.SNS``.
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


@dataclass(frozen=True)
class DeployedMapping:
    """One deployed SQS event source mapping and what it connects; or one asynchronous target (``mapping`` with
    ``async_config``, :func:`discover_async_targets`).

    ``label``: the source queue's logical id (stable, and what an input line's ``queue`` names), ``async-<function
    logical id>`` for an asynchronous target; ``queue_name`` (the inbox's for an asynchronous target); ``fifo``;
    ``mapping_uuid`` (``""`` for an asynchronous target: it has no mapping); ``dlq_url`` (``None`` when the queue
    has no redrive policy; the on-failure queue, or ``None`` without one, for an asynchronous target);
    ``code_dir``: the function's code (``None`` when discovered without a ``cdk.out``, e.g. in a real account);
    ``sources``: the EventBridge rules and SNS subscriptions that send an asynchronous target events. :default: ``()``.
    """

    label: str
    queue_name: str
    fifo: bool
    mapping: MappingConfig
    mapping_uuid: str
    dlq_url: str | None
    code_dir: Path | None
    sources: tuple[AsyncSource, ...] = ()


def _resources(cfn: Any, stack: str) -> list[dict[str, Any]]:
    return [
        summary
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for summary in page["StackResourceSummaries"]
    ]


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


def discover_mappings(session: Any, stack: str, cdk_out: Path | None) -> list[DeployedMapping]:
    """Every SQS event source mapping of ``stack``, in the order of their queues' logical ids; ``cdk_out``: the
    folder the stack was deployed from, to find each function's code (``None``: no code folders).

    :raises DeployError: the stack has no SQS event source mapping, or a function's code folder is not found.
    """
    cfn, lam, sqs = session.client("cloudformation"), session.client("lambda"), session.client("sqs")
    resources = _resources(cfn, stack)
    by_physical = {r.get("PhysicalResourceId", ""): r["LogicalResourceId"] for r in resources}
    queues = [r for r in resources if r.get("ResourceType") == "AWS::SQS::Queue"]
    found: list[DeployedMapping] = []
    for res in resources:
        if res.get("ResourceType") != "AWS::Lambda::EventSourceMapping":
            continue
        esm = lam.get_event_source_mapping(UUID=res["PhysicalResourceId"])
        queue_arn = esm["EventSourceArn"]
        if ":sqs:" not in queue_arn:
            continue
        queue_name = queue_arn.split(":")[5]
        queue_url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        # The queue's physical id is its URL on AWS; match on the name, whatever form the emulator keeps.
        label = next(
            (
                q["LogicalResourceId"]
                for q in queues
                if q.get("PhysicalResourceId", "").rstrip("/").split("/")[-1] == queue_name
                or q.get("PhysicalResourceId") == queue_arn
            ),
            queue_name,
        )
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attrs.get("RedrivePolicy", "{}"))
        dlq_url = (
            sqs.get_queue_url(QueueName=redrive["deadLetterTargetArn"].split(":")[5])["QueueUrl"]
            if "deadLetterTargetArn" in redrive
            else None
        )
        fn = lam.get_function_configuration(FunctionName=esm["FunctionArn"])
        fn_logical = by_physical.get(fn["FunctionName"])
        if fn_logical is None and cdk_out is not None:
            raise DeployError(f"the function of {label} ({fn['FunctionName']}) is not a resource of {stack}")
        mapping = MappingConfig(
            label=label,
            queue_url=queue_url,
            queue_arn=queue_arn,
            batch_size=int(esm.get("BatchSize", 10)),
            batching_window_seconds=int(esm.get("MaximumBatchingWindowInSeconds", 0) or 0),
            visibility_timeout_seconds=int(attrs["VisibilityTimeout"]),
            max_receive_count=int(redrive.get("maxReceiveCount", 0)),
            function_name=fn["FunctionName"],
            function_timeout_seconds=int(fn.get("Timeout", 3)),
            function_memory_mb=int(fn.get("MemorySize", 128)),
            function_env=dict(fn.get("Environment", {}).get("Variables", {})),
            handler=fn["Handler"],
        )
        found.append(
            DeployedMapping(
                label=label,
                queue_name=queue_name,
                fifo=queue_name.endswith(".fifo"),
                mapping=mapping,
                mapping_uuid=esm["UUID"],
                dlq_url=dlq_url,
                code_dir=code_dir(cdk_out, stack, fn_logical) if cdk_out is not None and fn_logical else None,
            )
        )
    if not found:
        raise DeployError(f"stack {stack} has no SQS event source mapping")
    return sorted(found, key=lambda m: m.label)


def disable(session: Any, mappings: list[DeployedMapping]) -> None:
    """Switch moto's own mappings off: it would hand every message to its Lambda stand-in (which cannot run the code
    without Docker) and delete it. The local runner plays their part. Asynchronous targets (no mapping) are
    skipped."""
    lam = session.client("lambda")
    for m in mappings:
        if m.mapping.async_config is None:
            lam.update_event_source_mapping(UUID=m.mapping_uuid, Enabled=False)


def _template(cdk_out: Path, stack: str) -> dict[str, Any]:
    path = cdk_out / f"{stack}.template.json"
    if not path.is_file():
        raise DeployError(f"no synthesized template {path} (was the stack deployed from {cdk_out}?)")
    resources: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")).get("Resources", {})
    return resources


def _logical_id(value: Any) -> str | None:
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


def _template_int(config: str, props: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
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


class _Stack:
    """A deployed stack beside its synthesized template: physical ids and template properties by logical id."""

    def __init__(self, session: Any, stack: str, cdk_out: Path) -> None:
        self.name = stack
        self.cdk_out = cdk_out
        self.template = _template(cdk_out, stack)
        self.physical: dict[str, str] = {
            r["LogicalResourceId"]: r.get("PhysicalResourceId", "")
            for r in _resources(session.client("cloudformation"), stack)
        }

    def of_type(self, resource_type: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (logical, resource.get("Properties") or {})
            for logical, resource in sorted(self.template.items())
            if resource.get("Type") == resource_type
        ]

    def type_of(self, logical: str) -> str | None:
        resource = self.template.get(logical)
        return resource.get("Type") if isinstance(resource, dict) else None

    def deployed(self, logical: str, what: str) -> str:
        physical = self.physical.get(logical)
        if not physical:
            raise DeployError(f"{what} {logical} of {self.name} is in the template but not deployed")
        return physical


def _function_name(value: Any, stack: _Stack) -> tuple[str | None, str | None]:
    """``(logical id, function name)`` of a template value naming a function: a ``Ref``/``GetAtt`` of the stack's
    function, or a literal name or ARN (``(None, name)``); ``(None, None)`` for anything else."""
    logical = _logical_id(value)
    if logical is not None:
        if stack.type_of(logical) != "AWS::Lambda::Function":
            return None, None
        return logical, stack.deployed(logical, "function").split(":")[-1]
    if isinstance(value, str) and value and not value.startswith("arn:"):
        return None, value
    parts = value.split(":") if isinstance(value, str) else []
    if len(parts) in (7, 8) and parts[2] == "lambda" and parts[5] == "function":
        return None, parts[6]
    return None, None


def _on_failure_queue(sqs: Any, stack: _Stack, config: str, props: dict[str, Any]) -> str | None:
    """The URL of the config's on-failure SQS queue, or ``None`` without a destination.

    :raises DeployError: a destination that is not an SQS queue, or a FIFO one (Lambda takes a standard queue only:
        ``effectively_once.ASYNC_DESTINATION_DOC``).
    """
    destination = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    if destination is None:
        return None
    logical = _logical_id(destination)
    if logical is not None:
        if stack.type_of(logical) != "AWS::SQS::Queue":
            raise DeployError(
                f"{config}: the on-failure destination {logical} ({stack.type_of(logical)}) is not an SQS queue: the "
                "local runner sends failure records to SQS queues only"
            )
        queue_name = stack.deployed(logical, "queue").rstrip("/").split("/")[-1].split(":")[-1]
    elif isinstance(destination, str) and destination.split(":")[2:3] == ["sqs"]:
        queue_name = destination.split(":")[5]
    else:
        raise DeployError(
            f"{config}: the on-failure destination {destination!r} is not an SQS queue: the local runner sends "
            "failure records to SQS queues only"
        )
    if queue_name.endswith(".fifo"):
        raise DeployError(f"{config}: the on-failure queue {queue_name} is FIFO ({ASYNC_DESTINATION_DOC})")
    return str(sqs.get_queue_url(QueueName=queue_name)["QueueUrl"])


def _inbox(sqs: Any, function_name: str, visibility: int) -> tuple[str, str, str]:
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


def _rules(events: Any, stack: _Stack, function_logical: str, function_name: str) -> list[AsyncSource]:
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
                kind=async_inbox.EVENTBRIDGE,
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


def _topics(sns: Any, stack: _Stack, function_logical: str, function_name: str, function_arn: str) -> list[AsyncSource]:
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
                kind=async_inbox.SNS,
                topic_arn=topic_arn,
                subscription_arn=_subscribe(sns, topic_arn, function_arn, props),
            )
        )
    return found


def discover_async_targets(session: Any, stack: str, cdk_out: Path) -> list[DeployedMapping]:
    """Every asynchronous target of the deployed ``stack``, in the order of their labels: each function with an
    ``AWS::Lambda::EventInvokeConfig`` of qualifier ``$LATEST`` in ``<cdk_out>/<stack>.template.json`` (moto skips
    that resource; configs of other qualifiers are ignored: the bridges deliver to the function by name). An empty
    list for a stack without one.

    Each target is a :class:`DeployedMapping` labelled ``async-<function logical id>`` whose ``mapping`` has an
    ``esm.AsyncConfig``: the function's ARN, ``MaximumRetryAttempts`` (default 2, 0..2), ``MaximumEventAgeInSeconds``
    (default 21600, 60..21600; both limits: CloudFormation AWS::Lambda::EventInvokeConfig), the on-failure queue's
    URL (``DestinationConfig.OnFailure.Destination``, ``None`` without one; also ``dlq_url``) and the time scale
    (``async_inbox.time_scale`` of this process's environment). Its queue is the function's inbox
    (``async_inbox.inbox_name``), created here (or updated) with a visibility timeout of the function's timeout plus
    5 s (``_moto_server.inbox_visibility_timeout``); ``batch_size`` 1, no batching window, ``max_receive_count`` 0
    (the runner applies Lambda's retry policy itself). The function's name, timeout, memory, environment and handler
    are read from the deployed function, its code folder from ``cdk_out`` (as :func:`discover_mappings`).
    ``sources``: the stack's EventBridge rules with a target naming the function (bus, rule name, the first
    ``source`` and ``detail-type`` of the deployed pattern), and its SNS topics with a ``lambda`` subscription of
    the function, each subscription created when missing (moto skips ``AWS::SNS::Subscription``): calling this
    again creates nothing twice.

    :raises DeployError: the template is missing, a resource it names is not deployed, the config's function is not
        a function of the stack, a retry or age setting is not a number in its range, the on-failure destination is
        not a standard SQS queue, or the function's code folder is not found.
    :raises ValueError: ``async_inbox.TIME_SCALE_ENV`` is set to something that is not a number > 0.
    """
    deployed = _Stack(session, stack, cdk_out)
    configs = [
        (logical, props)
        for logical, props in deployed.of_type("AWS::Lambda::EventInvokeConfig")
        if props.get("Qualifier", "$LATEST") == "$LATEST"
    ]
    if not configs:
        return []
    scale = async_inbox.time_scale(os.environ)
    lam, sqs = session.client("lambda"), session.client("sqs")
    events, sns = session.client("events"), session.client("sns")
    found: list[DeployedMapping] = []
    for config, props in configs:
        fn_logical, _ = _function_name(props.get("FunctionName"), deployed)
        if fn_logical is None:
            raise DeployError(
                f"{config}: its FunctionName {props.get('FunctionName')!r} is not a function of {stack} (a Ref or "
                "Fn::GetAtt of an AWS::Lambda::Function)"
            )
        retries = _template_int(
            config,
            props,
            "MaximumRetryAttempts",
            ASYNC_MAX_RETRY_ATTEMPTS,
            ASYNC_MIN_RETRY_ATTEMPTS,
            ASYNC_MAX_RETRY_ATTEMPTS,
        )
        max_age = _template_int(
            config,
            props,
            "MaximumEventAgeInSeconds",
            ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
            ASYNC_MIN_MAX_EVENT_AGE_SECONDS,
            ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
        )
        on_failure_url = _on_failure_queue(sqs, deployed, config, props)
        fn = lam.get_function_configuration(FunctionName=deployed.deployed(fn_logical, "function"))
        timeout = int(fn.get("Timeout", 3))
        visibility = inbox_visibility_timeout(timeout)
        inbox, inbox_url, inbox_arn = _inbox(sqs, fn["FunctionName"], visibility)
        sources = _rules(events, deployed, fn_logical, fn["FunctionName"])
        sources += _topics(sns, deployed, fn_logical, fn["FunctionName"], fn["FunctionArn"])
        label = f"async-{fn_logical}"
        mapping = MappingConfig(
            label=label,
            queue_url=inbox_url,
            queue_arn=inbox_arn,
            batch_size=1,
            batching_window_seconds=0,
            visibility_timeout_seconds=visibility,
            max_receive_count=0,
            function_name=fn["FunctionName"],
            function_timeout_seconds=timeout,
            function_memory_mb=int(fn.get("MemorySize", 128)),
            function_env=dict(fn.get("Environment", {}).get("Variables", {})),
            handler=fn["Handler"],
            async_config=AsyncConfig(
                function_arn=fn["FunctionArn"],
                max_retry_attempts=retries,
                max_event_age_seconds=max_age,
                on_failure_queue_url=on_failure_url,
                time_scale=scale,
            ),
        )
        found.append(
            DeployedMapping(
                label=label,
                queue_name=inbox,
                fifo=False,
                mapping=mapping,
                mapping_uuid="",
                dlq_url=on_failure_url,
                code_dir=code_dir(cdk_out, stack, fn_logical),
                sources=tuple(sources),
            )
        )
    return sorted(found, key=lambda m: m.label)
