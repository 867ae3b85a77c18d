"""Issue 33, item 7: a falsy result is returned to duplicates as stored, and FIFO is detected from each record's
queue, not from the first record. Against moto's DynamoDB (the idempotency table)."""

from __future__ import annotations

from typing import Any

import pytest

from effectively_once_runtime import Consumer
from effectively_once_runtime.sqs_batch import is_fifo_record

from .conftest import FakeLambdaContext, failures, sqs_record

# --- falsy results ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("result", [{}, 0, [], False, "", 0.5, None, {"charge": "ch-1"}])
def test_a_duplicate_gets_the_result_as_stored_falsy_or_not(result: Any) -> None:
    """Before the change, Powertools handed the duplicate ``None`` for ``{}``, ``0``, ``[]``, ``False`` and ``""``."""
    consumer = Consumer(key="order_id", key_prefix="tests/falsy", effect_key="scoped")
    runs: list[str] = []

    @consumer.record
    def handle(body: dict[str, Any]) -> Any:
        runs.append(body["order_id"])
        return result

    first = consumer.handler({"order_id": "o-1"}, FakeLambdaContext())
    again = consumer.handler({"order_id": "o-1"}, FakeLambdaContext())

    assert runs == ["o-1"], "the duplicate was answered from the record"
    assert (first, type(first)) == (result, type(result))
    assert (again, type(again)) == (result, type(result))


# --- FIFO from each record -------------------------------------------------------------------------------------------


def _without_source(record: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in record.items() if name != "eventSourceARN"}


def test_a_record_is_fifo_by_its_own_queue_or_its_sequence_number() -> None:
    fifo, standard = sqs_record({"order_id": "a"}, fifo_group="g"), sqs_record({"order_id": "b"})

    assert (is_fifo_record(fifo), is_fifo_record(standard)) == (True, False)
    assert is_fifo_record(_without_source(fifo)), "no ARN: the FIFO-only SequenceNumber says it"
    assert not is_fifo_record(_without_source(standard)), "neither: standard"
    grouped = {**standard, "attributes": {**standard["attributes"], "MessageGroupId": "g"}}
    assert not is_fifo_record(grouped), "a group id alone is a fair queue's, not proof of FIFO"


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("strip_first", [True, False])
def test_a_fifo_batch_whose_first_record_lacks_its_arn_still_holds_back_the_group(strip_first: bool) -> None:
    """Before the change, the first record's missing ARN made the batch standard: ``o-3``, behind the failed ``o-2``
    in group ``g``, was still run, out of order."""
    consumer = Consumer(key="order_id", key_prefix="tests/fifo-edge", effect_key="scoped")
    runs: list[str] = []

    @consumer.record
    def handle(body: dict[str, Any]) -> Any:
        runs.append(body["order_id"])
        if body["order_id"] == "o-2":
            raise RuntimeError("the provider is down")
        return body["order_id"]

    records = [sqs_record({"order_id": f"o-{n}"}, message_id=f"m-{n}", fifo_group="g", sequence=n) for n in (1, 2, 3)]
    if strip_first:
        records[0] = _without_source(records[0])

    response = consumer.handler({"Records": records}, FakeLambdaContext())

    assert runs == ["o-1", "o-2"], "o-3 is held behind the failure of its group"
    assert failures(response) == {"m-2", "m-3"}
