"""SDK faults from outside the app (issue 43, item 5a): a partial ``BatchWriteItem`` answered with part of its requests
in ``UnprocessedItems``, injected by a botocore hook the handler never sees. The held-back requests never reach the
table and come back in the answer, the app's own dict untouched; boto3's ``batch_writer`` writes them again; the
idempotency table is never touched; and the write watch names only what was written. In process, on moto."""

from __future__ import annotations

import copy
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.chaos.faults import ENV_WATCH_KEYS, WriteWatch
from effectively_once_local.chaos.sdk_faults import UNPROCESSED, SdkFaults
from effectively_once_runtime import names

REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    """moto in process, and boto3's ``Session.__init__`` put back after the test (the hooks patch it)."""
    monkeypatch.setattr(boto3.session.Session, "__init__", boto3.session.Session.__init__)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv(ENV_WATCH_KEYS, '{"orders": ["id"], "idem": ["id"]}')
    with mock_aws():
        yield monkeypatch


def _tables(session: Any) -> Any:
    dynamodb = session.client("dynamodb")
    for name in ("orders", "idem"):
        dynamodb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    return dynamodb


def _puts(table: str, n: int, prefix: str = "o") -> dict[str, Any]:
    return {
        table: [
            {"PutRequest": {"Item": {"id": {"S": f"{prefix}-{i}"}, "order_id": {"S": f"{prefix}-{i}"}}}}
            for i in range(n)
        ]
    }


def _ids(dynamodb: Any, table: str) -> set[str]:
    return {item["id"]["S"] for item in dynamodb.scan(TableName=table)["Items"]}


def test_a_partial_batch_write_holds_back_requests_the_table_never_sees(aws: Any) -> None:
    faults: list[dict[str, Any]] = []
    SdkFaults(ChaosConfig(partial_batch_write=1.0, seed=3), faults.append).install()
    dynamodb = _tables(boto3.session.Session(region_name=REGION))
    request = _puts("orders", 4)
    mine = copy.deepcopy(request)

    answer = dynamodb.batch_write_item(RequestItems=request)

    held = answer["UnprocessedItems"].get("orders", [])
    written = _ids(dynamodb, "orders")
    assert 1 <= len(held) <= 4 and len(written) == 4 - len(held), "some (or all) held back, the rest written"
    assert {r["PutRequest"]["Item"]["id"]["S"] for r in held} == {f"o-{i}" for i in range(4)} - written
    assert request == mine, "the app's own dict is never changed"
    [fault] = faults
    assert (fault["kind"], fault["op"], fault["target"]) == (UNPROCESSED, "dynamodb.BatchWriteItem", "orders")
    assert fault["requests"] == answer["UnprocessedItems"] and (fault["held_back"], fault["sent"]) == (
        len(held),
        4 - len(held),
    )


class _Script:
    """The hook's random source, scripted (no chance): ``random()`` answers ``strikes`` in turn (0.0: struck), then
    0.99 (not struck); a struck call holds back the next of ``counts`` requests, its last ones."""

    def __init__(self, strikes: list[float], counts: list[int]) -> None:
        self.strikes, self.counts = strikes, counts

    def random(self) -> float:
        return self.strikes.pop(0) if self.strikes else 0.99

    def randint(self, low: int, high: int) -> int:
        return min(self.counts.pop(0), high)

    def sample(self, places: list[Any], count: int) -> list[Any]:
        return places[-count:]


def test_boto3s_batch_writer_writes_them_again(aws: Any) -> None:
    faults: list[dict[str, Any]] = []
    # scripted: the writer's first call (25 requests) has 2 held back; its second (those 2 and the last 5) every one
    # held back, answered without being sent; its third not struck. A struck call may hold back all of its requests,
    # so at a fraction of 1 the writer would never finish.
    hook = SdkFaults(ChaosConfig(partial_batch_write=0.5), faults.append)
    hook._rng = _Script([0.0, 0.0], [2, 7])  # type: ignore[assignment]
    hook.install()
    session = boto3.session.Session(region_name=REGION)
    dynamodb = _tables(session)

    with session.resource("dynamodb").Table("orders").batch_writer() as batch:
        for i in range(30):
            batch.put_item(Item={"id": f"o-{i}", "total": i})

    assert [(f["held_back"], f["sent"]) for f in faults] == [(2, 23), (7, 0)], "a partial call, then a whole one"
    assert _ids(dynamodb, "orders") == {f"o-{i}" for i in range(30)}, "the resource layer read them as DynamoDB's"


