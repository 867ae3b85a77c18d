"""``IdempotentEventConsumer``: a function invoked asynchronously (an EventBridge rule, an SNS subscription, an S3
notification, ``Invoke(InvocationType="Event")``), with its one ``EventInvokeConfig``, an on-failure queue, and the
idempotency settings and alarms around them.

Built on the consumers' core (``_consumer_core.ConsumerCore``: the table grant, the runtime's environment, the effect
grants, the alarms and query definitions, shared with ``IdempotentQueueConsumer``); this module keeps only its
source: the event invoke config and its on-failure queue, the alarms' specs, and the table and key prefix the
function shares with its other constructs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsii
from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IValidation

from effectively_once_runtime import names

from . import limits
from ._consumer_checks import check_idempotency_expiry, check_key_prefix, check_shared_prefix, claim_prefix
from ._consumer_core import ConsumerCore, check_table, expiry_value, per_minute
from ._environment_size import function_variables
from ._existing_queue_checks import resolve
from ._function_checks import check_placement, check_unqualified
from ._validation import (
    Described,
    acknowledge,
    check_duration_range,
    check_int,
    check_range,
    check_type,
    fail,
    is_unresolved,
    message,
    seconds,
    template_seconds,
    warn,
)
from .existing_queue import ExistingQueue
from .idempotency_table import IdempotencyTable, advise_table_location
from .observability import AlarmSpec, AsyncInvocationOptions, build_async_invocation

#: Lambda's asynchronous-invocation metrics (namespace ``AWS/Lambda``, dimension ``FunctionName``) and the
#: invocation metric of failed destination deliveries. Source: AWS Lambda Developer Guide, "Types of metrics for
#: Lambda functions" (asynchronous invocation metrics; invocation metrics).
ASYNC_EVENTS_RECEIVED = "AsyncEventsReceived"
ASYNC_EVENT_AGE = "AsyncEventAge"
ASYNC_EVENTS_DROPPED = "AsyncEventsDropped"
DESTINATION_DELIVERY_FAILURES = "DestinationDeliveryFailures"
METRICS_DOC = (
    "AWS Lambda Developer Guide, Types of metrics for Lambda functions, "
    "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html#async-invocation-metrics"
)
#: Where the retry and event-age ranges come from.
ERROR_HANDLING_DOC = (
    "AWS Lambda Developer Guide, Configuring error handling for asynchronous invocation, "
    "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html; CloudFormation "
    "AWS::Lambda::EventInvokeConfig"
)
#: Lambda keeps one asynchronous invocation config per function and qualifier.
ONE_CONFIG_DOC = "AWS Lambda API Reference, PutFunctionEventInvokeConfig; CloudFormation AWS::Lambda::EventInvokeConfig"
#: The qualifier of the config this library writes: the unpublished function.
LATEST = "$LATEST"
#: What the error for a construct created outside its function's stack tells the user
#: (_function_checks.check_placement).
PLACEMENT_ADVICE = "create it with scope=Stack.of(function), or app.synth() fails with a DependencyCycle"


@dataclass(frozen=True)
class EventAlarmThresholds:
    """Thresholds of :class:`IdempotentEventConsumer`'s alarms; each fires when its metric is *above* the threshold
    for one 1-minute period; missing data is not breaching.

    :param on_failure_depth: on-failure queue ``ApproximateNumberOfMessagesVisible`` (maximum): events that failed
        every attempt or expired. :default: ``0``: any record.
    :param on_failure_age: on-failure queue ``ApproximateAgeOfOldestMessage`` (maximum): a record nobody redrove;
        it is deleted at the queue's retention. :default: ``Duration.days(1)``.
    :param async_events_dropped: Lambda ``AsyncEventsDropped`` (sum): events dropped without a successful run (sent
        to the on-failure destination first, when it can be reached). :default: ``0``: any event.
    :param async_event_age: Lambda ``AsyncEventAge`` (maximum, in the metric's milliseconds): events waiting in
        Lambda's queue (retries after errors, throttling). :default: ``Duration.minutes(5)``: longer than two retries'
        documented delays (about 1 and 2 minutes).
    :param destination_delivery_failures: Lambda ``DestinationDeliveryFailures`` (sum): records Lambda could not
        send to the on-failure queue: lost events. :default: ``0``: any failure.
    """

    on_failure_depth: int = 0
    on_failure_age: Duration = field(default_factory=lambda: Duration.days(1))
    async_events_dropped: int = 0
    async_event_age: Duration = field(default_factory=lambda: Duration.minutes(5))
    destination_delivery_failures: int = 0


class IdempotentEventConsumer(ConsumerCore):
    """The asynchronous invocation path of a function guarded by an ``IdempotencyTable``.

    For a function invoked by an EventBridge rule, an SNS subscription, an S3 notification or
    ``Invoke(InvocationType="Event")``: Lambda queues the event, retries it after an error or a timeout, and can
    deliver it more than once without any error; the runtime's idempotency record answers each repeat. What it does:

    - creates the function's one ``AWS::Lambda::EventInvokeConfig`` (child ``EventInvokeConfig``, qualifier
      ``$LATEST``): ``MaximumRetryAttempts`` and ``MaximumEventAgeInSeconds``, and the on-failure destination;
    - the on-failure destination is a standard SQS queue: ``on_failure_queue``, or a new child ``OnFailureQueue``
      kept 14 days (the SQS maximum, as the dead-letter queues), SSE-SQS, a policy denying requests without TLS, and
      ``removal_policy``. Lambda sends it a record of each event that failed every attempt or expired (the event is
      its ``requestPayload``); the destination grants the function ``sqs:SendMessage``, ``GetQueueAttributes`` and
      ``GetQueueUrl`` on it (CDK's ``SqsDestination``), and the config waits for the function's role policy;
    - grants ``table.grant_idempotency`` (``dynamodb:GetItem``, ``PutItem``, ``UpdateItem``, ``DeleteItem``);
    - sets ``IDEMPOTENCY_TABLE_NAME`` (the table's ARN), ``IDEMPOTENCY_EXPIRY_SECONDS`` and, when given,
      ``IDEMPOTENCY_KEY_PREFIX``, ``POWERTOOLS_METRICS_NAMESPACE`` and ``POWERTOOLS_SERVICE_NAME`` on a
      ``lambda.Function``, and ``ON_FAILURE_QUEUE_URL`` (the on-failure queue's URL): the runtime records an
      EventBridge, SNS or S3 event it refused for good (a ``PermanentError``, an invalid record) on that queue
      itself, in the shape of Lambda's own records with ``condition: "PermanentError"``, and the invocation
      succeeds, so Lambda's retries never run it again (with the destination's grant); a transient failure is
      raised, and Lambda's retries and this destination take it from there. ``ON_FAILURE_DIRECT=true`` with
      ``direct_invocations_async``. No ``DEAD_LETTER_QUEUE_URL``;
    - creates five alarms (:class:`EventAlarmThresholds`) and offers :meth:`dashboard_widgets`.

    The function may also have an ``IdempotentQueueConsumer`` (the same payments by SQS and by EventBridge): both
    must then name the same table and key prefix (the runtime reads one of each per function), and the expiry on the
    function is the longer of the two when this consumer is created after the queue consumer; created before it, the
    queue consumer's shorter expiry overwrites this one's and synth warns.

    :param scope: parent construct, in the function's stack.
    :param id: construct id.
    :param function: the function. A ``lambda.Function`` (its environment is set); an imported ``IFunction`` with its
        role (``from_function_attributes(role=...)``) gets the config and the grants on that role, and its environment
        is the caller's to set (the variables above). Unqualified: the config is for ``$LATEST``; an alias or a
        version is refused (``ValueError``: pass the function behind it).
    :param table: the idempotency table.
    :param retry_attempts: retries after a failed asynchronous invocation, 0..2 (an ``int``). :default: ``2``
        (Lambda's own).
    :param max_event_age: how long Lambda keeps an event for (re)tries, 60 s..6 h. :default: ``Duration.hours(6)``
        (Lambda's own).
    :param on_failure_queue: a standard SQS queue for the failure records (its retention, SSE and policies are its
        owner's). :default: ``None``: the new ``OnFailureQueue`` above.
    :param idempotency_expiry: how long a completed record answers repeats (a token must be ``Duration.seconds``).
        :default: ``None``: the on-failure queue's retention plus ``max_event_age``: a record is enqueued up to
        ``max_event_age`` after the event's first run and kept for the retention, so a late redrive still finds the
        first run's record (14 days 6 hours for the defaults; an imported queue or a token counts at SQS's 14-day and
        Lambda's 6-hour maxima).
    :param key_prefix: ``IDEMPOTENCY_KEY_PREFIX``: printable, no whitespace, at most 2015 UTF-8 bytes.
        :default: ``None``: not set; the handler's ``Consumer`` declares it.
    :param shared_prefix: another consumer's function holds this literal ``key_prefix`` on ``table`` on purpose (one
        operation): both say so. :default: ``False``: that fails synth (docs/runtime.md, "Two operations, one table").
    :param alarms: create the five alarms. :default: ``True``.
    :param alarm_action: added to every alarm. :default: ``None``: the alarms notify no one.
    :param alarm_thresholds: :default: ``EventAlarmThresholds()``.
    :param log_group: the function's log group, for the Logs Insights query definitions
        (docs/observability.md). :default: ``None``: no query definitions (an ``IdempotentQueueConsumer`` of the
        same function creates them on its function's own log group).
    :param metrics_namespace: ``POWERTOOLS_METRICS_NAMESPACE``. :default: ``None``: not set.
    :param service_name: ``POWERTOOLS_SERVICE_NAME``. :default: ``None``: not set.
    :param removal_policy: of the ``OnFailureQueue`` created here. :default: ``RemovalPolicy.RETAIN``: it holds the
        only record of events that failed every attempt.
    :param direct_invocations_async: every direct invocation of the function (``Invoke`` by a caller, not by an
        EventBridge rule, an SNS subscription or an S3 notification) is asynchronous (``InvocationType="Event"``):
        a direct invocation refused for good is then recorded on the on-failure queue and succeeds, as the events
        are. The runtime cannot tell an asynchronous caller from a synchronous one (the Lambda context does not
        say), and a synchronous caller would get a success for a refusal: leave it off when any caller waits for
        the answer. :default: ``False``: a direct invocation's failure is raised to its caller (and an asynchronous
        one's is retried by Lambda, then recorded by Lambda).
    :raises ValueError: ``retry_attempts`` not an ``int`` or outside 0..2, ``max_event_age`` outside 60 s..6 h (both:
        AWS Lambda Developer Guide, "Configuring error handling for asynchronous invocation"; CloudFormation
        AWS::Lambda::EventInvokeConfig); an ``on_failure_queue`` that is not an ``sqs.IQueue``, or a FIFO one (Lambda
        takes only standard queues as destinations: "Capturing records of Lambda asynchronous invocations"); an
        imported function without its role (the destination's grant needs it); the function already has an
        event invoke config for ``$LATEST`` (a second ``IdempotentEventConsumer``, an
        ``IdempotentQueueConsumer(async_invocation=...)``, ``function.configure_async_invoke``: Lambda keeps one per
        function and qualifier; the message names the function and the config); a function resource of another stack
        than this construct's; ``table`` not an ``IdempotencyTable``; ``key_prefix`` breaking its rules, or already held
        on ``table`` by another consumer of the app on another function unless both say ``shared_prefix=True``; an
        ``idempotency_expiry`` under 1 second or a token in another unit than seconds; ``IDEMPOTENCY_TABLE_NAME`` or
        ``IDEMPOTENCY_KEY_PREFIX`` already set on the function to another table or prefix; a negative count threshold
        or a duration threshold under 1 second.

    At ``app.synth()``: an event invoke config added to the function after this construct, or another table or key
    prefix set on it after this construct, fails the synth (naming the function); the environment must fit Lambda's
    4 KB, as :class:`IdempotentQueueConsumer` checks.

    Warnings (``Annotations``): ``idempotency_expiry`` shorter than the on-failure queue's retention plus
    ``max_event_age`` (``effectively-once:eventIdempotencyExpiryBelowRedriveHorizon``; a redrive after the record
    expired charges twice), also when another construct leaves a shorter expiry on the function; a table in another
    Region or account.

    Attributes:
        function, table: the inputs.
        event_invoke_config (lambda.EventInvokeConfig): the config.
        on_failure_queue (sqs.IQueue): the destination (the given queue or ``OnFailureQueue``).
        retry_attempts (int), max_event_age (Duration), direct_invocations_async (bool): as configured.
        idempotency_expiry (Duration): the expiry this consumer needs on the function.
        on_failure_depth_alarm, on_failure_age_alarm, async_events_dropped_alarm, async_event_age_alarm,
            destination_delivery_failures_alarm (cloudwatch.Alarm | None): ``None`` when ``alarms=False``.
        duplicate_deliveries_query, idempotency_rejections_query, effects_per_key_query
            (logs.CfnQueryDefinition | None): ``None`` without ``log_group``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function: lambda_.IFunction,
        table: IdempotencyTable,
        retry_attempts: int = limits.ASYNC_MAX_RETRY_ATTEMPTS,
        max_event_age: Duration | None = None,
        on_failure_queue: sqs.IQueue | None = None,
        idempotency_expiry: Duration | None = None,
        key_prefix: str | None = None,
        shared_prefix: bool = False,
        alarms: bool = True,
        alarm_action: cloudwatch.IAlarmAction | None = None,
        alarm_thresholds: EventAlarmThresholds | None = None,
        log_group: logs.ILogGroup | None = None,
        metrics_namespace: str | None = None,
        service_name: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        direct_invocations_async: bool = False,
    ) -> None:
        super().__init__(scope, id)
        max_event_age = max_event_age or Duration.seconds(limits.ASYNC_MAX_MAX_EVENT_AGE_SECONDS)
        thresholds = alarm_thresholds or EventAlarmThresholds()
        # Every check before the first resource (a prop breaking two rules names the first).
        _check_props(retry_attempts, max_event_age, on_failure_queue, idempotency_expiry, thresholds, alarms)
        check_type("direct_invocations_async", direct_invocations_async, bool, "a bool")
        self._check_inputs(function, table, key_prefix)
        check_shared_prefix(self, function, table, key_prefix, shared_prefix)

        self.function = function
        self.table = table
        self.key_prefix = key_prefix
        self.retry_attempts = retry_attempts
        self.max_event_age = max_event_age
        self.event_invoke_config, self.on_failure_queue = build_async_invocation(
            self,
            function,
            AsyncInvocationOptions(
                retry_attempts=retry_attempts, max_event_age=max_event_age, on_failure=on_failure_queue
            ),
            removal_policy,
        )
        self.idempotency_expiry = _idempotency_expiry(self.on_failure_queue, max_event_age, idempotency_expiry)
        self._grant()
        self.direct_invocations_async = direct_invocations_async
        self._set_environment(metrics_namespace, service_name)
        self._advise(idempotency_expiry)
        self.node.add_validation(_SharedSettings(self))
        (
            self.on_failure_depth_alarm,
            self.on_failure_age_alarm,
            self.async_events_dropped_alarm,
            self.async_event_age_alarm,
            self.destination_delivery_failures_alarm,
        ) = self._create_alarms(_alarm_specs(self, thresholds), enabled=alarms, action=alarm_action)
        self._wire_queries(log_group)
        claim_prefix(self, function, table, key_prefix, shared_prefix)

    # --- construction steps, in the order __init__ takes them ---------------------------------------------
    def _check_inputs(self, function: lambda_.IFunction, table: IdempotencyTable, key_prefix: str | None) -> None:
        """The table, key prefix and function checks, before the first resource."""
        check_table(table)
        check_key_prefix(key_prefix)
        check_unqualified(function, "IdempotentEventConsumer")
        check_placement(self, function, "IdempotentEventConsumer", PLACEMENT_ADVICE)
        _check_role(function)
        check_one_event_invoke_config(self, function)
        _check_shared_settings(function, table, key_prefix)

    def _grant(self) -> None:
        """The table grant, and the config after the role's policy (Lambda checks the destination's permission when
        the config is written)."""
        self._grant_idempotency()
        assert self.function.role is not None  # checked: _check_role
        self.event_invoke_config.node.add_dependency(self.function.role)
        cfn_function = self.function.node.default_child
        if isinstance(cfn_function, lambda_.CfnFunction):
            acknowledge(
                cfn_function,
                "Serverless-LambdaDLQ",
                "Asynchronous invocations that fail every attempt or expire go to the on-failure destination of the "
                "function's EventInvokeConfig (IdempotentEventConsumer), which records the error beside the event; "
                "a dead-letter queue would be a second, older mechanism for the same events.",
            )

    def _set_environment(self, metrics_namespace: str | None, service_name: str | None) -> None:
        """The runtime's variables (``ON_FAILURE_QUEUE_URL`` came with the config), and ``ON_FAILURE_DIRECT`` with
        ``direct_invocations_async``."""
        function = self._set_runtime_environment(
            self.key_prefix, metrics_namespace, service_name, keep_longer_expiry=True
        )
        if function is not None and self.direct_invocations_async:
            function.add_environment(names.ENV_ON_FAILURE_DIRECT, "true")

    def _advise(self, given_expiry: Duration | None) -> None:
        if given_expiry is not None:
            _warn_short_expiry(self, given_expiry, "idempotency_expiry")
        advise_table_location(self, self.table)

    # --- metrics (named after the CloudWatch metrics) -----------------------------------------------------------
    def metric_async_events_received(self, **props: Any) -> cloudwatch.Metric:
        """``AsyncEventsReceived``: events Lambda queued for the function. ``props``: ``MetricOptions``.
        :default: sum per minute."""
        return self.function.metric(ASYNC_EVENTS_RECEIVED, **per_minute("Sum", props))

    def metric_async_event_age(self, **props: Any) -> cloudwatch.Metric:
        """``AsyncEventAge``: milliseconds between Lambda queuing an event and invoking the function; grows with
        retries and throttling. As above. :default: maximum per minute."""
        return self.function.metric(ASYNC_EVENT_AGE, **per_minute("Maximum", props))

    def metric_async_events_dropped(self, **props: Any) -> cloudwatch.Metric:
        """``AsyncEventsDropped``: events dropped without a successful run (after the last retry, or expired).
        As above. :default: sum per minute."""
        return self.function.metric(ASYNC_EVENTS_DROPPED, **per_minute("Sum", props))

    def metric_destination_delivery_failures(self, **props: Any) -> cloudwatch.Metric:
        """``DestinationDeliveryFailures``: records Lambda could not send to the on-failure queue. As above.
        :default: sum per minute."""
        return self.function.metric(DESTINATION_DELIVERY_FAILURES, **per_minute("Sum", props))

    def metric_on_failure_approximate_number_of_messages_visible(self, **props: Any) -> cloudwatch.Metric:
        """``ApproximateNumberOfMessagesVisible`` of the on-failure queue. As above. :default: maximum per minute."""
        return self.on_failure_queue.metric_approximate_number_of_messages_visible(**per_minute("Maximum", props))

    def metric_on_failure_approximate_age_of_oldest_message(self, **props: Any) -> cloudwatch.Metric:
        """``ApproximateAgeOfOldestMessage`` of the on-failure queue, in seconds. As above.
        :default: maximum per minute."""
        return self.on_failure_queue.metric_approximate_age_of_oldest_message(**per_minute("Maximum", props))

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        """Graphs for a dashboard (``dashboard.add_widgets(*consumer.dashboard_widgets())``), one row of four:
        asynchronous events received and dropped, event age, on-failure queue depth and oldest record age, and
        destination delivery failures; new widgets on every call."""
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title="Async events received and dropped (sum per minute)",
                left=[self.metric_async_events_received(), self.metric_async_events_dropped()],
                width=6,
            ),
            cloudwatch.GraphWidget(
                title="Async event age (ms, maximum)", left=[self.metric_async_event_age()], width=6
            ),
            cloudwatch.GraphWidget(
                title="On-failure queue: records, oldest age (s)",
                left=[self.metric_on_failure_approximate_number_of_messages_visible()],
                right=[self.metric_on_failure_approximate_age_of_oldest_message()],
                width=6,
            ),
            cloudwatch.GraphWidget(
                title="Destination delivery failures", left=[self.metric_destination_delivery_failures()], width=6
            ),
        ]
        return widgets


# --- the one event invoke config of a function ----------------------------------------------------------------------
def event_invoke_configs(scope: Construct, function: lambda_.IFunction) -> list[lambda_.CfnEventInvokeConfig]:
    """Every ``AWS::Lambda::EventInvokeConfig`` of the app on ``function``'s ``$LATEST`` (the same function token,
    or the same literal name of an import)."""
    return [
        config
        for config in scope.node.root.node.find_all()
        if isinstance(config, lambda_.CfnEventInvokeConfig)
        and config.qualifier == LATEST
        and config.function_name == function.function_name
    ]


def second_config_message(function: lambda_.IFunction, configs: list[lambda_.CfnEventInvokeConfig]) -> str:
    """The error for a function with more than one config (``configs``: every config on it, the first one first)."""
    return message(
        "function",
        Described(f"function {function.node.path}, which has the event invoke config {configs[0].node.path},"),
        "must have one event invoke config for $LATEST: Lambda keeps one per function and qualifier (retries, maximum "
        "event age, destinations), so a second one (a second IdempotentEventConsumer, "
        "IdempotentQueueConsumer(async_invocation=...), function.configure_async_invoke) would replace the first at "
        "deploy; give the function one IdempotentEventConsumer",
        ONE_CONFIG_DOC,
    )


def check_one_event_invoke_config(scope: Construct, function: lambda_.IFunction) -> None:
    """Before a construct adds an event invoke config to ``function``: none may be there yet.

    :raises ValueError: naming the function and the config it already has.
    """
    configs = event_invoke_configs(scope, function)
    if configs:
        raise ValueError(second_config_message(function, configs))


def _alarm_specs(consumer: IdempotentEventConsumer, thresholds: EventAlarmThresholds) -> tuple[AlarmSpec, ...]:
    """The five alarms, in order (children ``OnFailureDepthAlarm``, ``OnFailureAgeAlarm``, ``AsyncEventsDroppedAlarm``,
    ``AsyncEventAgeAlarm``, ``DestinationDeliveryFailuresAlarm``), each over one 1-minute period."""
    return (
        (
            "OnFailureDepthAlarm",
            consumer.metric_on_failure_approximate_number_of_messages_visible(),
            thresholds.on_failure_depth,
            1,
            "records in the on-failure queue: events that failed every attempt or expired (redrive them)",
        ),
        (
            "OnFailureAgeAlarm",
            consumer.metric_on_failure_approximate_age_of_oldest_message(),
            thresholds.on_failure_age.to_seconds(),
            1,
            "an on-failure record older than the threshold (seconds) was not redriven; the queue deletes "
            "it at its retention",
        ),
        (
            "AsyncEventsDroppedAlarm",
            consumer.metric_async_events_dropped(),
            thresholds.async_events_dropped,
            1,
            "asynchronous events dropped without a successful run",
        ),
        (
            "AsyncEventAgeAlarm",
            consumer.metric_async_event_age(),
            thresholds.async_event_age.to_seconds() * 1000,
            1,
            "asynchronous events waited longer than the threshold (milliseconds): retries or throttling",
        ),
        (
            "DestinationDeliveryFailuresAlarm",
            consumer.metric_destination_delivery_failures(),
            thresholds.destination_delivery_failures,
            1,
            "failure records Lambda could not send to the on-failure queue: those events are lost",
        ),
    )


# --- checks ---------------------------------------------------------------------------------------------------------
def _check_props(
    retry_attempts: int,
    max_event_age: Duration,
    on_failure_queue: sqs.IQueue | None,
    idempotency_expiry: Duration | None,
    thresholds: EventAlarmThresholds,
    alarms: bool,
) -> None:
    check_range(
        "retry_attempts",
        retry_attempts,
        limits.ASYNC_MIN_RETRY_ATTEMPTS,
        limits.ASYNC_MAX_RETRY_ATTEMPTS,
        f"{ERROR_HANDLING_DOC} MaximumRetryAttempts",
    )
    check_type("max_event_age", max_event_age, Duration, "a Duration")
    check_duration_range(
        "max_event_age",
        max_event_age,
        limits.ASYNC_MIN_MAX_EVENT_AGE_SECONDS,
        limits.ASYNC_MAX_MAX_EVENT_AGE_SECONDS,
        f"{ERROR_HANDLING_DOC} MaximumEventAgeInSeconds",
    )
    if on_failure_queue is not None and not hasattr(on_failure_queue, "queue_arn"):
        raise fail(
            "on_failure_queue", Described(repr(on_failure_queue)), "must be an sqs.IQueue (sqs.Queue, an import)"
        )
    if on_failure_queue is not None and on_failure_queue.fifo:
        raise fail(
            "on_failure_queue",
            on_failure_queue.node.path,
            "must be a standard SQS queue (Lambda cannot send asynchronous invocation records to a FIFO queue)",
            limits.ASYNC_DESTINATION_DOC,
        )
    check_idempotency_expiry(idempotency_expiry)
    if idempotency_expiry is not None and is_unresolved(idempotency_expiry):
        template_seconds("idempotency_expiry", idempotency_expiry)
    check_type("alarms", alarms, bool, "a bool")
    source = "CloudWatch PutMetricAlarm Threshold"
    for prop in ("on_failure_depth", "async_events_dropped", "destination_delivery_failures"):
        value = getattr(thresholds, prop)
        if check_int(f"alarm_thresholds.{prop}", value, source) and value < 0:
            raise fail(f"alarm_thresholds.{prop}", value, "must be 0 or more", source)
    for prop in ("on_failure_age", "async_event_age"):
        age = getattr(thresholds, prop)
        check_type(f"alarm_thresholds.{prop}", age, Duration, "a Duration")
        if is_unresolved(age):
            # Written as a number of the metric's unit (seconds, milliseconds): CloudFormation cannot convert a token.
            raise fail(f"alarm_thresholds.{prop}", age, "must be a resolved Duration", limits.CFN_TOKEN_DOC)
        if age.to_seconds() < 1:
            raise fail(f"alarm_thresholds.{prop}", age, "must be 1 second or more", source)


def _check_role(function: lambda_.IFunction) -> None:
    """The destination is granted on the function's role: an imported function must come with it."""
    if function.role is None:
        raise fail(
            "function",
            function.function_arn,
            "must have its execution role: the on-failure destination needs sqs:SendMessage on it (Lambda checks "
            "when the config is written); import the function with lambda.Function.from_function_attributes("
            "function_arn=..., role=...)",
            limits.ASYNC_DESTINATION_DOC,
        )


def _conflict(function: lambda_.IFunction, table: IdempotencyTable, key_prefix: str | None) -> str | None:
    """Why the table or key prefix already on ``function`` is not this consumer's (the runtime reads one of each)."""
    if not isinstance(function, lambda_.Function):
        return None
    variables = function_variables(function)
    stack = Stack.of(function)
    for variable, value, wanted in (
        (names.ENV_TABLE_NAME, variables.get(names.ENV_TABLE_NAME), stack.resolve(table.table_arn)),
        (names.ENV_KEY_PREFIX, variables.get(names.ENV_KEY_PREFIX), stack.resolve(key_prefix)),
    ):
        if value is not None and wanted is not None and value != wanted:
            return message(
                f"{variable} of function {function.node.path}",
                Described(f"{value!r}, set by another construct,"),
                f"must be this IdempotentEventConsumer's {wanted!r}: the runtime reads one per function, so events "
                "and the function's other inputs must share the table and key prefix (one record per business key)",
                "effectively_once_runtime.settings: one environment per function",
            )
    return None


def _check_shared_settings(function: lambda_.IFunction, table: IdempotencyTable, key_prefix: str | None) -> None:
    problem = _conflict(function, table, key_prefix)
    if problem is not None:
        raise ValueError(problem)


def _idempotency_expiry(queue: sqs.IQueue, max_event_age: Duration, given: Duration | None) -> Duration:
    """As given, else the redrive horizon: the queue's retention plus ``max_event_age`` (the maxima when unknown)."""
    return given or _redrive_horizon(queue, max_event_age)


def _redrive_horizon(queue: sqs.IQueue, max_event_age: Duration) -> Duration:
    """The on-failure queue's retention plus ``max_event_age``; SQS's and Lambda's maxima for what is not known."""
    retention = seconds(resolve(ExistingQueue(queue=queue)).retention_period)
    age = seconds(max_event_age)
    return Duration.seconds(
        (limits.SQS_MAX_RETENTION_SECONDS if retention is None else retention)
        + (limits.ASYNC_MAX_MAX_EVENT_AGE_SECONDS if age is None else age)
    )


def _warn_short_expiry(consumer: IdempotentEventConsumer, expiry: Duration, prop: str) -> None:
    """The warning for an expiry below the redrive horizon (tokens are skipped)."""
    horizon = _redrive_horizon(consumer.on_failure_queue, consumer.max_event_age)
    shown_expiry = seconds(expiry)
    if shown_expiry is None or shown_expiry >= horizon.to_seconds():
        return
    warn(
        consumer,
        "eventIdempotencyExpiryBelowRedriveHorizon",
        prop,
        expiry,
        f"should be at least the on-failure queue's retention plus max_event_age ({horizon.to_human_string()}): "
        "Lambda enqueues a failure record up to max_event_age after the event's first run and the queue keeps it for "
        "its retention, so a redrive after the idempotency record expired runs, and charges, twice (leave "
        "idempotency_expiry unset to use that horizon)",
        limits.IDEMPOTENCY_EXPIRY_DOC,
    )


@jsii.implements(IValidation)
class _SharedSettings:
    """At synth: what was added to the function after the consumer (another config, table, key prefix, expiry)."""

    def __init__(self, consumer: IdempotentEventConsumer) -> None:
        self._consumer = consumer

    def validate(self) -> list[str]:
        consumer = self._consumer
        function = consumer.function
        errors = []
        configs = event_invoke_configs(consumer, function)
        if len(configs) > 1:
            errors.append(second_config_message(function, configs))
        conflict = _conflict(function, consumer.table, consumer.key_prefix)
        if conflict is not None:
            errors.append(conflict)
        if isinstance(function, lambda_.Function):
            current = function_variables(function).get(names.ENV_EXPIRY_SECONDS)
            # Another construct's value (this consumer's own was checked at construction).
            if isinstance(current, str) and current.isdigit() and current != expiry_value(consumer.idempotency_expiry):
                prop = f"{names.ENV_EXPIRY_SECONDS} of function {function.node.path} (set by another construct)"
                _warn_short_expiry(consumer, Duration.seconds(int(current)), prop)
        return errors
