"""Event-only stacks under the proof (issue 30, item 1): a stack with no queue runs. The orders example's
``OrdersEventsOnly`` (an EventBridge rule on a custom bus to the order function with its ``IdempotentEventConsumer``)
and ``OrdersTopicOnly`` (an SNS topic's ``lambda`` subscription to it), deployed once together. Each correct app
exits 0 with every key effected once, its one target discovered as asynchronous, the input lines naming no target;
the start-up line describes the target in its own terms. The stack with a queue is ``test_proof_async.py``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.profiles.chaos_run import run_chaos
from effectively_once_local.proof.stores import EffectStore

from .conftest import LocalAws

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples" / "orders"
STACKS = ("OrdersEventsOnly", "OrdersTopicOnly")
CONTEXT = {"function_timeout_seconds": "2", "max_receive_count": "2", "destroy_on_delete": "true"}
OUTBOX = EffectStore("table", "Outbox", "order_id")
KEYS = 12
CHAOS = ChaosConfig(resend=0.4, concurrent_duplicates=0.2, crash_after_write=0.5, async_duplicate=0.3, seed=5)


@pytest.fixture(scope="module")
def alone(local_aws: LocalAws, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cdk_out = local_aws.deploy(APP, list(STACKS), CONTEXT)
    tmp = tmp_path_factory.mktemp("alone")
    runs: dict[str, tuple[int, dict[str, Any], list[str]]] = {}

    def run(stack: str) -> tuple[int, dict[str, Any], list[str]]:
        if stack not in runs:
            path = tmp / f"{stack}.jsonl"
            rows = [{"order_id": f"{stack}-{i:03d}", "customer": f"c{i % 3}", "total": 100 + i} for i in range(KEYS)]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # bodies alone: one target, no queue named
            logged: list[str] = []
            opts = local_aws.chaos_options(
                app_dir=APP,
                stack=stack,
                cdk_out=cdk_out,
                run_dir=tmp / stack,
                input=path,
                key="order_id",
                effects=(OUTBOX,),
                chaos=CHAOS,
                redrive_rounds=2,
            )
            code, report = run_chaos(opts, log=logged.append)
            runs[stack] = (code, report, logged)
        return runs[stack]

    return run


@pytest.mark.parametrize(("stack", "source"), [("OrdersEventsOnly", "eventbridge"), ("OrdersTopicOnly", "sns")])
def test_a_stack_with_no_queue_runs_and_the_correct_app_passes(alone: Any, stack: str, source: str) -> None:
    code, report, logged = alone(stack)

    assert code == 0, " | ".join(report["verdict"]["reasons"])
    (target,) = report["run"]["mappings"].values()
    assert target["kind"] == "async" and target["max_retry_attempts"] == 2 and target["on_failure_queue"], target
    (name,) = target["sources"]
    assert ("OrderPlaced" if source == "eventbridge" else "OrdersTopic") in name, target
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == KEYS
    assert report["total"]["lost"] == 0 and report["total"]["duplicated"] == 0
    per_key = report["states"]["per_key"]
    assert len(per_key) == KEYS and all(row["deliveries"] >= 1 for row in per_key.values()), per_key
    assert report["async"]["events"] >= KEYS and report["async"]["invocations"] >= KEYS, report["async"]
    (line,) = [ln for ln in logged if "asynchronous, retries 2, maximum event age" in ln]
    assert "batch size" not in line and "maxReceiveCount" not in line, line
