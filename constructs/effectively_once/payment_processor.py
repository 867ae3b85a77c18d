"""``PaymentProcessor``: the sample pattern: queue + DLQ, idempotency table, ledger and the payment Lambda."""

from __future__ import annotations

import dataclasses
from typing import Any, Unpack

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from effectively_once_runtime import names

from . import limits
from ._assets import payment_function_code
from ._deprecated_props import DeprecatedProps, options_with_deprecated
from ._function_checks import check_timeout
from ._validation import acknowledge, check_int
from .idempotency_table import IdempotencyTable
from .observability import build_dashboard
from .options import IdempotentQueueConsumerOptions, ProcessingQueueOptions
from .powertools_layer import POWERTOOLS_RUNTIME
from .powertools_layer import POWERTOOLS_VERSION as POWERTOOLS_VERSION  # re-exported: the pin, read by tests
from .processing_queue import ProcessingQueue
from .queue_consumer import IdempotentQueueConsumer
from .runtime_layer import RuntimeLayer, check_architecture

# The Powertools pin (release and runtime) lives in powertools_layer.py; re-exported here for existing callers.
#: The runtime the function runs on (the newest Powertools supports).
PAYMENT_RUNTIME = POWERTOOLS_RUNTIME
#: The function's architecture when ``architecture`` is not given (Graviton: Lambda's arm64 GB-second price is
#: 20 % below x86_64's, benchmarks/cost_model.py); the Powertools layer is resolved for the same one.
PAYMENT_ARCHITECTURE = lambda_.Architecture.ARM_64
PAYMENT_HANDLER = "payments.handler.lambda_handler"
#: The function timeout when ``function_timeout`` is not given, in seconds.
DEFAULT_FUNCTION_TIMEOUT_SECONDS = 30

LEDGER_PARTITION_KEY = "charge_id"
#: The only ledger calls the handler makes: single-item write and read (no Query, Scan or Batch*).
LEDGER_ACTIONS = ("dynamodb:PutItem", "dynamodb:GetItem")


