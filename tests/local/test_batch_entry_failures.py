"""Per-entry failures in batch answers (issue 58, item 2): the handler's SQS ``SendMessageBatch``,
``DeleteMessageBatch``, ``ChangeMessageVisibilityBatch`` and SNS ``PublishBatch`` calls answered HTTP 200 with some
entries under ``Failed`` (``SenderFault`` false, ``InternalError``), those entries never performed; a call whose
every entry failed answered without being sent; the runner's own calls never struck; and a ``BatchWriteItem`` of one
request returned whole in ``UnprocessedItems``. In process, on moto; the report's side from chaos logs written here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from effectively_once_local.any_stack.inert_faults import inert_faults, stack_facts
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.chaos.faults import ENV_WATCH_KEYS, WriteWatch
from effectively_once_local.chaos.sdk_faults import FAILED_ENTRIES, UNPROCESSED, SdkFaults
from effectively_once_local.proof.faults_struck import faults_block
from effectively_once_local.proof.sdk_faults_seen import (
    demo_sdk_faults,
    render_demo_sdk_faults,
    render_sdk_faults,
    sdk_faults,
)

from .test_inert_faults import LOGS_ONLY, _policy, _stack

REGION = "us-east-1"


class _Draws:
    """A stand-in for the hook's random source: ``random()`` answers ``values`` in turn (then 0.99: no fault)."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0) if self.values else 0.99

    def randint(self, low: int, high: int) -> int:
        return high  # every request held back

    def sample(self, places: list[Any], count: int) -> list[Any]:
        return places[:count]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    """moto in process, and boto3's ``Session.__init__`` put back after the test (the hooks patch it)."""
    monkeypatch.setattr(boto3.session.Session, "__init__", boto3.session.Session.__init__)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv(ENV_WATCH_KEYS, '{"orders": ["id"]}')
    with mock_aws():
        yield monkeypatch


def _hook(
    fraction: float, *draws: float, running: list[bool] | None = None, throttle: float = 0.0
) -> tuple[SdkFaults, list[Any], list[Any]]:
    faults: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    state = running if running is not None else [True]
    config = ChaosConfig(batch_entry_failure=fraction, throttle=throttle)
    hook = SdkFaults(config, faults.append, running=lambda: state[0], on_call=calls.append)
    if draws:
        hook._rng = _Draws(*draws)  # type: ignore[assignment]
    hook.install()
    return hook, faults, calls


def _bodies(sqs: Any, url: str) -> list[str]:
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get("Messages")
    return sorted(m["Body"] for m in found or [])


def test_failed_send_entries_are_never_sent_and_come_back_under_failed(aws: Any) -> None:
    seen: list[dict[str, Any]] = []
    WriteWatch(seen.append).install()
    _, faults, calls = _hook(0.5, 0.0, 0.9, 0.0, 0.9)  # entries 0 and 2 fail
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    url = sqs.create_queue(QueueName="shipments")["QueueUrl"]
    entries = [{"Id": f"e{i}", "MessageBody": json.dumps({"order_id": f"o-{i}"})} for i in range(4)]
    mine = copy.deepcopy(entries)

    answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)

    assert entries == mine, "the app's own entries are never changed"
    assert sorted(e["Id"] for e in answer["Successful"]) == ["e1", "e3"]
    assert answer["Failed"] == [
        {"Id": f"e{i}", "SenderFault": False, "Code": "InternalError", "Message": answer["Failed"][0]["Message"]}
        for i in (0, 2)
    ]
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert _bodies(sqs, url) == [json.dumps({"order_id": f"o-{i}"}) for i in (1, 3)], "only the entries performed"
    [fault] = faults
    assert (fault["kind"], fault["op"], fault["target"], fault["error"]) == (
        FAILED_ENTRIES,
        "sqs.SendMessageBatch",
        url,
        "InternalError",
    )
    assert (fault["failed"], fault["sent"]) == (2, 2)
    assert fault["entries"] == [{"Id": f"e{i}", "body": json.dumps({"order_id": f"o-{i}"})} for i in (0, 2)]
    assert calls == [{"op": "sqs.SendMessageBatch", "target": url, "entries": 4}]
    [write] = [w for w in seen if w["op"] == "sqs.SendMessageBatch"]
    assert len(write["items"]) == 2, "the write watch names the messages sent"


