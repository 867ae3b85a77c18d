"""One discovery of a deployed stack, whatever the app (:func:`discover`, a :class:`StackDiscovery`), each part
under its own name:

- ``mappings``: every SQS event source mapping, with what the local runner needs to play it (queue, batch size,
  window, function handler, timeout, memory, environment, code folder) and its source queue's DLQ (the queue's
  redrive policy). The payments profile's view of them is ``payments/payments_view.py``.
- ``dlqs``: those DLQs, each with the mapping whose messages it holds (what ``redrive`` moves back).
- ``on_failure_queues``: the SQS queues that are the ``OnFailure`` destination of a function's
  ``EventInvokeConfig``, each with its function (what ``redrive --on-failure`` re-invokes).
- ``async_targets``: every asynchronous target, a function with an ``AWS::Lambda::EventInvokeConfig``, read from the
  synthesized template (moto skips that resource), with its inbox, its on-failure queue and the EventBridge rules
  and SNS subscriptions that send it events (moto skips ``AWS::SNS::Subscription``: they are created here).

The stack's resources are listed once, its template read once; each part is read on first use, so a command pays
(in calls and permissions) only for the parts it uses. :func:`discover_mappings`,
:func:`discover_async_targets` and :func:`discover_targets` (both, for a chaos run) are views of it as lists.

The code folder comes from the synthesized template in the deploy's ``cdk.out``: the function's ``aws:asset:path``
metadata (the CDK CLI writes it), else the ``asset.<hash>`` folder named by its ``Code.S3Key`` (shared/LOCAL_AWS.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from effectively_once.limits import (
    ASYNC_DESTINATION_DOC,
    ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
    ASYNC_MAX_RETRY_ATTEMPTS,
    ASYNC_MIN_MAX_EVENT_AGE_SECONDS,
    ASYNC_MIN_RETRY_ATTEMPTS,
)
from effectively_once_runtime import names

from . import async_inbox
from .async_sources import SOURCE_FINDERS, AsyncSource, function_inbox
from .deploy import DeployError
from .mapping_config import AsyncConfig, MappingConfig
from .moto_async_bridges import inbox_visibility_timeout
from .stack_template import LAMBDA_FUNCTION, SQS_QUEUE, DeployedStack, code_dir, sqs_destination, template_int
from .stack_template import function_name as _function_name
from .stack_template import logical_id as _logical_id
from .target_plan import nothing_to_drive

__all__ = [
    "AsyncSource",
    "DeadLetterQueue",
    "DeployedMapping",
    "OnFailureQueue",
    "StackDiscovery",
    "code_dir",
    "dead_letter_queues",
    "disable",
    "discover",
    "discover_async_targets",
    "discover_mappings",
    "discover_targets",
]

_EVENT_SOURCE_MAPPING, _EVENT_INVOKE_CONFIG = "AWS::Lambda::EventSourceMapping", "AWS::Lambda::EventInvokeConfig"


@dataclass(frozen=True)
class DeployedMapping:
    """One deployed SQS event source mapping and what it connects; or one asynchronous target (``mapping`` with
    ``async_config``, :attr:`StackDiscovery.async_targets`).

    ``label``: the source queue's logical id (stable, and what an input line's ``queue`` names), ``async-<function
    logical id>`` for an asynchronous target; ``queue_name`` (the inbox's for an asynchronous target); ``fifo``;
    ``mapping_uuid`` (``""`` for an asynchronous target: it has no mapping); ``dlq_url``: the source queue's DLQ
    (``None`` when the queue has no redrive policy, and for an asynchronous target); ``code_dir``: the function's
    code (``None`` when discovered without a ``cdk.out``, e.g. in a real account); ``sources``: the EventBridge
    rules and SNS subscriptions that send an asynchronous target events. :default: ``()``. ``on_failure_url``: an
    asynchronous target's on-failure queue (``None`` without one, and for a mapping). :default: ``None``.
    """

    label: str
    queue_name: str
    fifo: bool
    mapping: MappingConfig
    mapping_uuid: str
    dlq_url: str | None
    code_dir: Path | None
    sources: tuple[AsyncSource, ...] = ()
    on_failure_url: str | None = None

    @property
    def failure_queue_url(self) -> str | None:
        """Where what failed ends: the DLQ of a mapping, the on-failure queue of an asynchronous target."""
        return self.on_failure_url if self.mapping.async_config is not None else self.dlq_url


@dataclass(frozen=True)
class DeadLetterQueue:
    """The DLQ an SQS event source mapping's source queue names in its redrive policy.

    :ivar url: the DLQ's URL.
    :ivar arn: the DLQ's ARN.
    :ivar source: the mapping whose source queue it holds messages of (``source.mapping.queue_url``, ``queue_arn``).
    """

    url: str
    arn: str
    source: DeployedMapping


@dataclass(frozen=True)
class OnFailureQueue:
    """An SQS queue that is the ``OnFailure`` destination of a function's ``EventInvokeConfig`` (of any qualifier),
    and that function.

    :ivar url: the queue's URL.
    :ivar arn: the queue's ARN.
    :ivar function_id: the function's logical id in the stack; for a ``FunctionName`` given as a plain name (a
        function of another stack), that name.
    :ivar function_name: the function's physical name (a plain ``FunctionName`` as given).
    """

    url: str
    arn: str
    function_id: str
    function_name: str


def dead_letter_queues(
    sqs: Any, mappings: list[DeployedMapping] | tuple[DeployedMapping, ...]
) -> list[DeadLetterQueue]:
    """The DLQs of ``mappings`` (in their order), each with the first mapping that names it: a mapping without a
    DLQ, and an asynchronous target, is left out; a DLQ shared with another mapping comes once."""
    found: dict[str, DeadLetterQueue] = {}
    for m in mappings:
        if m.dlq_url is None or m.dlq_url in found:
            continue
        arn = sqs.get_queue_attributes(QueueUrl=m.dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        found[m.dlq_url] = DeadLetterQueue(m.dlq_url, arn, m)
    return list(found.values())


@dataclass(frozen=True, eq=False)
class StackDiscovery:
    """What the deployed stack ``stack`` holds, each part under its own name and read on first use, once (the module
    docstring). ``cdk_out``: the folder the stack was deployed from (its synthesized template); ``None``: without
    one, e.g. in a real account: no code folders, on-failure queues from Lambda, no asynchronous targets.
    """

    session: Any = field(repr=False)
    stack: str
    cdk_out: Path | None = None

    @cached_property
    def _deployed(self) -> DeployedStack:
        return DeployedStack(self.session, self.stack, self.cdk_out)

    @cached_property
    def mappings(self) -> tuple[DeployedMapping, ...]:
        """Every SQS event source mapping of the stack, in the order of their queues' logical ids (``()``: none),
        each with its source queue's DLQ (``dlq_url``) and, with a ``cdk_out``, its function's code folder.

        :raises DeployError: with a ``cdk_out``, a mapping's function is not a resource of the stack, or its code
            folder is not found.
        """
        lam, sqs = self.session.client("lambda"), self.session.client("sqs")
        found: list[DeployedMapping] = []
        for res in self._deployed.resources:
            if res.get("ResourceType") != _EVENT_SOURCE_MAPPING:
                continue
            esm = lam.get_event_source_mapping(UUID=res["PhysicalResourceId"])
            if ":sqs:" in esm["EventSourceArn"]:
                found.append(self._mapping(lam, sqs, esm))
        return tuple(sorted(found, key=lambda m: m.label))

    @property
    def functions(self) -> list[dict[str, Any]]:
        """The stack's ``AWS::Lambda::Function`` resources (``ListStackResources`` entries)."""
        return [r for r in self._deployed.resources if r.get("ResourceType") == LAMBDA_FUNCTION]

    @cached_property
    def dlqs(self) -> tuple[DeadLetterQueue, ...]:
        """The DLQs of :attr:`mappings` with their source queues (:func:`dead_letter_queues`)."""
        return tuple(dead_letter_queues(self.session.client("sqs"), self.mappings))

    @cached_property
    def on_failure_queues(self) -> tuple[OnFailureQueue, ...]:
        """The SQS on-failure queues of the stack's functions, by function id and URL: from ``cdk_out``'s synthesized
        template (its ``AWS::Lambda::EventInvokeConfig`` resources, resolved to the stack's physical ids) when given,
        else from ``ListFunctionEventInvokeConfigs`` per ``AWS::Lambda::Function`` of the stack (a local AWS keeps
        none: moto skips the resource). Destinations that are not SQS queues (SNS, Lambda, EventBridge, S3) are left
        out; a queue of one function comes once. ``()``: none.

        :raises DeployError: ``cdk_out`` has no template of the stack, the template names a function or queue the
            deployed stack does not have, or a ``FunctionName`` that is neither a ``Ref``/``GetAtt`` nor a name.
        :raises botocore.exceptions.ClientError: the stack or a queue does not exist, or access is denied.
        """
        found = self._template_destinations() if self.cdk_out is not None else self._configured_destinations()
        sqs = self.session.client("sqs")
        queues: dict[tuple[str, str], OnFailureQueue] = {}
        for function_id, function, queue_name, owner in found:
            extra = {"QueueOwnerAWSAccountId": owner} if owner else {}
            url = sqs.get_queue_url(QueueName=queue_name, **extra)["QueueUrl"]
            if (url, function) not in queues:
                arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                queues[url, function] = OnFailureQueue(url, arn, function_id, function)
        return tuple(sorted(queues.values(), key=lambda q: (q.function_id, q.url)))

    @cached_property
    def async_targets(self) -> tuple[DeployedMapping, ...]:
        """Every asynchronous target of the stack, in the order of their labels: each function with an
        ``AWS::Lambda::EventInvokeConfig`` of qualifier ``$LATEST`` in ``<cdk_out>/<stack>.template.json`` (moto
        skips that resource; configs of other qualifiers are ignored: the bridges deliver to the function by name).
        ``()`` for a stack without one. For the local runner: reading them creates inboxes and subscriptions.

        Each target is a :class:`DeployedMapping` labelled ``async-<function logical id>`` whose ``mapping`` has an
        ``AsyncConfig``: the function's ARN, ``MaximumRetryAttempts`` (default 2, 0..2), ``MaximumEventAgeInSeconds``
        (default 21600, 60..21600; both limits: CloudFormation AWS::Lambda::EventInvokeConfig), the on-failure
        queue's URL (``DestinationConfig.OnFailure.Destination``, ``None`` without one; also ``on_failure_url``) and
        the time scale (``async_inbox.time_scale`` of this process's environment). Its queue is the function's inbox
        (``async_inbox.inbox_name``), created here (or updated) with a visibility timeout of the function's timeout
        plus 5 s (``moto_async_bridges.inbox_visibility_timeout``); ``batch_size`` 1, no batching window,
        ``max_receive_count`` 0 (the runner applies Lambda's retry policy itself). The function's name, timeout,
        memory, environment and handler are read from the deployed function, its code folder from ``cdk_out`` (as
        :attr:`mappings`). ``sources``: what each finder of ``async_sources.SOURCE_FINDERS`` finds, in its order: the
        stack's EventBridge rules with a target naming the function (bus, rule name, the first ``source`` and
        ``detail-type`` of the deployed pattern), and its SNS topics with a ``lambda`` subscription of the function,
        each subscription created when missing (moto skips ``AWS::SNS::Subscription``): reading them again, in
        another discovery, creates nothing twice.

        :raises DeployError: no ``cdk_out`` or no template in it, a resource it names is not deployed, the config's
            function is not a function of the stack, a retry or age setting is not a number in its range, the
            on-failure destination is not a standard SQS queue, or the function's code folder is not found.
        :raises ValueError: ``async_inbox.TIME_SCALE_ENV`` is set to something that is not a number > 0.
        """
        configs = [
            (config, props)
            for config, props in self._deployed.of_type(_EVENT_INVOKE_CONFIG)
            if props.get("Qualifier", "$LATEST") == "$LATEST"
        ]
        if not configs:
            return ()
        scale = async_inbox.time_scale(os.environ)
        services = dict.fromkeys(("lambda", "sqs", *(finder.service for finder in SOURCE_FINDERS.values())))
        clients = {name: self.session.client(name) for name in services}
        found = [self._async_target(config, props, scale, clients) for config, props in configs]
        return tuple(sorted(found, key=lambda m: m.label))

    def _mapping(self, lam: Any, sqs: Any, esm: dict[str, Any]) -> DeployedMapping:
        """One SQS event source mapping (``GetEventSourceMapping``'s answer), its queue, DLQ and function."""
        queue_arn = esm["EventSourceArn"]
        queue_name = queue_arn.split(":")[5]
        queue_url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        label = self._queue_label(queue_name, queue_arn)
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attrs.get("RedrivePolicy", "{}"))
        dlq_url = (
            sqs.get_queue_url(QueueName=redrive["deadLetterTargetArn"].split(":")[5])["QueueUrl"]
            if "deadLetterTargetArn" in redrive
            else None
        )
        fn = lam.get_function_configuration(FunctionName=esm["FunctionArn"])
        by_physical = {physical: logical for logical, physical in self._deployed.physical.items()}
        fn_logical = by_physical.get(fn["FunctionName"])
        if fn_logical is None and self.cdk_out is not None:
            raise DeployError(f"the function of {label} ({fn['FunctionName']}) is not a resource of {self.stack}")
        return DeployedMapping(
            label=label,
            queue_name=queue_name,
            fifo=names.is_fifo_address(queue_name),
            mapping=_queue_mapping(label, queue_url, queue_arn, esm, attrs, redrive, fn),
            mapping_uuid=esm["UUID"],
            dlq_url=dlq_url,
            code_dir=code_dir(self.cdk_out, self.stack, fn_logical)
            if self.cdk_out is not None and fn_logical
            else None,
        )

    def _queue_label(self, queue_name: str, queue_arn: str) -> str:
        """The logical id of the stack's queue ``queue_name``; the name itself when it is not the stack's."""
        # The queue's physical id is its URL on AWS; match on the name, whatever form the emulator keeps.
        return next(
            (
                q["LogicalResourceId"]
                for q in self._deployed.resources
                if q.get("ResourceType") == SQS_QUEUE
                and (
                    q.get("PhysicalResourceId", "").rstrip("/").split("/")[-1] == queue_name
                    or q.get("PhysicalResourceId") == queue_arn
                )
            ),
            queue_name,
        )

    def _configured_destinations(self) -> list[_Destination]:
        """The SQS on-failure destinations Lambda keeps for each function of the stack."""
        lam = self.session.client("lambda")
        found: list[_Destination] = []
        for res in sorted(self._deployed.resources, key=lambda r: r["LogicalResourceId"]):
            if res.get("ResourceType") != LAMBDA_FUNCTION:
                continue
            function = res.get("PhysicalResourceId", "")
            pages = lam.get_paginator("list_function_event_invoke_configs").paginate(FunctionName=function)
            for config in (c for page in pages for c in page.get("FunctionEventInvokeConfigs", [])):
                arn = config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination", "")
                if ":sqs:" in arn:
                    found.append((res["LogicalResourceId"], function, arn.split(":")[5], arn.split(":")[4]))
        return found

    def _template_destinations(self) -> list[_Destination]:
        """The SQS on-failure destinations of the template's ``EventInvokeConfig`` resources, of any qualifier."""
        found: list[_Destination] = []
        for config, props in self._deployed.of_type(_EVENT_INVOKE_CONFIG):
            destination = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            queue = sqs_destination(destination, self._deployed)
            if queue is not None:
                found.append((*self._config_function(props.get("FunctionName"), config), *queue))
        return found

    def _config_function(self, name: Any, config: str) -> tuple[str, str]:
        """``(function id, physical name)`` of an ``EventInvokeConfig``'s ``FunctionName``: a ``Ref``, a ``GetAtt``
        or a plain name (a function of another stack: its id is its name)."""
        if isinstance(name, str):
            return name, name
        logical = _logical_id(name)
        if logical is None:
            raise DeployError(f"{config} of {self.stack}: FunctionName {name!r} is neither a Ref nor a name")
        return logical, self._deployed.deployed(logical, "function")

    def _async_target(
        self, config: str, props: dict[str, Any], scale: float, clients: dict[str, Any]
    ) -> DeployedMapping:
        """The asynchronous target of one ``EventInvokeConfig`` (:attr:`async_targets`), its inbox and sources."""
        deployed = self._deployed
        fn_logical, _ = _function_name(props.get("FunctionName"), deployed)
        if fn_logical is None:
            raise DeployError(
                f"{config}: its FunctionName {props.get('FunctionName')!r} is not a function of {self.stack} (a Ref or "
                "Fn::GetAtt of an AWS::Lambda::Function)"
            )
        retries, max_age = _retry_settings(config, props)
        on_failure_url = _on_failure_queue(clients["sqs"], deployed, config, props)
        fn = clients["lambda"].get_function_configuration(FunctionName=deployed.deployed(fn_logical, "function"))
        visibility = inbox_visibility_timeout(int(fn.get("Timeout", 3)))
        inbox, inbox_url, inbox_arn = function_inbox(clients["sqs"], fn["FunctionName"], visibility)
        sources = [
            source
            for finder in SOURCE_FINDERS.values()
            for source in finder.find(
                clients[finder.service], deployed, fn_logical, fn["FunctionName"], fn["FunctionArn"]
            )
        ]
        label = f"async-{fn_logical}"
        settings = AsyncConfig(
            function_arn=fn["FunctionArn"],
            max_retry_attempts=retries,
            max_event_age_seconds=max_age,
            on_failure_queue_url=on_failure_url,
            time_scale=scale,
        )
        return DeployedMapping(
            label=label,
            queue_name=inbox,
            fifo=False,
            mapping=_inbox_mapping(label, inbox_url, inbox_arn, visibility, fn, settings),
            mapping_uuid="",
            dlq_url=None,
            code_dir=code_dir(deployed.cdk_out, self.stack, fn_logical) if deployed.cdk_out is not None else None,
            sources=tuple(sources),
            on_failure_url=on_failure_url,
        )


