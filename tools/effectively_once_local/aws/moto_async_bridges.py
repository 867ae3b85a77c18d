"""Lambda's asynchronous invocation from EventBridge and SNS in moto: two bridges, and the event bus's ``Ref`` that a
rule on a custom bus needs (:func:`event_bus_ref_is_its_name`), for the local tooling, on moto
:data:`.moto_patches.REQUIRED_MOTO_VERSION`. Applied by :func:`.moto_patches.apply` (the local AWS's server), whose
module docstring lists every patch and the module that holds it. A bridge creates a missing inbox under
:data:`.moto_locking.SQS_LOCK`.

Bridged (moto 5.2.5): Lambda's asynchronous invocation from EventBridge and SNS (issue 23), and a direct
``Invoke`` with ``InvocationType="Event"`` (issue 30). moto raises ``NotImplementedError`` for an EventBridge rule
whose target is a Lambda function, and hands an SNS ``lambda`` subscription's message and an ``Event`` invocation to
its Docker-backed Lambda (no Docker here: the message is lost with a log line, the invocation fails). The local
AWS plays Lambda's asynchronous queue as an SQS queue per function, its *inbox* (``aws/async_inbox.py``), which the
local runner drains with Lambda's retry policy: the bridges put each event there exactly as the function receives it,
with the message attribute ``async_inbox.SOURCE_ATTRIBUTE`` naming its source. Rules on custom buses too.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from effectively_once_runtime.events import EVENTBRIDGE, SNS

from ..traffic.producer import EVENT_ID_HEADER
from .async_inbox import EVENT_ID_ATTRIBUTE, INVOKE, SOURCE_ATTRIBUTE, inbox_name
from .moto_locking import SQS_LOCK

#: Lambda's default function timeout, in seconds (AWS Lambda Developer Guide, "Configure Lambda function
#: timeout": 3 seconds by default): an inbox a bridge creates for a function moto does not know.
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3
#: What an inbox's visibility timeout adds to its function's timeout, in seconds: an attempt still running is not
#: received again (the runner makes a failed attempt's message visible at its retry delay itself).
INBOX_VISIBILITY_MARGIN_SECONDS = 5
#: The marker of this module's bridges on the moto methods they wrap (a second call wraps nothing twice).
_BRIDGED = "__effectively_once_bridge__"


def inbox_visibility_timeout(function_timeout_seconds: int) -> int:
    """The visibility timeout (seconds) of the inbox of a function that times out after ``function_timeout_seconds``:
    that timeout plus :data:`INBOX_VISIBILITY_MARGIN_SECONDS`."""
    return int(function_timeout_seconds) + INBOX_VISIBILITY_MARGIN_SECONDS


def _function_of(function_arn: str) -> tuple[str, str, str]:
    """``(account, region, function name)`` of a Lambda function ARN, qualified or not.

    :raises ValueError: not a Lambda function ARN (``arn:<partition>:lambda:<region>:<account>:function:<name>``).
    """
    parts = function_arn.split(":")
    if len(parts) not in (7, 8) or parts[2] != "lambda" or parts[5] != "function" or not parts[6]:
        raise ValueError(f"not a Lambda function ARN: {function_arn!r}")
    return parts[4], parts[3], parts[6]


def _is_function_arn(arn: str) -> bool:
    try:
        _function_of(arn)
    except ValueError:
        return False
    return True


def put_in_inbox(function_arn: str, body: str, source: str, event_id: str | None = None) -> None:
    """Queue ``body`` (the event, as the function receives it) in the inbox of the function ``function_arn`` names
    (``async_inbox.inbox_name`` of its name; a qualifier is dropped), in the SQS backend of that ARN's account and
    Region, with the message attribute ``SOURCE_ATTRIBUTE`` = ``source`` (and ``EVENT_ID_ATTRIBUTE`` = ``event_id``
    when given). A missing inbox is created first, with the
    visibility timeout :func:`inbox_visibility_timeout` of the function's timeout
    (:data:`LAMBDA_DEFAULT_TIMEOUT_SECONDS` when moto does not know the function: the event is queued anyway, for a
    runner to find).

    :raises ValueError: ``function_arn`` is not a Lambda function ARN.
    """
    from moto.awslambda.models import lambda_backends
    from moto.sqs.models import sqs_backends

    account, region, name = _function_of(function_arn)
    sqs = sqs_backends[account][region]
    queue = inbox_name(name)
    with SQS_LOCK:
        if queue not in sqs.queues:
            try:
                timeout = int(lambda_backends[account][region].get_function(name).timeout)
            except Exception:  # moto's UnknownFunctionException, or a function without a timeout
                timeout = LAMBDA_DEFAULT_TIMEOUT_SECONDS
            sqs.create_queue(queue, VisibilityTimeout=inbox_visibility_timeout(timeout))
    attributes = {SOURCE_ATTRIBUTE: {"DataType": "String", "StringValue": source}}
    if event_id is not None:
        attributes[EVENT_ID_ATTRIBUTE] = {"DataType": "String", "StringValue": event_id}
    sqs.send_message(queue, body, message_attributes=attributes)


class _RuleWithTargets:
    """A moto ``Rule`` as its own ``send_to_targets`` sees it for the targets moto delivers itself: every attribute
    is the rule's but ``targets``."""

    def __init__(self, rule: Any, targets: list[dict[str, Any]]) -> None:
        self._rule = rule
        self.targets = targets

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rule, name)


