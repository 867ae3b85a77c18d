"""Issue 55, item 3, at run time: two operations under one key prefix answer each other. Two consumers on one table
with ``key_prefix="payments"`` and the key ``order_id``, one charging and one refunding: the refund of o-1 met the
charge's ``COMPLETED`` record and was acknowledged as ``duplicate suppressed``; it never ran. With
``Consumer(operation=...)`` each record carries its operation in its validation hash, and a record of another
operation is ``OperationMismatch`` (permanent: the DLQ on first sight, naming both). Against moto in process."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError

from effectively_once_runtime import Consumer, PermanentError, names
from effectively_once_runtime.dead_letter import is_permanent
from effectively_once_runtime.operations import OperationMismatch

from .conftest import IDEMPOTENCY_TABLE, FakeLambdaContext, failures, sqs_record
from .orders_domain import Orders
from .test_dead_letter import Dlq, _use_dlq

PREFIX = "payments"


def _consumer(
    orders: Orders, name: str, done: list[str], *, operation: str | None, validate: str | None = None
) -> Consumer:
    consumer = Consumer(
        key="order_id", key_prefix=PREFIX, service=name, effect_key="scoped", operation=operation, validate=validate
    )
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream

    @consumer.record
    def handle(body: dict[str, Any]) -> dict[str, Any]:
        done.append(f"{name} {body['order_id']}")
        return {name: body["order_id"]}

    return consumer


def _invoke(consumer: Consumer, *records: dict[str, Any]) -> dict[str, Any]:
    return consumer.handler({"Records": list(records)}, FakeLambdaContext())  # type: ignore[no-any-return]


def _validation_hashes(orders: Orders) -> list[str]:
    items = orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    return [item["validation"]["S"] for item in items if "validation" in item]


def test_without_operations_the_refund_is_answered_by_the_charge(orders: Orders) -> None:
    """The issue's scenario as it stands without ``operation=``: the refund never runs (kept as the reason for it)."""
    done: list[str] = []
    charge, refund = (
        _consumer(orders, "charge", done, operation=None),
        _consumer(orders, "refund", done, operation=None),
    )

    _invoke(charge, sqs_record({"order_id": "o-1"}))
    response = _invoke(refund, sqs_record({"order_id": "o-1"}))

    assert failures(response) == set() and done == ["charge o-1"]
    assert orders.messages(names.MSG_DUPLICATE_SUPPRESSED)


