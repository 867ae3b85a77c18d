"""The event source mapping's own CloudWatch metrics: every name the consumer's ``metric_*`` methods and the
processor's dashboard use, in one place.

With ``MetricsConfig: {Metrics: [EventCount]}`` (the consumer's default, ``event_source_mapping_metrics=True``)
Lambda publishes, per mapping, in namespace ``AWS/Lambda`` with dimension ``EventSourceMappingUUID`` (the mapping's
UUID, its CloudFormation ``Ref``):

- ``PolledEventCount``: events the mapping read from the queue;
- ``FilteredOutEventCount``: events dropped by the mapping's filter criteria (this library sets none);
- ``InvokedEventCount``: events that invoked the function;
- ``FailedInvokeEventCount``: events whose invocation failed (a partial batch response's failed items included);
- ``DeletedEventCount``: events deleted from the queue after a successful invocation;
- ``DroppedEventCount``: events Lambda dropped on expiry or retry exhaustion (beyond ``MaximumRecordAgeInSeconds``
  or ``MaximumRetryAttempts``, which an SQS mapping does not have: a message that keeps failing is moved to the
  dead-letter queue by the queue's redrive policy instead), so anything above 0 here needs a look.

Source: AWS Lambda Developer Guide, "Types of metrics for Lambda functions", section "Event source mapping
metrics" (:data:`DOC`).
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_

DOC: Final = "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html#event-source-mapping-metrics"
NAMESPACE: Final = "AWS/Lambda"
DIMENSION: Final = "EventSourceMappingUUID"
#: The metric group ``MetricsConfig`` turns on; it carries every name below.
METRIC_TYPE: Final = lambda_.MetricType.EVENT_COUNT

POLLED_EVENT_COUNT: Final = "PolledEventCount"
FILTERED_OUT_EVENT_COUNT: Final = "FilteredOutEventCount"
INVOKED_EVENT_COUNT: Final = "InvokedEventCount"
FAILED_INVOKE_EVENT_COUNT: Final = "FailedInvokeEventCount"
DELETED_EVENT_COUNT: Final = "DeletedEventCount"
DROPPED_EVENT_COUNT: Final = "DroppedEventCount"

#: What the processor's dashboard graphs, in this order: polled, invoked, failed, deleted and dropped events.
DASHBOARD_EVENT_COUNTS: Final = (
    POLLED_EVENT_COUNT,
    INVOKED_EVENT_COUNT,
    FAILED_INVOKE_EVENT_COUNT,
    DELETED_EVENT_COUNT,
    DROPPED_EVENT_COUNT,
)


def metrics_config(enabled: bool) -> lambda_.MetricsConfig | None:
    """The mapping's ``MetricsConfig``: the event counts when ``enabled``, none otherwise."""
    return lambda_.MetricsConfig(metrics=[METRIC_TYPE]) if enabled else None


def mapping_metric(mapping: lambda_.IEventSourceMapping, name: str, **props: Any) -> cloudwatch.Metric:
    """One of the mapping's event counts. ``props``: ``cloudwatch.MetricOptions`` (keyword arguments).

    :default: sum per minute.
    """
    options: dict[str, Any] = {"statistic": cloudwatch.Stats.SUM, "period": Duration.minutes(1), **props}
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={DIMENSION: mapping.event_source_mapping_id},
        **options,
    )
