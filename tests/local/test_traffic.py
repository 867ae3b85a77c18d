"""The one producer (``effectively_once_local.traffic.producer``): FIFO resends that test something. A resend inside the
deduplication interval reuses its id and must be dropped; one after it gets a new id, as a producer retrying later
sends, and reaches the consumer."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from moto.sqs import models

from effectively_once_local.aws import moto_patches as _moto_server
from effectively_once_local.chaos.fault_model import ChaosConfig, EventLog
from effectively_once_local.traffic.chaos_input import InputLine
from effectively_once_local.traffic.producer import LATE_RESEND, RESEND, late_dedup_id, plan, send

REGION = "us-east-1"


def _lines(n: int) -> list[InputLine]:
    return [InputLine(i, json.dumps({"order_id": f"o-{i}"}), f"o-{i}", None, None) for i in range(1, n + 1)]


def test_fifo_resends_come_in_both_kinds_and_standard_ones_in_one() -> None:
    lines = _lines(200)

    out = plan(lines, lambda ln: "f" if ln.number % 2 else "s", {"s": False, "f": True}, ChaosConfig(resend=0.5))

    kinds = {label: Counter(o.kind for o in msgs) for label, msgs in out.items()}
    assert kinds["f"][RESEND] > 10 and kinds["f"][LATE_RESEND] > 10
    assert kinds["s"][LATE_RESEND] == 0 and kinds["s"][RESEND] > 20
    assert out == plan(
        lines, lambda ln: "f" if ln.number % 2 else "s", {"s": False, "f": True}, ChaosConfig(resend=0.5)
    )


def test_a_resend_inside_the_window_is_dropped_and_one_after_it_is_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models.Queue, "add_message", models.Queue.add_message)
    _moto_server.remember_deduplication_ids()  # SQS's 5 minutes, deleted or not
    line = _lines(1)[0]
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="o.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        log = EventLog(tmp_path / "sent.jsonl")
        original = {"f": [o for o in plan([line], lambda _: "f", {"f": True}, ChaosConfig())["f"]]}
        send(sqs, {"f": url}, {"f": True}, original, lambda n: None, log.write)
        for m in sqs.receive_message(QueueUrl=url).get("Messages", []):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        resends = plan([line] * 40, lambda _: "f", {"f": True}, ChaosConfig(resend=1.0))["f"]
        inside = next(o for o in resends if o.kind == RESEND)
        after = next(o for o in resends if o.kind == LATE_RESEND)

        send(sqs, {"f": url}, {"f": True}, {"f": [inside]}, lambda n: None, log.write)
        dropped = sqs.receive_message(QueueUrl=url).get("Messages", [])
        send(sqs, {"f": url}, {"f": True}, {"f": [after]}, lambda n: None, log.write)
        delivered = sqs.receive_message(QueueUrl=url).get("Messages", [])

    assert dropped == []
    assert [m["Body"] for m in delivered] == [line.body]
    rows = [json.loads(r) for r in (tmp_path / "sent.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["original", RESEND, LATE_RESEND]
    assert rows[2]["deduplication_id"] == late_dedup_id(line.dedup_id) != line.dedup_id
    assert len(rows[2]["deduplication_id"]) <= 128