def _event_time(value: Any) -> Any:
    """An event's ``time`` as EventBridge delivers it (``2026-12-01T10:00:00Z``); moto keeps epoch seconds."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.replace(".", "", 1).isdigit()):
        from moto.core.utils import iso_8601_datetime_without_milliseconds, utcfromtimestamp

        return iso_8601_datetime_without_milliseconds(utcfromtimestamp(float(value)))  # type: ignore[arg-type]
    return value


#: The fields of an event as a Lambda target receives it (Amazon EventBridge User Guide, "Amazon EventBridge
#: events", https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events.html), in that order; moto's event
#: also holds its ``ingestion-time``.
EVENT_FIELDS = ("version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail")


def eventbridge_event_for_lambda(rule: Any, target: dict[str, Any], event: dict[str, Any], transform: bool) -> Any:
    """What the Lambda ``target`` of ``rule`` receives for moto's ``event``: the whole event (:data:`EVENT_FIELDS`,
    ``time`` in ISO 8601), or, with an ``InputTransformer`` and ``transform``, what moto's own transformation
    (``EventTemplateParser``, the one it applies for SQS targets) makes of it; its template must give JSON (a plain
    text template is AWS's too, not moto's).

    :raises NotImplementedError: the target has ``Input`` or ``InputPath`` (moto has no transformation for either:
        only the whole event and an ``InputTransformer`` are delivered; docs/moto-bugs.md, report 9).
    """
    import copy

    whole = {name: copy.deepcopy(event.get(name)) for name in EVENT_FIELDS}
    whole["version"] = whole["version"] or "0"
    whole["resources"] = whole["resources"] or []
    whole["time"] = _event_time(whole["time"])
    if not transform:
        return whole
    for unsupported in ("Input", "InputPath"):
        if target.get(unsupported) is not None:
            raise NotImplementedError(
                f"the local AWS delivers the whole event or an InputTransformer's output to a Lambda target, but "
                f"target {target.get('Id')} of rule {rule.name} has {unsupported}"
            )
    transformer = target.get("InputTransformer")
    if not transformer:
        return whole
    from moto.events.utils import EventTemplateParser

    return EventTemplateParser.parse(
        input_template=transformer.get("InputTemplate"),
        input_paths_map=transformer.get("InputPathsMap", {}),
        # moto's template reads the ingestion time too (``<aws.events.event.ingestion-time>``).
        event={**whole, "ingestion-time": event.get("ingestion-time", event.get("time"))},  # type: ignore[typeddict-item]
    )


def eventbridge_lambda_targets() -> None:
    """moto 5.2.5: ``Rule.send_to_targets`` (events/models.py) delivers to log groups, archives, SQS queues, event
    buses and API destinations, and raises ``NotImplementedError`` ("Expr not defined") for any other target: a
    ``PutEvents`` matching a rule with a Lambda target fails (a 500 from the server), and the rule's other targets
    after it get nothing. EventBridge invokes the function asynchronously with the event. The patch delivers each
    matching rule's Lambda targets to the function's inbox (:func:`put_in_inbox`, source ``eventbridge``) as the
    function receives the event (:func:`eventbridge_event_for_lambda`), on any bus, and leaves the other targets to
    moto. A second call changes nothing. docs/moto-bugs.md, report 9; tests:
    ``test_put_events_on_a_custom_bus_reaches_the_inbox``, ``test_an_event_the_pattern_does_not_match_is_not_queued``,
    ``test_an_input_transformer_is_applied``, ``test_the_local_aws_server_bridges_eventbridge_and_sns``
    (tests/local/test_async_bridges.py)."""
    from moto.events import models as events_models

    send_to_targets: Callable[..., None] = events_models.Rule.send_to_targets
    if getattr(send_to_targets, _BRIDGED, False):
        return

    @wraps(send_to_targets)
    def send_to_targets_and_inboxes(self: Any, original_event: Any, transform_input: bool = True) -> None:
        functions = [t for t in self.targets if _is_function_arn(t["Arn"])]
        if not functions:
            send_to_targets(self, original_event, transform_input)
            return
        if not self.event_pattern.matches_event(original_event):
            return
        others = [t for t in self.targets if t not in functions]
        if others:
            send_to_targets(_RuleWithTargets(self, others), original_event, transform_input)
        for target in functions:
            event = eventbridge_event_for_lambda(self, target, original_event, transform_input)
            put_in_inbox(target["Arn"], json.dumps(event), EVENTBRIDGE)

    setattr(send_to_targets_and_inboxes, _BRIDGED, True)
    events_models.Rule.send_to_targets = send_to_targets_and_inboxes  # type: ignore[method-assign]


def sns_record_for_lambda(
    subscription: Any,
    message: str,
    message_id: str,
    subject: str | None,
    message_attributes: dict[str, Any] | None,
) -> dict[str, Any]:
    """The event a Lambda function subscribed to an SNS topic receives for one message: one record with
    ``EventSource`` ``aws:sns``, ``EventVersion``, ``EventSubscriptionArn`` and ``Sns``: ``Type``, ``MessageId``,
    ``TopicArn``, ``Subject`` (``None`` without one), ``Message``, ``Timestamp``, ``SignatureVersion``,
    ``Signature``, ``SigningCertUrl``, ``UnsubscribeUrl``, ``MessageAttributes`` as ``{name: {"Type", "Value"}}``
    (AWS Lambda Developer Guide, "Invoking Lambda functions with Amazon SNS notifications",
    https://docs.aws.amazon.com/lambda/latest/dg/with-sns.html). The timestamp, signature and certificate URL are
    moto's, as for its HTTP and SQS subscriptions."""
    post = subscription.get_post_data(message, message_id, subject, message_attributes=message_attributes)
    region = subscription.topic.arn.split(":")[3]
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": subscription.arn,
                "Sns": {
                    "Type": post["Type"],
                    "MessageId": message_id,
                    "TopicArn": subscription.topic.arn,
                    "Subject": subject or None,
                    "Message": message,
                    "Timestamp": post["Timestamp"],
                    "SignatureVersion": post["SignatureVersion"],
                    "Signature": post["Signature"],
                    "SigningCertUrl": post["SigningCertURL"],
                    "UnsubscribeUrl": (
                        f"https://sns.{region}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={subscription.arn}"
                    ),
                    "MessageAttributes": {
                        name: {"Type": value["Type"], "Value": str(value["Value"])}
                        for name, value in (message_attributes or {}).items()
                    },
                },
            }
        ]
    }


