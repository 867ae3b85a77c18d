#!/usr/bin/env python3
"""Baseline for ``synth_ratio``: the resources of ``PaymentsSandbox`` written with plain aws-cdk-lib L2 constructs.

Same resources, same settings (per kind Standard and Fifo: queue + DLQ with TLS-only policies, idempotency table
with TTL, ledger table, log group, role, function with the Powertools and runtime layers, event source mapping with
ReportBatchItemFailures, five alarms, three Logs Insights query definitions, a dashboard; the standard kind also an
on-failure queue and an event invoke config), the same outputs and the same validation plugins (none beyond
CDK's built-in CloudFormation validation, which ``CDK_VALIDATION=false`` switches off in both apps).
No validation of props, no annotations, no helper layer: what a hand-written stack costs to synthesize.

Run like the sandbox: ``python benchmarks/baseline_app.py`` with ``CDK_OUTDIR`` set.
"""

from __future__ import annotations

import os
from pathlib import Path

from aws_cdk import App, CfnOutput, Duration, Environment, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from effectively_once.observability import (
    DUPLICATE_DELIVERIES_QUERY,
    EFFECTS_PER_KEY_QUERY,
    EMF_METRICS,
    IDEMPOTENCY_REJECTIONS_QUERY,
)
from effectively_once.powertools_layer import POWERTOOLS_VERSION
from effectively_once.runtime_layer import stage_runtime_layer

LAMBDA_SRC = Path(__file__).resolve().parent.parent / "lambda_src"
# The sandbox's layer: Powertools' public SSM parameter for the pinned release, resolved at deploy time (the pin
# is read from the library, so the two apps cannot drift apart).
LAYER_PARAMETER = f"/aws/service/powertools/python/arm64/python3.14/{POWERTOOLS_VERSION}"


