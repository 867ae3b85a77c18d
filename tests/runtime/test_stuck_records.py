"""Issue 55, item 4a: a stored record that blocks its key. An ``INPROGRESS`` record without ``in_progress_expiration``
(an older version's, ``Consumer.process`` outside a handler, another writer's) was never taken over before its
``expiration``, days away: every receive failed as "already in progress" until SQS moved the message to the DLQ
without a reason. A status the runtime does not know (``EXPIRED`` stored, another writer's value) was answered as a
duplicate or as Powertools' "inconsistent results". Now a stale claim is taken over once its write time plus the
function timeout plus a margin has passed, an unknown status goes to the DLQ on first sight with a reason naming it,
and the record's failure lines name the stored status. Through a ``Consumer``'s handler against moto in process."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest

from effectively_once_runtime import names
from effectively_once_runtime.claims import STALE_CLAIM_AFTER_SECONDS

from .conftest import HANDLER_ENV, IDEMPOTENCY_TABLE, REGION, FakeLambdaContext, failures, sqs_record
from .orders_domain import Killed, Orders, _stored_key, order
from .test_dead_letter import Dlq, _use_dlq

EXPIRY = int(HANDLER_ENV["IDEMPOTENCY_EXPIRY_SECONDS"])
#: How long a claim without an in-progress expiry is held after its write: Lambda's longest timeout and a margin.
HELD_S = STALE_CLAIM_AFTER_SECONDS


def _context() -> FakeLambdaContext:
    return FakeLambdaContext(remaining_ms=30_000)  # a 30 s function: the window is Lambda's longest timeout still


def _store(ddb: Any, order_id: str, status: str, *, written_ago: float, in_progress_expiry: bool = False) -> str:
    """The record of ``order_id`` as another writer left it: ``status``, written ``written_ago`` seconds ago (its
    expiration is that time plus the expiry), with an in-progress expiry an hour on when ``in_progress_expiry``."""
    record_id = _stored_key(order_id)
    now = time.time()
    item = {
        "id": {"S": record_id},
        "status": {"S": status},
        "expiration": {"N": str(int(now - written_ago) + EXPIRY)},
    }
    if in_progress_expiry:
        item["in_progress_expiration"] = {"N": str(int(now * 1000) + 3_600_000)}
    ddb.put_item(TableName=IDEMPOTENCY_TABLE, Item=item)
    return record_id


def _status(ddb: Any, record_id: str) -> str:
    return ddb.get_item(TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": record_id}})["Item"]["status"]["S"]  # type: ignore[no-any-return]


def _killed_outside_a_handler(orders: Orders, order_id: str, written_ago: float) -> str:
    """The record of ``order_id`` left by ``Consumer.process`` outside a handler, killed in its record function: an
    ``INPROGRESS`` record with the payload's validation hash and no in-progress expiry, aged ``written_ago``
    seconds."""
    with pytest.raises(Killed), pytest.warns(UserWarning, match="remaining time"):
        orders.consumer.process(order(order_id, kill=True))
    record_id = _stored_key(order_id)
    orders.dynamodb.update_item(
        TableName=IDEMPOTENCY_TABLE,
        Key={"id": {"S": record_id}},
        UpdateExpression="SET expiration = expiration - :ago",
        ExpressionAttributeValues={":ago": {"N": str(int(written_ago))}},
    )
    return record_id


# --- a claim nothing releases --------------------------------------------------------------------------------------
@pytest.mark.parametrize("writer", ["killed-outside-a-handler", "another-writer"])
def test_a_claim_without_in_progress_expiry_older_than_the_timeout_is_taken_over(orders: Orders, writer: str) -> None:
    if writer == "another-writer":
        record_id = _store(orders.dynamodb, "o-1", "INPROGRESS", written_ago=HELD_S + 5)
    else:
        record_id = _killed_outside_a_handler(orders, "o-1", HELD_S + 5)

    response = orders.invoke([sqs_record(order("o-1"))], _context())

    assert failures(response) == set() and orders.confirmed == ["o-1"]
    assert _status(orders.dynamodb, record_id) == "COMPLETED"
    lines = orders.log_lines()
    [processed] = [line for line in lines if line.get("message") == names.MSG_RECORD_PROCESSED]
    assert names.FIELD_IDEMPOTENCY_STATUS not in processed, "the claim made again decided: no stale status"
    [line] = [line for line in lines if line.get("message") == names.MSG_STALE_CLAIM_TAKEN_OVER]
    assert (
        line["level"] == "WARNING"
        and record_id in line["reason"]
        and "no invocation can still hold it" in (line["reason"])
    )


def test_a_claim_without_in_progress_expiry_within_the_timeout_still_holds_its_key(orders: Orders) -> None:
    record_id = _killed_outside_a_handler(orders, "o-2", HELD_S - 20)
    record = sqs_record(order("o-2"))

    response = orders.invoke([record], _context())

    assert failures(response) == {record["messageId"]} and orders.confirmed == []
    assert _status(orders.dynamodb, record_id) == "INPROGRESS"
    lines = orders.log_lines()
    rejected = [line for line in lines if line.get("message") == names.MSG_IDEMPOTENCY_REJECTED]
    failed = [line for line in lines if line.get("message") == names.MSG_RECORD_FAILED]
    assert [line[names.FIELD_IDEMPOTENCY_STATUS] for line in rejected + failed] == ["INPROGRESS", "INPROGRESS"]
    assert failed[0]["error_type"] == "IdempotencyAlreadyInProgressError"
    assert not [line for line in lines if line.get("message") == names.MSG_STALE_CLAIM_TAKEN_OVER]


def test_a_claim_with_its_in_progress_expiry_is_left_to_it_however_old(orders: Orders) -> None:
    record = sqs_record(order("o-3"))
    record_id = _store(orders.dynamodb, "o-3", "INPROGRESS", written_ago=HELD_S * 10, in_progress_expiry=True)

    response = orders.invoke([record], _context())

    assert failures(response) == {record["messageId"]} and _status(orders.dynamodb, record_id) == "INPROGRESS"


def test_two_attempts_taking_over_one_stale_claim_run_it_once(orders: Orders) -> None:
    """Between this attempt's refusal and its removal of the stale claim, another attempt removed it and claimed the
    key: the removal's condition fails on the new claim, and the claim made again meets it."""
    record_id = _store(orders.dynamodb, "o-5", "INPROGRESS", written_ago=HELD_S + 5)
    other = boto3.client("dynamodb", region_name=REGION)
    orders.consumer.setup()
    state = orders.consumer._state
    assert state is not None

    def another_attempt_takes_it_over(**_: Any) -> None:
        other.delete_item(TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": record_id}})
        _store(other, "o-5", "INPROGRESS", written_ago=0, in_progress_expiry=True)

    state.persistence_store.client.meta.events.register_first(  # type: ignore[attr-defined]
        "before-call.dynamodb.DeleteItem", another_attempt_takes_it_over
    )
    record = sqs_record(order("o-5"))

    response = orders.invoke([record], _context())

    assert failures(response) == {record["messageId"]} and orders.confirmed == []
    stored = orders.dynamodb.get_item(TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": record_id}})["Item"]
    assert "in_progress_expiration" in stored, "the other attempt's claim stands"
    assert orders.messages(names.MSG_STALE_CLAIM_TAKEN_OVER) == [], "this attempt took nothing over"


def test_the_status_of_a_refused_claim_does_not_follow_the_next_record(orders: Orders) -> None:
    _killed_outside_a_handler(orders, "o-8", 0)
    held, free = sqs_record(order("o-8")), sqs_record(order("o-9"))

    orders.invoke([held, free], _context())

    [processed] = orders.messages(names.MSG_RECORD_PROCESSED)
    assert processed["idempotency_key"] == "o-9" and names.FIELD_IDEMPOTENCY_STATUS not in processed


# --- a status the runtime does not know ----------------------------------------------------------------------------
@pytest.mark.parametrize("status", ["EXPIRED", "FAILED"])
def test_an_unknown_stored_status_goes_to_the_dlq_on_first_sight_with_its_reason(
    orders: Orders, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    dlq: Dlq = _use_dlq(orders, monkeypatch, fifo=False)
    record_id = _store(orders.dynamodb, "o-6", status, written_ago=60)
    record, good = sqs_record(order("o-6")), sqs_record(order("o-7"))

    response = orders.invoke([record, good], _context())

    assert failures(response) == set(), "dead-lettered on first sight, and the batch goes on"
    assert orders.confirmed == ["o-7"] and _status(orders.dynamodb, record_id) == status
    [copy] = dlq.messages()
    reason = json.loads(copy["MessageAttributes"][names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])
    assert reason["error_type"] == "UnknownRecordStatus"
    assert f"idempotency record {record_id} holds status {status!r}" in reason["message"]
    [line] = [line for line in orders.log_lines() if line.get("message") == names.MSG_RECORD_DEAD_LETTERED]
    assert line[names.FIELD_IDEMPOTENCY_STATUS] == status
