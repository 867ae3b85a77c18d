"""What a chaos run will drive in a stack, read from its synthesized template before anything is deployed (issue 30,
item 1): a run that cannot work is refused in the seconds of a ``cdk synth``, not after a deploy.

The targets are the ones discovery finds after the deploy (``aws/discovery.py``), named the same way: an SQS event
source mapping by its queue's logical id (an ``AWS::Lambda::EventSourceMapping`` whose ``EventSourceArn`` is a
``Fn::GetAtt`` of an ``AWS::SQS::Queue`` of the stack), and an asynchronous target as ``async-<function logical id>``
(an ``AWS::Lambda::EventInvokeConfig`` of qualifier ``$LATEST``): driven through the EventBridge rules and SNS
``lambda`` subscriptions that name its function, or, when nothing in the stack invokes it, by direct asynchronous
invocations (``Invoke`` with ``InvocationType="Event"``: ``traffic.producer.invoke_sender``). Each comes with the
names an input line's ``queue`` may match (``traffic/chaos_input.resolve_queue``): the label, and a queue's
``QueueName`` when the template sets one, else the ``<stack>-<logical id>`` that CloudFormation's generated names
start with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .deploy import DeployError

_ESM, _QUEUE, _FUNCTION = "AWS::Lambda::EventSourceMapping", "AWS::SQS::Queue", "AWS::Lambda::Function"
_INVOKE_CONFIG, _RULE = "AWS::Lambda::EventInvokeConfig", "AWS::Events::Rule"
_SUBSCRIPTION, _TOPIC = "AWS::SNS::Subscription", "AWS::SNS::Topic"
#: The CDK's bucket notifications: a Lambda-backed custom resource, which moto runs only under Docker.
_S3_NOTIFICATIONS, _S3_NATIVE = "Custom::S3BucketNotifications", "AWS::S3::Bucket"


def _named(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` names; ``None`` for anything else."""
    if isinstance(value, dict) and isinstance(value.get("Ref"), str):
        return str(value["Ref"])
    attribute = value.get("Fn::GetAtt") if isinstance(value, dict) else None
    if isinstance(attribute, list) and attribute and isinstance(attribute[0], str):
        return attribute[0]
    if isinstance(attribute, str):
        return attribute.split(".", 1)[0]
    return None


def _invoked(resources: dict[str, Any]) -> set[str]:
    """The functions (logical ids) an EventBridge rule's target or an SNS ``lambda`` subscription names."""
    found: set[str] = set()
    for res in resources.values():
        props = res.get("Properties") or {}
        if res.get("Type") == _RULE:
            found.update(_named(target.get("Arn")) or "" for target in props.get("Targets") or [])
        elif res.get("Type") == _SUBSCRIPTION and props.get("Protocol") == "lambda":
            found.add(_named(props.get("Endpoint")) or "")
        elif res.get("Type") == _TOPIC:
            inline = [s for s in props.get("Subscription") or [] if s.get("Protocol") == "lambda"]
            found.update(_named(s.get("Endpoint")) or "" for s in inline)
    return found - {""}


def _s3_notified(resources: dict[str, Any]) -> list[tuple[str, str]]:
    """``(bucket, function)`` logical ids of every S3 notification to a function: the CDK's
    ``Custom::S3BucketNotifications`` and a bucket's own ``NotificationConfiguration``."""
    found: list[tuple[str, str]] = []
    for name, res in resources.items():
        props = res.get("Properties") or {}
        if res.get("Type") == _S3_NOTIFICATIONS:
            bucket, config = _named(props.get("BucketName")) or name, props.get("NotificationConfiguration") or {}
        elif res.get("Type") == _S3_NATIVE:
            bucket, config = name, props.get("NotificationConfiguration") or {}
        else:
            continue
        for entry in config.get("LambdaFunctionConfigurations") or config.get("LambdaConfigurations") or []:
            function = _named(entry.get("LambdaFunctionArn") or entry.get("Function"))
            if function is not None:
                found.append((bucket, function))
    return found


def planned_targets(template: dict[str, Any], stack: str) -> dict[str, str]:
    """``{label: queue name}`` of what a chaos run of ``stack`` will drive (module docstring), from its template.

    :raises DeployError: nothing to drive (the message names the stack's functions), or an S3 notification to a
        function: the local AWS cannot deliver one.
    """
    resources: dict[str, Any] = template.get("Resources") or {}
    notified = _s3_notified(resources)
    if notified:
        which = ", ".join(f"{bucket} -> {function}" for bucket, function in notified)
        raise DeployError(
            f"stack {stack}: S3 notifications ({which}) cannot be driven locally: the local AWS does not deliver"
            " them (moto runs the CDK's Custom::S3BucketNotifications only under Docker; docs/moto-bugs.md). Prove"
            " the function behind an EventBridge rule, an SNS topic or a queue in a stack for the run"
        )
    targets: dict[str, str] = {}
    for res in resources.values():
        props = res.get("Properties") or {}
        queue = _named(props.get("EventSourceArn")) if res.get("Type") == _ESM else None
        if queue is not None and (resources.get(queue) or {}).get("Type") == _QUEUE:
            targets[queue] = str((resources[queue].get("Properties") or {}).get("QueueName") or f"{stack}-{queue}")
    for res in resources.values():
        props = res.get("Properties") or {}
        if res.get("Type") != _INVOKE_CONFIG or props.get("Qualifier", "$LATEST") != "$LATEST":
            continue
        function = _named(props.get("FunctionName"))
        if function is not None:
            targets[f"async-{function}"] = f"async-{function}"
    if not targets:
        functions = [name for name, res in resources.items() if res.get("Type") == _FUNCTION]
        raise nothing_to_drive(stack, functions)
    return targets


def nothing_to_drive(stack: str, functions: list[str]) -> DeployError:
    """The one-line refusal of a stack with nothing a chaos run can drive, naming its ``functions`` (logical ids).
    Before the deploy (:func:`planned_targets`) and after it (``discovery.discover_targets``)."""
    return DeployError(
        f"stack {stack} has nothing to drive: no SQS event source mapping, and no function with an"
        " AWS::Lambda::EventInvokeConfig (an IdempotentEventConsumer: driven through its EventBridge rules and SNS"
        " subscriptions, or by direct asynchronous invocations); its functions:"
        f" {', '.join(sorted(functions)) or 'none'}"
    )


def planned_targets_of(cdk_out: Path, stack: str) -> dict[str, str]:
    """:func:`planned_targets` of ``<cdk_out>/<stack>.template.json``.

    :raises DeployError: as :func:`planned_targets`, or the template is missing or not JSON.
    """
    path = cdk_out / f"{stack}.template.json"
    try:
        template = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DeployError(f"stack {stack}: its synthesized template {path} cannot be read: {exc}") from exc
    return planned_targets(template, stack)
