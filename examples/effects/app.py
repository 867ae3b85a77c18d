#!/usr/bin/env python3
"""Every effect adapter with real stores, proven under kills (docs/effects.md, ``make proof``).

Stack:
  EffectsExample   a standard ``ProcessingQueue`` wired by ``IdempotentQueueConsumer`` to one function
                   (``effects_app.lambda_handler``, keyed on ``order_id``) whose one declared effect writes to every
                   store through its adapter: the ``Receipts`` table (partition key ``effect_key``), the ``Documents``
                   bucket (``documents/<order id>/...``), the ``Notices`` FIFO queue, the ``Announcements`` standard
                   queue, and outside the stack a SQL database and the HTTP provider (``src/effects_app.py``). The
                   variant ``naive`` (``--function-env EFFECTS_VARIANT=naive``) makes the same calls without the
                   adapters: the negative control.

Context (``-c name=value``): ``function_timeout_seconds`` (default 30), ``max_receive_count`` (default 5),
``batch_size`` (records per invocation, default 10), ``destroy_on_delete`` (``true``: tables, queues and the bucket
are deleted with the stack; default RETAIN; a bucket that still holds objects is not deleted).

The function's grants are the adapters' own (``grant_effect_table``, ``grant_effect_bucket``,
``grant_effect_queue``): PutItem and GetItem, PutObject and GetObject under ``documents/``, SendMessage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import App, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from effects_drivers import stage_drivers

from effectively_once import IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue, RuntimeLayer
from effectively_once.powertools_layer import POWERTOOLS_RUNTIME

HERE = Path(__file__).resolve().parent


class EffectsStack(Stack):
    """One queue, one function, every store an effect adapter writes to."""

    def __init__(self, scope: Construct, id: str, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        ctx = self.node.try_get_context
        timeout = Duration.seconds(int(ctx("function_timeout_seconds") or 30))
        destroy = str(ctx("destroy_on_delete") or "false").lower() == "true"
        removal = RemovalPolicy.DESTROY if destroy else RemovalPolicy.RETAIN
        receipts = dynamodb.Table(
            self,
            "Receipts",
            partition_key=dynamodb.Attribute(name="effect_key", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal,
        )
        documents = s3.Bucket(
            self,
            "Documents",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            removal_policy=removal,
        )
        # Named: CloudFormation would add ``.fifo`` to a generated name, the local AWS (moto) does not.
        notices = sqs.Queue(
            self,
            "Notices",
            queue_name=f"{self.stack_name}-notices.fifo",
            fifo=True,
            enforce_ssl=True,
            removal_policy=removal,
        )
        announcements = sqs.Queue(self, "Announcements", enforce_ssl=True, removal_policy=removal)
        orders = ProcessingQueue(
            self, "Orders", max_receive_count=int(ctx("max_receive_count") or 5), removal_policy=removal
        )
        runtime = RuntimeLayer(self, "Runtime", runtime=POWERTOOLS_RUNTIME)
        # psycopg, which the function imports for PostgreSQL: Lambda has it only if the function ships it.
        drivers = lambda_.LayerVersion(
            self,
            "Drivers",
            code=lambda_.Code.from_asset(
                str(stage_drivers(POWERTOOLS_RUNTIME, lambda_.Architecture.X86_64)), exclude=[".staged"]
            ),
            compatible_runtimes=[POWERTOOLS_RUNTIME],
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="psycopg 3 (binary) for the effects function",
        )
        fn = lambda_.Function(
            self,
            "Fulfil",
            runtime=POWERTOOLS_RUNTIME,
            handler="effects_app.lambda_handler",
            code=lambda_.Code.from_asset(str(HERE / "src"), exclude=["__pycache__", "*.pyc"]),
            timeout=timeout,
            architecture=lambda_.Architecture.X86_64,
            layers=[*runtime.layers, drivers],
            environment={
                "RECEIPTS_TABLE_NAME": receipts.table_name,
                "DOCUMENTS_BUCKET_NAME": documents.bucket_name,
                "NOTICES_QUEUE_URL": notices.queue_url,
                "ANNOUNCEMENTS_QUEUE_URL": announcements.queue_url,
            },
        )
        consumer = IdempotentQueueConsumer(
            self,
            "Consumer",
            queue=orders,
            function=fn,
            table=IdempotencyTable(self, "Idempotency", removal_policy=removal),
            batch_size=int(ctx("batch_size") or 10),
            removal_policy=removal,
        )
        consumer.grant_effect_table(receipts)
        consumer.grant_effect_bucket(documents, prefix="documents/")
        consumer.grant_effect_queue(notices)
        consumer.grant_effect_queue(announcements)
        CfnOutput(self, "OrdersQueueUrl", value=orders.queue.queue_url)
        CfnOutput(self, "ReceiptsTableName", value=receipts.table_name)
        CfnOutput(self, "DocumentsBucketName", value=documents.bucket_name)


if __name__ == "__main__":
    app = App()
    EffectsStack(app, "EffectsExample")
    app.synth()
