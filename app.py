#!/usr/bin/env python3
"""Sandbox app: stack ``PaymentsSandbox`` with a standard and a FIFO ``PaymentProcessor``.

Context (``cdk synth -c name=value``):
  destroy_on_delete         ``true``: every stateful resource (queues, DLQs, the on-failure queue, tables, log
                            groups) is DESTROYed with the stack (default ``false``: all RETAINed)
  function_timeout_seconds  the payment function's timeout (default 30)
  max_receive_count         receives before the DLQ (default 5)

Outputs (ids are stable; for people and scripts: the local deploy tooling reads the deployed resources
themselves): ``<Kind>QueueUrl``, ``<Kind>DeadLetterQueueUrl``,
``<Kind>IdempotencyTableName``, ``<Kind>LedgerTableName``, ``<Kind>FunctionName`` for Kind = Standard, Fifo;
``StandardOnFailureQueueUrl`` (the standard processor's asynchronous-invocation on-failure queue).
"""

from __future__ import annotations

import os
from typing import Any

from aws_cdk import App, CfnOutput, Duration, Environment, RemovalPolicy, Stack
from constructs import Construct

from effectively_once import (
    AsyncInvocationOptions,
    IdempotentQueueConsumerOptions,
    PaymentProcessor,
    ProcessingQueueOptions,
)

STACK_NAME = "PaymentsSandbox"


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


class PaymentsSandboxStack(Stack):
    """The sandbox: one standard and one FIFO payment processor, with outputs for the deploy tooling."""

    def __init__(self, scope: Construct, id: str = STACK_NAME, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        node = self.node
        destroy = _flag(node.try_get_context("destroy_on_delete") or False)
        timeout = int(node.try_get_context("function_timeout_seconds") or 30)
        max_receive_count = int(node.try_get_context("max_receive_count") or 5)
        removal_policy = RemovalPolicy.DESTROY if destroy else RemovalPolicy.RETAIN

        self.processors: dict[str, PaymentProcessor] = {}
        for kind, fifo in (("Standard", False), ("Fifo", True)):
            processor = PaymentProcessor(
                self,
                kind,
                function_timeout=Duration.seconds(timeout),
                removal_policy=removal_policy,
                queue_options=ProcessingQueueOptions(fifo=fifo, max_receive_count=max_receive_count),
                # The standard processor also takes direct (async) invocations: 2 retries, then a standard
                # on-failure queue. AWS accepts no FIFO queue as an async destination.
                consumer_options=IdempotentQueueConsumerOptions(
                    async_invocation=None if fifo else AsyncInvocationOptions()
                ),
            )
            self.processors[kind] = processor
            CfnOutput(self, f"{kind}QueueUrl", value=processor.queue.queue.queue_url)
            CfnOutput(self, f"{kind}DeadLetterQueueUrl", value=processor.queue.dead_letter_queue.queue_url)
            CfnOutput(self, f"{kind}IdempotencyTableName", value=processor.table.table.table_name)
            CfnOutput(self, f"{kind}LedgerTableName", value=processor.ledger.table_name)
            CfnOutput(self, f"{kind}FunctionName", value=processor.function.function_name)
            if processor.consumer.on_failure_queue is not None:
                CfnOutput(self, f"{kind}OnFailureQueueUrl", value=processor.consumer.on_failure_queue.queue_url)


if __name__ == "__main__":
    app = App()
    PaymentsSandboxStack(
        app,
        STACK_NAME,
        env=Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=os.environ.get("CDK_DEFAULT_REGION"),
        ),
    )
    app.synth()
