"""Observability builders shared by the constructs: alarms, Logs Insights query definitions, dashboard, and the
asynchronous-invocation path (event invoke config + on-failure queue).

The builders are called by the consumers' core (``_consumer_core.ConsumerCore``: the one alarm shape
:func:`threshold_alarm` and the query definitions, for both consumers), :class:`IdempotentQueueConsumer` (its alarm
specs, the deprecated async path), :class:`IdempotentEventConsumer` (the event invoke config) and
:class:`PaymentProcessor` (dashboard); the option types are public (``AlarmThresholds``,
``AsyncInvocationOptions``).

The metric names, log fields and log messages come from ``effectively_once_runtime.names``, the one runtime module
the CDK side imports (standard library only): the queries read the fields the runtime logs (Powertools Logger JSON;
see docs/observability.md): ``correlation_id`` (= idempotency key), ``idempotency_key``, ``message_id``,
``receive_count``, ``message``, ``idempotency_status``, ``idempotency_error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from effectively_once_runtime import names

from . import _mapping_metrics, limits
from ._validation import acknowledge, check_int, check_range, fail, is_unresolved, template_seconds

#: Outcome lines the runtime logs once per delivery (record processed, duplicate suppressed).
OUTCOME_MESSAGES = names.OUTCOME_MESSAGES
#: Lines the runtime logs when the idempotency layer turns a delivery away or answers it from its record.
REJECTION_MESSAGES = names.REJECTION_MESSAGES

#: Correlation ids seen in more than one delivery outcome: duplicate deliveries (redeliveries share a message id
#: with a growing receive count; producer resends bring a new message id).
DUPLICATE_DELIVERIES_QUERY = (
    f"fields @timestamp, {names.FIELD_CORRELATION_ID}, {names.FIELD_MESSAGE_ID}, {names.FIELD_RECEIVE_COUNT}, "
    f"{names.FIELD_MESSAGE}\n"
    f"| filter ispresent({names.FIELD_CORRELATION_ID}) and {names.FIELD_MESSAGE} in "
    + str(list(OUTCOME_MESSAGES)).replace("'", '"')
    + "\n"
    f"| stats count(*) as deliveries, count_distinct({names.FIELD_MESSAGE_ID}) as message_ids, "
    f"max({names.FIELD_RECEIVE_COUNT}) as max_receive_count by {names.FIELD_CORRELATION_ID}\n"
    "| filter deliveries > 1\n"
    "| sort deliveries desc\n"
    "| limit 1000"
)
#: Deliveries the idempotency layer rejected (already in progress, same key with another payload) or answered
#: from the stored result (duplicate suppressed).
IDEMPOTENCY_REJECTIONS_QUERY = (
    f"fields @timestamp, {names.FIELD_CORRELATION_ID}, {names.FIELD_IDEMPOTENCY_KEY}, {names.FIELD_MESSAGE_ID}, "
    f"{names.FIELD_RECEIVE_COUNT}, {names.FIELD_MESSAGE}, {names.FIELD_IDEMPOTENCY_ERROR}, "
    f"{names.FIELD_IDEMPOTENCY_STATUS}\n"
    f"| filter {names.FIELD_MESSAGE} in " + str(list(REJECTION_MESSAGES)).replace("'", '"') + "\n"
    "| sort @timestamp desc\n"
    "| limit 1000"
)
#: Idempotency keys whose declared side effects ran more than once (the runtime's ``effect executed`` line; the
#: local chaos checker counts the same line).
EFFECTS_PER_KEY_QUERY = (
    f"fields @timestamp, {names.FIELD_IDEMPOTENCY_KEY}, {names.FIELD_EFFECT}\n"
    f'| filter {names.FIELD_MESSAGE} = "{names.EFFECT_EXECUTED}"\n'
    f"| stats count(*) as effects by {names.FIELD_IDEMPOTENCY_KEY}, {names.FIELD_EFFECT}\n"
    "| filter effects > 1\n"
    "| sort effects desc\n"
    "| limit 1000"
)
#: Every record that failed, with why (the runtime's ``record failed`` line, one per record in ``batchItemFailures``
#: and per direct trigger that raised), newest first: the runbook's first query (docs/observability.md).
FAILED_RECORDS_QUERY = (
    f"fields @timestamp, {names.FIELD_MESSAGE_ID}, {names.FIELD_IDEMPOTENCY_KEY}, {names.FIELD_ERROR_TYPE}, "
    f"{names.FIELD_REASON}, {names.FIELD_MESSAGE_GROUP_ID}, {names.FIELD_BLOCKED_BY}, {names.FIELD_TRIGGER}\n"
    f'| filter {names.FIELD_MESSAGE} = "{names.MSG_RECORD_FAILED}"\n'
    "| sort @timestamp desc\n"
    "| limit 1000"
)

#: Records one SQS invocation reported as failed (``len(batchItemFailures)``), emitted by the runtime on every SQS
#: invocation, zero included (the runtime test ``tests/runtime/test_failed_records_metric.py`` proves the alarm
#: reads what the handler emits).
FAILED_RECORDS_METRIC = names.METRIC_FAILED_RECORDS
#: Metric names the runtime emits with Powertools Metrics (EMF, unit Count, dimension ``service``).
EMF_METRICS = names.EMF_METRICS
#: The dimension Powertools Metrics adds to every metric when a service name is set.
EMF_SERVICE_DIMENSION = names.EMF_SERVICE_DIMENSION
#: The runtime's defaults when ``POWERTOOLS_METRICS_NAMESPACE`` / ``POWERTOOLS_SERVICE_NAME`` are not set.
DEFAULT_METRICS_NAMESPACE = names.DEFAULT_METRICS_NAMESPACE
DEFAULT_SERVICE_NAME = names.DEFAULT_SERVICE_NAME
#: The failed-records alarm needs this many breaching 1-minute periods in a row: longer than one poison message's
#: receives can keep the count up (docs/observability.md, "Alarms").
FAILED_RECORDS_EVALUATIONPERIODS = 5

#: Period of every alarm and dashboard metric of the library (both consumers').
PERIOD = Duration.minutes(1)


def _errors(function: lambda_.IFunction) -> cloudwatch.Metric:
    return function.metric_errors(period=PERIOD, statistic=cloudwatch.Stats.SUM)


def _throttles(function: lambda_.IFunction) -> cloudwatch.Metric:
    return function.metric_throttles(period=PERIOD, statistic=cloudwatch.Stats.SUM)


@dataclass(frozen=True)
class AlarmThresholds:
    """Thresholds of the consumer's alarms; each alarm fires when the metric is *above* its threshold for one
    1-minute period (the failed-records alarm: for 5 periods in a row); missing data is not breaching.

    :param dlq_depth: DLQ ``ApproximateNumberOfMessagesVisible`` (maximum). :default: ``0``: any message.
    :param oldest_message_age: source queue ``ApproximateAgeOfOldestMessage`` (maximum), a backlog that is not
        drained. :default: ``Duration.minutes(5)``.
    :param errors: Lambda ``Errors`` (sum). :default: ``0``: any error.
    :param throttles: Lambda ``Throttles`` (sum). :default: ``0``: any throttle.
    :param failed_records: the handler's EMF ``FailedRecords`` (sum per minute: records the SQS invocations
        reported in ``batchItemFailures``), above it for 5 one-minute periods in a row: a systemic outage.
        :default: ``10``: one poison message (at most one batch of 10 per receive, ``max_receive_count`` receives,
        however close the runtime's backoff brings them) cannot hold it for 5 minutes (docs/observability.md,
        "Alarms").
    """

    dlq_depth: int = 0
    oldest_message_age: Duration = field(default_factory=lambda: Duration.minutes(5))
    errors: int = 0
    throttles: int = 0
    failed_records: int = 10


@dataclass(frozen=True)
class AsyncInvocationOptions:
    """The function's asynchronous invocation path (``AWS::Lambda::EventInvokeConfig``, qualifier ``$LATEST``).

    :param retry_attempts: retries after a failed asynchronous invocation, 0..2. :default: ``2`` (Lambda's own).
    :param max_event_age: how long Lambda keeps an event to (re)try, 60 s..6 h. :default: ``Duration.hours(6)``.
    :param on_failure: standard SQS queue that receives a record of each event that failed every attempt or
        expired. :default: ``None``: a new standard queue (SSE, TLS only, 14-day retention, the consumer's
        ``removal_policy``), child ``OnFailureQueue``.
    """

    retry_attempts: int = limits.ASYNC_MAX_RETRY_ATTEMPTS
    max_event_age: Duration = field(default_factory=lambda: Duration.hours(6))
    on_failure: sqs.IQueue | None = None


def check_alarm_thresholds(thresholds: AlarmThresholds) -> None:
    """:raises ValueError: a count threshold that is not an int (a float, NaN, infinity, a bool, a string) or is
    negative, an oldest-message-age threshold below one second, or one that is a deploy-time token in a unit other
    than seconds (the alarm threshold is written in seconds)."""
    source = "CloudWatch PutMetricAlarm Threshold"
    for prop in ("dlq_depth", "errors", "throttles", "failed_records"):
        value = getattr(thresholds, prop)
        if check_int(f"alarm_thresholds.{prop}", value, source) and value < 0:
            raise fail(f"alarm_thresholds.{prop}", value, "must be 0 or more", source)
    age = thresholds.oldest_message_age
    if is_unresolved(age):
        # The alarm threshold is written in seconds: a token follows only in that unit.
        template_seconds("alarm_thresholds.oldest_message_age", age)
    elif age.to_seconds() < 1:
        raise fail(
            "alarm_thresholds.oldest_message_age", age, "must be 1 second or more", "SQS ApproximateAgeOfOldestMessage"
        )


def check_async_invocation(options: AsyncInvocationOptions) -> None:
    """:raises ValueError: retry attempts outside 0..2, maximum event age outside 60 s..6 h, a FIFO on-failure
    queue (AWS accepts only standard queues as asynchronous invocation destinations)."""
    source = "CloudFormation AWS::Lambda::EventInvokeConfig"
    check_range(
        "async_invocation.retry_attempts",
        options.retry_attempts,
        limits.ASYNC_MIN_RETRY_ATTEMPTS,
        limits.ASYNC_MAX_RETRY_ATTEMPTS,
        f"{source} MaximumRetryAttempts",
    )
    if not is_unresolved(options.max_event_age):
        check_range(
            "async_invocation.max_event_age",
            options.max_event_age.to_seconds(),
            limits.ASYNC_MIN_MAX_EVENT_AGE_SECONDS,
            limits.ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
            f"{source} MaximumEventAgeInSeconds",
            integer=False,
        )
    queue = options.on_failure
    if queue is not None and queue.fifo:
        raise fail(
            "async_invocation.on_failure",
            queue.node.path,
            "must be a standard SQS queue (a FIFO queue cannot be an asynchronous invocation destination)",
            limits.ASYNC_DESTINATION_DOC,
        )


def emf_metric(name: str, *, namespace: str, service: str) -> cloudwatch.Metric:
    """One of the handler's EMF counts (Powertools Metrics: dimension ``service``), sum per minute."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={EMF_SERVICE_DIMENSION: service},
        statistic=cloudwatch.Stats.SUM,
        period=PERIOD,
    )