def test_a_batch_whose_every_entry_failed_is_answered_without_being_sent(aws: Any) -> None:
    seen: list[dict[str, Any]] = []
    WriteWatch(seen.append).install()
    _, faults, _ = _hook(1.0)
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    url = sqs.create_queue(QueueName="shipments")["QueueUrl"]

    answer = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "only", "MessageBody": "x"}])

    assert answer["Successful"] == [] and [e["Id"] for e in answer["Failed"]] == ["only"]
    assert _bodies(sqs, url) == []
    assert [f["sent"] for f in faults] == [0]
    assert not [w for w in seen if w["op"] == "sqs.SendMessageBatch"], "nothing sent, no write logged"


def test_an_app_that_sends_the_failed_entries_again_sends_each_message_once(aws: Any) -> None:
    # scripted, no chance: the first call fails entries 0, 3 and 7; the second (those three) fails 3 again; the
    # third (3 alone) draws past the script: sent
    first = [0.0 if i in (0, 3, 7) else 0.9 for i in range(10)]
    _, faults, _ = _hook(0.5, *first, 0.9, 0.0, 0.9)
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    url = sqs.create_queue(QueueName="shipments")["QueueUrl"]
    pending = [{"Id": str(i), "MessageBody": f"m-{i}"} for i in range(10)]

    for _ in range(3):
        failed = {e["Id"] for e in sqs.send_message_batch(QueueUrl=url, Entries=pending)["Failed"]}
        pending = [e for e in pending if e["Id"] in failed]
        if not pending:
            break

    assert not pending, "every failed entry was sent again"
    assert [[e["Id"] for e in f["entries"]] for f in faults] == [["0", "3", "7"], ["3"]]
    bodies = _bodies(sqs, url)
    assert sorted(bodies) == sorted(f"m-{i}" for i in range(10)), "each message once"


def test_a_throttled_batch_call_is_not_counted_as_one_answered_per_entry(aws: Any) -> None:
    """A throttled ``SendMessageBatch`` is answered whole with the throttling error: no entry of it could fail, so it
    is no ``batch_call`` (the count that tells a fault with no call to strike from one not drawn)."""
    _, faults, calls = _hook(0.5, 0.0, 0.9, 0.9, throttle=0.5)  # throttled; then not throttled, no entry failing
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    url = sqs.create_queue(QueueName="shipments")["QueueUrl"]
    entries = [{"Id": "a", "MessageBody": "x"}]

    with pytest.raises(ClientError):
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert sqs.send_message_batch(QueueUrl=url, Entries=entries)["Failed"] == []

    assert [f["kind"] for f in faults] == ["throttled"]
    assert calls == [{"op": "sqs.SendMessageBatch", "target": url, "entries": 1}], "the answered call alone"


def test_a_publish_batchs_failed_entries_come_back_from_the_xml_answer(aws: Any) -> None:
    """SNS speaks the query protocol: the entries are renumbered in the form body, ``Failed`` is added to the XML."""
    _, faults, _ = _hook(0.5, 0.9, 0.0, 0.9)  # entry 1 fails
    session = boto3.session.Session(region_name=REGION)
    sns, sqs = session.client("sns"), session.client("sqs")
    topic = sns.create_topic(Name="orders")["TopicArn"]
    url = sqs.create_queue(QueueName="subscriber")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    attribute = {"kind": {"DataType": "String", "StringValue": "order"}}
    entries = [{"Id": f"p{i}", "Message": f"m-{i}", "MessageAttributes": attribute} for i in range(3)]

    answer = sns.publish_batch(TopicArn=topic, PublishBatchRequestEntries=entries)

    assert sorted(e["Id"] for e in answer["Successful"]) == ["p0", "p2"]
    assert [(e["Id"], e["SenderFault"], e["Code"]) for e in answer["Failed"]] == [("p1", False, "InternalError")]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert sorted(m["Body"] for m in received) == ["m-0", "m-2"], "the entry after the failed one kept its fields"
    assert all(m["MessageAttributes"]["kind"]["StringValue"] == "order" for m in received)
    assert [(f["op"], f["target"], f["entries"]) for f in faults] == [
        ("sns.PublishBatch", topic, [{"Id": "p1", "body": "m-1"}])
    ]


