"""Permanent failures go to the DLQ on first sight (issue 14, section 1): the generic runtime against moto's SQS and
DynamoDB in process. Without ``DEAD_LETTER_QUEUE_URL`` the old behaviour (a batch item failure) is what
``test_runtime.py`` and the payment tests check."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyKeyError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from botocore.exceptions import ClientError, EndpointConnectionError

from effectively_once_runtime import InvalidRecord, PermanentError, names
from effectively_once_runtime.dead_letter import MAX_MESSAGE_ATTRIBUTES, DeadLetterQueue, is_permanent, queue_region
from payments.model import InvalidPayment

from .conftest import (
    IDEMPOTENCY_TABLE,
    REGION,
    FakeLambdaContext,
    failures,
    redeliver,
    sqs_record,
    use_dead_letter_queue,
)
from .orders_domain import Orders, Unfulfillable, _stored_key, order

# --- one place decides what is permanent ---------------------------------------------------------------------------

PERMANENT = {
    "PermanentError": PermanentError("rule"),
    "a user's PermanentError subclass": Unfulfillable("cannot"),
    "InvalidRecord (body not JSON / not an object / no key)": InvalidRecord("body is not valid JSON"),
    "the sample's InvalidPayment": InvalidPayment("amount must be positive"),
    "IdempotencyKeyError": IdempotencyKeyError("no key"),
    "IdempotencyValidationError": IdempotencyValidationError("payload does not match"),
}
TRANSIENT = {
    "in-progress duplicate": IdempotencyAlreadyInProgressError("busy"),
    "persistence layer (DynamoDB down)": IdempotencyPersistenceLayerError("unavailable"),
    "throttling": ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem"),
    "connection": EndpointConnectionError(endpoint_url="https://provider.example"),
    "timeout": TimeoutError("read timed out"),
    "unexpected": RuntimeError("bug"),
    "KeyError in a record function": KeyError("total"),
    "ValueError in a record function": ValueError("bad"),
    # A provider answering an HTML error page makes a record function's json.loads raise this: not permanent.
    "JSONDecodeError in a record function": json.JSONDecodeError("Expecting value", "<html>", 0),
}


@pytest.mark.parametrize("error", PERMANENT.values(), ids=PERMANENT.keys())
def test_permanent_errors(error: Exception) -> None:
    assert is_permanent(error)


@pytest.mark.parametrize("error", TRANSIENT.values(), ids=TRANSIENT.keys())
def test_transient_errors(error: Exception) -> None:
    assert not is_permanent(error)


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("https://sqs.eu-west-1.amazonaws.com/123456789012/q", "eu-west-1"),
        ("https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q", "cn-north-1"),
        ("https://us-east-2.queue.amazonaws.com/123456789012/q.fifo", "us-east-2"),
        ("http://localhost:4566/123456789012/q", None),
    ],
)
def test_queue_region_comes_from_the_queue_url(url: str, region: str | None) -> None:
    assert queue_region(url) == region


@pytest.mark.parametrize("url", ["q", "arn:aws:sqs:us-east-1:123456789012:q", "https://sqs.us-east-1.amazonaws.com/"])
def test_malformed_dead_letter_queue_url_fails_at_cold_start(
    orders: Orders,
    monkeypatch: pytest.MonkeyPatch,
    url: str,  # noqa: F811
) -> None:
    monkeypatch.setenv(names.ENV_DEAD_LETTER_QUEUE_URL, url)
    orders.consumer.reset()

    with pytest.raises(ValueError, match="DEAD_LETTER_QUEUE_URL must be an SQS queue URL"):
        orders.consumer.setup()


# --- against moto --------------------------------------------------------------------------------------------------


@dataclass
class Dlq:
    orders: Orders
    sqs: Any
    url: str

    def messages(self) -> list[dict[str, Any]]:
        """Every message in the DLQ (received once, left there)."""
        found: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                VisibilityTimeout=300,
            ).get("Messages", [])
            if not batch:
                return found
            found.extend(batch)

    def reasons(self) -> list[dict[str, Any]]:
        return [
            json.loads(m["MessageAttributes"][names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])
            for m in self.messages()
        ]


def _use_dlq(orders: Orders, monkeypatch: pytest.MonkeyPatch, *, fifo: bool, url: str | None = None) -> Dlq:
    return Dlq(orders, *use_dead_letter_queue(monkeypatch, fifo=fifo, consumer=orders.consumer, url=url))


@pytest.fixture
def dlq(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dlq]:  # noqa: F811
    yield _use_dlq(orders, monkeypatch, fifo=False)


@pytest.fixture
def fifo_dlq(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dlq]:  # noqa: F811
    yield _use_dlq(orders, monkeypatch, fifo=True)


ATTRIBUTES = {
    "trace": {"stringValue": "abc-123", "stringListValues": [], "binaryListValues": [], "dataType": "String"},
    "priority": {"stringValue": "7", "stringListValues": [], "binaryListValues": [], "dataType": "Number"},
    "blob": {
        "binaryValue": base64.b64encode(b"\x00\x01raw").decode(),
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "Binary.octets",
    },
}


def _with_attributes(record: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    record["messageAttributes"] = attributes
    return record


#: Each permanent kind, as a record body (the validation kind needs its key stored first, see the test).
#: (body, error type, the idempotency key on the dead-lettered line).
PERMANENT_BODIES = {
    "not JSON": ("not json", "InvalidRecord", None),
    "not an object": ("[1, 2]", "InvalidRecord", None),
    "no idempotency key": (json.dumps({"order": {"total": 5, "currency": "EUR"}}), "InvalidRecord", None),
    "PermanentError from the record function": (
        json.dumps(order("o-bad", unfulfillable=True)),
        "Unfulfillable",
        "o-bad",
    ),
    "key reused with another payload": (json.dumps(order("o-1", total=999)), "IdempotencyValidationError", "o-1"),
}


@pytest.mark.parametrize(("body", "error_type", "key"), PERMANENT_BODIES.values(), ids=PERMANENT_BODIES.keys())
def test_each_permanent_kind_goes_to_the_dlq_on_first_sight_and_is_done(
    dlq: Dlq, body: str, error_type: str, key: str | None
) -> None:
    assert failures(dlq.orders.invoke([sqs_record(order("o-1", total=100))])) == set()
    bad = _with_attributes(sqs_record(body, receive_count=1), dict(ATTRIBUTES))
    good = sqs_record(order("o-good"))
    dlq.orders.log_lines()

    response = dlq.orders.invoke([bad, good], FakeLambdaContext())

    assert failures(response) == set(), "a record sent to the DLQ is done"
    assert dlq.orders.confirmed == ["o-1", "o-good"]
    (copy,) = dlq.messages()
    assert copy["Body"] == body
    attributes = copy["MessageAttributes"]
    assert set(attributes) == {*ATTRIBUTES, names.DEAD_LETTER_REASON_ATTRIBUTE}
    assert attributes["trace"] == {"StringValue": "abc-123", "DataType": "String"}
    assert attributes["priority"] == {"StringValue": "7", "DataType": "Number"}
    assert attributes["blob"] == {"BinaryValue": b"\x00\x01raw", "DataType": "Binary.octets"}
    reason = json.loads(attributes[names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])
    assert reason["error_type"] == error_type
    assert reason["message_id"] == bad["messageId"]
    assert reason["receive_count"] == 1
    assert reason["function_name"] == "payments"  # FakeLambdaContext's
    assert 0 < len(reason["message"]) <= 400
    (line,) = dlq.orders.messages(names.MSG_RECORD_DEAD_LETTERED)
    assert line[names.FIELD_ERROR_TYPE] == error_type
    assert line[names.FIELD_MESSAGE_ID] == bad["messageId"]
    assert line[names.FIELD_DEAD_LETTER_MESSAGE_ID] == copy["MessageId"]
    assert line.get(names.FIELD_IDEMPOTENCY_KEY) == key, "the key when known (Powertools drops a None field)"


def test_reason_message_is_cut_short(dlq: Dlq) -> None:
    bad = sqs_record(order("x" * 5000, unfulfillable=True))

    assert failures(dlq.orders.invoke([bad])) == set()

    (reason,) = dlq.reasons()
    assert len(reason["message"]) < 400 and reason["message"].endswith("...")


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda o: sqs_record(order("o-x", fail=True)), id="unexpected exception"),
        pytest.param("in-progress", id="in-progress duplicate"),
    ],
)
def test_transient_failure_is_a_batch_item_failure_and_not_sent(dlq: Dlq, make: Any) -> None:
    if make == "in-progress":
        # Another invocation holds the key: its in-progress record, written as Powertools writes one.
        now = time.time()
        dlq.orders.dynamodb.put_item(
            TableName=IDEMPOTENCY_TABLE,
            Item={
                "id": {"S": _stored_key("o-busy")},
                "status": {"S": "INPROGRESS"},
                "expiration": {"N": str(int(now) + 3600)},
                "in_progress_expiration": {"N": str(int(now * 1000) + 30_000)},
                "validation": {"S": hashlib.md5(json.dumps([100, "EUR"]).encode()).hexdigest()},
            },
        )
        record = sqs_record(order("o-busy"))
    else:
        record = make(dlq.orders)

    response = dlq.orders.invoke([record, sqs_record(order("o-good"))])

    assert failures(response) == {record["messageId"]}
    assert dlq.orders.confirmed == ["o-good"]
    assert dlq.messages() == []
    assert dlq.orders.messages(names.MSG_RECORD_DEAD_LETTERED) == []


def test_send_to_a_wrong_queue_url_fails_the_record_and_loses_nothing(
    orders: Orders,
    monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    wrong = f"https://sqs.{REGION}.amazonaws.com/123456789012/no-such-queue"
    dlq = _use_dlq(orders, monkeypatch, fifo=False, url=wrong)
    bad, good = sqs_record("not json"), sqs_record(order("o-good"))

    response = orders.invoke([bad, good])

    assert failures(response) == {bad["messageId"]}, "the record stays in the queue; SQS moves it later"
    assert dlq.messages() == []
    assert orders.confirmed == ["o-good"]
    (line,) = orders.messages(names.MSG_DEAD_LETTER_FAILED)
    assert line[names.FIELD_ERROR_TYPE] == "InvalidRecord"
    assert "NonExistentQueue" in line[names.FIELD_REASON] or "QueueDoesNotExist" in line[names.FIELD_REASON]
    assert orders.messages(names.MSG_RECORD_DEAD_LETTERED) == []


class _Unreachable:
    def __init__(self) -> None:
        self.calls = 0

    def send_message(self, **request: Any) -> dict[str, Any]:
        self.calls += 1
        raise EndpointConnectionError(endpoint_url=request["QueueUrl"])


def test_send_that_fails_fails_the_record_and_the_client_is_built_once(dlq: Dlq) -> None:
    built: list[str | None] = []
    client = _Unreachable()

    def factory(region: str | None) -> Any:
        built.append(region)
        return client

    dlq.orders.consumer.state.dead_letter = DeadLetterQueue(dlq.url, client_factory=factory)
    first = [sqs_record("not json"), sqs_record(order(None))]
    second = [sqs_record("[]")]

    assert failures(dlq.orders.invoke(first)) == {r["messageId"] for r in first}
    assert failures(dlq.orders.invoke(second)) == {second[0]["messageId"]}

    assert client.calls == 3
    assert built == [REGION], "one SQS client per execution environment, in the queue URL's Region"
    assert len(dlq.orders.messages(names.MSG_DEAD_LETTER_FAILED)) == 3


def _attributes(count: int) -> dict[str, Any]:
    return {f"a{i}": {"stringValue": str(i), "dataType": "String"} for i in range(count)}


def test_ten_original_attributes_leave_no_room_for_the_reason_the_record_fails(dlq: Dlq) -> None:
    full = _with_attributes(sqs_record("not json"), _attributes(MAX_MESSAGE_ATTRIBUTES))
    room = _with_attributes(sqs_record("[]"), _attributes(MAX_MESSAGE_ATTRIBUTES - 1))

    response = dlq.orders.invoke([full, room])

    assert failures(response) == {full["messageId"]}
    (copy,) = dlq.messages()
    assert copy["Body"] == "[]" and len(copy["MessageAttributes"]) == MAX_MESSAGE_ATTRIBUTES
    (line,) = dlq.orders.messages(names.MSG_DEAD_LETTER_FAILED)
    assert "10 message attributes" in line[names.FIELD_REASON]


def test_fifo_poison_goes_to_the_dlq_and_its_group_continues_in_order(fifo_dlq: Dlq) -> None:
    a1 = sqs_record(order("a1"), fifo_group="g", sequence=1)
    poison = sqs_record(order("p", unfulfillable=True), fifo_group="g", sequence=2)
    a2 = sqs_record(order("a2"), fifo_group="g", sequence=3)
    a3 = sqs_record(order("a3"), fifo_group="g", sequence=4)

    response = fifo_dlq.orders.invoke([a1, poison, a2, a3])

    assert failures(response) == set(), "valid records never wait behind poison"
    assert fifo_dlq.orders.confirmed == ["a1", "a2", "a3"]
    (copy,) = fifo_dlq.messages()
    assert copy["Body"] == poison["body"]
    assert copy["Attributes"]["MessageGroupId"] == "g"
    assert copy["Attributes"]["MessageDeduplicationId"] == poison["messageId"]


def test_fifo_second_delivery_of_the_same_poison_is_deduplicated(fifo_dlq: Dlq) -> None:
    poison = sqs_record("not json", fifo_group="g", sequence=1)

    # The first copy was sent, but the record was not deleted (the invocation died after): SQS delivers it again.
    assert failures(fifo_dlq.orders.invoke([poison])) == set()
    assert failures(fifo_dlq.orders.invoke([redeliver(poison)])) == set()

    assert len(fifo_dlq.messages()) == 1


def test_standard_second_delivery_of_the_same_poison_sends_a_second_copy(dlq: Dlq) -> None:
    # Documented (dead_letter.py): a standard queue has no deduplication; a second copy of poison is harmless.
    poison = sqs_record("not json")

    dlq.orders.invoke([poison])
    dlq.orders.invoke([redeliver(poison)])

    assert sorted(r["receive_count"] for r in dlq.reasons()) == [1, 2]


def test_fair_queue_poison_reaches_its_standard_dlq_with_its_group_and_no_deduplication_id(dlq: Dlq) -> None:
    """Issue 55, item 5: a standard queue's record may carry a MessageGroupId (fair queues), and its DLQ is standard.
    The copy carried a MessageDeduplicationId, which SQS refuses on a standard queue (and moto here, as the local
    AWS: the conftest's ``aws_refusals``): the record stayed until maxReceiveCount and reached the DLQ without its
    reason."""
    poison = sqs_record("not json")
    poison["attributes"]["MessageGroupId"] = "tenant-7"  # a fair queue's tenant, on the standard queue

    response = dlq.orders.invoke([poison])

    assert failures(response) == set()
    [copy] = dlq.messages()
    assert copy["Attributes"]["MessageGroupId"] == "tenant-7" and "MessageDeduplicationId" not in copy["Attributes"]
    assert json.loads(copy["MessageAttributes"][names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])["error_type"] == (
        "InvalidRecord"
    )


def test_failed_records_counts_only_batch_item_failures_and_dead_lettered_counts_the_sends(dlq: Dlq) -> None:
    dlq.orders.log_lines()
    busy = sqs_record(order("o-x", fail=True))

    dlq.orders.invoke([sqs_record("not json"), sqs_record("[]"), busy, sqs_record(order("o-ok"))])

    docs = [json.loads(x) for x in dlq.orders.capsys.readouterr().out.splitlines() if x.startswith("{") and "_aws" in x]
    (doc,) = docs
    value = lambda name: sum(doc[name]) if isinstance(doc[name], list) else doc[name]  # noqa: E731
    assert value(names.METRIC_FAILED_RECORDS) == 1
    assert value(names.METRIC_DEAD_LETTERED) == 2


def test_direct_invocation_still_raises_and_sends_nothing(dlq: Dlq) -> None:
    with pytest.raises(PermanentError):
        dlq.orders.invoke_direct(order("o-bad", unfulfillable=True))

    assert dlq.messages() == []
