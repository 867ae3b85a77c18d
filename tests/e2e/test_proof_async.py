"""The chaos proof of the asynchronous path (issue 23, ``make proof``): the orders example's ``OrdersEvents`` stack,
whose function is invoked by an EventBridge rule on a custom bus (with its ``IdempotentEventConsumer``: 2 retries, an
on-failure queue) and by its queue. The chaos command discovers the asynchronous target beside the SQS mapping,
sends input through the bus (every copy a new ``PutEvents``: a new event id), and the local runner plays Lambda's
asynchronous queue (retries after Lambda's scaled delays, duplicates without an error, on-failure records) with the
same kills after writes.

- the correct app (keyed on ``order_id``, ``envelope="auto"``) exits 0;
- the control keyed on the event's ``id`` exits 1 with duplicates;
- the app whose first three attempts fail for half the keys exits 0 too: each such event's on-failure record is
  redriven by the run and effected once.
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
STACK = "OrdersEvents"
CONTEXT = {"function_timeout_seconds": "2", "max_receive_count": "2", "destroy_on_delete": "true"}
OUTBOX = EffectStore("table", "Outbox", "order_id")


def _chaos(**fields: Any) -> ChaosConfig:
    return ChaosConfig(resend=0.4, concurrent_duplicates=0.2, seed=7, **fields)


def _input(path: Path, prefix: str, count: int, queued: int = 0) -> Path:
    """``count`` orders through the bus (``async``), then ``queued`` through the queue."""
    rows = [
        {"queue": "async", "body": {"order_id": f"{prefix}-{i:03d}", "customer": f"c{i % 3}", "total": 100 + i}}
        for i in range(count)
    ]
    rows += [
        {"queue": "StandardOrders", "body": {"order_id": f"{prefix}-q{i:03d}", "customer": "c9", "total": 5 + i}}
        for i in range(queued)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def events_run(local_aws: LocalAws, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cdk_out = local_aws.deploy(APP, [STACK], CONTEXT)
    tmp = tmp_path_factory.mktemp("async")
    runs: dict[str, tuple[int, dict[str, Any]]] = {}

    def run(name: str, variant: str, chaos: ChaosConfig, count: int = 16, queued: int = 0) -> tuple[int, dict]:
        if name not in runs:
            opts = local_aws.chaos_options(
                app_dir=APP,
                stack=STACK,
                cdk_out=cdk_out,
                run_dir=tmp / name,
                input=_input(tmp / f"{name}.jsonl", name, count, queued),
                key="order_id",
                effects=(OUTBOX,),
                chaos=chaos,
                function_env={"ORDER_EVENTS_VARIANT": variant},
                redrive_rounds=2,
            )
            runs[name] = run_chaos(opts, log=lambda _: None)
        return runs[name]

    return run


def _reasons(report: dict[str, Any]) -> str:
    return " | ".join(report["verdict"]["reasons"])


def test_the_correct_app_passes_through_the_bus_and_the_queue(events_run: Any) -> None:
    code, report = events_run("correct", "correct", _chaos(crash_after_write=0.5, async_duplicate=0.3), queued=6)

    assert code == 0, _reasons(report)
    kinds = {m["kind"] for m in report["run"]["mappings"].values()}
    assert kinds == {"async", "standard"}, "the asynchronous target is discovered beside the SQS mapping"
    (target,) = [m for m in report["run"]["mappings"].values() if m["kind"] == "async"]
    assert target["max_retry_attempts"] == 2 and target["on_failure_queue"], target
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == 22
    assert report["total"]["kills"]["after_write"] > 0, "the faults struck"


def test_a_key_on_the_events_id_is_caught(events_run: Any) -> None:
    code, report = events_run("event-id", "event_id", _chaos())

    assert code == 1
    assert report["total"]["duplicated"] > 0, _reasons(report)


def test_events_that_exhaust_their_retries_are_recorded_and_redriven(events_run: Any) -> None:
    code, report = events_run("exhaust", "exhaust", _chaos())

    assert code == 0, _reasons(report)
    assert report["total"]["redriven_then_effected"] > 0, "the on-failure records came back through the redrive"
    assert report["run"]["redrive_rounds"][0]["moved"] > 0
    # The asynchronous path in the report (issue 30, item 3): Lambda's retries, the records, the redrive's invocations.
    path = report["async"]
    assert path["retries"] > 0 and path["on_failure"]["RetriesExhausted"] > 0, path
    assert path["redrive_invocations"] >= report["run"]["redrive_rounds"][0]["moved"], path
    assert path["events"] >= 16 and path["invocations"] >= path["events"], path