#: One alarm: (construct id, metric, threshold, evaluation periods, what it means), as :func:`threshold_alarm` takes
#: them after its scope.
AlarmSpec = tuple[str, cloudwatch.Metric, float, int, str]


def queue_alarm_specs(
    *,
    queue: sqs.IQueue,
    dead_letter_queue: sqs.IQueue | None,
    function: lambda_.IFunction,
    thresholds: AlarmThresholds,
    namespace: str = DEFAULT_METRICS_NAMESPACE,
    service: str = DEFAULT_SERVICE_NAME,
) -> tuple[AlarmSpec | None, AlarmSpec, AlarmSpec, AlarmSpec, AlarmSpec]:
    """``IdempotentQueueConsumer``'s five failure alarms (children ``DlqDepthAlarm``, ``OldestMessageAgeAlarm``,
    ``ErrorsAlarm``, ``ThrottlesAlarm``, ``FailedRecordsAlarm``), in that order: ``None`` for the DLQ-depth alarm
    without a dead-letter queue. ``namespace`` and ``service`` locate the handler's EMF ``FailedRecords``
    (:default: the runtime's defaults ``EffectivelyOnce`` and ``payments``)."""
    maximum = cloudwatch.Stats.MAXIMUM
    dlq_depth: AlarmSpec | None = (
        None
        if dead_letter_queue is None
        else (
            "DlqDepthAlarm",
            dead_letter_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic=maximum),
            thresholds.dlq_depth,
            1,
            "messages in the dead-letter queue: payments that failed max_receive_count times",
        )
    )
    return (
        dlq_depth,
        (
            "OldestMessageAgeAlarm",
            queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic=maximum),
            thresholds.oldest_message_age.to_seconds(),
            1,
            "the oldest message in the source queue is older than the threshold (seconds): backlog not drained",
        ),
        (
            "ErrorsAlarm",
            _errors(function),
            thresholds.errors,
            1,
            "payment function errors: a crash, a timeout or an unhandled exception (a batch whose records all "
            "failed is not one)",
        ),
        ("ThrottlesAlarm", _throttles(function), thresholds.throttles, 1, "payment function throttles"),
        (
            "FailedRecordsAlarm",
            emf_metric(FAILED_RECORDS_METRIC, namespace=namespace, service=service),
            thresholds.failed_records,
            FAILED_RECORDS_EVALUATIONPERIODS,
            f"records failing batch after batch for {FAILED_RECORDS_EVALUATIONPERIODS} minutes: a systemic outage",
        ),
    )