class PaymentProcessor(Construct):
    """The sample effectively-once payment pipeline, composed from the library's constructs.

    Children (ids are stable): ``Queue`` (:class:`ProcessingQueue`), ``IdempotencyTable``, ``Ledger``,
    ``LogGroup``, ``Runtime`` (:class:`RuntimeLayer`), ``FunctionRole``, ``Function``, ``Consumer``
    (:class:`IdempotentQueueConsumer`: alarms, query definitions on ``LogGroup``, async path), ``Dashboard``.
    The function's role has no managed policy: it may write only to its own log group (``logs:CreateLogStream``,
    ``logs:PutLogEvents`` on that group's ARN, instead of AWSLambdaBasicExecutionRole's ``Resource: "*"``),
    plus the queue, table and ledger grants. The function runs
    ``payments.handler.lambda_handler`` from ``lambda_src/payments`` (shipped in the wheel; the asset holds that
    package only) on Python 3.14 and ``architecture`` (arm64 by default), and gets the runtime the way a user's
    function does: the layers of a :class:`RuntimeLayer` built for the same architecture, the runtime package and
    the public Powertools layer of the pinned release (``POWERTOOLS_VERSION``), resolved at deploy time from
    Powertools' SSM parameter (:func:`~effectively_once.powertools_layer.public_powertools_layer`).

    :param function_timeout: the function's timeout, 1 to 900 seconds (Lambda's range; a token is not checked).
        :default: ``None``: 30 seconds (``DEFAULT_FUNCTION_TIMEOUT_SECONDS``).
    :param memory_size: the function's memory, in MiB (an ``int``; its range is CloudFormation's to check).
        :default: ``256``.
    :param architecture: the function's architecture, ``lambda_.Architecture.ARM_64`` or ``X86_64``; the
        function and its :class:`RuntimeLayer` (which resolves the Powertools layer per architecture) get this one
        value, so they cannot disagree. :default: ``lambda_.Architecture.ARM_64`` (``PAYMENT_ARCHITECTURE``).
    :param removal_policy: for every stateful resource: the idempotency table, the ledger, the log group, the
        source queue and its DLQ, and the consumer's on-failure queue (with ``async_invocation``).
        :default: ``RemovalPolicy.RETAIN``.
    :param log_retention: retention of the function's log group. :default: ``RetentionDays.ONE_MONTH``.
    :param powertools_layer: the Powertools layer. :default: ``None``: the public layer carrying Powertools
        ``POWERTOOLS_VERSION`` for the function's architecture and runtime, its ARN read at deploy time from
        ``/aws/service/powertools/python/<architecture>/python3.14/<POWERTOOLS_VERSION>`` in the deploying region
        (:func:`~effectively_once.powertools_layer.public_powertools_layer`). Required where Powertools publishes
        no such parameter: the China (``aws-cn``) and GovCloud (``aws-us-gov``) partitions and regions outside
        ``limits.POWERTOOLS_SSM_REGIONS``.
    :param service_name: ``POWERTOOLS_SERVICE_NAME``; also the ``service`` dimension the consumer's
        failed-records alarm and the dashboard read. :default: ``"payments"``.
    :param metrics_namespace: ``POWERTOOLS_METRICS_NAMESPACE``; also where the failed-records alarm and the
        dashboard read. :default: ``"EffectivelyOnce"``.
    :param queue_options: the ``Queue``'s props (:class:`~effectively_once.options.ProcessingQueueOptions`: ``fifo``,
        ``visibility_timeout``, ``retention_period``, ``max_receive_count``, ``content_based_deduplication``,
        ``high_throughput``), each with :class:`ProcessingQueue`'s default; the queue's ``removal_policy`` is the
        one above. A ``visibility_timeout`` is required when ``function_timeout`` or ``max_batching_window`` is a
        deploy-time token. :default: ``None``: ``ProcessingQueueOptions()``, every field at its default.
    :param consumer_options: the ``Consumer``'s props
        (:class:`~effectively_once.options.IdempotentQueueConsumerOptions`: ``batch_size``, ``max_batching_window``,
        ``max_concurrency``, ``provisioned_poller_config``, ``event_source_mapping_metrics`` (also the dashboard's
        row of the mapping's event counts), ``idempotency_expiry``, ``key_prefix``, ``alarms``, ``alarm_action``,
        ``alarm_thresholds``, ``async_invocation``), each with :class:`IdempotentQueueConsumer`'s default; the
        consumer gets ``removal_policy``, ``service_name``, ``metrics_namespace`` and the log group from above.
        :default: ``None``: ``IdempotentQueueConsumerOptions()``, every field at its default.
    :param deprecated: **deprecated** (removed in 0.4.0): those 17 props as keywords of their own
        (``PaymentProcessor(fifo=True, batch_size=5)``). Each still works, with a ``DeprecationWarning`` naming the
        option object to pass instead; combined with its option object's other fields.
    :raises ValueError: as :class:`ProcessingQueue` and :class:`IdempotentQueueConsumer`; ``queue_options`` or
        ``consumer_options`` of another type; a deprecated keyword given beside its option object's same field
        (the message names both); ``function_timeout``
        outside 1..900 seconds (CloudFormation AWS::Lambda::Function ``Timeout``); ``architecture`` is not
        a ``lambda_.Architecture`` or is neither arm64 nor x86_64; ``powertools_layer`` is
        ``None`` and the stack's region is known and has no Powertools parameter (see above).
    :raises TypeError: a keyword that is none of these (as Python raises for a misspelt keyword).

    Attributes:
        queue (ProcessingQueue), table (IdempotencyTable), ledger (dynamodb.Table), function (lambda.Function),
        consumer (IdempotentQueueConsumer; its alarms, queries and async path), log_group (logs.LogGroup),
        role (iam.Role),
        runtime_layer (RuntimeLayer: the runtime and Powertools layers of the function),
        dashboard (cloudwatch.Dashboard): the handler's EMF counts (namespace ``metrics_namespace``, dimension
        ``service`` = ``service_name``) beside queue depth, DLQ depth, oldest message age, Lambda errors, and the
        mapping's polled, invoked, failed, deleted and dropped events (with ``event_source_mapping_metrics``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function_timeout: Duration | None = None,
        memory_size: int = 256,
        architecture: lambda_.Architecture = PAYMENT_ARCHITECTURE,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        powertools_layer: lambda_.ILayerVersion | None = None,
        service_name: str = names.DEFAULT_SERVICE_NAME,
        metrics_namespace: str = names.DEFAULT_METRICS_NAMESPACE,
        queue_options: ProcessingQueueOptions | None = None,
        consumer_options: IdempotentQueueConsumerOptions | None = None,
        **deprecated: Unpack[DeprecatedProps],
    ) -> None:
        super().__init__(scope, id)
        queue_options, consumer_options = options_with_deprecated(deprecated, queue_options, consumer_options)
        architecture = check_architecture("architecture", architecture)
        # Before lambda.Function: a NaN or infinity would crash the jsii kernel, a float would be synthesized.
        check_int("memory_size", memory_size, limits.LAMBDA_MEMORY_SIZE_DOC)
        if function_timeout is None:
            function_timeout = Duration.seconds(DEFAULT_FUNCTION_TIMEOUT_SECONDS)
        check_timeout("function_timeout", function_timeout)
        self.queue = ProcessingQueue(self, "Queue", removal_policy=removal_policy, **_props(queue_options))
        self.table = IdempotencyTable(self, "IdempotencyTable", removal_policy=removal_policy)
        self.ledger = self._ledger(removal_policy)
        self.log_group = logs.LogGroup(self, "LogGroup", retention=log_retention, removal_policy=removal_policy)
        self.runtime_layer = RuntimeLayer(
            self, "Runtime", architecture=architecture, runtime=PAYMENT_RUNTIME, powertools_layer=powertools_layer
        )
        self.role = self._function_role()
        self.function = self._function(function_timeout, memory_size, service_name, metrics_namespace)
        self.consumer = IdempotentQueueConsumer(
            self,
            "Consumer",
            queue=self.queue,
            function=self.function,
            table=self.table,
            log_group=self.log_group,
            removal_policy=removal_policy,
            metrics_namespace=metrics_namespace,
            service_name=service_name,
            **_props(consumer_options),
        )
        self.dashboard = build_dashboard(
            self,
            queue=self.queue.queue,
            dead_letter_queue=self.queue.dead_letter_queue,
            function=self.function,
            namespace=metrics_namespace,
            service=service_name,
            event_source_mapping=self.consumer.event_source_mapping
            if self.consumer.event_source_mapping_metrics
            else None,
        )

    # --- construction steps, in the order __init__ takes them ---------------------------------------------
    def _ledger(self, removal_policy: RemovalPolicy) -> dynamodb.Table:
        """The payments ledger (child ``Ledger``): pk ``charge_id``, on demand, AWS-managed encryption, PITR."""
        return dynamodb.Table(
            self,
            "Ledger",
            partition_key=dynamodb.Attribute(name=LEDGER_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal_policy,
        )

    def _function_role(self) -> iam.Role:
        """The function's role (child ``FunctionRole``): no managed policy, writes to its own log group only."""
        role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Payment function: its own log group, its queue, idempotency table and ledger only",
        )
        # The log group is stack-created, so the function needs no logs:CreateLogGroup and no "*" resource.
        self.log_group.grant_write(role)
        return role

    def _function(
        self, timeout: Duration, memory_size: int, service_name: str, metrics_namespace: str
    ) -> lambda_.Function:
        """The payment function (child ``Function``) on the runtime layers, with its ledger grant."""
        function = lambda_.Function(
            self,
            "Function",
            role=self.role,
            runtime=PAYMENT_RUNTIME,
            architecture=self.runtime_layer.architecture,
            handler=PAYMENT_HANDLER,
            code=payment_function_code(),
            timeout=timeout,
            memory_size=memory_size,
            layers=self.runtime_layer.layers,
            log_group=self.log_group,
            environment={
                "LEDGER_TABLE_NAME": self.ledger.table_name,
                names.ENV_SERVICE_NAME: service_name,
                names.ENV_METRICS_NAMESPACE: metrics_namespace,
            },
        )
        self.ledger.grant(function, *LEDGER_ACTIONS)
        _acknowledge_function_findings(function)
        return function