def test_with_operations_the_refund_meeting_the_charges_record_goes_to_the_dlq_naming_both(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    done: list[str] = []
    charge = _consumer(orders, "charge", done, operation="charge")
    refund = _consumer(orders, "refund", done, operation="refund")
    dlq: Dlq = _use_dlq(orders, monkeypatch, fifo=False)
    _invoke(charge, sqs_record({"order_id": "o-1"}))
    record, other = sqs_record({"order_id": "o-1"}), sqs_record({"order_id": "o-2"})

    response = _invoke(refund, record, other)

    assert failures(response) == set(), "dead-lettered on first sight; the batch goes on"
    assert done == ["charge o-1", "refund o-2"], "the refund of o-1 did not run, nor was it a duplicate"
    [copy] = dlq.messages()
    reason = json.loads(copy["MessageAttributes"][names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])
    assert reason["error_type"] == "OperationMismatch"
    assert re.search(r"was written by operation 'charge', not 'refund'", reason["message"])
    assert not orders.messages(names.MSG_DUPLICATE_SUPPRESSED)


def test_the_same_operation_still_answers_its_duplicates(orders: Orders) -> None:
    done: list[str] = []
    charge = _consumer(orders, "charge", done, operation="charge")

    first = _invoke(charge, sqs_record({"order_id": "o-1"}))
    again = _invoke(charge, sqs_record({"order_id": "o-1"}))

    assert failures(first) == failures(again) == set() and done == ["charge o-1"]
    [stored] = _validation_hashes(orders)
    assert re.fullmatch(r"[0-9a-f]{32}@charge", stored), "the operation is stored in the validation hash"


def test_with_validate_another_payload_of_the_same_operation_is_a_validation_error_not_a_mismatch(
    orders: Orders,
) -> None:
    done: list[str] = []
    charge = _consumer(orders, "charge", done, operation="charge", validate="amount")
    _invoke(charge, sqs_record({"order_id": "o-1", "amount": 10}))
    record = sqs_record({"order_id": "o-1", "amount": 11})

    response = _invoke(charge, record)

    assert failures(response) == {record["messageId"]} and done == ["charge o-1"]
    [line] = orders.messages(names.MSG_IDEMPOTENCY_REJECTED)
    assert line[names.FIELD_IDEMPOTENCY_ERROR] == "IdempotencyValidationError"


@pytest.mark.parametrize("validate", [None, "amount"], ids=["no-validate", "validate"])
def test_a_record_written_without_an_operation_is_answered_as_before(orders: Orders, validate: str | None) -> None:
    done: list[str] = []
    before = _consumer(orders, "charge", done, operation=None, validate=validate)
    _invoke(before, sqs_record({"order_id": "o-1", "amount": 10}))
    after = _consumer(orders, "charge", done, operation="charge", validate=validate)  # the deploy adding operation=

    response = _invoke(after, sqs_record({"order_id": "o-1", "amount": 10}))

    assert failures(response) == set() and done == ["charge o-1"]
    assert orders.messages(names.MSG_DUPLICATE_SUPPRESSED)


def test_a_record_without_an_operation_and_another_payload_is_still_refused(orders: Orders) -> None:
    done: list[str] = []
    _invoke(_consumer(orders, "charge", done, operation=None, validate="amount"), sqs_record({"order_id": "o-1"}))
    after = _consumer(orders, "charge", done, operation="charge", validate="amount")
    record = sqs_record({"order_id": "o-1", "amount": 11})

    response = _invoke(after, record)

    assert failures(response) == {record["messageId"]} and done == ["charge o-1"]


def test_operation_mismatch_is_permanent_and_a_validation_error() -> None:
    error = OperationMismatch("payments#abc", "charge", "refund")

    assert isinstance(error, PermanentError) and isinstance(error, IdempotencyValidationError)
    assert is_permanent(error) and "not 'refund'" in str(error)


@pytest.mark.parametrize("operation", ["", "charge refund", "a@b", "x" * 65, "é"])
def test_an_operation_that_breaks_its_rule_fails_at_construction(operation: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"but {operation!r} was given")):
        Consumer(key="order_id", key_prefix=PREFIX, effect_key="scoped", operation=operation)


def test_a_stale_claim_of_another_operation_is_refused_not_taken_over(
    orders: Orders, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A charge's claim without an in-progress expiry, older than the take-over window (``claims.py``): the refund
    meeting it is ``OperationMismatch`` on first sight; the charge's record stays."""
    import time

    from effectively_once_runtime.claims import STALE_CLAIM_AFTER_SECONDS

    from .conftest import HANDLER_ENV

    done: list[str] = []
    charge = _consumer(orders, "charge", done, operation="charge")
    _invoke(charge, sqs_record({"order_id": "o-1"}))
    [item] = orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    written = int(time.time()) - STALE_CLAIM_AFTER_SECONDS - 5
    stale = {
        "id": item["id"],
        "status": {"S": "INPROGRESS"},
        "validation": item["validation"],
        "expiration": {"N": str(written + int(HANDLER_ENV["IDEMPOTENCY_EXPIRY_SECONDS"]))},
    }
    orders.dynamodb.put_item(TableName=IDEMPOTENCY_TABLE, Item=stale)
    dlq: Dlq = _use_dlq(orders, monkeypatch, fifo=False)
    refund = _consumer(orders, "refund", done, operation="refund")

    response = _invoke(refund, sqs_record({"order_id": "o-1"}))

    assert failures(response) == set() and done == ["charge o-1"]
    [copy] = dlq.messages()
    assert "OperationMismatch" in copy["MessageAttributes"][names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"]
    [kept] = orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert kept["status"]["S"] == "INPROGRESS" and kept["validation"] == item["validation"]
    assert not orders.messages(names.MSG_STALE_CLAIM_TAKEN_OVER)