def threshold_alarm(
    scope: Construct,
    id: str,
    metric: cloudwatch.Metric,
    threshold: float,
    periods: int,
    description: str,
    *,
    action: cloudwatch.IAlarmAction | None,
) -> cloudwatch.Alarm:
    """The one alarm shape of the library (both consumer constructs' alarms): above ``threshold`` for ``periods``
    periods of the metric in a row, missing data not breaching, described as ``effectively-once: <description>
    (<scope's path>)``, with ``action`` (when given) as its alarm action.

    :param scope: the construct the alarm is a child of (its construct id is ``id``).
    :param id: the alarm's construct id (a public contract: it gives the logical id).
    :param metric: what the alarm reads (its period and statistic are the metric's).
    :param threshold: in the metric's unit; the alarm fires *above* it.
    :param periods: breaching periods in a row (1 or more).
    :param description: what a breach means.
    :param action: added to the alarm's actions. :default: ``None``: no notification.
    :returns: the alarm.
    """
    alarm = metric.create_alarm(
        scope,
        id,
        threshold=threshold,
        evaluation_periods=periods,
        datapoints_to_alarm=periods if periods > 1 else None,  # every period of the window breaches
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"effectively-once: {description} ({scope.node.path})",
    )
    if action is not None:
        alarm.add_alarm_action(action)
    return alarm