#: One on-failure destination found: (function id, function name, queue name, queue owner account or "").
_Destination = tuple[str, str, str, str]


def discover(session: Any, stack: str, cdk_out: Path | None = None) -> StackDiscovery:
    """The one discovery of the deployed ``stack`` (:class:`StackDiscovery`: nothing is read until a part is).

    :param cdk_out: the folder the stack was deployed from. :default: ``None``: see :class:`StackDiscovery`.
    """
    return StackDiscovery(session, stack, cdk_out)


def discover_mappings(session: Any, stack: str, cdk_out: Path | None) -> list[DeployedMapping]:
    """Every SQS event source mapping of ``stack``, in the order of their queues' logical ids
    (:attr:`StackDiscovery.mappings`); ``cdk_out``: the folder the stack was deployed from, to find each function's
    code (``None``: no code folders).

    :raises DeployError: the stack has no SQS event source mapping, or a function's code folder is not found.
    """
    found = list(discover(session, stack, cdk_out).mappings)
    if not found:
        raise DeployError(f"stack {stack} has no SQS event source mapping")
    return found


def discover_targets(session: Any, stack: str, cdk_out: Path | None) -> list[DeployedMapping]:
    """Everything a chaos run can drive in ``stack``, from one discovery: its SQS event source mappings (as
    :func:`discover_mappings`), then, with a ``cdk_out``, its asynchronous targets (as :func:`discover_async_targets`).
    A stack of either kind alone runs: an EventBridge-only or SNS-only stack has no mapping.

    :raises DeployError: neither is there (the message names the stack's functions), or as the two views.
    """
    found = discover(session, stack, cdk_out)
    targets = [*found.mappings, *(found.async_targets if cdk_out is not None else ())]
    if not targets:
        raise nothing_to_drive(stack, [r["LogicalResourceId"] for r in found.functions])
    return targets