def test_a_failed_delete_or_visibility_change_leaves_its_message_as_it_was(aws: Any) -> None:
    """The runtime's own batch calls in the handler (its backoff's visibility change, its receive budget's delete):
    a failed entry is not performed, so its message stays, with the queue's visibility timeout."""
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    url = sqs.create_queue(QueueName="orders", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    for i in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=f"m-{i}")
    _, faults, _ = _hook(0.5, 0.0, 0.9, 0.0, 0.9)  # the first entry of each call fails
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    messages = sorted(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"], key=lambda m: m["Body"])
    handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]

    changed = sqs.change_message_visibility_batch(
        QueueUrl=url, Entries=[{**h, "VisibilityTimeout": 600} for h in handles]
    )
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=handles)

    assert [e["Id"] for e in changed["Failed"]] == ["0"] and [e["Id"] for e in deleted["Failed"]] == ["0"]
    assert [f["op"] for f in faults] == ["sqs.ChangeMessageVisibilityBatch", "sqs.DeleteMessageBatch"]
    assert _bodies(sqs, url) == ["m-0"], "m-0: not deleted, and visible again (its change failed too)"


def test_the_runners_own_calls_and_a_fraction_of_zero_are_never_struck(aws: Any) -> None:
    running = [False]
    _, faults, calls = _hook(1.0, running=running)
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]

    answer = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "runner"}])

    assert answer["Failed"] == [] and faults == [] and calls == [], "outside an invocation: the runner's call"
    running[0] = True
    assert sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "handler"}])["Failed"]
    before = boto3.session.Session.__init__
    SdkFaults(ChaosConfig(partial_batch_write=0.0), lambda _: None).install()
    assert boto3.session.Session.__init__ is before, "nothing asked: no hook"


