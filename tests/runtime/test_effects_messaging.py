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
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from effectively_once_runtime import InvalidEffectCall, PermanentError, names
from effectively_once_runtime.effect_keys import MAX_EFFECT_KEY_CHARS, form
from effectively_once_runtime.effects import _context
from effectively_once_runtime.effects.messaging import (
    DEDUPLICATION_INTERVAL_SECONDS,
    MessageRejected,
    publish,
    publish_fifo,
    send_fifo,
    send_message,
)
from effectively_once_runtime.effects.unkeyed import AT_LEAST_ONCE, AT_MOST_ONCE, MarkerTable, MarkerUnavailable

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

    with pytest.raises(InvalidEffectCall, match="ending in '.fifo'") as raised:
        adapter(client=client, message_group_id="g", idempotency_key="k", **target, **content)

    assert variant in str(raised.value) and "delivery=" in str(raised.value)


def test_fails_on_an_empty_message_group(aws: Aws) -> None:
    url = aws.queue("orders.fifo")

    with pytest.raises(InvalidEffectCall, match="needs a non-empty message_group_id"):
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

    with pytest.raises(InvalidEffectCall, match="needs a non-empty message_group_id"):
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


# --- each :raises condition of the docstrings (issue 55, item 6b) ---------------------------------------------------
FIFO_ADAPTERS = [send_fifo, publish_fifo]
UNKEYED_ADAPTERS = [send_message, publish]


def _target(aws: Aws, adapter: Any, name: str) -> tuple[str, str]:
    """A queue (``send_*``) or a topic with a queue subscribed (``publish*``), FIFO for the FIFO adapters: the
    address to send to, and the URL of the queue where what was sent arrives."""
    fifo = adapter in FIFO_ADAPTERS
    if adapter in (send_fifo, send_message):
        url = aws.queue(f"{name}.fifo" if fifo else name)
        return url, url
    return aws.topic_to_queue(f"{name}.fifo" if fifo else name)


def _send(aws: Aws, adapter: Any, address: str, client: Any = None, **options: Any) -> Any:
    """``adapter`` with the arguments it needs (a group for FIFO, ``delivery`` and ``markers`` for the un-keyed
    variants), ``options`` over them; an option given as ``None`` is left out."""
    sqs = adapter in (send_fifo, send_message)
    arguments: dict[str, Any] = {
        "client": client or (aws.sqs if sqs else aws.sns),
        "queue_url" if sqs else "topic_arn": address,
        "body" if sqs else "message": "m",
        "idempotency_key": "k",
    }
    if adapter in FIFO_ADAPTERS:
        arguments["message_group_id"] = "g"
    else:
        arguments |= {"delivery": AT_MOST_ONCE, "markers": aws.markers}
    arguments |= options
    return adapter(**{name: value for name, value in arguments.items() if value is not None})


def _markers(aws: Aws) -> list[dict[str, Any]]:
    return aws.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("adapter", FIFO_ADAPTERS + UNKEYED_ADAPTERS, ids=lambda a: a.__name__)
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"idempotency_key": ""}, "idempotency_key must be the non-empty key"),
        ({"name": ""}, "name must be a non-empty string or None"),
    ],
    ids=["empty-key", "empty-name"],
)
def test_every_adapter_refuses_an_empty_key_or_name_before_sending(
    aws: Aws, adapter: Any, options: dict[str, Any], message: str
) -> None:
    address, url = _target(aws, adapter, "orders")

    with pytest.raises(InvalidEffectCall, match=message):
        _send(aws, adapter, address, **options)

    assert aws.messages(url) == [] and _markers(aws) == []


def test_publish_fifo_fails_on_an_empty_message_group(aws: Aws) -> None:
    topic, url = _target(aws, publish_fifo, "orders")

    with pytest.raises(InvalidEffectCall, match="publish_fifo needs a non-empty message_group_id"):
        _send(aws, publish_fifo, topic, message_group_id="")

    assert aws.messages(url) == []


@pytest.mark.parametrize("adapter", FIFO_ADAPTERS + UNKEYED_ADAPTERS, ids=lambda a: a.__name__)
def test_every_adapter_refuses_a_second_call_with_one_name_in_one_effect(aws: Aws, adapter: Any) -> None:
    address, url = _target(aws, adapter, "orders")

    with _context.running(_context.EffectCall("notify", "k", record_key="o-1")):
        _send(aws, adapter, address, name="first")
        with pytest.raises(InvalidEffectCall, match=f"{adapter.__name__} was called twice in effect 'notify'"):
            _send(aws, adapter, address, name="first")

    assert len(aws.messages(url)) == 1


