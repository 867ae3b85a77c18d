"""Every delivery's writes count (issue 43, item 1a): where the write log shows the runtime's per-record boundary it is
kept exactly; elsewhere a key's new items in an invocation are held against its deliveries in that batch, with the
items one delivery writes learned from the keys delivered once. No AWS but moto, for one store read back."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from effectively_once_local.chaos.fault_model import EventLog
from effectively_once_local.chaos.write_services import item_identity
from effectively_once_local.proof import key_check
from effectively_once_local.proof.executions import (
    Writer,
    all_writes,
    batch_kills,
    batches,
    count_effects,
    rewritten,
    writers,
)
from effectively_once_local.proof.stores import Store, parse_effect

REGION = "us-east-1"


def _report(sent: Counter[str], store_counts: Counter[str], **fields: Any) -> dict[str, Any]:
    """The per-key report of a run that sent ``sent`` (one message a key sent once) and found ``store_counts``."""
    args: dict[str, Any] = {
        "invalid_lines": 0,
        "messages_sent": sum(sent.values()),
        "dlq_keys": set(),
        "dead_lettered": 0,
        "log_counts": Counter(),
        "kill_records": [],
        "effect_takes_key": False,
        **fields,
    }
    return key_check.build(sent=sent, store_counts=store_counts, **args)


def _loose(request_id: str, n: int = 0) -> Writer:
    return Writer(f"chaos-q-1.jsonl#{n}#None", request_id, bounded=False)


def test_two_deliveries_of_one_key_in_one_batch_that_leave_two_new_items_are_two_effects() -> None:
    """The issue's broken app: a fresh uuid per message, a concurrent duplicate sent back to back into one batch."""
    items = [("u1", "a"), ("u2", "a"), ("u3", "b"), ("u4", "c")]
    written = {
        ("t", "u1"): _loose("r1"),
        ("t", "u2"): _loose("r1"),
        ("t", "u3"): _loose("r1"),
        ("t", "u4"): _loose("r2"),
    }
    invoked = {"r1": Counter({"a": 2, "b": 1}), "r2": Counter({"c": 1})}

    counted = count_effects(items, "t", written, invoked)

    assert counted.effects == {"a": 2, "b": 1, "c": 1}
    assert counted.items_per_delivery == 1
    assert count_effects(items, "t", written, None).effects == {"a": 1, "b": 1, "c": 1}, "the old rule merged them"


def test_an_upsert_rewriting_one_item_is_one_effect_however_often_it_is_delivered() -> None:
    written = {("t", "k-a"): _loose("r1")}
    invoked = {"r1": Counter({"a": 2}), "r2": Counter({"a": 1})}

    assert count_effects([("k-a", "a")], "t", written, invoked).effects == {"a": 1}


def test_a_row_and_its_audit_row_per_delivery_stay_one_effect_and_twice_that_is_two() -> None:
    """Learned from the keys delivered once: 2 items each. A key delivered twice in a batch with 4 new items is two
    effects; with 2 it is one (the second delivery rewrote its rows)."""
    rows = {"b": 2, "c": 2, "d": 2, "a": 4, "e": 2}
    items, written = [], {}
    for key, n in rows.items():
        for i in range(n):
            items.append((f"{key}{i}", key))
            written[("t", f"{key}{i}")] = _loose("r1" if key in "abc" else "r2")
    invoked = {"r1": Counter({"a": 2, "b": 1, "c": 1}), "r2": Counter({"d": 1, "e": 2})}

    counted = count_effects(items, "t", written, invoked)

    assert counted.items_per_delivery == 2
    assert counted.effects == {"a": 2, "b": 1, "c": 1, "d": 1, "e": 1}
    assert counted.multiples == []


def test_a_key_delivered_once_with_a_multiple_of_the_figure_is_flagged_never_counted_twice() -> None:
    items = [("b0", "b"), ("c0", "c"), ("a0", "a"), ("a1", "a")]
    written = {("t", i): _loose("r1") for i, _ in items}

    counted = count_effects(items, "t", written, {"r1": Counter({"a": 1, "b": 1, "c": 1})})

    assert counted.effects == {"a": 1, "b": 1, "c": 1} and counted.multiples == ["a"]


def test_the_runtimes_boundary_is_kept_and_an_unknown_batch_counts_as_before() -> None:
    items = [("x1", "a"), ("x2", "a"), ("y1", "b")]
    written = {
        ("t", "x1"): Writer("log#1#p#r1", "r1", bounded=True),
        ("t", "x2"): Writer("log#1#p#r1", "r1", bounded=True),  # one record's two writes: one effect
        ("t", "y1"): _loose("r9"),  # its batch is not in the logs
    }

    counted = count_effects(items, "t", written, {"r1": Counter({"a": 2})})

    assert counted.effects == {"a": 1, "b": 1} and counted.items_per_delivery is None


