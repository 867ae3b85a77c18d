"""Faults from outside the app (``effectively_once_local.chaos.faults``): every write the local AWS accepted is seen at
the SDK boundary, numbered with the kills by one counter, and may be a kill point; a kill's key is proved from that
order, never from what the app declares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.chaos import fault_model as chaos_module
from effectively_once_local.chaos.fault_model import AFTER_WRITE, RANDOM_MOMENT, ChaosConfig, EventLog, InvocationChaos
from effectively_once_local.chaos.faults import (
    DEAD_LETTER,
    EFFECT,
    EFFECT_RESULT,
    ENV_WATCH_KEYS,
    IDEMPOTENCY_RECORD,
    KILL_POINT_ROLES,
    WriteWatch,
    record_hash_candidates,
    role,
)
from effectively_once_local.chaos.write_services import item_identity
from effectively_once_local.proof.key_check import kills
from effectively_once_runtime import names

REGION = "us-east-1"
RECORD = "shop/orders#" + sorted(record_hash_candidates("o-1"))[0]


class Killed(Exception):
    pass


@pytest.fixture
def no_suicide(monkeypatch: pytest.MonkeyPatch) -> None:
    def kill() -> None:
        raise Killed

    monkeypatch.setattr(chaos_module, "kill_self", kill)


def _table(dynamodb: Any, name: str) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def test_the_watch_sees_accepted_writes_only_with_their_role(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    with mock_aws():
        monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
        WriteWatch(seen.append).install()
        session = boto3.session.Session(region_name=REGION)
        dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
        _table(dynamodb, "idem")
        _table(dynamodb, "outbox")
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        monkeypatch.setenv(names.ENV_TABLE_NAME, "idem")
        monkeypatch.setenv(names.ENV_DEAD_LETTER_QUEUE_URL, dlq)

        dynamodb.put_item(TableName="idem", Item={"id": {"S": RECORD}})
        dynamodb.put_item(TableName="outbox", Item={"id": {"S": "x"}})
        with pytest.raises(dynamodb.exceptions.ConditionalCheckFailedException):
            dynamodb.put_item(
                TableName="outbox", Item={"id": {"S": "x"}}, ConditionExpression="attribute_not_exists(id)"
            )
        sqs.send_message(QueueUrl=dlq, MessageBody="poison")
        sqs.receive_message(QueueUrl=dlq)  # a read: not watched
        dynamodb.update_item(
            TableName="idem",
            Key={"id": {"S": RECORD}},
            UpdateExpression="SET #s = :s",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": "COMPLETED"}},
        )

    assert [(w["op"], w["role"]) for w in seen] == [
        ("dynamodb.PutItem", IDEMPOTENCY_RECORD),
        ("dynamodb.PutItem", EFFECT),  # the refused conditional put was not accepted: not seen
        ("sqs.SendMessage", DEAD_LETTER),
        ("dynamodb.UpdateItem", IDEMPOTENCY_RECORD),
    ]
    assert seen[0]["record_id"] == RECORD and seen[1]["target"] == "outbox"


def test_an_item_in_the_idempotency_table_that_is_no_powertools_record_is_an_effect() -> None:
    env = {names.ENV_TABLE_NAME: "idem"}
    marker = {"TableName": "idem", "Item": {"id": {"S": "shop/orders#marker#o-1"}}}
    record = {"TableName": "idem", "Item": {"id": {"S": RECORD}}}

    assert role("dynamodb", "PutItem", marker, env) == EFFECT
    assert role("dynamodb", "PutItem", record, env) == IDEMPOTENCY_RECORD
    assert role("dynamodb", "PutItem", record, {}) == EFFECT, "without the table's name every write is an effect"


def test_the_runtimes_effect_result_markers_and_on_failure_records_have_their_own_roles() -> None:
    """Issue 30, item 2: an effect's result marker is the runtime's bookkeeping (logged, no kill point), however its
    key ends (a long key ends in a SHA-256, as a record id does); a refused event's record on the on-failure queue is
    the runtime's refusal send, as a DLQ copy is."""
    env = {names.ENV_TABLE_NAME: "idem", names.ENV_ON_FAILURE_QUEUE_URL: "https://q/on-failure"}
    hexed = {"TableName": "idem", "Item": {"id": {"S": "shop/orders#effect-result#confirm#1#" + "ab" * 32}}}
    plain = {"TableName": "idem", "Item": {"id": {"S": "shop/orders#effect-result#confirm#1#o-1"}}}

    assert role("dynamodb", "PutItem", hexed, env) == role("dynamodb", "PutItem", plain, env) == EFFECT_RESULT
    assert EFFECT_RESULT not in KILL_POINT_ROLES
    assert role("sqs", "SendMessage", {"QueueUrl": "https://q/on-failure"}, env) == DEAD_LETTER
    assert role("sqs", "SendMessage", {"QueueUrl": "https://q/other"}, env) == EFFECT
    assert role("sqs", "SendMessage", {"QueueUrl": "https://q/other"}, {names.ENV_ON_FAILURE_QUEUE_URL: ""}) == EFFECT


