#!/usr/bin/env python3
"""A plain SQS-to-Lambda-to-DynamoDB app, as the public CDK Python samples write it: no effectively_once construct,
no runtime, no Powertools. The chaos proof's subject for apps not built on the runtime (docs/chaos.md, issue 43).

Stack ``PlainOrders``: a standard queue with a dead-letter queue (maxReceiveCount 3), an ``Orders`` table
(partition key ``id``), a ``Shipments`` queue downstream and one function (``plain_orders.handler``) fed by an SQS
event source with a batching window, writing one item per message. ``PLAIN_VARIANT`` (the function's environment;
the proof sets it per run with ``--function-env``) picks how:

- ``upsert`` (default): the item's ``id`` is the order id: a redelivery rewrites it. Must pass.
- ``new_item``: a fresh ``uuid4()`` id per message, the order id as an attribute (a common tutorial pattern): every
  redelivery adds a row. Must fail: duplicated.
- ``batch_writer`` and ``batch_drop``: one batch write per batch, through boto3's ``batch_writer`` (passes under
  partial batch writes) or a ``batch_write_item`` that ignores ``UnprocessedItems`` and swallows every exception
  (fails under partial batch writes and throttling).
- ``send_retry`` and ``send_drop``: no item; each order's shipment sent to ``Shipments`` in one
  ``send_message_batch`` per batch, the failed entries sent again (passes under per-entry failures) or ignored
  (fails under them).

Context (``-c name=value``): ``function_timeout_seconds`` (default 30), ``visibility_timeout_seconds`` (default 6 x
the function timeout), ``batching_window_seconds`` (default 2), ``batch_size`` (default 10), ``destroy_on_delete``
(``true``: the table and queues are deleted with the stack; default RETAIN), ``http_api`` (``true``: an HTTP API in
front, as the samples with an API have; the local AWS skips its type: docs/local-aws-limits.md) and
``http_api_parameter`` (``true``: also an SSM parameter holding the API's URL, whose reference to the skipped API
fails a local deploy).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

HERE = Path(__file__).resolve().parent


class PlainOrdersStack(Stack):
    """The queue, its DLQ, the table and the function (the module docstring)."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        ctx = self.node.try_get_context
        timeout = int(ctx("function_timeout_seconds") or 30)
        visibility = int(ctx("visibility_timeout_seconds") or 6 * timeout)
        removal = (
            RemovalPolicy.DESTROY if str(ctx("destroy_on_delete") or "").lower() == "true" else RemovalPolicy.RETAIN
        )
        dlq = sqs.Queue(self, "DeadLetterQueue", retention_period=Duration.days(14), removal_policy=removal)
        queue = sqs.Queue(
            self,
            "Orders",
            visibility_timeout=Duration.seconds(visibility),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=3),
            removal_policy=removal,
        )
        shipments = sqs.Queue(self, "Shipments", removal_policy=removal)
        table = dynamodb.Table(
            self,
            "OrdersTable",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            removal_policy=removal,
        )
        fn = lambda_.Function(
            self,
            "Handler",
            runtime=lambda_.Runtime.PYTHON_3_12,
            handler="plain_orders.handler",
            code=lambda_.Code.from_asset(str(HERE / "src"), exclude=["__pycache__", "*.pyc"]),
            timeout=Duration.seconds(timeout),
            environment={
                "TABLE_NAME": table.table_name,
                "SHIPMENTS_QUEUE_URL": shipments.queue_url,
                "PLAIN_VARIANT": "upsert",
            },
        )
        table.grant_write_data(fn)
        shipments.grant_send_messages(fn)
        fn.add_event_source(
            sources.SqsEventSource(
                queue,
                batch_size=int(ctx("batch_size") or 10),
                max_batching_window=Duration.seconds(int(ctx("batching_window_seconds") or 2)),
            )
        )
        CfnOutput(self, "QueueUrl", value=queue.queue_url)
        CfnOutput(self, "TableName", value=table.table_name)
        if str(ctx("http_api") or "").lower() == "true":
            api = apigwv2.HttpApi(self, "HttpApi", description="orders intake (a local run leaves it out)")
            if str(ctx("http_api_parameter") or "").lower() == "true":
                ssm.StringParameter(self, "ApiUrl", string_value=api.api_endpoint)


if __name__ == "__main__":
    app = App()
    PlainOrdersStack(app, "PlainOrders")
    app.synth()