@pytest.mark.parametrize("adapter", UNKEYED_ADAPTERS, ids=lambda a: a.__name__)
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delivery": "exactly_once"}, "delivery must be one of"),
        ({"markers": None}, r"needs markers=MarkerTable"),
        ({"message_group_id": None, "fifo": True}, "needs a non-empty message_group_id"),
        ({"idempotency_key": "k" * 100, "prefix": "p" * 2000}, "more than the 2048 a DynamoDB key holds"),
    ],
    ids=["delivery", "no-markers-outside-a-consumer", "fifo-without-a-group", "marker-id-too-long"],
)
def test_the_unkeyed_variants_refuse_what_unkeyed_refuses_before_sending(
    aws: Aws, adapter: Any, options: dict[str, Any], message: str
) -> None:
    options = dict(options)  # the parameters are shared between the adapters' cases
    fifo, prefix = options.pop("fifo", False), options.pop("prefix", None)
    address, url = _target(aws, adapter, "orders.fifo" if fifo else "orders")
    if prefix is not None:
        options["markers"] = MarkerTable(table_name=IDEMPOTENCY_TABLE, key_prefix=prefix, client=aws.ddb)

    with pytest.raises(InvalidEffectCall, match=message):
        _send(aws, adapter, address, **options)

    assert aws.messages(url) == [] and _markers(aws) == []


@pytest.mark.parametrize("adapter", [send_fifo, publish_fifo, publish], ids=lambda a: a.__name__)
def test_a_message_sqs_or_sns_refuses_is_permanent_from_every_adapter(aws: Aws, adapter: Any) -> None:
    """``send_message``'s own case is above; SNS takes at most 256 KiB, SQS 1 MiB (moto checks both)."""
    address, url = _target(aws, adapter, "orders")
    too_long = "x" * ((1024 if adapter is send_fifo else 256) * 1024 + 1)
    content = {"body": too_long} if adapter is send_fifo else {"message": too_long}

    with pytest.raises(MessageRejected, match=rf"{adapter.__name__}: the message was refused \(Invalid") as raised:
        _send(aws, adapter, address, **content)

    assert isinstance(raised.value, PermanentError) and "xxxx" not in str(raised.value)
    assert aws.messages(url) == []
    assert _markers(aws) == [], "publish: nothing was published, so the claim is released"


@pytest.mark.parametrize("adapter", UNKEYED_ADAPTERS, ids=lambda a: a.__name__)
def test_a_marker_that_cannot_be_written_sends_nothing(aws: Aws, adapter: Any) -> None:
    address, url = _target(aws, adapter, "orders")
    missing = MarkerTable(table_name="no-such-table", key_prefix="shop/notify", client=aws.ddb)

    with pytest.raises(MarkerUnavailable, match="put_item on marker"):
        _send(aws, adapter, address, markers=missing)

    assert aws.messages(url) == []


@pytest.mark.parametrize("adapter", FIFO_ADAPTERS + UNKEYED_ADAPTERS, ids=lambda a: a.__name__)
def test_any_other_client_error_is_raised_as_botocore_raised_it(aws: Aws, adapter: Any) -> None:
    fifo = ".fifo" if adapter in FIFO_ADAPTERS else ""
    if adapter in (send_fifo, send_message):
        address = aws.queue("orders" + fifo).replace("/orders", "/missing")
    else:
        address = f"arn:aws:sns:{REGION}:123456789012:missing{fifo}"

    with pytest.raises(ClientError) as raised:
        _send(aws, adapter, address)

    assert raised.value.response["Error"]["Code"] in ("AWS.SimpleQueueService.NonExistentQueue", "NotFound")
    assert not isinstance(raised.value, PermanentError), "transient: SQS redelivers the record"


class Unreachable:
    """A client whose every call fails before any answer (no network): a ``BotoCoreError``, not a ``ClientError``."""

    def send_message(self, **_: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://unreachable.invalid")

    publish = send_message


@pytest.mark.parametrize("adapter", FIFO_ADAPTERS + UNKEYED_ADAPTERS, ids=lambda a: a.__name__)
def test_a_botocore_error_is_raised_as_it_came_and_leaves_the_marker_pending(aws: Aws, adapter: Any) -> None:
    address, _url = _target(aws, adapter, "orders")

    with pytest.raises(EndpointConnectionError) as raised:
        _send(aws, adapter, address, client=Unreachable())

    assert not isinstance(raised.value, PermanentError)
    if adapter in UNKEYED_ADAPTERS:  # it may have been sent: the claim stays, and a replay counts it possibly lost
        [marker] = _markers(aws)
        assert marker["status"]["S"] == "pending"
