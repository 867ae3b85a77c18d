"""Option objects: a composed construct's props, carried as one typed value by the construct that composes it.

:class:`PaymentProcessor` takes ``queue_options`` (:class:`ProcessingQueueOptions`, for its ``Queue``) and
``consumer_options`` (:class:`IdempotentQueueConsumerOptions`, for its ``Consumer``) instead of forwarding each prop
one by one. Each field has the name, type and default of the construct's own prop (tests/unit/test_options.py
compares every default with the construct's signature); the props the composer sets itself (the consumer's
``queue``, ``function``, ``table``, ``log_group``) and the ones it applies to more than the one construct
(``removal_policy``, ``service_name``, ``metrics_namespace``: :class:`PaymentProcessor`'s own) are not fields.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, TypeVar

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_

from . import limits
from .observability import AlarmThresholds, AsyncInvocationOptions

_Options = TypeVar("_Options")


def _remembers_given_fields(cls: type[_Options]) -> type[_Options]:
    """Record which fields the caller passed (:func:`given_fields`): a field passed with its default value is still
    given, which comparing with the default could not tell."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, **given: Any) -> None:
        init(self, **given)
        object.__setattr__(self, "_given_fields", frozenset(given))  # frozen: set past the dataclass's __setattr__

    setattr(cls, "__init__", __init__)  # noqa: B010 - assigning a method would need a type: ignore
    return cls


def given_fields(options: object) -> frozenset[str]:
    """The fields passed when ``options`` was built (``dataclasses.replace`` passes them all)."""
    return getattr(options, "_given_fields", frozenset())


@_remembers_given_fields
@dataclass(frozen=True, kw_only=True)
class ProcessingQueueOptions:
    """The props of a composed :class:`ProcessingQueue` (``PaymentProcessor(queue_options=...)``); each as there.

    :param fifo: FIFO queues (source and DLQ). :default: ``False``: standard queues.
    :param visibility_timeout: the source queue's visibility timeout. :default: ``None``: filled in by the consumer
        as 6 x function timeout + batching window (180 s for ``PaymentProcessor``'s defaults); required when either
        is a deploy-time token (a ``ValueError`` otherwise).
    :param retention_period: how long the source queue keeps a message (60 s..14 days).
        :default: ``None``: 4 days, SQS's default, stated in the template.
    :param max_receive_count: receives before SQS moves a message to the DLQ (1..1000).
        :default: ``5`` (AWS guidance for Lambda consumers).
    :param content_based_deduplication: FIFO only: deduplicate on a SHA-256 of the body.
        :default: ``False``: producers send a ``MessageDeduplicationId``.
    :param high_throughput: FIFO only: deduplication scope and throughput limit per message group.
        :default: ``False``: queue-wide.
    :raises ValueError: at the construct, as :class:`ProcessingQueue` (the options object checks nothing itself).
    """

    fifo: bool = False
    visibility_timeout: Duration | None = None
    retention_period: Duration | None = None
    max_receive_count: int = limits.LAMBDA_SQS_RECOMMENDED_MIN_MAX_RECEIVE_COUNT
    content_based_deduplication: bool = False
    high_throughput: bool = False


@_remembers_given_fields
@dataclass(frozen=True, kw_only=True)
class IdempotentQueueConsumerOptions:
    """The props of a composed :class:`IdempotentQueueConsumer` (``PaymentProcessor(consumer_options=...)``); each
    as there.

    :param batch_size: records per invocation (standard 1..10,000, FIFO 1..10; above 10 needs a window).
        :default: ``10``.
    :param max_batching_window: how long Lambda gathers records before invoking (standard queues only).
        :default: ``None``: no batching window.
    :param max_concurrency: most concurrent invocations of the mapping (2..1000); exclusive with
        ``provisioned_poller_config``. :default: ``None``: no limit beyond the function's concurrency.
    :param provisioned_poller_config: the mapping's provisioned mode (minimum 2..200, maximum 2..2000 pollers); the
        minimum pollers are billed every hour, traffic or not. :default: ``None``: on-demand mode.
    :param event_source_mapping_metrics: the mapping's event-count metrics (and ``PaymentProcessor``'s dashboard
        row of them). :default: ``True``.
    :param idempotency_expiry: how long a completed record answers duplicates.
        :default: ``None``: the source queue's retention period.
    :param key_prefix: ``IDEMPOTENCY_KEY_PREFIX`` (printable, no whitespace, at most 2015 UTF-8 bytes).
        :default: ``None``: not set; the handler's ``Consumer`` declares it (the sample's
        ``effectively-once/payments``).
    :param alarms: the five failure alarms. :default: ``True``.
    :param alarm_action: added to every alarm. :default: ``None``: the alarms notify no one.
    :param alarm_thresholds: :default: ``None``: ``AlarmThresholds()``.
    :param async_invocation: **deprecated** (removed in 0.4.0, with a ``DeprecationWarning``): the function's
        asynchronous invocation path (event invoke config and on-failure queue); use :class:`IdempotentEventConsumer`
        on the composed function instead. :default: ``None``: left to Lambda's defaults (2 retries, 6 hours, no
        destination).
    :raises ValueError: at the construct, as :class:`IdempotentQueueConsumer` (the options object checks nothing
        itself).
    """

    batch_size: int = 10
    max_batching_window: Duration | None = None
    max_concurrency: int | None = None
    provisioned_poller_config: lambda_.ProvisionedPollerConfig | None = None
    event_source_mapping_metrics: bool = True
    idempotency_expiry: Duration | None = None
    key_prefix: str | None = None
    alarms: bool = True
    alarm_action: cloudwatch.IAlarmAction | None = None
    alarm_thresholds: AlarmThresholds | None = None
    async_invocation: AsyncInvocationOptions | None = None