def test_a_batch_write_of_one_request_comes_back_whole(aws: Any) -> None:
    """``--partial-batch-writes``: AWS may return every request of a batch unprocessed, a batch of one included."""
    seen: list[dict[str, Any]] = []
    WriteWatch(seen.append).install()
    faults: list[dict[str, Any]] = []
    SdkFaults(ChaosConfig(partial_batch_write=1.0), faults.append).install()
    dynamodb = boto3.session.Session(region_name=REGION).client("dynamodb")
    dynamodb.create_table(
        TableName="orders",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    request = {"orders": [{"PutRequest": {"Item": {"id": {"S": "o-1"}}}}]}

    answer = dynamodb.batch_write_item(RequestItems=request)

    assert answer["UnprocessedItems"] == request
    assert dynamodb.scan(TableName="orders")["Items"] == []
    assert [(f["kind"], f["held_back"], f["sent"]) for f in faults] == [(UNPROCESSED, 1, 0)]
    assert not [w for w in seen if w["op"] == "dynamodb.BatchWriteItem"], "nothing sent, no write logged"


def _log(run_dir: Path, *records: dict[str, Any]) -> None:
    (run_dir / "chaos-q-7.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_failed_send_entry_names_its_key_through_the_queue_store(tmp_path: Path) -> None:
    url = "http://localhost:5000/123456789012/shipments"
    entries = [{"Id": "0", "body": json.dumps({"order_id": " O-2 "})}, {"Id": "1", "body": "not json"}]
    _log(
        tmp_path,
        {"event": "batch_call", "op": "sqs.SendMessageBatch", "target": url, "entries": 3},
        {"event": "sdk_fault", "seq": 2, "kind": FAILED_ENTRIES, "op": "sqs.SendMessageBatch", "target": url}
        | {"entries": entries, "request_id": "r1"},
    )
    states: dict[str, Any] = {"per_key": {"o-2": {"state": "vanished"}}, "evidence": {"o-2": {"kills": []}}}

    section = sdk_faults(states, tmp_path, {}, lambda k: k.strip().lower(), {url: "order_id"})

    assert section["by_kind"] == {UNPROCESSED: 0, "throttled": 0, FAILED_ENTRIES: 1}
    assert (section["batch_calls"], section["keys"]) == (1, {"o-2": 1})
    assert states["evidence"]["o-2"]["sdk_faults"][0]["kind"] == FAILED_ENTRIES
    assert render_sdk_faults(dict(section)).endswith("failed_entries=1; 1 keys hit (o-2)")
    # the same fault to a queue the run counts nothing in ties no key
    assert sdk_faults({}, tmp_path, {}, str, {})["keys"] == {}


def test_the_demo_counts_them_and_says_so(tmp_path: Path) -> None:
    _log(
        tmp_path,
        {"event": "batch_call", "op": "sqs.ChangeMessageVisibilityBatch", "entries": 2},
        {"event": "sdk_fault", "kind": FAILED_ENTRIES, "op": "sqs.ChangeMessageVisibilityBatch", "entries": []},
        {"event": "kill", "phase": "after_complete"},
    )

    block = demo_sdk_faults(tmp_path)

    assert block == {"by_kind": {UNPROCESSED: 0, "throttled": 0, FAILED_ENTRIES: 1}, "batch_calls": 1}
    assert render_demo_sdk_faults(block, ChaosConfig(batch_entry_failure=0.05)) == (
        "sdk faults: failed_entries=1 (1 batch calls answered per entry)\n"
    )
    empty = {"by_kind": {UNPROCESSED: 0, "throttled": 0, FAILED_ENTRIES: 0}, "batch_calls": 0}
    assert render_demo_sdk_faults(empty, ChaosConfig()) == "", "not asked, nothing struck: no line"


def test_a_run_without_a_batch_call_could_not_strike_and_one_with_calls_was_not_struck() -> None:
    chaos = ChaosConfig(batch_entry_failure=0.05)
    report: dict[str, Any] = {"total": {"kills": {}}, "sdk_faults": {"by_kind": {FAILED_ENTRIES: 0}, "batch_calls": 0}}

    none = faults_block(report, chaos, {"standard"}, 3)
    report["sdk_faults"]["batch_calls"] = 4
    some = faults_block(report, chaos, {"standard"}, 3)

    assert [(r["flag"], r["why"][:35]) for r in none["could_not_strike"]] == [
        ("--batch-entry-failures", "no SQS or SNS batch call by the han")
    ]
    assert [r["flag"] for r in some["not_struck"]] == ["--batch-entry-failures"] and not some["could_not_strike"]


def test_a_stack_whose_functions_may_make_no_batch_call_is_refused_the_flag(tmp_path: Path) -> None:
    chaos = ChaosConfig(batch_entry_failure=0.5)

    def inert(cdk_out: Path) -> dict[str, str]:
        return {i.fault.flag: i.why for i in inert_faults(chaos, stack_facts(cdk_out, "Orders"))}

    consumer = inert(_stack(tmp_path / "c", policy=_policy("sqs:ReceiveMessage", "sqs:DeleteMessage")))
    publisher = inert(_stack(tmp_path / "p", asynchronous=True, policy=_policy("sns:Publish")))
    nothing = inert(_stack(tmp_path / "n", asynchronous=True, policy=LOGS_ONLY))

    assert consumer == {} and publisher == {}, "a queue's consumer may delete in batches; a publisher may publish"
    assert "may make an SQS or SNS batch call" in nothing["--batch-entry-failures"]
