"""``IdempotentQueueConsumer``: wires a ``ProcessingQueue`` (or an ``ExistingQueue``) to a function guarded by an
``IdempotencyTable``.

Built on the consumers' core (``_consumer_core.ConsumerCore``: the table grant, the runtime's environment, the effect
grants, the alarms and query definitions, shared with ``IdempotentEventConsumer``); this module keeps only its
source: the event source mapping, the queue's consume grant and visibility timeout, and the dead-letter send."""

from __future__ import annotations

import warnings
from typing import Any

from aws_cdk import Annotations, Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from effectively_once_runtime import names

from . import _mapping_metrics, limits
from ._consumer_checks import (
    advise,
    check_given_visibility_timeout,
    check_idempotency_expiry,
    check_key_prefix,
    check_mapping,
    check_provisioned_pollers,
    check_reserved_concurrency,
    check_shared_prefix,
    claim_prefix,
    visibility_timeout_needed,
)
from ._consumer_core import ConsumerCore, check_table, source_queues_value
from ._deprecated_props import REMOVED_IN
from ._existing_queue_checks import resolve, warn_unknown
from ._function_checks import check_function_timeout, check_one_consumer, check_placement, check_unqualified
from ._stacklevel import caller_stacklevel
from ._validation import WARNING_ID_PREFIX, acknowledge, check_type, fail, is_unresolved
from .event_consumer import check_one_event_invoke_config
from .existing_queue import ExistingQueue
from .idempotency_table import IdempotencyTable, advise_table_location
from .observability import (
    DEFAULT_METRICS_NAMESPACE,
    DEFAULT_SERVICE_NAME,
    AlarmThresholds,
    AsyncInvocationOptions,
    build_async_invocation,
    check_alarm_thresholds,
    check_async_invocation,
    queue_alarm_specs,
)
from .processing_queue import ProcessingQueue

#: Environment variables set on the function (the runtime's contract: effectively_once_runtime.names / .settings).
ENV_TABLE_NAME = names.ENV_TABLE_NAME
ENV_EXPIRY_SECONDS = names.ENV_EXPIRY_SECONDS
ENV_KEY_PREFIX = names.ENV_KEY_PREFIX
ENV_METRICS_NAMESPACE = names.ENV_METRICS_NAMESPACE
ENV_SERVICE_NAME = names.ENV_SERVICE_NAME
ENV_DEAD_LETTER_QUEUE_URL = names.ENV_DEAD_LETTER_QUEUE_URL
ENV_SOURCE_QUEUES = names.ENV_SOURCE_QUEUES

#: What the runtime needs to send a permanent failure to the DLQ: SendMessage on the queue and, for a queue
#: encrypted with a customer-managed key, kms:GenerateDataKey and kms:Decrypt on that key (Amazon SQS Developer
#: Guide, "Key management": "Permissions for producers"). CDK's grant_send_messages gives more (GetQueueAttributes,
#: GetQueueUrl; Encrypt and ReEncrypt* on the key), which the runtime never calls: it has the URL.
DEAD_LETTER_SEND_ACTIONS = ("sqs:SendMessage",)
DEAD_LETTER_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
#: What the error for a consumer created outside its function's stack tells the user (_function_checks.check_placement).
PLACEMENT_ADVICE = (
    "create the consumer with scope=Stack.of(function) or a construct of that stack, or its event source mapping "
    "(naming the function) and the grants and environment it adds to the function (naming the queue and the table) "
    "make each stack depend on the other, and app.synth() fails with a DependencyCycle"
)


