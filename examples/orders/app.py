#!/usr/bin/env python3
"""Order confirmations: the chaos proof outside payments (docs/chaos.md).

Stacks:
  OrdersExample             a standard and a FIFO queue, each wired by ``IdempotentQueueConsumer`` to an order
                            function (``orders.lambda_handler``, keyed on ``order_id``); the confirmations go to one
                            outbox table (partition key ``idempotency_key``, attribute ``order_id``).
  OrdersMessageIdControl    the same (standard and FIFO) with ``orders.by_message_id_handler``: keyed on the SQS
                            ``messageId``, the negative control (a resend is confirmed twice); the same input
                            file drives both stacks.
  OrdersGallery             the same with ``gallery.lambda_handler``: the proof gallery's variants, right and wrong,
                            one chosen per run by the function environment's ``GALLERY_VARIANT`` (``src/gallery.py``;
                            ``make proof`` runs each).
  OrdersEvents              the asynchronous path: a standard queue and an EventBridge rule on a custom bus
                            (``OrdersBus``, events with source ``examples.orders`` and detail-type
                            ``OrderPlaced``) deliver orders to one function (``order_events.lambda_handler``,
                            ``envelope="auto"``), whose ``IdempotentEventConsumer`` owns its retries (2) and on-failure
                            queue; ``ORDER_EVENTS_VARIANT=event_id`` keys it on the event's ``id`` (the control).
  OrdersEventsOnly          the same function behind the EventBridge rule alone: no queue (issue 30, item 1).
  OrdersTopicOnly           the same function behind an SNS topic (``OrdersTopic``, a ``lambda`` subscription) alone:
                            no queue.
  OrdersDirectOnly          the same function with its ``IdempotentEventConsumer`` and nothing in the stack invoking
                            it: its callers ``Invoke`` it with ``InvocationType="Event"``
                            (``direct_invocations_async=True``: a refused one is recorded on the on-failure queue).

Context (``-c name=value``): ``function_timeout_seconds`` (default 30), ``max_receive_count`` (default 5),
``batch_size`` (records per invocation, default 10), ``visibility_timeout_seconds`` (the queues'; default: filled in
by the consumer, 6 x the function timeout; a test stack sets it lower to wait less after each kill, at least the
function timeout), ``destroy_on_delete`` (``true``: tables and queues are deleted with the stack; default RETAIN).

How the functions get the runtime: one line, ``layers=RuntimeLayer(...).layers``: the ``effectively_once_runtime``
package as a layer of its own, and Powertools from its pinned public layer. The code asset is ``src/`` alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import App, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from effectively_once import (
    IdempotencyTable,
    IdempotentEventConsumer,
    IdempotentQueueConsumer,
    ProcessingQueue,
    RuntimeLayer,
)
from effectively_once.powertools_layer import POWERTOOLS_RUNTIME

HERE = Path(__file__).resolve().parent
ENV_OUTBOX_TABLE = "OUTBOX_TABLE_NAME"
#: The order events the ``OrdersEvents`` rule delivers.
ORDER_EVENT_SOURCE = "examples.orders"
ORDER_EVENT_DETAIL_TYPE = "OrderPlaced"


class OrdersStack(Stack):
    """One order function per queue kind in ``kinds`` (``"Standard"``, ``"Fifo"``), all on one outbox; with no kind,
    one function (``EventsConfirm``) with no queue. ``events``: the functions behind an EventBridge rule too;
    ``topic``: behind an SNS topic (only without ``kinds``); ``direct``: invoked directly, asynchronously (only
    without ``kinds``, ``events`` and ``topic``)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        handler: str,
        kinds: tuple[str, ...],
        events: bool = False,
        topic: bool = False,
        direct: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        ctx = self.node.try_get_context
        timeout = Duration.seconds(int(ctx("function_timeout_seconds") or 30))
        max_receive_count = int(ctx("max_receive_count") or 5)
        batch_size = int(ctx("batch_size") or 10)
        visibility = ctx("visibility_timeout_seconds")
        visibility_timeout = Duration.seconds(int(visibility)) if visibility else None
        destroy = str(ctx("destroy_on_delete") or "false").lower() == "true"
        removal = RemovalPolicy.DESTROY if destroy else RemovalPolicy.RETAIN
        outbox = dynamodb.Table(
            self,
            "Outbox",
            partition_key=dynamodb.Attribute(name="idempotency_key", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal,
        )
        table = IdempotencyTable(self, "Idempotency", removal_policy=removal)
        runtime = RuntimeLayer(self, "Runtime", runtime=POWERTOOLS_RUNTIME)
        code = lambda_.Code.from_asset(str(HERE / "src"), exclude=["__pycache__", "*.pyc"])
        for kind in kinds:
            queue = ProcessingQueue(
                self,
                f"{kind}Orders",
                fifo=kind == "Fifo",
                max_receive_count=max_receive_count,
                visibility_timeout=visibility_timeout,
                removal_policy=removal,
            )
            fn = self._function(f"{kind}Confirm", handler, code, timeout, runtime, outbox)
            IdempotentQueueConsumer(
                self,
                f"{kind}Consumer",
                queue=queue,
                function=fn,
                table=table,
                batch_size=batch_size,
                removal_policy=removal,
            )
            CfnOutput(self, f"{kind}QueueUrl", value=queue.queue.queue_url)
            if events:
                self._order_events(fn, table, removal)
        if not kinds:
            fn = self._function("EventsConfirm", handler, code, timeout, runtime, outbox)
            if events:
                self._order_events(fn, table, removal)
            if topic:
                self._order_topic(fn, table, removal, consumer=not events)
            if direct:
                IdempotentEventConsumer(
                    self,
                    "OrderEvents",
                    function=fn,
                    table=table,
                    removal_policy=removal,
                    direct_invocations_async=True,
                )
                CfnOutput(self, "OrdersFunctionName", value=fn.function_name)
        CfnOutput(self, "OutboxTableName", value=outbox.table_name)

    def _function(
        self,
        id: str,
        handler: str,
        code: lambda_.Code,
        timeout: Duration,
        runtime: RuntimeLayer,
        outbox: dynamodb.Table,
    ) -> lambda_.Function:
        """An order function writing to the outbox."""
        fn = lambda_.Function(
            self,
            id,
            runtime=POWERTOOLS_RUNTIME,
            handler=handler,
            code=code,
            timeout=timeout,
            layers=runtime.layers,
            environment={ENV_OUTBOX_TABLE: outbox.table_name},
        )
        outbox.grant(fn, "dynamodb:PutItem")
        return fn

    def _order_events(self, fn: lambda_.Function, table: IdempotencyTable, removal: RemovalPolicy) -> None:
        """The asynchronous entry: a rule on a custom bus, and the function's event consumer (after the queue
        consumer, on the same table: its longer idempotency expiry is the function's)."""
        bus = events.EventBus(self, "OrdersBus")
        events.Rule(
            self,
            "OrderPlaced",
            event_bus=bus,
            event_pattern=events.EventPattern(source=[ORDER_EVENT_SOURCE], detail_type=[ORDER_EVENT_DETAIL_TYPE]),
            targets=[targets.LambdaFunction(fn)],
        )
        IdempotentEventConsumer(self, "OrderEvents", function=fn, table=table, removal_policy=removal)
        CfnOutput(self, "OrdersBusName", value=bus.event_bus_name)

    def _order_topic(
        self, fn: lambda_.Function, table: IdempotencyTable, removal: RemovalPolicy, *, consumer: bool
    ) -> None:
        """The asynchronous entry through SNS: a topic with the function's ``lambda`` subscription, and (``consumer``)
        the function's event consumer."""
        topic = sns.Topic(self, "OrdersTopic")
        topic.add_subscription(subscriptions.LambdaSubscription(fn))
        if consumer:
            IdempotentEventConsumer(self, "OrderEvents", function=fn, table=table, removal_policy=removal)
        CfnOutput(self, "OrdersTopicArn", value=topic.topic_arn)


if __name__ == "__main__":
    app = App()
    OrdersStack(app, "OrdersExample", handler="orders.lambda_handler", kinds=("Standard", "Fifo"))
    OrdersStack(app, "OrdersMessageIdControl", handler="orders.by_message_id_handler", kinds=("Standard", "Fifo"))
    OrdersStack(app, "OrdersGallery", handler="gallery.lambda_handler", kinds=("Standard", "Fifo"))
    OrdersStack(app, "OrdersEvents", handler="order_events.lambda_handler", kinds=("Standard",), events=True)
    OrdersStack(app, "OrdersEventsOnly", handler="order_events.lambda_handler", kinds=(), events=True)
    OrdersStack(app, "OrdersTopicOnly", handler="order_events.lambda_handler", kinds=(), topic=True)
    OrdersStack(app, "OrdersDirectOnly", handler="order_events.lambda_handler", kinds=(), direct=True)
    app.synth()
