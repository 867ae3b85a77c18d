"""Event-only stacks under the proof (issue 30, items 1 and 2): a stack with no queue runs. The orders example's
``OrdersEventsOnly`` (an EventBridge rule on a custom bus to the order function with its ``IdempotentEventConsumer``),
``OrdersTopicOnly`` (an SNS topic's ``lambda`` subscription to it) and ``OrdersDirectOnly`` (nothing in the stack
invokes it: the run invokes it directly, ``InvocationType="Event"``), deployed once together. Each correct app
exits 0 with every valid key effected once, its one target discovered as asynchronous, the input lines naming no
target; the start-up line describes the target in its own terms. Its invalid orders are refused on first sight: the
runtime records each on the on-failure queue (condition ``PermanentError``), the run calls them invalid with their
reason, never stranded, and its redrive leaves them alone. The broken variant: the same app without the runtime's
on-failure queue (``ON_FAILURE_QUEUE_URL`` empty) raises them, Lambda's retries run out, and the run fails them as
stranded. The stack with a queue is ``test_proof_async.py``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack.chaos_run import run_chaos
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.proof.stores import EffectStore

from .conftest import LocalAws

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples" / "orders"
STACKS = ("OrdersEventsOnly", "OrdersTopicOnly", "OrdersDirectOnly")
CONTEXT = {"function_timeout_seconds": "2", "max_receive_count": "2", "destroy_on_delete": "true"}
OUTBOX = EffectStore("table", "Outbox", "order_id")
KEYS = 12
#: Orders the app refuses for good (``orders.check``: no customer, a negative total).
INVALID = 3
CHAOS = ChaosConfig(resend=0.4, concurrent_duplicates=0.2, crash_after_write=0.5, async_duplicate=0.3, seed=5)


@pytest.fixture(scope="module")
def alone(local_aws: LocalAws, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cdk_out = local_aws.deploy(APP, list(STACKS), CONTEXT)
    tmp = tmp_path_factory.mktemp("alone")
    runs: dict[str, tuple[int, dict[str, Any], list[str]]] = {}

    def run(stack: str, variant: str = "correct") -> tuple[int, dict[str, Any], list[str]]:
        if (stack, variant) not in runs:
            # Keys of their own per variant: the runs share the deployment's tables and on-failure queue.
            name = stack if variant == "correct" else f"{stack}-{variant}"
            path = tmp / f"{name}.jsonl"
            rows = [{"order_id": f"{name}-{i:03d}", "customer": f"c{i % 3}", "total": 100 + i} for i in range(KEYS)]
            rows += [_invalid(name, i) for i in range(INVALID)]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # bodies alone: one target, no queue named
            logged: list[str] = []
            opts = local_aws.chaos_options(
                app_dir=APP,
                stack=stack,
                cdk_out=cdk_out,
                run_dir=tmp / name,
                input=path,
                key="order_id",
                effects=(OUTBOX,),
                chaos=CHAOS,
                redrive_rounds=2,
                # The broken variant: the runtime has no on-failure queue, so it raises a refusal to Lambda.
                function_env={"ON_FAILURE_QUEUE_URL": ""} if variant == "raises" else {},
            )
            code, report = run_chaos(opts, log=logged.append)
            runs[stack, variant] = (code, report, logged)
        return runs[stack, variant]

    return run


def _invalid(name: str, i: int) -> dict[str, Any]:
    """An order ``orders.check`` refuses with a ``PermanentError``, keyed ``<name>-bad-<i>``."""
    order_id = f"{name}-bad-{i}"
    return {"order_id": order_id, "customer": "", "total": 5} if i % 2 else {"order_id": order_id, "total": -1}


@pytest.mark.parametrize(
    ("stack", "source"),
    [("OrdersEventsOnly", "eventbridge"), ("OrdersTopicOnly", "sns"), ("OrdersDirectOnly", "invoke")],
)
def test_a_stack_with_no_queue_runs_and_the_correct_app_passes(alone: Any, stack: str, source: str) -> None:
    code, report, logged = alone(stack)

    assert code == 0, " | ".join(report["verdict"]["reasons"])
    (target,) = report["run"]["mappings"].values()
    assert target["kind"] == "async" and target["max_retry_attempts"] == 2 and target["on_failure_queue"], target
    if source == "invoke":  # nothing in the stack invokes it: the run's direct Invoke (InvocationType Event)
        assert target["sources"] == [], target
    else:
        (name,) = target["sources"]
        assert ("OrderPlaced" if source == "eventbridge" else "OrdersTopic") in name, target
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == KEYS
    assert report["total"]["lost"] == 0 and report["total"]["duplicated"] == 0
    per_key = report["states"]["per_key"]
    assert len(per_key) == KEYS + INVALID and all(row["deliveries"] >= 1 for row in per_key.values()), per_key
    assert report["async"]["events"] >= KEYS and report["async"]["invocations"] >= KEYS, report["async"]
    (line,) = [ln for ln in logged if "asynchronous, retries 2, maximum event age" in ln]
    assert "batch size" not in line and "maxReceiveCount" not in line, line
    assert ("invoked by direct Invoke (Event)" in line) == (source == "invoke"), line


@pytest.mark.parametrize("stack", STACKS)
def test_invalid_events_are_refused_on_first_sight_and_called_invalid_never_stranded(alone: Any, stack: str) -> None:
    code, report, logged = alone(stack)

    assert code == 0, " | ".join(report["verdict"]["reasons"])
    per_key = report["states"]["per_key"]
    bad = {f"{stack}-bad-{i}" for i in range(INVALID)}
    assert {k: per_key[k]["state"] for k in bad} == dict.fromkeys(bad, "invalid_in_dlq")
    assert report["total"]["stranded"] == 0 and report["total"]["invalid_in_dlq"] == INVALID
    (on_failure,) = report["dlq"].values()
    # Every record on the on-failure queue is the runtime's own refusal, with its reason, left there by the redrive.
    assert on_failure["why"] == {"PermanentError": on_failure["messages"]} and on_failure["messages"] >= INVALID
    assert set(on_failure["keys"]) == bad
    assert report["async"]["on_failure"]["PermanentError"] == on_failure["messages"]
    assert all(row["valid_keys"] > 0 for row in report["run"]["redrive_rounds"]), "a refusal alone starts no redrive"


def test_the_broken_variant_that_raises_its_refusals_fails_them_as_stranded(alone: Any) -> None:
    code, report, _ = alone("OrdersEventsOnly", "raises")

    assert code == 1
    bad = sorted(f"OrdersEventsOnly-raises-bad-{i}" for i in range(INVALID))
    assert report["states"]["keys"]["stranded"] == bad, report["states"]["keys"]
    assert report["async"]["on_failure"]["RetriesExhausted"] >= INVALID  # Lambda's retries ran out on each
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == KEYS
