"""Issue 55, item 7: Lambda Managed Instances' experimental thread and hybrid modes run requests side by side in one
process, and the runtime holds one Lambda context per process (the state's ``IdempotencyConfig``): the last request's
deadline would become every in-flight record's in-progress expiry. The handler refuses such a mode at cold start
(``Consumer.warm()`` in the init phase, else the first invocation) with a ``RuntimeError`` saying why; the default
process mode, and no mode at all, run as ever."""

from __future__ import annotations

import pytest

from effectively_once_runtime import ConcurrencyModeRefused, names

from .conftest import FakeLambdaContext, failures, sqs_record
from .orders_domain import Orders, order


@pytest.mark.parametrize("mode", ["thread", "hybrid", "THREAD", " hybrid ", "threads"])
def test_a_mode_that_shares_the_process_is_refused_at_cold_start(
    orders: Orders, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv(names.ENV_CONCURRENCY_MODE, mode)

    with pytest.raises(ConcurrencyModeRefused) as refused:
        orders.consumer.warm()
    with pytest.raises(RuntimeError, match=names.ENV_CONCURRENCY_MODE):
        orders.invoke([sqs_record(order("o-1"))])

    message = str(refused.value)
    assert repr(mode) in message and "process" in message and "in-progress expiry" in message
    assert orders.confirmed == [] and orders.stored_keys() == [], "nothing ran, nothing was claimed"


@pytest.mark.parametrize("mode", [None, "", "process", "Process"])
def test_the_process_mode_runs(orders: Orders, monkeypatch: pytest.MonkeyPatch, mode: str | None) -> None:
    if mode is None:
        monkeypatch.delenv(names.ENV_CONCURRENCY_MODE, raising=False)
    else:
        monkeypatch.setenv(names.ENV_CONCURRENCY_MODE, mode)

    assert orders.consumer.warm() is not None
    response = orders.invoke([sqs_record(order("o-2"))], FakeLambdaContext())

    assert failures(response) == set() and orders.confirmed == ["o-2"]


def test_an_environment_given_to_setup_is_read_too(orders: Orders) -> None:
    with pytest.raises(ConcurrencyModeRefused, match="'thread'"):
        orders.consumer.setup(env={names.ENV_TABLE_NAME: "idempotency", names.ENV_CONCURRENCY_MODE: "thread"})