def _query(scope: Construct, id: str, suffix: str, query: str, log_group: logs.ILogGroup) -> logs.CfnQueryDefinition:
    # L1: logs.QueryString cannot express a filter after stats.
    return logs.CfnQueryDefinition(
        scope,
        id,
        name=f"effectively-once/{scope.node.path}/{suffix}",
        query_string=query,
        log_group_names=[log_group.log_group_name],
    )


def build_queries(
    scope: Construct, log_group: logs.ILogGroup
) -> tuple[logs.CfnQueryDefinition, logs.CfnQueryDefinition, logs.CfnQueryDefinition]:
    """The three Logs Insights query definitions on ``log_group`` (children ``DuplicateDeliveriesQuery``,
    ``IdempotencyRejectionsQuery``, ``EffectsPerKeyQuery``)."""
    return (
        _query(scope, "DuplicateDeliveriesQuery", "duplicate-deliveries", DUPLICATE_DELIVERIES_QUERY, log_group),
        _query(scope, "IdempotencyRejectionsQuery", "idempotency-rejections", IDEMPOTENCY_REJECTIONS_QUERY, log_group),
        _query(scope, "EffectsPerKeyQuery", "effects-per-key", EFFECTS_PER_KEY_QUERY, log_group),
    )


def build_async_invocation(
    scope: Construct, function: lambda_.IFunction, options: AsyncInvocationOptions, removal_policy: RemovalPolicy
) -> tuple[lambda_.EventInvokeConfig, sqs.IQueue]:
    """The event invoke config (child ``EventInvokeConfig``) and its on-failure queue (given, or the new child
    ``OnFailureQueue`` with ``removal_policy``); the destination grants the function ``sqs:SendMessage`` on it, and
    a ``lambda.Function`` gets the queue's URL as ``ON_FAILURE_QUEUE_URL``: the runtime records an event it refused
    for good there itself, with that grant (``effectively_once_runtime.on_failure``)."""
    on_failure = options.on_failure or sqs.Queue(
        scope,
        "OnFailureQueue",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.seconds(limits.SQS_MAX_RETENTION_SECONDS),
        removal_policy=removal_policy,
    )
    if options.on_failure is None:
        acknowledge(
            on_failure.node.default_child,  # type: ignore[arg-type]
            "AwsSolutions-SQS3",
            "This queue is itself the terminal failure destination of asynchronous invocations (it plays the "
            "dead-letter role, 14-day retention); a dead-letter queue behind it would only move the same records.",
        )
        acknowledge(
            on_failure.node.default_child,  # type: ignore[arg-type]
            "Serverless-SQSRedrivePolicy",
            "This queue is itself the terminal failure destination of asynchronous invocations; nothing consumes "
            "it automatically, so there is no receive count to redrive on.",
        )
    config = lambda_.EventInvokeConfig(
        scope,
        "EventInvokeConfig",
        function=function,
        retry_attempts=options.retry_attempts,
        max_event_age=options.max_event_age,
        on_failure=destinations.SqsDestination(on_failure),
    )
    if isinstance(function, lambda_.Function):
        function.add_environment(names.ENV_ON_FAILURE_QUEUE_URL, on_failure.queue_url)
    return config, on_failure


