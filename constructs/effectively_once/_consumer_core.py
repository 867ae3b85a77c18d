"""The core of the two consumer constructs: what :class:`IdempotentQueueConsumer` and :class:`IdempotentEventConsumer`
both do to a function, written once.

Modelled on aws-cdk's event sources, where ``SqsEventSource``'s siblings (Kinesis, DynamoDB streams) share
``StreamEventSource``, and on cdk-monitoring-constructs, which builds its ``...WithDlq`` monitorings on one base:
:class:`ConsumerCore` is a private base class, ``IdempotentQueueConsumer(ConsumerCore)`` and
``IdempotentEventConsumer(ConsumerCore)``. A base class rather than a composed helper because everything the core
creates must be a child of the consumer itself: the alarms and query definitions keep their construct ids
(``<consumer>/ErrorsAlarm``, ``<consumer>/EffectsPerKeyQuery``) and so their logical ids (a public contract), the
warnings go to the consumer's path, and the effect grants stay the consumer's methods
(``consumer.grant_effect_table(...)``). The core has no ``__init__``: each construct runs its own checks first (a
prop breaking two rules names the first, in that construct's order), sets ``function``, ``table`` and
``idempotency_expiry``, and then calls the steps below in its own order.

What lives here, once for both:

- the idempotency table grant (:meth:`ConsumerCore._grant_idempotency`): ``IdempotencyTable.grant_idempotency``,
  exactly ``dynamodb:GetItem``, ``PutItem``, ``UpdateItem`` and ``DeleteItem``;
- the runtime's environment (:meth:`ConsumerCore._set_runtime_environment`): ``IDEMPOTENCY_TABLE_NAME`` (the table's
  ARN), ``IDEMPOTENCY_EXPIRY_SECONDS`` and, when given, ``IDEMPOTENCY_KEY_PREFIX``, ``POWERTOOLS_METRICS_NAMESPACE``
  and ``POWERTOOLS_SERVICE_NAME``, with the synth-time check that the environment fits Lambda's 4 KB
  (``_environment_size.EnvironmentSize``);
- the effect grants (``grant_effect_table``, ``_bucket``, ``_queue``, ``_topic``): inherited from
  ``_effect_grants.EffectGrants``, the core's part for the runtime's effect adapters (kept in its own module: it is
  a third of the core's size and has its own sources and cdk-nag acknowledgements);
- observability: the alarms (:meth:`ConsumerCore._create_alarms`, from each construct's specs, in the one alarm shape
  ``observability.threshold_alarm``), the three Logs Insights query definitions (:meth:`ConsumerCore._wire_queries`)
  and the per-minute metric options the alarms and the dashboard widgets read (:func:`per_minute`).

What stays in each construct is its source: the queue consumer's event source mapping, consume grant, visibility
timeout and dead-letter send; the event consumer's event invoke config, on-failure queue and the table and key
prefix it shares with the function's other constructs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration, Fn, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from effectively_once_runtime import names

from ._effect_grants import EffectGrants
from ._environment_size import EnvironmentSize, function_variables
from ._function_checks import check_concurrency_mode
from ._validation import check_type, is_unresolved, seconds, template_seconds
from .idempotency_table import IdempotencyTable
from .observability import PERIOD, AlarmSpec, build_queries, threshold_alarm


class ConsumerCore(EffectGrants, Construct):
    """The base of both consumer constructs (private: not exported; the constructs' docstrings are the contract).

    Attributes (set by the construct before it calls a step):
        function (lambda.IFunction): the consumer's function.
        table (IdempotencyTable): its idempotency table.
        idempotency_expiry (Duration): the expiry this consumer sets on the function.
        duplicate_deliveries_query, idempotency_rejections_query, effects_per_key_query
            (logs.CfnQueryDefinition | None): set by :meth:`_wire_queries`; ``None`` without a log group.
    """

    function: lambda_.IFunction
    table: IdempotencyTable
    idempotency_expiry: Duration
    duplicate_deliveries_query: logs.CfnQueryDefinition | None
    idempotency_rejections_query: logs.CfnQueryDefinition | None
    effects_per_key_query: logs.CfnQueryDefinition | None

    def _grant_idempotency(self) -> iam.Grant:
        """``table.grant_idempotency`` to the function (an imported function without its role: a dropped grant)."""
        return self.table.grant_idempotency(self.function)

    def _set_runtime_environment(
        self,
        key_prefix: str | None,
        metrics_namespace: str | None,
        service_name: str | None,
        *,
        keep_longer_expiry: bool,
    ) -> lambda_.Function | None:
        """The runtime's variables (``effectively_once_runtime.names``) on a ``lambda.Function``, and the 4 KB check
        at synth (a validation of this consumer, so variables added after it count too).

        :param key_prefix: ``IDEMPOTENCY_KEY_PREFIX``. :default: none: ``None`` leaves it unset.
        :param metrics_namespace: ``POWERTOOLS_METRICS_NAMESPACE``; ``None`` leaves it unset.
        :param service_name: ``POWERTOOLS_SERVICE_NAME``; ``None`` leaves it unset.
        :param keep_longer_expiry: keep a literal ``IDEMPOTENCY_EXPIRY_SECONDS`` already on the function when it is
            longer than this consumer's (the event consumer, sharing a function with a queue consumer); otherwise
            this consumer's is written.
        :returns: the function, for the construct's own variables after these; ``None`` for an imported function
            (its environment is the caller's to set).
        """
        function = self.function
        if not isinstance(function, lambda_.Function):
            return None
        self.node.add_validation(EnvironmentSize(self, function))
        check_concurrency_mode(function)
        function.add_environment(names.ENV_TABLE_NAME, self.table.table_arn)
        current = function_variables(function).get(names.ENV_EXPIRY_SECONDS) if keep_longer_expiry else None
        if not _below(current, self.idempotency_expiry):
            function.add_environment(names.ENV_EXPIRY_SECONDS, expiry_value(self.idempotency_expiry))
        for name, value in (
            (names.ENV_KEY_PREFIX, key_prefix),
            (names.ENV_METRICS_NAMESPACE, metrics_namespace),
            (names.ENV_SERVICE_NAME, service_name),
        ):
            if value is not None:
                function.add_environment(name, value)
        return function

    def _create_alarms(
        self, specs: Sequence[AlarmSpec | None], *, enabled: bool, action: cloudwatch.IAlarmAction | None
    ) -> list[cloudwatch.Alarm | None]:
        """One alarm per spec, children of this consumer, in order (``observability.threshold_alarm``).

        :param specs: the construct's alarms; ``None`` for one it does not have (no dead-letter queue).
        :param enabled: the ``alarms`` prop; ``False`` creates none.
        :param action: the ``alarm_action`` prop, added to every alarm. :default: none: ``None``.
        :returns: one entry per spec: the alarm, or ``None`` (a ``None`` spec, or ``enabled=False``).
        """
        if not enabled:
            return [None] * len(specs)
        return [None if spec is None else threshold_alarm(self, *spec, action=action) for spec in specs]

    def _wire_queries(self, log_group: logs.ILogGroup | None) -> None:
        """The three Logs Insights query definitions on ``log_group`` (``observability.build_queries``: children
        ``DuplicateDeliveriesQuery``, ``IdempotencyRejectionsQuery``, ``EffectsPerKeyQuery``), or ``None`` in each
        attribute without one."""
        queries: tuple[logs.CfnQueryDefinition | None, ...] = (None, None, None)
        if log_group is not None:
            queries = build_queries(self, log_group)
        self.duplicate_deliveries_query, self.idempotency_rejections_query, self.effects_per_key_query = queries


def check_table(table: Any) -> None:
    """:raises ValueError: ``table`` is not an ``IdempotencyTable`` (both consumers' ``table`` prop)."""
    check_type("table", table, IdempotencyTable, "an IdempotencyTable (IdempotencyTable.from_table_arn imports one)")


def per_minute(statistic: str, props: dict[str, Any]) -> dict[str, Any]:
    """A consumer metric's options: ``statistic`` over 1-minute periods (``observability.PERIOD``), overridden by the
    caller's ``MetricOptions`` ``props``."""
    return {"statistic": statistic, "period": PERIOD, **props}


def expiry_value(expiry: Duration) -> str:
    """``IDEMPOTENCY_EXPIRY_SECONDS``: whole seconds of ``expiry``, or for a deploy-time token the
    token itself (a Number parameter's ``Ref`` is a string in CloudFormation, so it is a valid environment value).

    :raises ValueError: a token in another unit than seconds (``_validation.template_seconds``).
    """
    if is_unresolved(expiry):
        return Token.as_string(template_seconds("idempotency_expiry", expiry))
    return str(int(expiry.to_seconds()))


def _below(current: Any, expiry: Duration) -> bool:
    """Whether ``expiry`` is below the literal expiry ``current`` already on the function."""
    needed = seconds(expiry)
    return isinstance(current, str) and current.isdigit() and needed is not None and needed < int(current)


def source_queues_value(queue: sqs.IQueue, max_receive_count: int | None, visibility_timeout: Duration | None) -> str:
    """``SOURCE_QUEUES`` for one queue: ``{"<queue ARN>": {"maxReceiveCount": N, "visibilityTimeout": S}}`` as a
    string (an ``Fn::Join`` around the ARN's token), a fact left out when unknown: ``None``, or a deploy-time value
    (a parameter's number token would be written as its placeholder, which the runtime refuses)."""
    facts: dict[str, int] = {}
    if max_receive_count is not None and not is_unresolved(max_receive_count):
        facts["maxReceiveCount"] = max_receive_count
    timeout = seconds(visibility_timeout)
    if timeout is not None:
        facts["visibilityTimeout"] = int(timeout)
    return Fn.join("", ['{"', queue.queue_arn, '":', json.dumps(facts, separators=(",", ":")), "}"])
