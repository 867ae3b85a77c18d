"""The chaos proof outside payments: the orders example (examples/orders) under chaos on a local AWS.

The session's local AWS and one `cdk deploy` of each stack into it (``local_aws``, tests/e2e/conftest.py), then one
``run_chaos`` per stack: OrdersExample (standard + FIFO), the one e2e chaos run of `make test`, sized for its budget
(about two minutes on 2 cores: 60 orders per queue, a 2 s function timeout); OrdersMessageIdControl (keyed on the SQS
messageId), the negative control, in `make proof`; and a run of 5 orders without faults under a wrong
``--effect-key``, which must stop as a usage error rather than report the orders lost.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack.chaos_run import run_chaos
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.proof.stores import EffectStoreError

from .conftest import LocalAws

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples" / "orders"
# maxReceiveCount 5 (the default): with this many kills, fewer receives park valid orders in the DLQ (not lost, but
# not confirmed either), which would weaken the proof.
CONTEXT = {"function_timeout_seconds": "2", "max_receive_count": "5", "destroy_on_delete": "true"}
# Kills are drawn per invocation and only strike where the invocation reaches an effect line; with 60 orders per
# queue in batches of up to 10, about 15 invocations do: 35 % makes a run without such a kill very unlikely (~0.2 %);
# a kill after completion can strike any of the 30-odd invocations (15 %: ~0.8 %).
CHAOS = ChaosConfig(
    resend=0.3, concurrent_duplicates=0.1, crash_after_charge=0.35, crash_after_complete=0.15, timeout=0.03, seed=11
)


def orders(path: Path, count: int, queues: tuple[str, ...]) -> Path:
    rng = random.Random(3)
    rows: list[dict[str, Any]] = []
    for i in range(count * len(queues)):
        queue = queues[i % len(queues)]
        customer = f"c{rng.randrange(8)}"
        rows.append(
            {
                "queue": queue,
                "group": customer,
                "body": {"order_id": f"o-{i:04d}", "customer": customer, "total": rng.randrange(1, 9999)},
            }
        )
    rows.append(
        {"queue": queues[0], "body": {"order_id": "o-refused", "customer": "c1", "total": -1}}
    )  # PermanentError
    rows.append({"queue": queues[0], "body": "not json"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, local_aws: LocalAws) -> Any:
    """``runs(stack)``: that stack deployed into the session's local AWS and run under chaos, once per module."""
    tmp = tmp_path_factory.mktemp("chaos")
    out: dict[str, tuple[int, dict[str, Any]]] = {}
    queues = {"OrdersExample": ("standard", "fifo"), "OrdersMessageIdControl": ("standard",)}

    def run(stack: str) -> tuple[int, dict[str, Any]]:
        if stack not in out:
            opts = local_aws.chaos_options(
                app_dir=APP,
                stack=stack,
                cdk_out=local_aws.deploy(APP, [stack], CONTEXT),
                run_dir=tmp / stack,
                input=orders(tmp / f"{stack}.jsonl", 60, queues[stack]),
                key="order_id",
                effect_table="Outbox",
                effect_key="order_id",
                chaos=CHAOS,
                concurrency=2,
            )
            out[stack] = run_chaos(opts, log=lambda _: None)
            assert "AWS_ENDPOINT_URL" not in os.environ, "a run leaves this process's environment as it was"
        return out[stack]

    return run


def test_orders_under_chaos_lose_nothing_and_duplicate_nothing(runs: Any) -> None:
    code, report = runs("OrdersExample")
    total = report["total"]

    assert code == 0, report["verdict"]
    assert (total["lost"], total["duplicated"], total["unexpected"], total["unexplained_replays"]) == (0, 0, 0, 0)
    assert total["keys_sent"] == 121  # 120 orders and o-refused, which the handler refuses: it ends in the DLQ
    # Every valid order is confirmed once or parked in a DLQ after maxReceiveCount kills (not lost: redrive it).
    assert total["effects"] + total["dead_lettered_keys"] >= total["keys_sent"]
    assert total["effects"] >= 0.9 * 120, "most orders were confirmed, not parked"


def test_every_mapping_of_the_stack_ran_and_the_chaos_happened(runs: Any) -> None:
    report = runs("OrdersExample")[1]
    total = report["total"]

    assert sorted(m["fifo"] for m in report["run"]["mappings"].values()) == [False, True]
    assert total["messages_sent"] > total["keys_sent"] + 1, "resends and duplicates were sent"
    assert total["kills"]["after_effect"] > 0 and total["kills"]["after_complete"] > 0
    # Every replayed effect was answered by the outbox's conditional put, after a kill that explains it.
    assert total["effect_log_lines"] >= total["effects"]
    assert len(report["keys"]["replayed_after_kill"]) == total["replayed_after_kill"]


@pytest.mark.proof  # the long runs: `make test` runs the orders example once, `make proof` its control too
def test_handler_keyed_on_the_message_id_is_caught(runs: Any) -> None:
    code, report = runs("OrdersMessageIdControl")
    total = report["total"]

    assert code == 1
    assert total["duplicated"] > 0, "a resend is a new message id: the outbox confirms the order twice"
    assert any("duplicated" in reason for reason in report["verdict"]["reasons"])


def test_a_wrong_effect_key_is_a_usage_error_not_lost_orders(local_aws: LocalAws, tmp_path: Path) -> None:
    """Issue 57, item 2: the outbox holds the run's confirmations under ``order_id``; read under ``orderId`` it held
    none, and the run blamed the app (``FAIL: 5 lines vanished``, ``lost 5``) while every order had its effect line.
    The run says the store or its key is probably wrong, with the outbox's attributes (the command exits 2)."""
    bodies = [{"order_id": f"wrong-key-{i}", "customer": "c1", "total": 5} for i in range(5)]
    rows = [{"queue": "standard", "body": body} for body in bodies]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    opts = local_aws.chaos_options(
        app_dir=APP,
        stack="OrdersExample",
        cdk_out=local_aws.deploy(APP, ["OrdersExample"], CONTEXT),
        run_dir=tmp_path / "run",
        input=tmp_path / "in.jsonl",
        key="order_id",
        effect_table="Outbox",
        effect_key="orderId",
        chaos=ChaosConfig(seed=1),
        concurrency=1,
    )
    with pytest.raises(EffectStoreError) as raised:
        run_chaos(opts, log=lambda _: None)

    error = str(raised.value)
    assert " holds 5 new items, none with attribute 'orderId' matching a key of the 5 effect lines; " in error, error
    assert "its items have attributes " in error and "order_id" in error, "the attribute the outbox does have"
    assert error.endswith("): --effect-table or --effect-key is probably wrong"), error