def _props(options: ProcessingQueueOptions | IdempotentQueueConsumerOptions) -> dict[str, Any]:
    """An option object's fields as the construct's keyword arguments (shallow: ``asdict`` would copy the values)."""
    return {field.name: getattr(options, field.name) for field in dataclasses.fields(options)}


def _acknowledge_function_findings(function: lambda_.Function) -> None:
    """The rule-pack findings on the function that do not apply, each with why."""
    cfn_function = function.node.default_child
    acknowledge(
        cfn_function,  # type: ignore[arg-type]
        "Serverless-LambdaDLQ",
        "The SQS event source mapping invokes the function synchronously, where a function dead-letter "
        "queue does not apply: failed records return to the source queue and move to its dead-letter queue "
        "(14 days) after max_receive_count receives. Asynchronous invocations, when async_invocation is set, "
        "go to an on-failure destination, which AWS recommends over a function dead-letter queue.",
    )
    acknowledge(
        cfn_function,  # type: ignore[arg-type]
        "Serverless-LambdaTracing",
        "X-Ray tracing is an observability choice, not a data-protection control; turning it on adds "
        "xray:PutTraceSegments/PutTelemetryRecords on Resource '*' (X-Ray has no resource-level "
        "permissions). Every log line carries the payment's correlation id (Powertools Logger).",
    )