class IdempotentQueueConsumer(ConsumerCore):
    """One SQS event source mapping with partial batch responses, and the access and settings around it.

    What it does:

    - creates one event source mapping (child ``EventSourceMapping``) from the source queue to ``function``
      with ``FunctionResponseTypes: [ReportBatchItemFailures]`` always on, so only failed records return to
      the queue;
    - grants the function consume on the source queue (``sqs:ReceiveMessage``, ``DeleteMessage``,
      ``ChangeMessageVisibility``, ``GetQueueAttributes``, ``GetQueueUrl``; plus ``kms:Decrypt`` when the
      queue uses a customer-managed key), ``table.grant_idempotency`` on the table and, to send permanent
      failures to the dead-letter queue on first sight, ``sqs:SendMessage`` on that DLQ only (plus
      ``kms:GenerateDataKey`` and ``kms:Decrypt`` when it uses a customer-managed key; SQS-managed SSE needs
      none), nothing more;
    - sets ``IDEMPOTENCY_TABLE_NAME`` (always the table's **ARN**, never its bare name, which would address
      the function's own account and Region; DynamoDB's ``TableName`` takes either), ``IDEMPOTENCY_EXPIRY_SECONDS``
      and, when given, ``IDEMPOTENCY_KEY_PREFIX`` (``key_prefix``), ``POWERTOOLS_METRICS_NAMESPACE``
      (``metrics_namespace``) and ``POWERTOOLS_SERVICE_NAME`` (``service_name``) on the function, and
      ``DEAD_LETTER_QUEUE_URL`` (the queue's DLQ) while ``dead_letter_on_first_sight`` is on;
    - when a ``ProcessingQueue``'s visibility timeout was left open, fills it in as
      ``6 x function timeout + max_batching_window`` (capped at 12 hours) by writing the queue's L1
      ``VisibilityTimeout`` (:meth:`ProcessingQueue.fill_visibility_timeout`). An ``ExistingQueue`` is never
      changed: a visibility timeout cannot be filled in on a queue this library does not own.

    Deploy-time tokens (``CfnParameter`` values, imports): checks skip them, settings derived from them never
    are. An expiry or retention period that is a token is written to ``IDEMPOTENCY_EXPIRY_SECONDS`` as the
    token (e.g. ``{"Ref": "RetentionSeconds"}``); a visibility timeout cannot be computed from a token
    function timeout or batching window (CloudFormation has no arithmetic), so the queue's must then be given.

    :param scope: parent construct.
    :param id: construct id.
    :param queue: the source queue: a ``ProcessingQueue``, or a queue you already have with the facts the checks
        need (:class:`ExistingQueue`: an ``sqs.IQueue`` of this stack, of another stack, or imported with
        ``sqs.Queue.from_queue_attributes``). Every check below runs on an existing queue's facts; each fact it
        does not have gives one warning naming the checks skipped (docs/validation.md).
    :param function: the consumer. A ``lambda.Function`` (its timeout and environment are used); an imported
        ``IFunction`` only when ``queue`` was given a visibility timeout or is an ``ExistingQueue``, and then its
        environment is the caller's to set (the variables above). Never an alias or a version (``ValueError``: pass
        the function behind it; the variables belong to the function). **One consumer per function**: the runtime reads
        one ``DEAD_LETTER_QUEUE_URL``, expiry and key prefix, so a second ``IdempotentQueueConsumer`` on the same
        function (or on a second import of the same literal ARN) is a ``ValueError`` rather than a per-queue DLQ map;
        give each queue its own function. A function that is a resource (not imported) must be in the consumer's
        stack: create the consumer with ``scope`` in ``Stack.of(function)`` (a queue and table of other stacks are
        fine); an imported function may be in any stack.
    :param table: the idempotency table.
    :param batch_size: records per invocation (standard 1..10,000, FIFO 1..10; above 10 needs a window).
        :default: ``10``.
    :param max_batching_window: how long Lambda gathers records before invoking (standard queues only).
        :default: ``None``: no batching window.
    :param max_concurrency: most concurrent invocations this mapping makes (2..1000). The function's reserved
        concurrency, when set, should be at least the total of its SQS mappings' maximum concurrency (a warning).
        Exclusive with ``provisioned_poller_config``.
        :default: ``None``: no limit beyond the function's concurrency.
    :param provisioned_poller_config: the mapping's provisioned mode: ``lambda.ProvisionedPollerConfig(
        minimum_pollers=..., maximum_pollers=...)``, minimum 2..200 (Lambda's default 2), maximum 2..2000 (default
        200), minimum <= maximum, no ``poller_group_name`` (Kafka only); exclusive with ``max_concurrency`` (the
        SQS ranges and rules of aws-cdk-lib's ``SqsEventSource``). Each poller drives up to 10 concurrent
        invocations (AWS Lambda Developer Guide, "Configuring scaling behavior for SQS event source mappings"), so
        the function's reserved concurrency, when set, should be at least 10 x ``maximum_pollers`` (a warning).
        **Always-on cost**: the minimum pollers are billed every hour whether or not messages arrive, in Event
        Poller Unit-hours (AWS Lambda pricing, https://aws.amazon.com/lambda/pricing/: provisioned mode is charged
        for the provisioned minimum event pollers and the pollers added while scaling), and each poller long-polls
        the queue with up to 10 polls a second, billed as SQS requests (https://aws.amazon.com/sqs/pricing/).
        :default: ``None``: on-demand mode (Lambda scales its pollers itself, nothing billed while idle).
    :param event_source_mapping_metrics: turn on the mapping's event-count metrics (``MetricsConfig: {Metrics:
        [EventCount]}``: ``PolledEventCount``, ``InvokedEventCount``, ``FailedInvokeEventCount``,
        ``DeletedEventCount``, ``DroppedEventCount``, ``FilteredOutEventCount`` in ``AWS/Lambda`` by
        ``EventSourceMappingUUID``; read them with the ``metric_*`` methods).
        Source: AWS Lambda Developer Guide, "Event source mapping metrics",
        https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html#event-source-mapping-metrics.
        :default: ``True``.
    :param idempotency_expiry: how long a completed record answers duplicates (a token must be
        ``Duration.seconds(...)``: it is written in seconds). :default: ``None``: the source queue's retention period,
        so no redelivery within retention can charge twice; for an ``ExistingQueue`` whose retention is unknown, 14
        days (the SQS maximum retention).
    :param key_prefix: stable prefix of every idempotency key (``IDEMPOTENCY_KEY_PREFIX``): printable characters
        without whitespace, at most 2015 UTF-8 bytes (the runtime's rules, ``names.is_valid_key_prefix`` and
        ``names.key_prefix_fits``: Powertools stores ``<key_prefix>#<md5 hex>``, 33 bytes more, and a DynamoDB
        partition key holds at most 2,048; checked here at synth). :default: ``None``: not set; the ``key_prefix``
        your handler's ``Consumer`` declares applies (the sample's is ``effectively-once/payments``).
    :param shared_prefix: another consumer's function holds this literal ``key_prefix`` on ``table`` on purpose (one
        operation): both say so. :default: ``False``: that fails synth (docs/runtime.md, "Two operations, one table").
    :param alarms: create the five failure alarms (DLQ depth, oldest message age, Lambda errors, throttles, the
        handler's failed records; see :class:`AlarmThresholds`); an ``ExistingQueue`` without a dead-letter queue
        gets no DLQ-depth alarm. :default: ``True``.
    :param alarm_action: added to every alarm's alarm actions (e.g. ``cloudwatch_actions.SnsAction(topic)``).
        :default: ``None``: the alarms change state without notifying anyone.
    :param alarm_thresholds: :default: ``AlarmThresholds()``: DLQ depth > 0, oldest message age > 5 minutes,
        errors > 0, throttles > 0, each over one 1-minute period; failed records > 10 a minute for 5 minutes.
    :param metrics_namespace: the namespace of the function's Powertools Metrics, where the failed-records alarm
        reads the handler's EMF ``FailedRecords``; set on the function as ``POWERTOOLS_METRICS_NAMESPACE``.
        :default: ``None``: not set; the alarm reads the runtime's default ``EffectivelyOnce``.
    :param service_name: the ``service`` dimension of those metrics; set on the function as
        ``POWERTOOLS_SERVICE_NAME``. :default: ``None``: not set; the alarm reads the runtime's default
        ``payments``. A function that sets either variable itself must pass the same value here.
    :param log_group: the function's log group; three Logs Insights query definitions are created on it
        (duplicate deliveries, idempotency rejections; docs/observability.md).
        :default: ``None``: the function's own ``log_group`` when it is a ``lambda.Function`` created with one
        (``log_group=...``, as ``PaymentProcessor`` does), otherwise no query definitions.
    :param async_invocation: **deprecated** (removed in 0.4.0; a ``DeprecationWarning`` and the synth warning
        ``effectively-once:asyncInvocationDeprecated``): use :class:`IdempotentEventConsumer`, which owns the
        function's event invoke config, its on-failure queue, expiry and alarms. Configures the function's
        asynchronous invocation path (event invoke config and a standard on-failure queue); the function must not
        have an event invoke config already (a ``ValueError`` naming it). :default: ``None``: left to Lambda's
        defaults (2 retries, 6 hours, no destination).
    :param dead_letter_on_first_sight: let the runtime send a permanent failure (``PermanentError``, a body that
        is not JSON, a missing idempotency key, a key reused with another payload) straight to the queue's
        dead-letter queue and report it done: sets ``DEAD_LETTER_QUEUE_URL`` and grants the send above. Without a
        known DLQ (an ``ExistingQueue`` without one: a warning) neither is done.
        :default: ``True``. Turn it off to let SQS count receives instead: a permanent failure then returns to
        the queue ``max_receive_count`` times before SQS moves it (no environment variable, no grant).
    :param removal_policy: what happens to the on-failure queue created for ``async_invocation`` when it leaves
        the stack (a given ``on_failure`` queue keeps its own).
        :default: ``RemovalPolicy.RETAIN``: it holds the only record of events that failed every attempt.
    An imported function without its role gets no grants (there is no policy to add to) and a warning.

    :raises ValueError: ``function`` is not a ``lambda.Function`` and the queue's visibility timeout was not
        given; ``function`` already consumed by another ``IdempotentQueueConsumer`` (the message names the function
        and that consumer's path); ``function`` a resource of another stack than the consumer's (it names both stacks:
        otherwise ``app.synth()`` fails with a ``DependencyCycle``); the timeout of a given ``lambda.Function`` outside
        1..900 seconds (CloudFormation AWS::Lambda::Function ``Timeout``); ``key_prefix`` not printable, with
        whitespace, longer than 2015 UTF-8 bytes, or another function's on ``table`` (see ``shared_prefix``); an ``int``
        prop (``batch_size``, ``max_concurrency``, the pollers, ``retry_attempts``, the count thresholds) that is not an
        ``int`` (a float, even ``3.0``, NaN, infinity, a bool, a string); ``batch_size``, ``max_concurrency`` or
        ``max_batching_window`` out of range; a ``provisioned_poller_config`` breaking the rules above; a batching
        window on a FIFO queue; a batch above 10 on a standard queue without a batching window; a given queue
        ``visibility_timeout`` shorter than the function's timeout; ``idempotency_expiry`` under 1 second; a
        negative alarm threshold; ``async_invocation`` retry attempts outside 0..2, maximum event age outside
        60 s..6 h, or a FIFO on-failure queue (AWS Lambda Developer Guide, asynchronous invocation destinations);
        the queue's visibility timeout left open while the function timeout or ``max_batching_window`` is a deploy-time
        token (it cannot be filled in, and SQS's 30-second default can be below the function timeout); an
        ``idempotency_expiry`` or ``oldest_message_age`` threshold that is a token in a unit other than seconds;
        an ``ExistingQueue`` whose ``dead_letter_queue`` is of the other type (FIFO or standard), whose
        ``max_receive_count`` is given without a dead-letter queue or outside 1..1000, whose ``retention_period`` is
        outside 60 s..14 days or ``visibility_timeout`` above 12 hours, or whose given fact differs from its
        ``sqs.Queue``'s own. Each message names the prop, the value, the rule and its source (docs/validation.md).

    At ``app.synth()`` (a validation, so variables added to the function after this consumer count too): the
    function's environment, measured as Lambda does (its variables as one compact JSON object, UTF-8), must be at
    most 4,096 bytes. A deploy-time value is counted at its upper bound (a table ARN 314 bytes, a queue URL 138, a
    table name 255, ...: ``limits.py``; one of unknown kind, a parameter or an import, at 0): synth fails
    (``RuntimeError`` "Validation failed", naming this consumer and the function) when the environment is too large
    without its deploy-time values, and warns (``functionEnvironmentMayExceedLimit``) when only their bounds make it
    so.

    Warnings (``Annotations``, ids ``effectively-once:...``): a given queue ``visibility_timeout`` below
    ``6 x function timeout + max_batching_window`` (AWS guidance); ``idempotency_expiry`` shorter than the
    queue's retention period (a resend after the record expires would be charged twice); the queue's
    ``max_receive_count`` below 5 (throttling alone could move a valid message to the DLQ); the function's
    reserved concurrency below the total maximum concurrency of the SQS mappings that invoke it
    (``max_concurrency``, or 10 x ``maximum_pollers`` in provisioned mode), counted when this consumer is created
    (AWS Lambda Developer Guide, SQS scaling: throttled batches return to the queue and climb toward the DLQ); a
    table whose ARN names another Region (the function's client must be built there) or another account (its
    resource-based policy must allow the function's role); for an
    ``ExistingQueue``, one per unknown fact: no dead-letter queue, no ``max_receive_count``, no
    ``visibility_timeout``, no ``retention_period`` (with a given ``idempotency_expiry`` under 14 days), an
    imported queue without its KMS key (``kms:Decrypt`` not granted).

    Attributes:
        event_source_mapping (lambda.EventSourceMapping): the mapping.
        event_source_mapping_metrics (bool): the prop: whether the mapping publishes its event counts.
        queue (sqs.IQueue): the source queue (``ProcessingQueue.queue`` or ``ExistingQueue.queue``).
        dead_letter_queue (sqs.IQueue | None): its dead-letter queue; ``None`` for an ``ExistingQueue`` without one.
        function, table: the inputs.
        visibility_timeout (Duration | None): the queue's visibility timeout after this consumer (given, filled in,
            or the ``ExistingQueue``'s fact); ``None`` when unknown.
        idempotency_expiry (Duration): the expiry set on the function.
        dlq_depth_alarm, oldest_message_age_alarm, errors_alarm, throttles_alarm, failed_records_alarm
            (cloudwatch.Alarm | None): ``None`` when ``alarms=False``.
        log_group (logs.ILogGroup | None): the log group the queries read.
        duplicate_deliveries_query, idempotency_rejections_query, effects_per_key_query
            (logs.CfnQueryDefinition | None): ``None`` without a log group.
        event_invoke_config (lambda.EventInvokeConfig | None), on_failure_queue (sqs.IQueue | None): ``None``
            without ``async_invocation``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue: ProcessingQueue | ExistingQueue,
        function: lambda_.IFunction,
        table: IdempotencyTable,
        batch_size: int = 10,
        max_batching_window: Duration | None = None,
        max_concurrency: int | None = None,
        provisioned_poller_config: lambda_.ProvisionedPollerConfig | None = None,
        event_source_mapping_metrics: bool = True,
        idempotency_expiry: Duration | None = None,
        key_prefix: str | None = None,
        shared_prefix: bool = False,
        alarms: bool = True,
        alarm_action: cloudwatch.IAlarmAction | None = None,
        alarm_thresholds: AlarmThresholds | None = None,
        log_group: logs.ILogGroup | None = None,
        async_invocation: AsyncInvocationOptions | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        metrics_namespace: str | None = None,
        service_name: str | None = None,
        dead_letter_on_first_sight: bool = True,
    ) -> None:
        super().__init__(scope, id)
        # Every check before the first resource, in this order (a prop breaking two rules names the first).
        source = self._check_inputs(queue, function, table, key_prefix, shared_prefix)
        _check_mapping_props(source, batch_size, max_batching_window, max_concurrency, provisioned_poller_config)
        check_type("event_source_mapping_metrics", event_source_mapping_metrics, bool, "a bool")
        check_idempotency_expiry(idempotency_expiry)
        thresholds = alarm_thresholds or AlarmThresholds()
        check_alarm_thresholds(thresholds)
        if async_invocation is not None:
            check_async_invocation(async_invocation)
            check_one_event_invoke_config(self, function)
        _check_function_kind(source, function)

        self.queue: sqs.IQueue = source.queue
        self.dead_letter_queue: sqs.IQueue | None = source.dead_letter_queue
        self.function = function
        self.table = table
        self.visibility_timeout = self._settle_visibility_timeout(source, max_batching_window)
        self.event_source_mapping_metrics = event_source_mapping_metrics
        self.event_source_mapping = self._wire_mapping(
            batch_size, max_batching_window, max_concurrency, provisioned_poller_config
        )
        # Permanent failures go to the DLQ on first sight only where one is known.
        dead_letter_target = self.dead_letter_queue if dead_letter_on_first_sight else None
        self._grant(dead_letter_target)
        self.idempotency_expiry = _idempotency_expiry(source, idempotency_expiry)
        self._advise(source, max_batching_window, idempotency_expiry, max_concurrency, provisioned_poller_config)
        self._set_environment(dead_letter_target, key_prefix, metrics_namespace, service_name)
        self._set_source_queue(source)
        self._wire_alarms(alarms, thresholds, alarm_action, metrics_namespace, service_name)
        self.log_group = log_group if log_group is not None else _own_log_group(function)
        self._wire_queries(self.log_group)
        self._wire_async_invocation(async_invocation, removal_policy)
        claim_prefix(self, function, table, key_prefix, shared_prefix)

    # --- construction steps, in the order __init__ takes them ---------------------------------------------
    def _check_inputs(
        self,
        queue: ProcessingQueue | ExistingQueue,
        function: lambda_.IFunction,
        table: IdempotencyTable,
        key_prefix: str | None,
        shared_prefix: bool,
    ) -> ProcessingQueue | ExistingQueue:
        """The queue, function, table and key prefix checks; returns the source (an ``ExistingQueue``'s facts
        completed by :func:`resolve`)."""
        check_type("queue", queue, (ProcessingQueue, ExistingQueue), "a ProcessingQueue or an ExistingQueue")
        check_table(table)
        check_unqualified(function, "IdempotentQueueConsumer")
        check_placement(self, function, "IdempotentQueueConsumer", PLACEMENT_ADVICE)
        check_one_consumer(self, function, IdempotentQueueConsumer)
        check_function_timeout(function)
        check_key_prefix(key_prefix)
        check_shared_prefix(self, function, table, key_prefix, shared_prefix)
        return resolve(queue) if isinstance(queue, ExistingQueue) else queue

    def _settle_visibility_timeout(
        self, source: ProcessingQueue | ExistingQueue, max_batching_window: Duration | None
    ) -> Duration | None:
        """Fill in a ``ProcessingQueue``'s open visibility timeout, or check the one it has; returns the queue's."""
        if isinstance(source, ProcessingQueue) and not source.visibility_timeout_given:
            assert isinstance(self.function, lambda_.Function)
            timeout = self.function.timeout or Duration.seconds(limits.LAMBDA_DEFAULT_TIMEOUT_SECONDS)
            window = max_batching_window or Duration.seconds(0)
            if is_unresolved(timeout) or is_unresolved(window):
                raise visibility_timeout_needed(timeout, window)
            source.fill_visibility_timeout(
                Duration.seconds(limits.visibility_timeout_guidance_seconds(timeout.to_seconds(), window.to_seconds()))
            )
        else:
            owned = isinstance(source, ProcessingQueue)
            check_given_visibility_timeout(
                self, source.visibility_timeout, self.function, max_batching_window, owned=owned
            )
        return source.visibility_timeout

    def _wire_mapping(
        self,
        batch_size: int,
        max_batching_window: Duration | None,
        max_concurrency: int | None,
        provisioned_poller_config: lambda_.ProvisionedPollerConfig | None,
    ) -> lambda_.EventSourceMapping:
        """The event source mapping (child ``EventSourceMapping``), partial batch responses always on."""
        mapping = lambda_.EventSourceMapping(
            self,
            "EventSourceMapping",
            target=self.function,
            event_source_arn=self.queue.queue_arn,
            batch_size=batch_size,
            max_batching_window=max_batching_window,
            max_concurrency=max_concurrency,
            provisioned_poller_config=provisioned_poller_config,
            metrics_config=_mapping_metrics.metrics_config(self.event_source_mapping_metrics),
            report_batch_item_failures=True,
        )
        acknowledge(
            mapping.node.default_child,  # type: ignore[arg-type]
            "Serverless-LambdaEventSourceMappingDestination",
            "SQS event source mappings do not support on-failure destinations (DestinationConfig applies to "
            "stream and Kafka sources only; CloudFormation AWS::Lambda::EventSourceMapping). Failed records "
            "return to the queue through ReportBatchItemFailures and move to its dead-letter queue after "
            "max_receive_count receives.",
        )
        return mapping

    def _grant(self, dead_letter_target: sqs.IQueue | None) -> None:
        """Consume on the queue, ``grant_idempotency`` on the table and the DLQ send, before the mapping starts; a
        warning instead for an imported function without its role (there is no policy to add to)."""
        function = self.function
        if function.role is None:
            self._warn_function_without_role(dead_letter_target)
            return
        # The mapping's poller uses the function's role: it must be able to read before the mapping starts.
        self.queue.grant_consume_messages(function).apply_before(self.event_source_mapping)
        self._grant_idempotency()
        if dead_letter_target is not None:
            _grant_dead_letter_send(function, dead_letter_target).apply_before(self.event_source_mapping)

    def _warn_function_without_role(self, dead_letter_target: sqs.IQueue | None) -> None:
        dead_letter_send = (
            ", and sqs:SendMessage on the dead-letter queue (kms:GenerateDataKey/Decrypt on its customer-managed key)"
            if dead_letter_target is not None
            else ""
        )
        Annotations.of(self).add_warning_v2(
            "effectively-once:consumerImportedFunctionWithoutRole",
            "function was imported without its role: grant it consume on the queue (and kms:Decrypt on a "
            "customer-managed key) and dynamodb:GetItem/PutItem/UpdateItem/DeleteItem on the idempotency "
            "table yourself"
            + dead_letter_send
            + ", or import it with lambda.Function.from_function_attributes(role=...)",
        )

    def _advise(
        self,
        source: ProcessingQueue | ExistingQueue,
        max_batching_window: Duration | None,
        idempotency_expiry: Duration | None,
        max_concurrency: int | None,
        provisioned_poller_config: lambda_.ProvisionedPollerConfig | None,
    ) -> None:
        """The warnings on the queue, function and table together (``idempotency_expiry``: the prop as given)."""
        advise(self, self.idempotency_expiry, source.retention_period, source.max_receive_count)
        if isinstance(source, ExistingQueue):
            warn_unknown(self, source, self.function, max_batching_window, idempotency_expiry)
        check_reserved_concurrency(self, self.function, max_concurrency, provisioned_poller_config)
        advise_table_location(self, self.table)

    def _set_environment(
        self,
        dead_letter_target: sqs.IQueue | None,
        key_prefix: str | None,
        metrics_namespace: str | None,
        service_name: str | None,
    ) -> None:
        """The runtime's variables (the core's), and ``DEAD_LETTER_QUEUE_URL`` while permanent failures go to the DLQ
        on first sight; an imported function's environment is the caller's."""
        function = self._set_runtime_environment(key_prefix, metrics_namespace, service_name, keep_longer_expiry=False)
        if function is not None and dead_letter_target is not None:
            function.add_environment(ENV_DEAD_LETTER_QUEUE_URL, dead_letter_target.queue_url)

    def _set_source_queue(self, source: ProcessingQueue | ExistingQueue) -> None:
        """``SOURCE_QUEUES``: the queue's ARN with what is known of it, ``maxReceiveCount`` (with a dead-letter
        queue) and ``visibilityTimeout`` (seconds, when a number at synth), each left out when unknown; the runtime's
        per-record backoff and receive budget read it. An imported function's environment is the caller's."""
        if not isinstance(self.function, lambda_.Function):
            return
        self.function.add_environment(
            ENV_SOURCE_QUEUES, source_queues_value(self.queue, source.max_receive_count, self.visibility_timeout)
        )

    def _wire_alarms(
        self,
        alarms: bool,
        thresholds: AlarmThresholds,
        alarm_action: cloudwatch.IAlarmAction | None,
        metrics_namespace: str | None,
        service_name: str | None,
    ) -> None:
        """The five failure alarms (:func:`queue_alarm_specs`), or ``None`` in each attribute with ``alarms=False``
        (and in ``dlq_depth_alarm`` without a dead-letter queue)."""
        specs = queue_alarm_specs(
            queue=self.queue,
            dead_letter_queue=self.dead_letter_queue,
            function=self.function,
            thresholds=thresholds,
            namespace=metrics_namespace or DEFAULT_METRICS_NAMESPACE,
            service=service_name or DEFAULT_SERVICE_NAME,
        )
        (
            self.dlq_depth_alarm,
            self.oldest_message_age_alarm,
            self.errors_alarm,
            self.throttles_alarm,
            self.failed_records_alarm,
        ) = self._create_alarms(specs, enabled=alarms, action=alarm_action)

    def _wire_async_invocation(self, options: AsyncInvocationOptions | None, removal_policy: RemovalPolicy) -> None:
        """The asynchronous invocation path (event invoke config and on-failure queue), with ``async_invocation``."""
        self.event_invoke_config: lambda_.EventInvokeConfig | None = None
        self.on_failure_queue: sqs.IQueue | None = None
        if options is not None:
            _deprecate_async_invocation(self)
            self.event_invoke_config, self.on_failure_queue = build_async_invocation(
                self, self.function, options, removal_policy
            )

    # --- the mapping's event counts (named after the CloudWatch metrics; _mapping_metrics.DOC) ---------------
    def metric_polled_event_count(self, **props: Any) -> cloudwatch.Metric:
        """``PolledEventCount``: events the mapping read from the queue. ``props``: ``MetricOptions``.
        No data with ``event_source_mapping_metrics=False``. :default: sum per minute."""
        return _mapping_metrics.mapping_metric(self.event_source_mapping, _mapping_metrics.POLLED_EVENT_COUNT, **props)

    def metric_filtered_out_event_count(self, **props: Any) -> cloudwatch.Metric:
        """``FilteredOutEventCount``: events dropped by filter criteria (the consumer sets none). As above."""
        return _mapping_metrics.mapping_metric(
            self.event_source_mapping, _mapping_metrics.FILTERED_OUT_EVENT_COUNT, **props
        )

    def metric_invoked_event_count(self, **props: Any) -> cloudwatch.Metric:
        """``InvokedEventCount``: events that invoked the function. As above."""
        return _mapping_metrics.mapping_metric(self.event_source_mapping, _mapping_metrics.INVOKED_EVENT_COUNT, **props)

    def metric_failed_invoke_event_count(self, **props: Any) -> cloudwatch.Metric:
        """``FailedInvokeEventCount``: events whose invocation failed (reported batch item failures included).
        As above."""
        return _mapping_metrics.mapping_metric(
            self.event_source_mapping, _mapping_metrics.FAILED_INVOKE_EVENT_COUNT, **props
        )

    def metric_deleted_event_count(self, **props: Any) -> cloudwatch.Metric:
        """``DeletedEventCount``: events deleted from the queue after processing. As above."""
        return _mapping_metrics.mapping_metric(self.event_source_mapping, _mapping_metrics.DELETED_EVENT_COUNT, **props)

    def metric_dropped_event_count(self, **props: Any) -> cloudwatch.Metric:
        """``DroppedEventCount``: events Lambda dropped on expiry or retry exhaustion. As above."""
        return _mapping_metrics.mapping_metric(self.event_source_mapping, _mapping_metrics.DROPPED_EVENT_COUNT, **props)


#: The deprecation of ``async_invocation`` (0.3.0): the Python warning and the synth warning say the same.
ASYNC_INVOCATION_DEPRECATION = (
    f"IdempotentQueueConsumer(async_invocation=...) is deprecated and will be removed in {REMOVED_IN}: use "
    "IdempotentEventConsumer(function=..., table=..., retry_attempts=..., max_event_age=..., on_failure_queue=...) "
    "for the function's asynchronous invocations (docs/event-consumer.md)"
)


def _deprecate_async_invocation(consumer: IdempotentQueueConsumer) -> None:
    """A ``DeprecationWarning`` at the line that built the consumer, and the same at synth (``Annotations``)."""
    warnings.warn(ASYNC_INVOCATION_DEPRECATION, DeprecationWarning, stacklevel=caller_stacklevel())
    Annotations.of(consumer).add_warning_v2(
        WARNING_ID_PREFIX + "asyncInvocationDeprecated", ASYNC_INVOCATION_DEPRECATION
    )


def _grant_dead_letter_send(function: lambda_.IFunction, dead_letter_queue: sqs.IQueue) -> iam.Grant:
    """``sqs:SendMessage`` on the DLQ, and the key actions a sender needs on its customer-managed key."""
    grant = iam.Grant.add_to_principal_or_resource(
        grantee=function,
        actions=list(DEAD_LETTER_SEND_ACTIONS),
        resource_arns=[dead_letter_queue.queue_arn],
        resource=dead_letter_queue,
    )
    key = dead_letter_queue.encryption_master_key
    if key is not None:
        grant = grant.combine(key.grant(function, *DEAD_LETTER_KEY_ACTIONS))
    return grant


def _check_mapping_props(
    source: ProcessingQueue | ExistingQueue,
    batch_size: int,
    max_batching_window: Duration | None,
    max_concurrency: int | None,
    provisioned_poller_config: lambda_.ProvisionedPollerConfig | None,
) -> None:
    """The event source mapping's props against the queue's type and each other."""
    check_mapping(bool(source.queue.fifo), batch_size, max_batching_window, max_concurrency)
    check_type(
        "provisioned_poller_config",
        provisioned_poller_config,
        lambda_.ProvisionedPollerConfig,
        "a lambda.ProvisionedPollerConfig",
        optional=True,
    )
    check_provisioned_pollers(provisioned_poller_config, max_concurrency)


def _check_function_kind(source: ProcessingQueue | ExistingQueue, function: lambda_.IFunction) -> None:
    """An imported ``IFunction`` only where its timeout is not needed: a queue whose visibility timeout is known."""
    if isinstance(function, lambda_.Function):
        return
    if isinstance(source, ProcessingQueue) and not source.visibility_timeout_given:
        raise fail(
            "function",
            function.function_arn,
            "must be a lambda.Function when the queue's visibility_timeout is not given (its timeout is "
            "needed to fill in the visibility timeout, and its environment to set the idempotency "
            "settings); give the ProcessingQueue a visibility_timeout and set IDEMPOTENCY_TABLE_NAME (the table's "
            "ARN) / IDEMPOTENCY_EXPIRY_SECONDS on the function yourself",
        )


def _idempotency_expiry(source: ProcessingQueue | ExistingQueue, given: Duration | None) -> Duration:
    """The expiry set on the function: as given, else the queue's retention period."""
    # An existing queue of unknown retention: 14 days, the SQS maximum, covers any retention it can have.
    return given or source.retention_period or Duration.seconds(limits.SQS_MAX_RETENTION_SECONDS)


def _own_log_group(function: lambda_.IFunction) -> logs.ILogGroup | None:
    """The log group a ``lambda.Function`` was created with (``log_group=``), not the implicit
    ``/aws/lambda/<name>``; ``None`` for an imported function or one without."""
    if not isinstance(function, lambda_.Function):
        return None
    # Function.log_group would create a LogRetention resource for the implicit group; read the prop instead.
    config = function.node.default_child
    logging = getattr(config, "logging_config", None)
    return function.log_group if getattr(logging, "log_group", None) is not None else None