def build_dashboard(
    scope: Construct,
    *,
    queue: sqs.IQueue,
    dead_letter_queue: sqs.IQueue | None,
    function: lambda_.IFunction,
    namespace: str,
    service: str,
    metric_names: Sequence[str] = EMF_METRICS,
    event_source_mapping: lambda_.IEventSourceMapping | None = None,
) -> cloudwatch.Dashboard:
    """A dashboard (child ``Dashboard``): the handler's EMF counts beside queue depth, DLQ depth (an empty graph
    without a dead-letter queue), oldest message age and Lambda errors/throttles, at 1-minute resolution; with
    ``event_source_mapping`` (one that publishes its event counts), a row of its polled, invoked, failed, deleted
    and dropped events (``_mapping_metrics.DASHBOARD_EVENT_COUNTS``, sum per minute)."""
    emf = [emf_metric(name, namespace=namespace, service=service) for name in metric_names]
    maximum = cloudwatch.Stats.MAXIMUM
    depth = queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic=maximum)
    dlq_depth = (
        []
        if dead_letter_queue is None
        else [dead_letter_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic=maximum)]
    )
    oldest = queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic=maximum)
    dashboard = cloudwatch.Dashboard(scope, "Dashboard")
    dashboard.add_widgets(
        cloudwatch.GraphWidget(title="Payments (EMF, sum per minute)", left=emf, width=24),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(title="Queue depth", left=[depth], width=6),
        cloudwatch.GraphWidget(title="DLQ depth", left=dlq_depth, width=6),
        cloudwatch.GraphWidget(title="Oldest message age (s)", left=[oldest], width=6),
        cloudwatch.GraphWidget(
            title="Lambda errors and throttles",
            left=[_errors(function), _throttles(function)],
            width=6,
        ),
    )
    if event_source_mapping is not None:
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Event source mapping: polled, invoked, failed, deleted, dropped events (sum per minute)",
                left=[
                    _mapping_metrics.mapping_metric(event_source_mapping, name, period=PERIOD)
                    for name in _mapping_metrics.DASHBOARD_EVENT_COUNTS
                ],
                width=24,
            )
        )
    return dashboard