def test_the_idempotency_table_is_never_held_back_and_a_single_request_comes_back_whole(aws: Any) -> None:
    """Issue 58, item 2: a batch of one request was never struck, so an app writing one request per call and
    ignoring ``UnprocessedItems`` passed; AWS may return it (this test kept it written before)."""
    aws.setenv(names.ENV_TABLE_NAME, "idem")
    faults: list[dict[str, Any]] = []
    SdkFaults(ChaosConfig(partial_batch_write=1.0), faults.append).install()
    dynamodb = _tables(boto3.session.Session(region_name=REGION))

    assert dynamodb.batch_write_item(RequestItems=_puts("idem", 5))["UnprocessedItems"] == {}
    assert dynamodb.batch_write_item(RequestItems=_puts("orders", 1))["UnprocessedItems"] == _puts("orders", 1)
    assert _ids(dynamodb, "orders") == set()
    # (moto refuses one id in two tables of one request as a duplicate: other ids here)
    mixed = dynamodb.batch_write_item(RequestItems={**_puts("idem", 3, "i"), **_puts("orders", 2, "m")})

    assert "idem" not in mixed["UnprocessedItems"] and {"i-0", "i-1", "i-2"} <= _ids(dynamodb, "idem")
    assert all(set(f["requests"]) == {"orders"} for f in faults) and len(faults) == 2


class _TwoHeldBack:
    """The hook's random source, drawn to strike every call and hold back two requests, the last ones."""

    def random(self) -> float:
        return 0.0

    def randint(self, low: int, high: int) -> int:
        return 2

    def sample(self, places: list[Any], count: int) -> list[Any]:
        return places[-count:]


def test_the_write_watch_names_only_the_requests_sent(aws: Any) -> None:
    seen: list[dict[str, Any]] = []
    WriteWatch(seen.append).install()
    hook = SdkFaults(ChaosConfig(partial_batch_write=1.0, seed=5), lambda _: None)
    hook._rng = _TwoHeldBack()  # type: ignore[assignment]  # (a draw may hold back all four: then nothing is written)
    hook.install()
    dynamodb = _tables(boto3.session.Session(region_name=REGION))

    answer = dynamodb.batch_write_item(RequestItems=_puts("orders", 4))

    [write] = [w for w in seen if w["op"] == "dynamodb.BatchWriteItem"]
    assert sorted(i[1] for i in write["items"]) == sorted(f'[{{"S": "{i}"}}]' for i in _ids(dynamodb, "orders"))
    assert len(write["items"]) == 4 - len(answer["UnprocessedItems"]["orders"])


def test_no_fraction_no_hook(aws: Any) -> None:
    before = boto3.session.Session.__init__
    SdkFaults(ChaosConfig(), lambda _: None).install()

    assert boto3.session.Session.__init__ is before


def test_a_lost_key_shows_the_fault_that_hit_it(tmp_path: Any) -> None:
    """The proof's side (``proof/sdk_faults_seen.py``): a fault's held-back requests named by key through the table
    store's attribute, counted by kind, in the lost key's evidence and row, and in the verdict's words."""
    from effectively_once_local.proof.key_check import verdict
    from effectively_once_local.proof.sdk_faults_seen import render_sdk_faults, sdk_faults

    held = {"orders-physical": [{"PutRequest": {"Item": {"id": {"S": "x"}, "order_id": {"S": " O-2 "}}}}]}
    rows = [
        {"event": "write", "seq": 1, "op": "dynamodb.BatchWriteItem", "request_id": "r1"},
        {"event": "sdk_fault", "seq": 2, "kind": UNPROCESSED, "op": "dynamodb.BatchWriteItem", "requests": held},
    ]
    (tmp_path / "chaos-q-7.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report: dict[str, Any] = {
        "total": {"lost": 1, "duplicated": 0, "unexpected": 0, "unexplained_replays": 0},
        "keys": {"lost": ["o-2"]},
        "states": {"per_key": {"o-2": {"state": "vanished"}}, "evidence": {"o-2": {"kills": []}}},
    }

    def same(key: str) -> str:  # the run's normalisation
        return key.strip().lower()

    report["sdk_faults"] = sdk_faults(report["states"], tmp_path, {"orders-physical": "order_id"}, same)

    assert report["sdk_faults"] == {
        "by_kind": {UNPROCESSED: 1, "throttled": 0, "failed_entries": 0},
        "batch_write_calls": 1,
        "aws_write_calls": 1,
        "batch_calls": 0,
        "keys": {"o-2": 1},
    }
    assert report["states"]["per_key"]["o-2"]["sdk_faults"] == 1
    assert report["states"]["evidence"]["o-2"]["sdk_faults"][0]["kind"] == UNPROCESSED
    assert render_sdk_faults(report["sdk_faults"]) == (
        "sdk faults: unprocessed_items=1, throttled=0, failed_entries=0; 1 keys hit (o-2)"
    )
    report["states"]["keys"], report["states"]["invalid_lines"] = {}, []
    reason = "1 keys lost to injected SDK faults (unprocessed_items), their messages acknowledged: o-2"
    assert reason in verdict(report)[1]