def test_a_plain_handler_writing_a_new_item_per_message_is_duplicated_end_to_end(tmp_path: Path) -> None:
    """The chaos log as a run writes it (an ``invocation`` line, then the watched writes, no Powertools record), the
    store read back through moto: the key sent twice into one batch shows two effects and fails the verdict."""
    log = EventLog(tmp_path / "chaos-plain-1.jsonl")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName="orders-1",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        store = Store(_Session(), "s", parse_effect("table:Orders:order_id"), tmp_path)
        store.snapshot()
        log.write(event="invocation", invocation=1, request_id="r1", batch_keys=["o-1", "o-1", "o-2"])
        for i, key in enumerate(["o-1", "o-1", "o-2"]):
            item = {"id": {"S": f"uuid-{i}"}, "order_id": {"S": key}}
            dynamodb.put_item(TableName="orders-1", Item=item)
            items = [["orders-1", item_identity(item, ["id"])]]
            log.write(event="write", op="dynamodb.PutItem", role="effect", invocation=1, request_id="r1", items=items)

        counts = store.count(writers(tmp_path), batches(tmp_path))

    assert counts == {"o-1": 2, "o-2": 1}
    report = _report(Counter({"o-1": 2, "o-2": 1}), counts)
    assert report["keys"]["duplicated"] == ["o-1"] and key_check.verdict(report)[0] == 1


def test_the_terminal_says_the_figure_learned() -> None:
    report = _report(Counter({"a": 1}), Counter({"a": 1}))
    row = {"items_per_delivery": 2, "items_per_delivery_learned_from_keys": 5, "delivered_once_items_a_multiple": ["a"]}
    report["run"] = {"effect_stores": {"table:Orders:order_id": row}}

    text = key_check.render(report)

    assert "store table:Orders:order_id: writes without the runtime's per-record boundary" in text
    assert "2 items per delivery (learned from 5 keys delivered once); delivered once with a multiple of it: a" in text
    row["items_per_delivery"] = None
    assert "items per delivery unknown (no key delivered once), one effect per invocation" in key_check.render(report)


class _Session:
    """What ``Store`` needs of a session: CloudFormation naming the table, and the real (moto) DynamoDB."""

    def client(self, name: str) -> Any:
        if name == "cloudformation":
            return _Cfn()
        return boto3.client(name, region_name=REGION)


class _Cfn:
    def get_paginator(self, _: str) -> Any:
        return self

    def paginate(self, **_: Any) -> Any:
        resource = {
            "ResourceType": "AWS::DynamoDB::Table",
            "LogicalResourceId": "Orders",
            "PhysicalResourceId": "orders-1",
        }
        return [{"StackResourceSummaries": [resource]}]


def _write(log: Path, **record: Any) -> None:
    with log.open("a") as fh:
        fh.write(json.dumps(record) + "\n")


def test_a_kill_replays_its_whole_batch_and_every_key_it_wrote_counts(tmp_path: Path) -> None:
    """Issue 43, item 4: a plain handler's invocation writes a, b and c, and is killed after b's write: a and b were
    written before the kill (c was not), so both count as killed and replayed; their items rewritten by the replay
    are one effect each, rewritten once."""
    log = tmp_path / "chaos-plain-1.jsonl"
    _write(log, event="invocation", invocation=1, request_id="r1", batch_keys=["a", "b", "c"], ts=1.0)
    for seq, key in ((1, "a"), (2, "b")):
        _write(
            log, event="write", seq=seq, role="effect", invocation=1, request_id="r1", items=[["t", key]], ts=1 + seq
        )
    _write(log, event="kill", seq=3, phase="after_write", invocation=1, request_id="r1", batch_keys=["a", "b", "c"])
    replay = tmp_path / "chaos-plain-2.jsonl"
    _write(replay, event="invocation", invocation=1, request_id="r2", batch_keys=["a", "b", "c"], ts=10.0)
    for seq, key in ((1, "a"), (2, "b"), (3, "c")):
        _write(
            replay,
            event="write",
            seq=seq,
            role="effect",
            invocation=1,
            request_id="r2",
            items=[["t", key]],
            ts=10 + seq,
        )
    item_keys = {("t", k): k for k in "abc"}
    writes = all_writes(tmp_path)
    kill = {**key_check.kills(tmp_path)[0], "key": "b"}  # the kill's own key, as the write order proves it

    extra = batch_kills([kill], writes, item_keys)

    assert [(k["key"], k["batch"], k["proved"]) for k in extra] == [("a", True, True)], "b is the kill's own key"
    assert rewritten(item_keys, writes, Counter({"a": 1, "b": 1, "c": 1})) == {"a": 1, "b": 1}
    report = _report(
        Counter({"a": 1, "b": 1, "c": 1}),
        Counter({"a": 1, "b": 1, "c": 1}),
        kill_records=[{**kill, "proved": True}],
        batch_kills=extra,
    )
    assert report["keys"]["replayed_after_kill"] == ["a", "b"]
    assert report["total"]["kills"]["after_write"] == 1, "one kill, however many keys it replays"
    assert report["total"]["kills_between_effect_and_completion"] == 2
    assert key_check.verdict(report)[0] == 0


def test_the_runtimes_completed_records_are_not_replays_of_a_batch_kill(tmp_path: Path) -> None:
    """With the per-record boundary a completed record is answered by its idempotency record, not run again: a kill
    adds no other key, so a second effect line stays unexplained."""
    writes = {("t", "a"): [Writer("log#1#p#ra", "r1", True, "chaos-q-1.jsonl", 2)]}
    kill = {"phase": "after_write", "key": "b", "request_id": "r1", "log": "chaos-q-1.jsonl", "seq": 5}

    assert batch_kills([kill], writes, {("t", "a"): "a"}) == []


def test_the_terminal_lists_the_rewritten_keys() -> None:
    report = _report(Counter({"a": 1}), Counter({"a": 1}))
    report["rewritten"] = {"a": 2}

    assert "rewritten (listed, not failing): 1 keys whose one effect was written again" in key_check.render(report)
    assert '"a" (2 times)' in key_check.render(report)