class BaselineStack(Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        for kind, fifo in (("Standard", False), ("Fifo", True)):
            self._processor(kind, fifo)

    def _failure_queue(self, id: str, fifo: bool) -> sqs.Queue:
        return sqs.Queue(
            self,
            id,
            fifo=fifo or None,
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _processor(self, kind: str, fifo: bool) -> None:
        timeout = Duration.seconds(30)
        dlq = self._failure_queue(f"{kind}DeadLetterQueue", fifo)
        queue = sqs.Queue(
            self,
            f"{kind}Queue",
            fifo=fifo or None,
            retention_period=Duration.days(4),
            visibility_timeout=Duration.seconds(180),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=5),
            removal_policy=RemovalPolicy.RETAIN,
        )
        table = dynamodb.Table(
            self,
            f"{kind}IdempotencyTable",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expiration",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        ledger = dynamodb.Table(
            self,
            f"{kind}Ledger",
            partition_key=dynamodb.Attribute(name="charge_id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        log_group = logs.LogGroup(
            self, f"{kind}LogGroup", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.RETAIN
        )
        on_failure = None
        if not fifo:
            on_failure = self._failure_queue(f"{kind}OnFailureQueue", False)
        function = lambda_.Function(
            self,
            f"{kind}Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="payments.handler.lambda_handler",
            code=lambda_.Code.from_asset(
                str(LAMBDA_SRC), exclude=["__pycache__", "*.pyc", "**/__pycache__", "effectively_once_runtime"]
            ),
            memory_size=256,
            timeout=timeout,
            log_group=log_group,
            layers=[
                lambda_.LayerVersion.from_layer_version_arn(
                    self,
                    f"{kind}PowertoolsLayer",
                    ssm.StringParameter.value_for_string_parameter(self, LAYER_PARAMETER),
                ),
                # The sandbox's runtime layer: the same staged folder (staging is not a construct).
                lambda_.LayerVersion(
                    self,
                    f"{kind}RuntimeLayer",
                    code=lambda_.Code.from_asset(str(stage_runtime_layer())),
                    compatible_architectures=[lambda_.Architecture.X86_64, lambda_.Architecture.ARM_64],
                    compatible_runtimes=[
                        lambda_.Runtime.PYTHON_3_11,
                        lambda_.Runtime.PYTHON_3_12,
                        lambda_.Runtime.PYTHON_3_13,
                        lambda_.Runtime.PYTHON_3_14,
                    ],
                ),
            ],
            environment={
                "IDEMPOTENCY_TABLE_NAME": table.table_arn,
                "LEDGER_TABLE_NAME": ledger.table_name,
                "IDEMPOTENCY_EXPIRY_SECONDS": "345600",
                "POWERTOOLS_SERVICE_NAME": "payments",
                "POWERTOOLS_METRICS_NAMESPACE": "EffectivelyOnce",
            },
            description=None,
        )
        table.grant(function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
        ledger.grant(function, "dynamodb:GetItem", "dynamodb:PutItem")
        function.add_event_source(sources.SqsEventSource(queue, batch_size=10, report_batch_item_failures=True))
        if on_failure is not None:
            function.configure_async_invoke(
                retry_attempts=2, max_event_age=Duration.hours(6), on_failure=destinations.SqsDestination(on_failure)
            )

        def alarm(name: str, metric: cloudwatch.Metric, threshold: float, what: str, periods: int = 1) -> None:
            cloudwatch.Alarm(
                self,
                f"{kind}{name}Alarm",
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                datapoints_to_alarm=periods if periods > 1 else None,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"baseline: {what}",
            )

        minute = Duration.minutes(1)
        dlq_depth = dlq.metric_approximate_number_of_messages_visible(period=minute, statistic="Maximum")
        depth = queue.metric_approximate_number_of_messages_visible(period=minute, statistic="Maximum")
        oldest = queue.metric_approximate_age_of_oldest_message(period=minute, statistic="Maximum")
        errors = function.metric_errors(period=minute, statistic="Sum")
        throttles = function.metric_throttles(period=minute, statistic="Sum")
        alarm("DlqDepth", dlq_depth, 0, "messages in the dead-letter queue")
        alarm("OldestMessageAge", oldest, 300, "oldest message age")
        alarm("Errors", errors, 0, "function errors")
        alarm("Throttles", throttles, 0, "function throttles")
        failed_records = cloudwatch.Metric(
            namespace="EffectivelyOnce",
            metric_name="FailedRecords",
            dimensions_map={"service": "payments"},
            period=minute,
            statistic="Sum",
        )
        alarm("FailedRecords", failed_records, 10, "records failing for 5 minutes", periods=5)
        for name, query in (
            ("DuplicateDeliveries", DUPLICATE_DELIVERIES_QUERY),
            ("IdempotencyRejections", IDEMPOTENCY_REJECTIONS_QUERY),
            ("EffectsPerKey", EFFECTS_PER_KEY_QUERY),
        ):
            logs.QueryDefinition(
                self,
                f"{kind}{name}Query",
                query_definition_name=f"baseline/{kind}/{name}",
                query_string=_raw_query(query),
                log_groups=[log_group],
            )
        emf = [
            cloudwatch.Metric(
                namespace="EffectivelyOnce",
                metric_name=name,
                dimensions_map={"service": "payments"},
                period=minute,
                statistic="Sum",
            )
            for name in EMF_METRICS
        ]
        dashboard = cloudwatch.Dashboard(self, f"{kind}Dashboard")
        dashboard.add_widgets(cloudwatch.GraphWidget(title="Payments (EMF, sum per minute)", left=emf, width=24))
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Queue depth", left=[depth], width=6),
            cloudwatch.GraphWidget(title="DLQ depth", left=[dlq_depth], width=6),
            cloudwatch.GraphWidget(title="Oldest message age (s)", left=[oldest], width=6),
            cloudwatch.GraphWidget(title="Lambda errors and throttles", left=[errors, throttles], width=6),
        )
        CfnOutput(self, f"{kind}QueueUrl", value=queue.queue_url)
        CfnOutput(self, f"{kind}DeadLetterQueueUrl", value=dlq.queue_url)
        CfnOutput(self, f"{kind}IdempotencyTableName", value=table.table_name)
        CfnOutput(self, f"{kind}LedgerTableName", value=ledger.table_name)
        CfnOutput(self, f"{kind}FunctionName", value=function.function_name)
        if on_failure is not None:
            CfnOutput(self, f"{kind}OnFailureQueueUrl", value=on_failure.queue_url)


def _raw_query(text: str) -> logs.QueryString:
    """A ``QueryString`` holding the query text as is (the L2 builds it from statements; we hand it whole lines)."""
    lines = text.split("\n")
    fields = lines[0].removeprefix("fields ")
    rest = [line.removeprefix("| ") for line in lines[1:]]
    kwargs: dict[str, object] = {"fields": [fields]}
    filters = [line.removeprefix("filter ") for line in rest if line.startswith("filter ")]
    stats = [line.removeprefix("stats ") for line in rest if line.startswith("stats ")]
    sorts = [line.removeprefix("sort ") for line in rest if line.startswith("sort ")]
    limits = [line.removeprefix("limit ") for line in rest if line.startswith("limit ")]
    if filters:
        kwargs["filter_statements"] = filters
    if stats:
        kwargs["stats_statements"] = stats
    if sorts:
        kwargs["sort"] = sorts[0]
    if limits:
        kwargs["limit"] = int(limits[0])
    return logs.QueryString(**kwargs)  # type: ignore[arg-type]


if __name__ == "__main__":
    app = App()
    BaselineStack(
        app,
        "PaymentsBaseline",
        env=Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")),
    )
    app.synth()