def test_a_throttled_write_fails_as_after_the_sdks_retries_and_writes_nothing(aws: Any) -> None:
    """Item 5b: answered with the service's throttling error, once per call (per HTTP attempt, the SDK's own retries
    would hide it), nothing sent; the idempotency table and the runner's own calls never throttled."""
    from effectively_once_local.chaos.sdk_faults import THROTTLED

    aws.setenv(names.ENV_TABLE_NAME, "idem")
    faults: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []
    running = [True]
    WriteWatch(seen.append).install()
    SdkFaults(ChaosConfig(throttle=1.0), faults.append, running=lambda: running[0]).install()
    session = boto3.session.Session(region_name=REGION)
    dynamodb, s3 = _tables(session), session.client("s3")
    s3.create_bucket(Bucket="receipts")

    with pytest.raises(dynamodb.exceptions.ProvisionedThroughputExceededException) as raised:
        dynamodb.put_item(TableName="orders", Item={"id": {"S": "o-1"}, "order_id": {"S": "o-1"}})
    with pytest.raises(s3.exceptions.ClientError, match="SlowDown"):
        s3.put_object(Bucket="receipts", Key="o-1.json", Body=b"{}")
    with pytest.raises(dynamodb.exceptions.ProvisionedThroughputExceededException):
        session.resource("dynamodb").Table("orders").put_item(Item={"id": "o-2", "order_id": "o-2"})
    dynamodb.put_item(TableName="idem", Item={"id": {"S": "rec#abc"}})  # the idempotency table: never
    running[0] = False
    dynamodb.put_item(TableName="orders", Item={"id": {"S": "runner"}})  # outside an invocation: never

    assert raised.value.response["ResponseMetadata"]["MaxAttemptsReached"] is True
    assert _ids(dynamodb, "orders") == {"runner"} and _ids(dynamodb, "idem") == {"rec#abc"}
    assert [(f["kind"], f["op"], f["error"]) for f in faults] == [
        (THROTTLED, "dynamodb.PutItem", "ProvisionedThroughputExceededException"),
        (THROTTLED, "s3.PutObject", "SlowDown"),
        (THROTTLED, "dynamodb.PutItem", "ProvisionedThroughputExceededException"),
    ]
    assert faults[0]["requests"] == {
        "orders": [{"PutRequest": {"Item": {"id": {"S": "o-1"}, "order_id": {"S": "o-1"}}}}]
    }, "the item, in the wire form, to name its key"
    assert faults[2]["requests"]["orders"][0]["PutRequest"]["Item"]["id"] == {"S": "o-2"}, "the resource's too"
    assert [w["target"] for w in seen if w["op"] == "dynamodb.PutItem"] == ["idem", "orders"], "only what was written"


def test_two_installs_still_draw_once_per_call_and_sqs_throttles_with_its_own_code(aws: Any) -> None:
    faults: list[dict[str, Any]] = []
    for _ in range(2):  # the hooks' unique ids: registered once per session
        SdkFaults(ChaosConfig(throttle=1.0), faults.append).install()
    sqs = boto3.session.Session(region_name=REGION).client("sqs")
    url = sqs.create_queue(QueueName="out")["QueueUrl"]

    with pytest.raises(sqs.exceptions.ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody="x")

    assert raised.value.response["Error"]["Code"] == "RequestThrottled"
    assert len(faults) == 1, "one fault for one call"
