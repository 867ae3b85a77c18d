"""A chaos run that cannot work is refused before anything is deployed, in the seconds of a ``cdk synth`` (issue 30,
item 1): a ``--stack`` the app does not have, and input lines that name no target of the stack or leave out the
``queue`` a stack of several targets needs. Each refusal is one line naming what exists; the run's ``cdk.log``
shows the synth and no bootstrap or deploy. The orders example, a fresh local AWS per run (no deploy to share)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack.chaos_context import ChaosOptions
from effectively_once_local.any_stack.chaos_run import run_chaos
from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.traffic.chaos_input import InputFileError

pytestmark = pytest.mark.e2e
APP = Path(__file__).resolve().parents[2] / "examples" / "orders"
ORDER = {"order_id": "o-1", "customer": "c", "total": 5}


def _refused(tmp_path: Path, stack: str, line: dict[str, Any]) -> tuple[Exception, str]:
    (tmp_path / "in.jsonl").write_text(json.dumps(line) + "\n")
    opts = ChaosOptions(
        app_dir=APP,
        stack=stack,
        input=tmp_path / "in.jsonl",
        key="order_id",
        run_dir=tmp_path / "run",
        report_path=tmp_path / "report.json",
        quiet=True,
    )
    with pytest.raises((DeployError, InputFileError)) as refused:
        run_chaos(opts, log=lambda _: None)
    return refused.value, (tmp_path / "run" / "cdk.log").read_text()


@pytest.mark.parametrize(
    ("stack", "line", "error"),
    [
        ("OrdersNowhere", ORDER, r"^stack OrdersNowhere is not in the app in .*: its stacks are OrdersDirectOnly, "),
        ("OrdersExample", {"body": ORDER, "queue": "payments"}, r"^queue 'payments' matches no queue of the stack"),
        ("OrdersExample", ORDER, r"^the stack has 2 targets .*each line must name its queue \(FifoOrders"),
    ],
    ids=["unknown-stack", "unknown-target", "no-queue-field"],
)
def test_refused_after_the_synth_before_any_deploy(
    tmp_path: Path, stack: str, line: dict[str, Any], error: str
) -> None:
    refused, log = _refused(tmp_path, stack, line)

    assert "\n" not in str(refused)
    assert re.search(error, str(refused)), str(refused)
    assert " synth --quiet " in log
    assert " bootstrap " not in log and " deploy " not in log
