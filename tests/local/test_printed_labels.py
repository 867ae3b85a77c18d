"""Printed labels that say what they mean (issue 43, item 8): "no DLQ" for a queue without a redrive policy, never
``maxReceiveCount 0``; "moved by the redrive policy" for what SQS moved to a DLQ; the stranded keys of a
``--no-redrive`` run described as no redrive ran; a stranded key's batch kills in ``batch_kills``. The JSON keys
stay. No AWS: the lines and reports built here."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from effectively_once_local.aws.discovery import DeployedMapping
from effectively_once_local.aws.mapping_config import MappingConfig
from effectively_once_local.engine.pipeline import describe
from effectively_once_local.proof.key_check import build, render, verdict
from effectively_once_local.proof.line_states import dlq_contents, dlq_why, line_states
from effectively_once_local.traffic.chaos_input import InputLine

from .test_line_states import _dlq, _key_of


def _mapping(max_receive_count: int, dlq_url: str | None) -> DeployedMapping:
    config = MappingConfig(
        label="Orders",
        queue_url="http://localhost/123/orders",
        queue_arn="arn:aws:sqs:us-east-1:123:orders",
        batch_size=10,
        batching_window_seconds=0,
        visibility_timeout_seconds=300,
        max_receive_count=max_receive_count,
        function_name="orders-fn",
        function_timeout_seconds=30,
        function_memory_mb=128,
        function_env={},
        handler="index.handler",
    )
    return DeployedMapping("Orders", "orders", False, config, "uuid", dlq_url, Path("."))


def test_a_queue_without_a_dlq_is_said_to_have_none() -> None:
    without = describe(_mapping(0, None))
    with_dlq = describe(_mapping(3, "http://localhost/123/orders-dlq"))

    assert "no DLQ (SQS redelivers a failing message until its retention period ends)" in without
    assert "maxReceiveCount" not in without
    assert "maxReceiveCount 3, then its DLQ" in with_dlq


#: Forty messages SQS moved, one the app refused; "o-1" and "o-2" never effected, in one killed batch.
DLQ = {
    "orders-dlq": [_dlq(json.dumps({"order_id": f"o-{i}"})) for i in range(1, 41)]
    + [_dlq("not json", {"error_type": "InvalidRecord"})]
}
#: The kill struck after o-3's write: booked to o-3; o-1 and o-2 were in its batch, so it replays them too.
KILLS = [
    {
        "key": "o-3",
        "phase": "after_write",
        "seq": 9,
        "pid": 7,
        "log": "chaos-q-7.jsonl",
        "request_id": "r1",
        "batch_keys": ["o-1", "o-2", "o-3"],
        "last_write": {"op": "dynamodb.BatchWriteItem"},
    }
]


def _report(redrive: bool) -> dict[str, Any]:
    lines = [InputLine(i, json.dumps({"order_id": f"o-{i}"}), f"o-{i}", None, None) for i in (1, 2, 3)]
    sent = [{"line": ln.number, "key": ln.key, "kind": "original", "message_id": f"m{ln.number}"} for ln in lines]
    states = line_states(
        lines=lines,
        effects=Counter({"o-3": 1}),
        duplicated=[],
        redriven=set(),
        dlq_messages=DLQ,
        sent_rows=sent,
        deliveries=[{"message_id": f"m{n}", "receive_count": 3} for n in (1, 2, 3)],
        kill_records=KILLS,
        key_of=_key_of,
    )
    report = build(
        sent=Counter({"o-1": 1, "o-2": 1, "o-3": 1}),
        invalid_lines=0,
        messages_sent=3,
        dlq_keys={"o-1", "o-2"},
        dead_lettered=41,
        log_counts=Counter({"o-3": 1}),
        store_counts=None,
        kill_records=KILLS,
        effect_takes_key=False,
    )
    report |= {"total": report["total"] | states["counts"], "states": states, "dlq": dlq_contents(DLQ, _key_of)}
    report["run"] = {"redrive": redrive}
    return report


def test_dlq_counts_say_who_moved_the_messages_and_the_json_keys_stay() -> None:
    report = _report(redrive=True)

    assert report["dlq"]["orders-dlq"]["why"] == {"InvalidRecord": 1, "maxReceiveCount": 40}, "the JSON keys stay"
    line = next(ln for ln in render(report).splitlines() if ln.startswith("DLQ orders-dlq"))
    assert line == "DLQ orders-dlq: 41 messages (1 refused by the app: InvalidRecord, 40 moved by the redrive policy)"
    assert "(maxReceiveCount" not in render(report)
    assert dlq_why({}) == "empty"


def test_a_stranded_keys_batch_kills_are_listed_though_no_kill_is_booked_to_it() -> None:
    report = _report(redrive=True)
    rows, evidence = report["states"]["per_key"], report["states"]["evidence"]

    assert report["states"]["keys"]["stranded"] == ["o-1", "o-2"]
    assert (rows["o-1"]["kills"], rows["o-1"]["batch_kills"]) == ({}, {"after_write": 1})
    assert evidence["o-1"]["kills"] == [] and evidence["o-1"]["batch_kills"] == [
        {"phase": "after_write", "after_write": "dynamodb.BatchWriteItem", "seq": 9, "request_id": "r1"}
    ]
    assert "batch_kills" not in rows["o-3"], "only a stranded key's row"


def test_stranded_keys_under_no_redrive_are_not_said_to_have_been_redriven() -> None:
    _, redriven = verdict(_report(redrive=True))
    _, not_redriven = verdict(_report(redrive=False))

    assert "only in a DLQ after the run's redrive" in redriven[0]
    assert "after the run's redrive" not in not_redriven[0]
    assert not_redriven[0].startswith("2 valid keys in a DLQ, never effected (--no-redrive: no redrive ran;")
