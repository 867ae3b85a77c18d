"""Issue 55, item 7, at synth: a consumer's function whose ``AWS_LAMBDA_CONCURRENCY_MODE`` runs requests side by side
in one process (Lambda Managed Instances' experimental ``thread`` and ``hybrid`` modes) fails synth, whenever the
variable was set; ``process``, unset, or a deploy-time value (left to the runtime's refusal at cold start)
synthesize."""

from __future__ import annotations

import pytest
from aws_cdk import App, CfnParameter

from effectively_once import IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue

from .helpers import inline_function, new_app, new_stack


def _consumer(mode: str | None, *, after: bool = False) -> App:
    app = new_app()
    stack = new_stack(app)
    function = inline_function(stack, "Function")
    if mode is not None and not after:
        function.add_environment("AWS_LAMBDA_CONCURRENCY_MODE", mode)
    IdempotentQueueConsumer(
        stack, "Consumer", queue=ProcessingQueue(stack, "Queue"), function=function, table=IdempotencyTable(stack, "T")
    )
    if mode is not None and after:
        function.add_environment("AWS_LAMBDA_CONCURRENCY_MODE", mode)
    return app


@pytest.mark.parametrize(("mode", "after"), [("thread", False), ("hybrid", True), ("Thread", False)])
def test_a_mode_that_shares_the_process_fails_synth(mode: str, after: bool) -> None:
    app = _consumer(mode, after=after)

    with pytest.raises(RuntimeError, match="Validation failed") as raised:
        app.synth()

    assert (
        "environment variable AWS_LAMBDA_CONCURRENCY_MODE of function Test/Function must be unset or 'process': "
        "in the thread and hybrid modes requests share one process"
    ) in str(raised.value)
    assert f"but '{mode}' was given" in str(raised.value)


@pytest.mark.parametrize("mode", [None, "process", "PROCESS"])
def test_the_process_mode_synthesizes(mode: str | None) -> None:
    _consumer(mode).synth()


def test_a_deploy_time_mode_is_left_to_the_runtime() -> None:
    app = new_app()
    stack = new_stack(app)
    function = inline_function(stack, "Function")
    function.add_environment("AWS_LAMBDA_CONCURRENCY_MODE", CfnParameter(stack, "Mode").value_as_string)
    IdempotentQueueConsumer(
        stack, "Consumer", queue=ProcessingQueue(stack, "Queue"), function=function, table=IdempotencyTable(stack, "T")
    )

    app.synth()
