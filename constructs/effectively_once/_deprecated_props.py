"""``PaymentProcessor``'s deprecated keywords: the props it forwarded one by one to its queue and its consumer
before ``queue_options`` and ``consumer_options`` (deprecated in 0.3.0, removed in 0.4.0).

Each old keyword still works, with a ``DeprecationWarning`` naming the option object to use instead; an old keyword
together with the same field given in its option object is a ``ValueError`` naming both. The old keyword and an
option object's other fields combine.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any, TypedDict, TypeVar

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_

from ._stacklevel import caller_stacklevel
from ._validation import Described, fail, shown
from .observability import AlarmThresholds, AsyncInvocationOptions
from .options import IdempotentQueueConsumerOptions, ProcessingQueueOptions, given_fields

#: The release that removes the keywords.
REMOVED_IN = "0.4.0"

_Options = TypeVar("_Options", ProcessingQueueOptions, IdempotentQueueConsumerOptions)


class DeprecatedProps(TypedDict, total=False):
    """The deprecated keywords with their types (``**kwargs: Unpack[DeprecatedProps]``): type checkers still check
    them while they work."""

    fifo: bool
    visibility_timeout: Duration | None
    retention_period: Duration | None
    max_receive_count: int
    content_based_deduplication: bool
    high_throughput: bool
    batch_size: int
    max_batching_window: Duration | None
    max_concurrency: int | None
    provisioned_poller_config: lambda_.ProvisionedPollerConfig | None
    event_source_mapping_metrics: bool
    idempotency_expiry: Duration | None
    key_prefix: str | None
    alarms: bool
    alarm_action: cloudwatch.IAlarmAction | None
    alarm_thresholds: AlarmThresholds | None
    async_invocation: AsyncInvocationOptions | None


def options_with_deprecated(
    deprecated: Mapping[str, Any],
    queue_options: ProcessingQueueOptions | None,
    consumer_options: IdempotentQueueConsumerOptions | None,
) -> tuple[ProcessingQueueOptions, IdempotentQueueConsumerOptions]:
    """The two option objects (``None``: every field at its default), each with the old keywords of its fields.

    :raises TypeError: a keyword that ``PaymentProcessor`` never took (as Python raises for a misspelt one).
    :raises ValueError: an option object of another type; an old keyword whose field its option object was given.
    """
    unknown = sorted(set(deprecated) - set(DeprecatedProps.__annotations__))
    if unknown:
        raise TypeError(f"PaymentProcessor() got an unexpected keyword argument {unknown[0]!r}")
    return (
        _with_keywords("queue_options", ProcessingQueueOptions, queue_options, deprecated),
        _with_keywords("consumer_options", IdempotentQueueConsumerOptions, consumer_options, deprecated),
    )


def _with_keywords(prop: str, cls: type[_Options], options: _Options | None, deprecated: Mapping[str, Any]) -> _Options:
    """``options`` (or ``cls()``) with the old keywords among its fields, after one warning naming them all."""
    if options is not None and not isinstance(options, cls):
        raise fail(prop, _value(options), f"must be a {cls.__name__} or None")
    fields = [field.name for field in dataclasses.fields(cls)]
    keywords = {name: deprecated[name] for name in fields if name in deprecated}
    if options is None:
        options = cls()
    if not keywords:
        return options
    both = sorted(set(keywords) & given_fields(options))
    if both:
        name = both[0]
        raise fail(
            name,
            _value(keywords[name]),
            f"must not be given beside {prop}.{name} ({shown(_value(getattr(options, name)))}): the {name} keyword is "
            f"deprecated; give it once, as {prop}={cls.__name__}({name}=...)",
        )
    listed = ", ".join(f"{name}=..." for name in keywords)
    warnings.warn(
        f"PaymentProcessor({listed}) is deprecated and will be removed in {REMOVED_IN}: pass "
        f"{prop}={cls.__name__}({listed}) instead",
        DeprecationWarning,
        stacklevel=caller_stacklevel(),
    )
    return dataclasses.replace(options, **keywords)


def _value(value: Any) -> Any:
    """A value as the message shows it: a number, string or Duration as :func:`shown` does, anything else by its
    ``repr`` (an object that is not jsii's must not reach ``Token.is_unresolved``)."""
    if value is None or isinstance(value, (str, int, float, Duration)):
        return value
    return Described(repr(value))
