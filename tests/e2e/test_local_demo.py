"""Local end-to-end: a fresh local AWS (moto server on loopback), a real `cdk deploy` of PaymentsSandbox, payments
with producer duplicates and crashes, and the report read back from the deployed tables and queues.

Runs the same entry point as `make demo` (``python -m effectively_once_local demo``) on 200 payments. Each run
takes about a minute and a half (102 s measured on 2 shared cores); the poison messages go to the DLQs on first
sight. The safe run ends with a small outage backlog (``--redrive-backlog 3``: 3 charged and 3 new payments into
each DLQ, then a redrive) and asserts its ``redrive`` block.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.payments.payments_input import generate_sample

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]


def run_demo(tmp: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    payments = tmp / "payments.jsonl"
    payments.write_text("".join(json.dumps(r) + "\n" for r in generate_sample(count=200, accounts=12, seed=5)))
    report = tmp / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "effectively_once_local",
            "demo",
            "--quiet",
            "--payments",
            str(payments),
            "--report",
            str(report),
            "--run-dir",
            str(tmp / "run"),
            "--resend",
            "0.15",
            "--concurrent-duplicates",
            "0.10",
            "--crash-after-charge",
            "0.08",
            "--crash-after-complete",
            "0.08",
            "--timeouts",
            "0.04",
            "--drain-timeout",
            "420",
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert report.exists(), output
    return proc.returncode, json.loads(report.read_text()), output


@pytest.fixture(scope="module")
def safe_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str]:
    return run_demo(tmp_path_factory.mktemp("safe"), "--redrive-backlog", "3")


def test_nothing_lost_and_nothing_double_charged(safe_run: tuple[int, dict[str, Any], str]) -> None:
    code, report, output = safe_run
    total = report["total"]

    assert code == 0, output
    assert total["valid_payments"] == 200
    assert total["lost"] == 0
    assert total["double_charged"] == 0
    assert total["charges"] + total["valid_dead_lettered"] >= total["valid_payments"]
    assert total["sent_never_delivered"] == 0, "every first send SQS accepted was delivered (the run's send log)"


def test_the_general_per_key_report_agrees(safe_run: tuple[int, dict[str, Any], str]) -> None:
    report = safe_run[1]
    per_key = report["per_key"]["total"]

    assert per_key["messages_sent"] == report["run"]["messages_sent"] > 0
    assert (per_key["lost"], per_key["duplicated"], per_key["unexpected"], per_key["unexplained_replays"]) == (
        0,
        0,
        0,
        0,
    )
    assert per_key["effects"] == report["total"]["charges"]


def test_chaos_really_happened(safe_run: tuple[int, dict[str, Any], str]) -> None:
    report = safe_run[1]
    total = report["total"]
    # The payments sent through the bus reach the function as asynchronous invocations, not SQS deliveries.
    handed = total["deliveries"] + report.get("async", {}).get("invocations", 0)

    assert handed > total["payments"], "duplicates and redeliveries must have reached the function"
    assert total["duplicates_suppressed"] > 0
    assert total["kills"]["after_charge"] + total["kills"]["after_complete"] > 0
    assert total["provider_replays"] <= total["kills_between_charge_and_completion"]


def test_every_poison_message_ends_intact_in_a_dlq(safe_run: tuple[int, dict[str, Any], str]) -> None:
    total = safe_run[1]["total"]

    assert total["poison"] == 6
    assert total["poison_in_dlq"] == total["poison"]
    # Under this chaos a killed or timed-out FIFO batch adds a receive to each of its messages, so valid ones may
    # still pass maxReceiveCount (valid_dead_lettered) and poison may take a second receive; without chaos
    # poison_receives_max is 1 (unit tested in tests/local/test_redrive_backlog.py).
    assert 1 <= total["poison_receives_max"] <= 5


def test_redrive_of_an_outage_backlog_charges_only_the_new_payments(safe_run: tuple[int, dict[str, Any], str]) -> None:
    code, report, output = safe_run
    block = report["redrive"]

    assert code == 0, output
    assert sorted(block) == ["fifo", "standard"]
    for row in block.values():
        assert row["charged_resent"] == 3 and row["charged_new_provider_calls"] == 0
        assert row["new_sent"] == 3 and row["new_charged"] == 3
        assert row["poison_back_in_dlq"] == row["poison_redriven"] > 0
        assert row["valid_in_dlq"] == 0 and row["double_charged"] == 0
    assert "poison_back_in_dlq" in output, "the block is rendered"


def _page(output: str) -> str:
    """The page the run's output links to (exactly one link)."""
    links = [m.group(1) for line in output.splitlines() if (m := re.fullmatch(r"page: (file://\S+)", line))]
    assert len(links) == 1, output
    return Path(urllib.parse.unquote(urllib.parse.urlparse(links[0]).path)).read_text(encoding="utf-8")


def test_the_asynchronous_leg_loses_nothing_and_its_on_failure_redrive_charges_only_the_new(
    safe_run: tuple[int, dict[str, Any], str],
) -> None:
    """Issue 23: a share of the payments through the sandbox's EventBridge bus, with duplicates and kills; then the
    on-failure queue's records (and an outage backlog written as Lambda's destination records) redriven."""
    code, report, output = safe_run
    block = report["async"]

    assert code == 0, output
    assert block["payments"] > 0 and block["events_put"] > block["payments"], "resends are new puts"
    assert block["invocations"] >= block["events_put"]
    assert block["lost"] == 0 and block["double_charged"] == 0
    redrive = block["redrive"]
    assert redrive["charged_resent"] == 3 and redrive["charged_new_provider_calls"] == 0
    assert redrive["new_sent"] == 3 and redrive["new_charged"] == 3
    assert redrive["double_charged"] == 0 and redrive["on_failure_after"] == 0
    assert "on-failure redrive" in output, "the block is rendered"
    page = _page(output)  # the block is a table on the page, its figures the report's
    for key in ("payments", "events_put", "invocations", "lost", "double_charged", "redrive.new_charged"):
        value = block[key] if "." not in key else block["redrive"][key.split(".", 1)[1]]
        assert f'data-async="{key}">{value}<' in page, key


def test_the_demo_writes_its_page_holding_the_reports_totals(safe_run: tuple[int, dict[str, Any], str]) -> None:
    # The page beside the JSON report (report/page.py), linked from the terminal output after the report.
    _, report, output = safe_run
    page = _page(output)

    shown = {k: int(v) for k, v in re.findall(r'data-total="([\w.]+)">(-?\d+)<', page)}
    expected = {k: v for k, v in report["total"].items() if isinstance(v, int)}
    expected |= {f"kills.{k}": v for k, v in report["total"]["kills"].items()}
    assert shown == expected
    assert 'src="data:image/png;base64,' in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)


def test_unsafe_control_run_double_charges(tmp_path: Path) -> None:
    code, report, output = run_demo(tmp_path, "--unsafe")

    assert report["total"]["double_charged"] > 0, output
    assert code == 0, output
