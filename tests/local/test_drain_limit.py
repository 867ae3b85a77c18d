"""Slow queues, clear limits (issue 43, item 7): the chaos run's drain limit follows the stack's queues, a run that
runs out of time says what is left where and which flag raises the limit and exits 4, and a run removes the previous
run's report as it starts sending (``tests/local/test_report_kept.py``: not before). No AWS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.aws.mapping_config import AsyncConfig
from effectively_once_local.cli import chaos_command
from effectively_once_local.cli.main import main
from effectively_once_local.engine.drain_limit import DrainTimeout, default_drain_seconds, left_in
from effectively_once_local.engine.pipeline import clear_report

from .conftest import mapping_config

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "mappings, messages, seconds",
    [
        ([mapping_config(visibility_timeout_seconds=12, max_receive_count=5)], 30, 600),  # the floor
        ([mapping_config(visibility_timeout_seconds=300, max_receive_count=3)], 200, 4 * 300 + 60 + 40),  # a sample's
        ([mapping_config(visibility_timeout_seconds=300, max_receive_count=0)], 0, 6 * 300 + 60),  # no DLQ: as 5
        ([mapping_config(visibility_timeout_seconds=12), mapping_config(visibility_timeout_seconds=180)], 5, 1141),
        ([mapping_config(visibility_timeout_seconds=1, max_receive_count=3)], 5000, 4 + 60 + 1000),  # a large input
    ],
)
def test_the_default_limit_follows_the_stacks_queues(mappings: list[Any], messages: int, seconds: int) -> None:
    assert default_drain_seconds(mappings, messages) == seconds


def test_an_asynchronous_target_counts_lambdas_attempts_and_one_more() -> None:
    config = AsyncConfig(function_arn="arn:aws:lambda:us-east-1:123456789012:function:f", max_retry_attempts=2)
    target = mapping_config(visibility_timeout_seconds=300, async_config=config)

    assert default_drain_seconds([target], 0) == 4 * 300 + 60


class _Sqs:
    def __init__(self, counts: dict[str, dict[str, str]]) -> None:
        self.counts = counts

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:  # noqa: N803
        return {"Attributes": self.counts[QueueUrl]}


def test_the_timeout_names_what_is_left_where_and_the_flag(tmp_path: Path) -> None:
    sqs = _Sqs(
        {
            "http://x/1/Orders": {"ApproximateNumberOfMessages": "3", "ApproximateNumberOfMessagesNotVisible": "2"},
            "http://x/1/Empty": {"ApproximateNumberOfMessages": "0"},
        }
    )

    error = DrainTimeout(600, left_in(sqs, ["http://x/1/Orders", "http://x/1/Empty"]), tmp_path)

    assert error.left == {"Orders": {"visible": 3, "in flight": 2, "delayed": 0}}
    assert str(error).startswith("queues not drained after 600s (Orders: 3 visible, 2 in flight); raise the limit")
    assert "--drain-timeout SECONDS" in str(error) and str(tmp_path) in str(error)


def test_a_run_that_ran_out_of_time_exits_4_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def out_of_time(args: Any) -> int:
        raise DrainTimeout(7, {"Orders": {"visible": 1, "in flight": 0, "delayed": 0}}, tmp_path)

    monkeypatch.setattr(chaos_command, "run", out_of_time)
    (tmp_path / "in.jsonl").write_text('{"order_id": "o1"}\n')
    argv = ["chaos", "--app-dir", str(REPO / "examples" / "plain"), "--stack", "PlainOrders", "--input"]

    code = main([*argv, str(tmp_path / "in.jsonl"), "--key", "order_id"])

    err = capsys.readouterr().err
    assert code == 4
    assert err.startswith("error: queues not drained after 7s (Orders: 1 visible)") and err.count("\n") == 1


def test_a_run_removes_the_previous_runs_report_and_page_and_nothing_else(tmp_path: Path) -> None:
    report = tmp_path / "reports" / "chaos-report.json"
    report.parent.mkdir()
    for name in ("chaos-report.json", "chaos-report.html", "other.json"):
        (report.parent / name).write_text("{}")

    clear_report(report)

    assert sorted(p.name for p in report.parent.iterdir()) == ["other.json"]