def _chaos(tmp_path: Path, config: ChaosConfig) -> InvocationChaos:
    return InvocationChaos(config, EventLog(tmp_path / "chaos-q-1.jsonl"), "q", at_effect_line=True)


def _log(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "chaos-q-1.jsonl").read_text().splitlines()]


def test_a_kill_after_a_write_strikes_only_after_a_kill_point_and_is_numbered_after_it(
    tmp_path: Path, no_suicide: None
) -> None:
    chaos = _chaos(tmp_path, ChaosConfig(crash_after_write=1.0, seed=3))
    chaos.rng.random = lambda: 0.0  # type: ignore[method-assign]  # every draw: the fate, and "strike here"
    chaos.begin(deadline=10**9, batch_keys=["o-1"], request_id="r1")

    chaos.on_write({"op": "dynamodb.PutItem", "target": "idem", "role": IDEMPOTENCY_RECORD, "record_id": RECORD})
    with pytest.raises(Killed):
        chaos.on_write({"op": "dynamodb.PutItem", "target": "outbox", "role": EFFECT, "record_id": None})

    log = _log(tmp_path)
    assert [(r["event"], r.get("seq")) for r in log] == [("invocation", None), ("write", 1), ("write", 2), ("kill", 3)]
    assert (log[0]["request_id"], log[0]["batch_keys"]) == ("r1", ["o-1"]), "the batch, for the stores' count"
    assert log[3]["phase"] == AFTER_WRITE and log[3]["last_write"]["target"] == "outbox"


def test_a_random_moment_kill_is_called_off_when_the_invocation_returns(tmp_path: Path, no_suicide: None) -> None:
    chaos = _chaos(tmp_path, ChaosConfig(crash_random=1.0))
    chaos.begin(deadline=10**9, request_id="r1")
    assert chaos.fate == RANDOM_MOMENT and chaos._timer is not None

    chaos.end()

    assert chaos._timer is None


def test_the_new_fates_leave_the_older_draws_alone() -> None:
    # A config without the newer fractions draws what it drew before they existed: they come last.
    assert list(ChaosConfig().fates())[:3] == ["after_charge", "after_complete", "timeout"]
    with pytest.raises(ValueError, match="must not add up to more than 1"):
        ChaosConfig(crash_after_write=0.6, crash_random=0.5)


