"""A usage error keeps the last good report (issue 57, item 4): a run of ``chaos`` or ``demo`` that stops with exit 2
before it sends anything (a wrong ``--stack``, a wrong ``--effect-table``) leaves the previous report and its page
as they were; a run that started sending removes them, so a stale report never looks like the run's. The run's
logs in ``--run-dir`` are the new run's from its start (its deploy writes there). No AWS: the deploy, the discovery
and SQS are faked, every step between them is the run's own, through the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack import chaos_run
from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.aws.discovery import DeployedMapping
from effectively_once_local.cli.main import main
from effectively_once_local.engine.pipeline import Deployment
from effectively_once_local.payments import demo
from effectively_once_local.payments.payments_view import Pipeline

from .conftest import mapping_config

REPO = Path(__file__).resolve().parents[2]
CHAOS_STACK, DEMO_STACK = "PlainOrders", "PaymentsSandbox"
LAST_REPORT, LAST_PAGE = '{"verdict": "the last good run"}\n', "<html>the last good run</html>\n"


class _Sqs:
    """SQS refusing every message: a run that gets this far started sending, and stops with a ``SendError``."""

    def __init__(self) -> None:
        self.batches: list[str] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.batches.append(QueueUrl)
        return {"Failed": [{"Id": "0", "Code": "InvalidParameterValue", "Message": "refused by the test"}]}


class _Pages:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages

    def paginate(self, **kwargs: Any) -> list[dict[str, Any]]:
        return self.pages


class _Cloudformation:
    """The stack's resources: one table, ``Ledger``."""

    def get_paginator(self, name: str) -> _Pages:
        table = {"ResourceType": "AWS::DynamoDB::Table", "LogicalResourceId": "Ledger", "PhysicalResourceId": "l-1"}
        return _Pages([{"StackResourceSummaries": [table]}])


class _Session:
    def __init__(self) -> None:
        self.sqs = _Sqs()

    def client(self, name: str) -> Any:
        clients = {"sqs": self.sqs, "cloudformation": _Cloudformation()}
        if name not in clients:
            raise AssertionError(f"the run asked for a {name} client this test does not fake")
        return clients[name]


def _mapping(label: str, queue: str, code_dir: Path) -> DeployedMapping:
    arn = f"arn:aws:sqs:us-east-1:123456789012:{queue}"
    config = mapping_config(label=label, queue_url=f"http://127.0.0.1:9/123456789012/{queue}", queue_arn=arn)
    return DeployedMapping(label, queue, queue.endswith(".fifo"), config, "uuid", f"{config.queue_url}-dlq", code_dir)


@pytest.fixture
def faked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Session:
    """The deploy (a stack other than :data:`CHAOS_STACK` or :data:`DEMO_STACK` fails it, as ``cdk synth`` does),
    the local AWS's session and the discovery faked for both runs; the last run's report, page and logs in
    ``tmp_path``."""
    session = _Session()

    @contextmanager
    def deployment(**kwargs: Any) -> Iterator[Deployment]:
        if kwargs["stack"] not in (CHAOS_STACK, DEMO_STACK):
            raise DeployError(f"cdk synth failed (exit 1): No stack found matching '{kwargs['stack']}'")
        yield Deployment("http://127.0.0.1:9", tmp_path / "cdk.out", fresh=True)

    def pipelines(session: Any, stack: str) -> dict[str, Pipeline]:
        found = [_mapping("standard", "payments", tmp_path), _mapping("fifo", "payments.fifo", tmp_path)]
        return {m.label: Pipeline(m.mapping, "uuid", str(m.dlq_url), "idempotency", "ledger") for m in found}

    for module in (chaos_run, demo):
        monkeypatch.setattr(module, "local_deployment", deployment)
        monkeypatch.setattr(module, "local_session", lambda endpoint: session)
        monkeypatch.setattr(module, "disable", lambda session, mappings: None)
    monkeypatch.setattr(chaos_run, "discover_targets", lambda s, stack, out: [_mapping("Orders", "orders", tmp_path)])
    monkeypatch.setattr(demo, "discover", pipelines)
    monkeypatch.setattr(demo, "discover_async_targets", lambda s, stack, out: [])
    monkeypatch.chdir(REPO)  # the demo's payments file and handler root by default
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "last.json").write_text(LAST_REPORT)
    (tmp_path / "reports" / "last.html").write_text(LAST_PAGE)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "deliveries-Orders-1.jsonl").write_text("{}\n")
    return session


def _run(command: str, flags: list[str], tmp_path: Path) -> int:
    outputs = ["--report", str(tmp_path / "reports" / "last.json"), "--run-dir", str(tmp_path / "run"), "--quiet"]
    if command == "demo":
        return main(["demo", *outputs, "--drain-timeout", "30", *flags])
    (tmp_path / "in.jsonl").write_text('{"order_id": "o1"}\n{"order_id": "o2"}\n')
    app = ["--app-dir", str(REPO / "examples" / "plain"), "--input", str(tmp_path / "in.jsonl"), "--key", "order_id"]
    return main(["chaos", *app, *outputs, "--drain-timeout", "30", *flags])


@pytest.mark.parametrize(
    "command, flags, error",
    [
        ("chaos", ["--stack", "PlainOrdrs"], "No stack found matching 'PlainOrdrs'"),
        ("chaos", ["--stack", CHAOS_STACK, "--effect-table", "Ledgr", "--effect-key", "k"], "names 0 tables"),
        ("demo", ["--stack", "PaymentSandbox"], "No stack found matching 'PaymentSandbox'"),
    ],
    ids=["chaos: a wrong --stack", "chaos: a wrong --effect-table", "demo: a wrong --stack"],
)
def test_a_usage_error_before_sending_keeps_the_last_report_and_page(
    command: str, flags: list[str], error: str, faked: _Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(command, flags, tmp_path)

    err = capsys.readouterr().err
    assert code == 2 and error in err, err
    assert faked.sqs.batches == [], "nothing was sent"
    assert (tmp_path / "reports" / "last.json").read_text() == LAST_REPORT
    assert (tmp_path / "reports" / "last.html").read_text() == LAST_PAGE
    assert not (tmp_path / "run" / "deliveries-Orders-1.jsonl").exists(), "the run folder is the new run's"


@pytest.mark.parametrize(
    "command, flags", [("chaos", ["--stack", CHAOS_STACK]), ("demo", ["--stack", DEMO_STACK])], ids=["chaos", "demo"]
)
def test_a_run_that_started_sending_removes_the_last_report_and_page(
    command: str, flags: list[str], faked: _Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(command, flags, tmp_path)

    err = capsys.readouterr().err
    assert code == 2 and "SQS rejected the message of line" in err and "refused by the test" in err, err
    assert faked.sqs.batches != [], "the run started sending"
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [], "a stale report never looks like this run's"
