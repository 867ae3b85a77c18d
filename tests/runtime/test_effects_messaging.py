"""Queues and topics (issue 24, item 4): FIFO sends carry the adapter key as their deduplication id; standard queues
and topics go through the un-keyed markers with ``delivery=``. Against moto's SQS, SNS and DynamoDB in process
(moto deduplicates a FIFO id against the messages still in the queue, which is all these tests need)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_runtime import PermanentError, names
from effectively_once_runtime.effect_keys import MAX_EFFECT_KEY_CHARS, form
from effectively_once_runtime.effects.messaging import (
    DEDUPLICATION_INTERVAL_SECONDS,
    MessageRejected,
    publish,
    publish_fifo,
    send_fifo,
    send_message,
)
from effectively_once_runtime.effects.unkeyed import AT_LEAST_ONCE, AT_MOST_ONCE, MarkerTable

from .conftest import HANDLER_ENV, IDEMPOTENCY_TABLE, REGION, create_table

LOGGER = "effectively_once_runtime.effects.unkeyed"


class Killed(BaseException):
    """The execution environment dying right after the send returned (before the marker was set done)."""


@dataclass
class Aws:
    sqs: Any
    sns: Any
    ddb: Any
    markers: MarkerTable

    def queue(self, name: str) -> str:
        attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
        return self.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]  # type: ignore[no-any-return]

    def messages(self, url: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300, AttributeNames=["All"]
        ).get("Messages"):
            found.extend(batch)
        return found

    def topic_to_queue(self, name: str) -> tuple[str, str]:
        """A topic (FIFO when ``name`` ends in .fifo) with a queue of the same kind subscribed, raw delivery on."""
        fifo = name.endswith(".fifo")
        topic = self.sns.create_topic(Name=name, Attributes={"FifoTopic": "true"} if fifo else {})["TopicArn"]
        url = self.queue("q-" + name)
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
        return topic, url


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        create_table(ddb, IDEMPOTENCY_TABLE, "id")
        markers = MarkerTable(table_name=IDEMPOTENCY_TABLE, key_prefix="shop/notify", client=ddb)
        yield Aws(boto3.client("sqs", region_name=REGION), boto3.client("sns", region_name=REGION), ddb, markers)


class KilledAfter:
    """A client whose next ``kills`` calls are made and then the environment dies (before the marker is done)."""

    def __init__(self, client: Any, kills: int = 1) -> None:
        self.client, self.kills = client, kills

    def __getattr__(self, operation: str) -> Any:
        def call(**request: Any) -> Any:
            response = getattr(self.client, operation)(**request)
            if self.kills:
                self.kills -= 1
                raise Killed()
            return response

        return call


def _lines(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.getMessage() == message]


# --- FIFO, inside the window ---------------------------------------------------------------------------------------
def test_send_fifo_twice_with_one_key_queues_one_message_deduplicated_on_the_key(aws: Aws) -> None:
    url = aws.queue("orders.fifo")

    first = send_fifo(client=aws.sqs, queue_url=url, body="b1", message_group_id="g", idempotency_key="shop#ship#o-1")
    send_fifo(client=aws.sqs, queue_url=url, body="b1", message_group_id="g", idempotency_key="shop#ship#o-1")

    [message] = aws.messages(url)
    assert message["Body"] == "b1" and first["MessageId"]
    assert message["Attributes"]["MessageDeduplicationId"] == "shop#ship#o-1"
    assert aws.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] == [], "no marker: the queue deduplicates"


def test_send_fifo_with_two_names_sends_two_messages(aws: Aws) -> None:
    url = aws.queue("orders.fifo")

    for name in ("ship", "bill"):
        send_fifo(client=aws.sqs, queue_url=url, body=name, message_group_id="g", idempotency_key="k", name=name)

    assert sorted(m["Attributes"]["MessageDeduplicationId"] for m in aws.messages(url)) == ["k#bill", "k#ship"]


def test_send_fifo_turns_a_key_sqs_would_refuse_into_a_deduplication_id(aws: Aws) -> None:
    url = aws.queue("orders.fifo")
    key = "Bestellung Nr. 7 für Zoë " * 10

    send_fifo(client=aws.sqs, queue_url=url, body="b", message_group_id="g", idempotency_key=key)

    [message] = aws.messages(url)
    dedup = message["Attributes"]["MessageDeduplicationId"]
    assert dedup == form(key) and len(dedup) == MAX_EFFECT_KEY_CHARS and all("!" <= c <= "~" for c in dedup)


def test_publish_fifo_twice_with_one_key_delivers_one_message(aws: Aws) -> None:
    topic, url = aws.topic_to_queue("orders.fifo")

    for _ in range(2):
        publish_fifo(client=aws.sns, topic_arn=topic, message="m", message_group_id="g", idempotency_key="k-1")

    [message] = aws.messages(url)
    assert message["Body"] == "m" and message["Attributes"]["MessageDeduplicationId"] == "k-1"


@pytest.mark.parametrize(
    ("adapter", "target", "variant"),
    [
        (send_fifo, {"queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/orders"}, "send_message("),
        (publish_fifo, {"topic_arn": "arn:aws:sns:us-east-1:123456789012:orders"}, "publish("),
    ],
)
def test_fails_on_a_standard_queue_or_topic_pointing_to_the_unkeyed_variant(
    aws: Aws, adapter: Any, target: dict[str, str], variant: str
) -> None:
    content = {"body": "b"} if adapter is send_fifo else {"message": "m"}
    client = aws.sqs if adapter is send_fifo else aws.sns

    with pytest.raises(ValueError, match="ending in '.fifo'") as raised:
        adapter(client=client, message_group_id="g", idempotency_key="k", **target, **content)

    assert variant in str(raised.value) and "delivery=" in str(raised.value)


def test_fails_on_an_empty_message_group(aws: Aws) -> None:
    url = aws.queue("orders.fifo")

    with pytest.raises(ValueError, match="needs a non-empty message_group_id"):
        send_fifo(client=aws.sqs, queue_url=url, body="b", message_group_id="", idempotency_key="k")

    assert aws.messages(url) == []


def test_the_window_is_sqs_and_sns_five_minute_deduplication_interval() -> None:
    assert DEDUPLICATION_INTERVAL_SECONDS == 5 * 60


# --- standard queues and topics: delivery= ------------------------------------------------------------------------
def test_send_message_fails_without_delivery(aws: Aws) -> None:
    url = aws.queue("mail")

    with pytest.raises(TypeError, match="delivery"):
        send_message(client=aws.sqs, queue_url=url, body="b", idempotency_key="k", markers=aws.markers)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="delivery"):
        publish(client=aws.sns, topic_arn="arn", message="m", idempotency_key="k")  # type: ignore[call-arg]

    assert aws.messages(url) == []


@pytest.mark.parametrize("delivery", [AT_MOST_ONCE, AT_LEAST_ONCE])
def test_send_message_sends_once_and_a_replay_after_completion_returns_the_same_response(
    aws: Aws, delivery: str
) -> None:
    url = aws.queue("mail")

    sent = [
        send_message(
            client=aws.sqs, queue_url=url, body="hi", delivery=delivery, idempotency_key="o-1", markers=aws.markers
        )
        for _ in range(3)
    ]

    assert len(aws.messages(url)) == 1
    assert sent[0] is not None and [s["MessageId"] for s in sent if s] == [sent[0]["MessageId"]] * 3
    [marker] = aws.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert marker["id"]["S"] == "shop/notify#effect-marker#send_message#-#o-1" and marker["status"]["S"] == "done"


def test_send_message_at_most_once_after_a_kill_never_sends_twice_and_counts_possibly_lost(
    aws: Aws, caplog: pytest.LogCaptureFixture
) -> None:
    url = aws.queue("mail")
    client = KilledAfter(aws.sqs)
    with pytest.raises(Killed):
        send_message(
            client=client, queue_url=url, body="hi", delivery=AT_MOST_ONCE, idempotency_key="o-2", markers=aws.markers
        )

    again = send_message(
        client=client, queue_url=url, body="hi", delivery=AT_MOST_ONCE, idempotency_key="o-2", markers=aws.markers
    )

    assert again is None, "a pending marker means maybe sent: skipped"
    assert len(aws.messages(url)) == 1
    [line] = _lines(caplog, names.MSG_EFFECT_POSSIBLY_LOST)
    assert line.effect_marker == "shop/notify#effect-marker#send_message#-#o-2"  # type: ignore[attr-defined]


def test_send_message_at_least_once_after_a_kill_sends_again_and_counts_the_repeat(
    aws: Aws, caplog: pytest.LogCaptureFixture
) -> None:
    url = aws.queue("mail")
    client = KilledAfter(aws.sqs)
    with pytest.raises(Killed):
        send_message(
            client=client, queue_url=url, body="hi", delivery=AT_LEAST_ONCE, idempotency_key="o-3", markers=aws.markers
        )

    again = send_message(
        client=client, queue_url=url, body="hi", delivery=AT_LEAST_ONCE, idempotency_key="o-3", markers=aws.markers
    )

    assert again is not None and again["MessageId"]
    assert [m["Body"] for m in aws.messages(url)] == ["hi", "hi"]
    [line] = _lines(caplog, names.MSG_EFFECT_REPEATED)
    assert line.attempts == 2  # type: ignore[attr-defined]


def test_send_message_to_a_fifo_queue_needs_a_group_and_sets_the_deduplication_id(aws: Aws) -> None:
    url = aws.queue("mail.fifo")

    with pytest.raises(ValueError, match="needs a non-empty message_group_id"):
        send_message(
            client=aws.sqs, queue_url=url, body="b", delivery=AT_MOST_ONCE, idempotency_key="k", markers=aws.markers
        )
    send_message(
        client=aws.sqs,
        queue_url=url,
        body="b",
        delivery=AT_LEAST_ONCE,
        idempotency_key="k",
        message_group_id="g",
        markers=aws.markers,
    )

    [message] = aws.messages(url)
    assert message["Attributes"]["MessageDeduplicationId"] == "k"


def test_a_message_sqs_refuses_is_permanent_and_releases_the_claim(aws: Aws) -> None:
    url = aws.queue("mail")

    with pytest.raises(MessageRejected, match=r"send_message: the message was refused \(InvalidParameterValue\)") as e:
        send_message(
            client=aws.sqs,
            queue_url=url,
            body="x" * (1024 * 1024 + 1),
            delivery=AT_MOST_ONCE,
            idempotency_key="o-4",
            markers=aws.markers,
        )

    assert isinstance(e.value, PermanentError) and "xxxx" not in str(e.value), "the reason never holds the body"
    assert aws.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] == [], "nothing was sent: the claim is released"


@pytest.mark.parametrize("delivery", [AT_MOST_ONCE, AT_LEAST_ONCE])
def test_publish_to_a_standard_topic_with_delivery_publishes_once(aws: Aws, delivery: str) -> None:
    topic, url = aws.topic_to_queue("alerts")

    for _ in range(2):
        publish(
            client=aws.sns,
            topic_arn=topic,
            message=json.dumps({"order": "o-5"}),
            subject="order",
            delivery=delivery,
            idempotency_key="o-5",
            markers=aws.markers,
        )

    assert [json.loads(m["Body"]) for m in aws.messages(url)] == [{"order": "o-5"}]
