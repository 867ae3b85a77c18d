"""Issue 33, item 4: S3 event notifications carried by a queue or a topic are a supported shape. ``envelope="s3"``
names it, ``"auto"`` detects it, each S3 record is keyed as a direct S3 trigger's record is, and the ``s3:TestEvent``
S3 sends when a bucket's notification configuration is written is acknowledged with one INFO line: no DLQ copy, no
failure. Against moto's DynamoDB and SQS."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from effectively_once_runtime import Consumer, names

from .conftest import (
    FakeLambdaContext,
    _CurrentStdout,
    failures,
    sqs_record,
)
from .test_events import s3_record, sns_envelope, sns_record

KEY = "[s3.bucket.name, s3.object.key, s3.object.sequencer]"
TEST_EVENT = {
    "Service": "Amazon S3",
    "Event": "s3:TestEvent",
    "Time": "2026-12-05T08:00:00.000Z",
    "Bucket": "payments-inbox",
    "RequestId": "5582815E1AEA5ADF",
    "HostId": "8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE",
}


class Queue:
    """moto's idempotency table and a DLQ, and a consumer factory whose record function counts its runs."""

    def __init__(self, sqs: Any, dlq: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.sqs, self.dlq, self.capsys = sqs, dlq, capsys
        self.runs: list[str] = []

    def consumer(self, envelope: str, fail: str | None = None) -> Consumer:
        consumer = Consumer(key=KEY, key_prefix="tests/s3-queues", envelope=envelope, effect_key="scoped")
        consumer.logger.registered_handler.stream = _CurrentStdout()  # type: ignore[attr-defined]

        @consumer.record
        def handle(record: dict[str, Any]) -> Any:
            name = record["s3"]["object"]["key"]
            self.runs.append(name)
            if name == fail:
                raise RuntimeError("the ledger is down")
            return {"object": name}

        return consumer

    def dead_lettered(self) -> list[str]:
        found = self.sqs.receive_message(QueueUrl=self.dlq, MaxNumberOfMessages=10).get("Messages") or []
        return [message["Body"] for message in found]

    def lines(self, message: str) -> list[dict[str, Any]]:
        out = self.capsys.readouterr().out
        return [line for line in map(json.loads, filter(None, out.splitlines())) if line.get("message") == message]


@pytest.fixture
def queue(dead_letter_aws: tuple[Any, str], capsys: pytest.CaptureFixture[str]) -> Queue:
    return Queue(*dead_letter_aws, capsys)


def _object(name: str, sequencer: str = "0C0F6F405D6ED209E1") -> dict[str, Any]:
    record = copy.deepcopy(s3_record())
    record["s3"]["object"].update(key=name, sequencer=sequencer)
    return record


def _s3_to_sqs(*records: dict[str, Any], message_id: str = "m-1") -> dict[str, Any]:
    """An SQS record as S3 -> SQS delivers it: the body is the notification."""
    return sqs_record({"Records": list(records)}, message_id=message_id)


def _s3_to_sns_to_sqs(*records: dict[str, Any], message_id: str = "m-1") -> dict[str, Any]:
    """An SQS record as S3 -> SNS -> SQS (raw delivery off) delivers it: the notification is the SNS Message."""
    return sqs_record(sns_envelope(json.dumps({"Records": list(records)})), message_id=message_id)


@pytest.mark.parametrize("envelope", ["s3", "auto"])
@pytest.mark.parametrize("carried", [_s3_to_sqs, _s3_to_sns_to_sqs], ids=["s3-sqs", "s3-sns-sqs"])
def test_an_s3_notification_in_a_queue_is_processed_once_per_record(queue: Queue, envelope: str, carried: Any) -> None:
    """Before the change, ``envelope="s3"`` was refused and under ``"auto"`` the key found nothing in the body (the
    record went to the DLQ as invalid)."""
    consumer = queue.consumer(envelope)
    record = _object("batches/1.json")

    first = consumer.handler({"Records": [carried(record)]}, FakeLambdaContext())
    again = consumer.handler({"Records": [carried(record, message_id="m-2")]}, FakeLambdaContext())

    assert failures(first) == failures(again) == set()
    assert queue.runs == ["batches/1.json"], "the redelivery was answered as a duplicate"
    assert queue.dead_lettered() == []


def test_each_s3_record_is_keyed_as_a_direct_s3_trigger_is(queue: Queue) -> None:
    """The same S3 record, first from a direct S3 trigger, then through a queue: one run."""
    consumer = queue.consumer("auto")
    record = _object("batches/2.json")

    consumer.handler({"Records": [record]}, FakeLambdaContext())
    response = consumer.handler({"Records": [_s3_to_sqs(record)]}, FakeLambdaContext())

    assert failures(response) == set()
    assert queue.runs == ["batches/2.json"]


def test_several_s3_records_in_one_message_are_each_processed_and_a_failure_brings_it_back(queue: Queue) -> None:
    consumer = queue.consumer("s3", fail="batches/b.json")
    message = _s3_to_sqs(
        _object("batches/a.json", "01"), _object("batches/b.json", "02"), _object("batches/c.json", "03")
    )

    response = consumer.handler({"Records": [message]}, FakeLambdaContext())
    assert failures(response) == {"m-1"}, "transient: the message comes back"
    assert queue.runs == ["batches/a.json", "batches/b.json", "batches/c.json"], "every record was tried"

    healed = queue.consumer("s3")
    queue.runs.clear()
    again = healed.handler({"Records": [message]}, FakeLambdaContext())

    assert failures(again) == set()
    assert queue.runs == ["batches/b.json"], "a and c were answered as duplicates"


@pytest.mark.parametrize("envelope", ["s3", "auto"])
@pytest.mark.parametrize(
    "carried",
    [
        lambda: sqs_record(TEST_EVENT, message_id="m-test"),
        lambda: sqs_record(sns_envelope(json.dumps(TEST_EVENT)), message_id="m-test"),
    ],
    ids=["s3-sqs", "s3-sns-sqs"],
)
def test_the_s3_test_event_is_acknowledged_with_one_info_line(queue: Queue, envelope: str, carried: Any) -> None:
    """Before the change the test event went to the DLQ as an invalid record, and the DLQ alarm fired on a
    notification configuration change."""
    consumer = queue.consumer(envelope)
    queue.capsys.readouterr()

    response = consumer.handler({"Records": [carried()]}, FakeLambdaContext())

    assert failures(response) == set()
    assert queue.runs == [] and queue.dead_lettered() == []
    [line] = queue.lines(names.MSG_S3_TEST_EVENT)
    assert line["level"] == "INFO" and "payments-inbox" in line[names.FIELD_REASON]
    assert queue.lines(names.MSG_INVALID_RECORD) == []


def test_the_s3_test_event_through_a_topic_to_the_function_is_acknowledged(queue: Queue) -> None:
    consumer = queue.consumer("auto")

    result = consumer.handler({"Records": [sns_record(json.dumps(TEST_EVENT))]}, FakeLambdaContext())

    assert result is None or result == [None]
    assert queue.runs == []


def test_s3_names_the_shape_so_another_body_is_refused(queue: Queue) -> None:
    consumer = queue.consumer("s3")

    response = consumer.handler({"Records": [sqs_record({"payment_id": "p-1"}, message_id="m-p")]}, FakeLambdaContext())

    assert failures(response) == set() and queue.runs == []
    [moved] = queue.dead_lettered()
    assert "p-1" in moved


def test_auto_keeps_a_plain_body_that_holds_records_of_its_own(queue: Queue) -> None:
    """A payload with a ``Records`` list that is not S3's is the payload itself under ``"auto"``."""
    consumer = Consumer(key="batch_id", key_prefix="tests/s3-auto", envelope="auto", effect_key="scoped")
    seen: list[Any] = []

    @consumer.record
    def handle(body: dict[str, Any]) -> Any:
        seen.append(body)
        return None

    body = {"batch_id": "b-1", "Records": [{"line": 1}]}
    response = consumer.handler({"Records": [sqs_record(body)]}, FakeLambdaContext())

    assert failures(response) == set() and seen == [body]