def _write_chaos_log(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    (run_dir / "chaos-q-7.jsonl").write_text("".join(json.dumps({"pid": 7, **r}) + "\n" for r in rows))


def _w(seq: int, role_: str, op: str = "dynamodb.PutItem", record: str | None = None) -> dict[str, Any]:
    return {"event": "write", "seq": seq, "op": op, "role": role_, "record_id": record, "request_id": "r1"}


@pytest.mark.parametrize(
    ("writes", "expected"),
    [
        # in progress, the effect, the kill: between effect and completion, proved from the order
        ([_w(1, IDEMPOTENCY_RECORD, record=RECORD), _w(2, EFFECT)], "o-1"),
        # ... and the record completed before the kill: after completion
        (
            [
                _w(1, IDEMPOTENCY_RECORD, record=RECORD),
                _w(2, EFFECT),
                _w(3, IDEMPOTENCY_RECORD, "dynamodb.UpdateItem", RECORD),
            ],
            None,
        ),
        # in progress, no effect yet: the kill came before the effect
        ([_w(1, IDEMPOTENCY_RECORD, record=RECORD)], None),
        # an effect with no record in progress (an unguarded handler): no record to be between
        ([_w(1, EFFECT)], None),
    ],
    ids=["effect-then-kill", "completed-first", "before-the-effect", "no-record"],
)
def test_a_kills_key_is_proved_from_the_order_of_writes(
    tmp_path: Path, writes: list[dict[str, Any]], expected: str | None
) -> None:
    kill = {
        "event": "kill",
        "seq": len(writes) + 1,
        "phase": AFTER_WRITE,
        "request_id": "r1",
        "batch_keys": ["o-0", "o-1"],
    }
    _write_chaos_log(tmp_path, [*writes, kill])

    (found,) = kills(tmp_path)

    assert found["key"] == expected


def test_a_stall_at_the_effect_line_is_booked_to_that_lines_key(tmp_path: Path) -> None:
    # A replay answered from its key writes nothing the local AWS accepts: the order of writes shows no window, but
    # the stall struck at the effect line of a key whose record was not completed.
    writes = [_w(1, IDEMPOTENCY_RECORD, record=RECORD)]
    kill = {"event": "kill", "seq": 2, "phase": "timeout", "request_id": "r1", "effect_line_key": "o-1"}
    _write_chaos_log(tmp_path, [*writes, kill])

    (found,) = kills(tmp_path)

    assert found["key"] == "o-1"


def test_a_deadline_with_no_window_in_the_writes_falls_back_to_the_requests_last_effect_line(tmp_path: Path) -> None:
    writes = [_w(1, IDEMPOTENCY_RECORD, record=RECORD)]
    kill = {"event": "kill", "seq": 2, "phase": "deadline", "request_id": "r1", "batch_keys": ["o-1"]}
    _write_chaos_log(tmp_path, [*writes, kill])
    line = {"message": names.EFFECT_EXECUTED, "idempotency_key": "o-1", "function_request_id": "r1"}
    (tmp_path / "function-q-7.log").write_text(json.dumps(line) + "\n")

    (found,) = kills(tmp_path)

    assert found["key"] == "o-1"


def test_each_write_names_the_items_it_wrote_in_the_form_the_stores_read_them(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    with mock_aws():
        monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
        monkeypatch.setenv(ENV_WATCH_KEYS, json.dumps({"outbox": ["id"]}))
        WriteWatch(seen.append).install()
        session = boto3.session.Session(region_name=REGION)
        dynamodb, sqs, s3 = session.client("dynamodb"), session.client("sqs"), session.client("s3")
        _table(dynamodb, "outbox")
        _table(dynamodb, "other")
        queue = sqs.create_queue(QueueName="events")["QueueUrl"]
        s3.create_bucket(Bucket="receipts")

        dynamodb.put_item(TableName="outbox", Item={"id": {"S": "a"}, "order_id": {"S": "o-1"}})
        dynamodb.put_item(TableName="other", Item={"id": {"S": "b"}})  # not an effect store: nothing named
        dynamodb.batch_write_item(RequestItems={"outbox": [{"PutRequest": {"Item": {"id": {"S": "c"}}}}]})
        dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": "outbox", "Item": {"id": {"S": "d"}}}}])
        sent = sqs.send_message(QueueUrl=queue, MessageBody="{}")["MessageId"]
        s3.put_object(Bucket="receipts", Key="r/o-1.json", Body=b"{}")

    assert [w["items"] for w in seen] == [
        [["outbox", item_identity({"id": {"S": "a"}}, ["id"])]],
        [],
        [["outbox", item_identity({"id": {"S": "c"}}, ["id"])]],
        [["outbox", item_identity({"id": {"S": "d"}}, ["id"])]],
        [[queue, sent]],
        [["receipts", "r/o-1.json"]],
    ]