def discover_async_targets(session: Any, stack: str, cdk_out: Path) -> list[DeployedMapping]:
    """Every asynchronous target of the deployed ``stack`` (:attr:`StackDiscovery.async_targets`), in the order of
    their labels; an empty list for a stack without one.

    :raises DeployError: as :attr:`StackDiscovery.async_targets`.
    :raises ValueError: ``async_inbox.TIME_SCALE_ENV`` is set to something that is not a number > 0.
    """
    return list(discover(session, stack, cdk_out).async_targets)


def disable(session: Any, mappings: list[DeployedMapping]) -> None:
    """Switch moto's own mappings off: it would hand every message to its Lambda stand-in (which cannot run the code
    without Docker) and delete it. The local runner plays their part. Asynchronous targets (no mapping) are
    skipped."""
    lam = session.client("lambda")
    for m in mappings:
        if m.mapping.async_config is None:
            lam.update_event_source_mapping(UUID=m.mapping_uuid, Enabled=False)


def _queue_mapping(
    label: str,
    queue_url: str,
    queue_arn: str,
    esm: dict[str, Any],
    attrs: dict[str, Any],
    redrive: dict[str, Any],
    fn: dict[str, Any],
) -> MappingConfig:
    """How the local runner plays an SQS event source mapping: its answers, its queue's and its function's."""
    return MappingConfig(
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


def _inbox_mapping(
    label: str, inbox_url: str, inbox_arn: str, visibility: int, fn: dict[str, Any], settings: AsyncConfig
) -> MappingConfig:
    """How the local runner plays an asynchronous target: its inbox, one event at a time, Lambda's retries."""
    return MappingConfig(
        label=label,
        queue_url=inbox_url,
        queue_arn=inbox_arn,
        batch_size=1,
        batching_window_seconds=0,
        visibility_timeout_seconds=visibility,
        max_receive_count=0,
        function_name=fn["FunctionName"],
        function_timeout_seconds=int(fn.get("Timeout", 3)),
        function_memory_mb=int(fn.get("MemorySize", 128)),
        function_env=dict(fn.get("Environment", {}).get("Variables", {})),
        handler=fn["Handler"],
        async_config=settings,
    )


def _retry_settings(config: str, props: dict[str, Any]) -> tuple[int, int]:
    """``(MaximumRetryAttempts, MaximumEventAgeInSeconds)`` of the config, defaults and ranges Lambda's."""
    retries = template_int(
        config,
        props,
        "MaximumRetryAttempts",
        ASYNC_MAX_RETRY_ATTEMPTS,
        ASYNC_MIN_RETRY_ATTEMPTS,
        ASYNC_MAX_RETRY_ATTEMPTS,
    )
    max_age = template_int(
        config,
        props,
        "MaximumEventAgeInSeconds",
        ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
        ASYNC_MIN_MAX_EVENT_AGE_SECONDS,
        ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
    )
    return retries, max_age


def _on_failure_queue(sqs: Any, stack: DeployedStack, config: str, props: dict[str, Any]) -> str | None:
    """The URL of an asynchronous target's on-failure SQS queue, or ``None`` without a destination.

    :raises DeployError: a destination that is not an SQS queue, or a FIFO one (Lambda takes a standard queue only:
        ``effectively_once.ASYNC_DESTINATION_DOC``).
    """
    destination = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    if destination is None:
        return None
    queue = sqs_destination(destination, stack)
    if queue is None:
        logical = _logical_id(destination)
        what = f"{logical} ({stack.type_of(logical)})" if logical is not None else repr(destination)
        raise DeployError(
            f"{config}: the on-failure destination {what} is not an SQS queue: the local runner sends failure "
            "records to SQS queues only"
        )
    queue_name = queue[0]
    if names.is_fifo_address(queue_name):
        raise DeployError(f"{config}: the on-failure queue {queue_name} is FIFO ({ASYNC_DESTINATION_DOC})")
    return str(sqs.get_queue_url(QueueName=queue_name)["QueueUrl"])