def sns_lambda_subscriptions() -> None:
    """moto 5.2.5: ``Subscription.publish`` (sns/models.py) hands a ``lambda`` subscription's message to its
    Docker-backed Lambda (``send_sns_message``); without Docker the message is lost with a log line, and the publish
    succeeds. SNS invokes the function asynchronously with the SNS event. The patch puts that event
    (:func:`sns_record_for_lambda`) in the function's inbox (:func:`put_in_inbox`, source ``sns``), after moto's own
    filter policy and ``MessageStructure=json`` (the ``lambda`` key, else ``default``); other protocols stay moto's. A
    second call changes nothing. docs/moto-bugs.md, report 10; tests: ``test_an_sns_publish_reaches_the_inbox``,
    ``test_an_sns_filter_policy_is_applied``, ``test_the_local_aws_server_bridges_eventbridge_and_sns``
    (tests/local/test_async_bridges.py)."""
    from moto.sns import models as sns_models

    publish: Callable[..., None] = sns_models.Subscription.publish
    if getattr(publish, _BRIDGED, False):
        return
    signature = inspect.signature(publish)

    @wraps(publish)
    def publish_to_inbox(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        subscription = given["self"]
        if subscription.protocol != "lambda":
            publish(*args, **kwargs)
            return
        message, attributes = given["message"], given["message_attributes"]
        matcher = subscription._filter_policy_matcher
        if matcher is not None and not matcher.matches(attributes, message):
            return
        if given["message_structure"] == "json":
            message = subscription._parse_message_structure(message, subscription.protocol)
        record = sns_record_for_lambda(subscription, message, given["message_id"], given["subject"], attributes)
        put_in_inbox(subscription.endpoint, json.dumps(record), SNS)

    setattr(publish_to_inbox, _BRIDGED, True)
    sns_models.Subscription.publish = publish_to_inbox  # type: ignore[method-assign]


def lambda_event_invocations() -> None:
    """moto 5.2.5: ``LambdaBackend.invoke`` (awslambda/models.py) runs every invocation in its Docker-backed Lambda,
    ``InvocationType="Event"`` included (no Docker here: it fails). Lambda queues such an event and answers 202 at
    once. The patch puts the payload, as it is, in the function's inbox (:func:`put_in_inbox`, source
    ``async_inbox.INVOKE``) under a new event id (a UUID), which the answer carries in the header
    ``traffic.producer.EVENT_ID_HEADER`` and the inbox message in ``async_inbox.EVENT_ID_ATTRIBUTE``, and answers 202
    with an empty payload; a qualifier is dropped, as the other bridges do. Other invocation types stay moto's. A
    second call changes nothing. docs/moto-bugs.md, report 12; tests: ``test_an_event_invocation_reaches_the_inbox``
    (tests/local/test_async_bridges.py)."""
    from moto.awslambda import models as lambda_models

    invoke: Callable[..., Any] = lambda_models.LambdaBackend.invoke
    if getattr(invoke, _BRIDGED, False):
        return

    @wraps(invoke)
    def invoke_or_queue(
        self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
    ) -> Any:
        if (headers or {}).get("X-Amz-Invocation-Type") != "Event":
            return invoke(self, function_name, qualifier, body, headers, response_headers)
        import uuid

        function = self.get_function(function_name, None)  # raises moto's own "not found" for an unknown name
        event_id = str(uuid.uuid4())
        payload = body.decode("utf-8") if isinstance(body, bytes) else str(body)
        put_in_inbox(function.function_arn, payload, INVOKE, event_id)
        response_headers[EVENT_ID_HEADER] = event_id
        return b""

    setattr(invoke_or_queue, _BRIDGED, True)
    lambda_models.LambdaBackend.invoke = invoke_or_queue  # type: ignore[method-assign]


def event_bus_ref_is_its_name() -> None:
    """moto 5.2.5: an ``AWS::Events::EventBus`` has no ``physical_resource_id``, so ``{"Ref": <bus>}`` resolves to
    the Python object, and a rule on it (``EventBusName``: what CDK emits for a custom bus) fails CreateStack with a
    500 (``'EventBus' object has no attribute 'split'``). CloudFormation's Ref of an event bus is its name. The patch
    gives the bus that id. docs/moto-bugs.md, report 8; test: ``test_a_rule_on_a_custom_bus_deploys``."""
    from moto.events import models as events_models

    if not hasattr(events_models.EventBus, "physical_resource_id"):
        events_models.EventBus.physical_resource_id = property(lambda self: self.name)  # type: ignore[attr-defined]


def apply_bridges() -> None:
    """Every bridge of this module, in order (``moto_patches.apply`` calls it): a new bridge is registered here."""
    event_bus_ref_is_its_name()
    eventbridge_lambda_targets()
    sns_lambda_subscriptions()
    lambda_event_invocations()
