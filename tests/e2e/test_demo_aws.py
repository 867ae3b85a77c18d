"""`make demo-aws`'s `produce` and `report` steps, run for real against a stack deployed into a local AWS.

Against AWS, `make demo-aws` deploys PaymentsSandbox, then runs `produce` (the payments go to the deployed queues)
and `report` (waits for the queues to drain, then reads the ledgers and DLQs); the Lambda functions run in AWS. Here
the stack is deployed with the real CDK CLI into a fresh moto server on loopback, the local event source mapping
runner stands in for Lambda (one poller process per queue, polling while `produce` sends and `report` waits, as
Lambda would), and the two steps are the Makefile's own command lines, run as subprocesses whose environment points
the default AWS credential chain at the local AWS: the same code path as against an account.

A small payments file (30 payments and the six poison messages) and a function timeout of 2 s with
maxReceiveCount 2 keep the run near a minute, most of it the deploy.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.aws.discovery import disable
from effectively_once_local.aws.server import aws_env
from effectively_once_local.payments.payments_input import generate_sample
from effectively_once_local.payments.payments_view import discover
from effectively_once_local.proof.attribution import emf_sum
from effectively_once_local.runner.mapping_runner import PollerPool, PollerSpec

from .conftest import LocalAws

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]
STACK = "PaymentsSandbox"
PAYMENTS = 30


def demo_aws_steps() -> dict[str, list[str]]:
    """The `produce` and `report` command lines of the Makefile's `demo-aws` recipe, `$(PY)` as this interpreter."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^demo-aws:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "Makefile has no demo-aws recipe"
    steps = {}
    for line in recipe.group(1).splitlines():
        words = shlex.split(line.strip())
        if words[:1] == ["$(PY)"]:
            steps[words[3]] = [sys.executable, *words[1:]]
    assert set(steps) == {"produce", "report"}, recipe.group(1)
    return steps


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory, local_aws: LocalAws) -> Iterator[tuple[dict[str, str], Path]]:
    """PaymentsSandbox deployed into the session's local AWS, pollers running; yields (environment for the steps,
    run dir)."""
    run = tmp_path_factory.mktemp("demo-aws")
    with pytest.MonkeyPatch.context() as mp:
        context = {"function_timeout_seconds": "2", "max_receive_count": "2", "destroy_on_delete": "true"}
        local_aws.deploy(REPO, [STACK], context)
        env = aws_env(local_aws.endpoint)
        for name, value in env.items():
            mp.setenv(name, value)
        import boto3

        session = boto3.session.Session()
        pipelines = discover(session, STACK)
        disable(session, [p.deployed for p in pipelines.values()])
        handler_root = str(REPO / "lambda_src")
        pool = PollerPool(
            [
                (PollerSpec(mapping=p.mapping, run_dir=str(run), handler_root=handler_root, aws_env=env), 1)
                for p in pipelines.values()
            ]
        )
        pool.start()
        # A poller killed at its deadline (a slow machine) is replaced, as Lambda starts a new environment.
        stopping = threading.Event()
        supervisor = threading.Thread(target=_supervise, args=(pool, stopping), daemon=True)
        supervisor.start()
        try:
            yield dict(os.environ), run
        finally:
            stopping.set()
            supervisor.join()
            pool.stop()


def _supervise(pool: PollerPool, stopping: threading.Event) -> None:
    while not stopping.wait(1.0):
        pool.supervise()


@pytest.fixture(scope="module")
def demo_aws(sandbox: tuple[dict[str, str], Path]) -> dict[str, Any]:
    env, run = sandbox
    payments = run / "payments.jsonl"
    payments.write_text("".join(json.dumps(r) + "\n" for r in generate_sample(count=PAYMENTS, accounts=6, seed=11)))
    report_path = run / "aws-report.json"
    steps = demo_aws_steps()
    produced = subprocess.run(
        [*steps["produce"], "--payments", str(payments)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # The wait is the default one, derived from the deployed queues; moto's counts are exact, so a short settle.
    report_args = ["--payments", str(payments), "--report", str(report_path), "--settle", "3"]
    reported = subprocess.run(
        [*steps["report"], *report_args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    first = json.loads(report_path.read_text()) if report_path.exists() else None
    # A user runs the report again: it must find the same (the first one left the DLQs as it found them).
    again = subprocess.run(
        [*steps["report"], *report_args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    output = "".join(
        f"$ {name}\n{proc.stdout}{proc.stderr}"
        for name, proc in (("produce", produced), ("report", reported), ("report again", again))
    )
    return {
        "produce": produced,
        "report": reported,
        "again": again,
        "output": output,
        "json": first,
        "json_again": json.loads(report_path.read_text()) if report_path.exists() else None,
        "run": run,
    }


def test_produce_sends_every_payment_and_the_duplicates(demo_aws: dict[str, Any]) -> None:
    produced = demo_aws["produce"]

    assert produced.returncode == 0, demo_aws["output"]
    match = re.search(r"sent (\d+) messages: fifo (\d+), standard (\d+)", produced.stdout)
    assert match, demo_aws["output"]
    sent, fifo, standard = map(int, match.groups())
    assert sent == fifo + standard
    assert fifo > 0 and standard > 0
    assert sent > PAYMENTS + 6, "the default resends and concurrent duplicates must be sent too"


def test_report_finds_nothing_lost_and_nothing_double_charged(demo_aws: dict[str, Any]) -> None:
    report, output = demo_aws["json"], demo_aws["output"]

    assert demo_aws["report"].returncode == 0, output
    assert report is not None, output
    total = report["total"]
    assert total["valid_payments"] == PAYMENTS
    assert total["lost"] == 0
    assert total["double_charged"] == 0
    assert total["charges"] + total["valid_dead_lettered"] >= PAYMENTS
    assert total["poison"] == 6
    assert total["poison_in_dlq"] == 6
    assert total["dlq_unread"] == 0
    assert report["verdict"] == {"exit_code": 0, "reasons": []}
    assert "lost" in demo_aws["report"].stdout, "the table is printed"


def test_the_pollers_suppressed_the_duplicates_produce_sent(demo_aws: dict[str, Any]) -> None:
    # The function logs (EMF) are the runner's: they show the duplicates reached the handler and were stopped.
    logs = sorted(demo_aws["run"].glob("function-*.log"))

    assert logs, demo_aws["output"]
    assert emf_sum(logs, "DuplicatesSuppressed") > 0, demo_aws["output"]


def test_a_second_report_finds_the_same(demo_aws: dict[str, Any]) -> None:
    assert demo_aws["again"].returncode == 0, demo_aws["output"]
    assert demo_aws["json_again"] == demo_aws["json"], demo_aws["output"]
