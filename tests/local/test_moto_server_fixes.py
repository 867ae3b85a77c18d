"""The local AWS's fixes for moto 5.2.5 (docs/moto-bugs.md has each as an upstream report).

Cost (``lazy_queue_attributes``, ``direct_retention_check``): a send or a receive no longer counts the whole queue.
Under concurrent calls (moto's server answers each request on its own thread):
- SQS (``serialize_queue_mutations``): ``DeleteMessage`` rebuilds a queue's message list and assigns it back
  without a lock; a send, or a receive that moves a message to the DLQ, that lands in between is undone (the soak
  lost a payment SQS had accepted);
- DynamoDB (``serialize_dynamodb_item_calls``): a conditional write reads, checks and writes without a lock, so two
  concurrent ``attribute_not_exists`` puts on one key both pass;
- S3 (``serialize_s3_puts_per_key``): ``PutObject`` with ``If-None-Match: *`` checks the key, then writes, without a
  lock, so two concurrent conditional puts on one key both succeed.
Each test makes the other call land exactly inside the first (from a second thread) and checks the outcome with and
without the fix.
FIFO deduplication (``remember_deduplication_ids``, ``sns_content_based_deduplication_ids``): a deduplication id is
kept for the window after its message was deleted, per message group with ``DeduplicationScope=messageGroup``, also
through an SNS FIFO topic, whose content-based publishes get an id."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.sqs import models

from effectively_once_local.aws import moto_patches as _moto_server

ACCOUNT = "123456789012"
REGION = "us-east-1"


def _sqs_classes_restored(monkeypatch: pytest.MonkeyPatch, fix: bool) -> bool:
    """moto's SQS classes are restored after the test; the fix applied when ``fix``."""
    for cls, names in (
        (models.SQSBackend, (*_moto_server.SQS_BACKEND_MUTATIONS, "receive_message")),
        (models.Queue, _moto_server.SQS_QUEUE_MUTATIONS),
    ):
        for name in names:
            monkeypatch.setattr(cls, name, getattr(cls, name))
    if fix:
        _moto_server.serialize_queue_mutations()
        _moto_server.serialize_queue_mutations()  # a second call wraps nothing twice
    return fix


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def fixed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the fix is applied."""
    return _sqs_classes_restored(monkeypatch, bool(request.param))


@pytest.fixture
def with_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    _sqs_classes_restored(monkeypatch, True)


def _delete_while(queue: Any, other_call: Callable[[], None], delete: Callable[[], None]) -> None:
    """Run ``delete``; when its rebuild has read the queue's whole message list, run ``other_call`` on a second
    thread and give it 0.5 s (with the fix it waits for the queue's lock until the delete is done)."""
    other = threading.Thread(target=other_call)

    class CallAtTheEnd(list):  # type: ignore[type-arg]
        def __iter__(self) -> Iterator[Any]:
            yield from list.__iter__(self)
            if not other.is_alive() and other.ident is None:
                other.start()
                other.join(timeout=0.5)

    queue._messages = CallAtTheEnd(queue._messages)
    delete()
    other.join(timeout=10)
    assert not other.is_alive()


def test_a_message_sent_during_a_delete_is_kept(fixed: bool) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="payments")["QueueUrl"]
        backend = models.sqs_backends[ACCOUNT][REGION]
        sqs.send_message(QueueUrl=url, MessageBody="first")
        [first] = sqs.receive_message(QueueUrl=url)["Messages"]

        _delete_while(
            backend.get_queue("payments"),
            lambda: backend.send_message("payments", "sent-during-the-delete"),
            lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"]),
        )

        bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
        if fixed:
            assert bodies == ["sent-during-the-delete"]
        else:
            assert bodies == [], "moto as is drops it: the reason for the fix (if this fails, moto fixed it)"


def test_a_message_moved_to_the_dlq_during_a_delete_stays_moved(fixed: bool) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        dlq_url = sqs.create_queue(QueueName="payments-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = sqs.create_queue(
            QueueName="payments",
            Attributes={
                "VisibilityTimeout": "0",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}),
            },
        )["QueueUrl"]
        backend = models.sqs_backends[ACCOUNT][REGION]
        sqs.send_message(QueueUrl=url, MessageBody="poison")
        sqs.send_message(QueueUrl=url, MessageBody="done")
        # Both received once (visibility timeout 0: visible again at once); the next receive moves "poison" to the
        # DLQ (maxReceiveCount 1), and "done" is kept in flight until its delete.
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        [done] = [m for m in received if m["Body"] == "done"]
        assert len(received) == 2
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=done["ReceiptHandle"], VisibilityTimeout=30)

        _delete_while(
            backend.get_queue("payments"),
            lambda: backend.receive_message("payments", 10, 0, 30),
            lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle=done["ReceiptHandle"]),
        )

        source = [m.body for m in backend.get_queue("payments")._messages]
        dlq = [m.body for m in backend.get_queue("payments-dlq")._messages]
        assert dlq == ["poison"]
        if fixed:
            assert source == []
        else:
            assert source == ["poison"], "moto as is puts it back: in both queues (if this fails, moto fixed it)"


@pytest.mark.usefixtures("with_fix")
def test_a_long_poll_waits_without_holding_up_a_delete() -> None:
    # A FIFO group in flight: a long poll finds a visible message it may not return. The delete that releases the
    # group answers at once, and the poll then returns the next message of the group.
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="payments.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        for n in (1, 2):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g", MessageDeduplicationId=f"d{n}")
        [first] = sqs.receive_message(QueueUrl=url)["Messages"]
        polled: list[Any] = []
        poll = threading.Thread(
            target=lambda: polled.extend(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", []))
        )
        poll.start()
        time.sleep(0.5)

        started = time.monotonic()
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
        delete_seconds = time.monotonic() - started
        poll.join(timeout=10)

        assert delete_seconds < 1.0, f"the delete waited {delete_seconds:.1f} s for the long poll"
        assert [m["Body"] for m in polled] == ["m2"]


@pytest.mark.usefixtures("with_fix")
def test_two_queues_that_are_each_others_dlq_do_not_deadlock() -> None:
    # Receives on both at once, each moving messages into the other: a lock per queue taken in two orders would
    # hang both.
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        urls = {n: sqs.create_queue(QueueName=n)["QueueUrl"] for n in ("qa", "qb")}
        arns = {
            n: sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            for n, u in urls.items()
        }
        for n, other in (("qa", "qb"), ("qb", "qa")):
            policy = json.dumps({"deadLetterTargetArn": arns[other], "maxReceiveCount": 1})
            sqs.set_queue_attributes(QueueUrl=urls[n], Attributes={"RedrivePolicy": policy, "VisibilityTimeout": "0"})
            for i in range(300):
                sqs.send_message(QueueUrl=urls[n], MessageBody=f"{n}-{i}")
        backend = models.sqs_backends[ACCOUNT][REGION]
        for n in urls:
            for message in backend.get_queue(n)._messages:
                message.approximate_receive_count = 1  # received once: the next receive moves it to the other queue

        threads = [
            threading.Thread(target=lambda n=n: [backend.receive_message(n, 10, 0, 0) for _ in range(30)], daemon=True)
            for n in urls
        ]
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)  # interleave the two receives finely
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=20)
        finally:
            sys.setswitchinterval(switch)

        assert not any(t.is_alive() for t in threads), "the receives are stuck"
        counts = [len(backend.get_queue(n)._messages) for n in urls]
        assert sum(counts) == 600, "every message is in one of the two queues"


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def dynamodb_fixed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    from moto.dynamodb.models import DynamoDBBackend

    for name in _moto_server.DYNAMODB_ITEM_CALLS:
        monkeypatch.setattr(DynamoDBBackend, name, getattr(DynamoDBBackend, name))
    if request.param:
        _moto_server.serialize_dynamodb_item_calls()
        _moto_server.serialize_dynamodb_item_calls()
    return bool(request.param)


def test_two_concurrent_conditional_puts_on_one_key_let_one_through(
    dynamodb_fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Powertools' first step for an idempotency key: PutItem with attribute_not_exists. Two concurrent duplicates
    # make two such calls; DynamoDB lets exactly one through. The second call lands while the first has read the
    # current item (none) and not yet written its own.
    from moto.dynamodb.models.table import Table

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName="idempotency",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        outcomes: list[str] = []

        def put(who: str) -> None:
            try:
                dynamodb.put_item(
                    TableName="idempotency",
                    Item={"id": {"S": "pay-1"}, "by": {"S": who}},
                    ConditionExpression="attribute_not_exists(id)",
                )
                outcomes.append(f"{who} written")
            except dynamodb.exceptions.ConditionalCheckFailedException:
                outcomes.append(f"{who} refused")

        second = threading.Thread(target=put, args=("second",))
        get_item = Table.get_item

        def get_item_then_let_the_second_in(self: Any, *args: Any, **kwargs: Any) -> Any:
            current = get_item(self, *args, **kwargs)
            if second.ident is None:
                second.start()
                second.join(timeout=0.5)
            return current

        monkeypatch.setattr(Table, "get_item", get_item_then_let_the_second_in)
        put("first")
        second.join(timeout=10)

        if dynamodb_fixed:
            assert outcomes == ["first written", "second refused"]
        else:
            assert sorted(outcomes) == ["first written", "second written"], (
                "moto as is lets both through: the reason for the fix (if this fails, moto fixed it)"
            )


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def s3_fixed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the S3 fix is applied (moto's ``S3Response.put_object`` is restored after the test)."""
    from moto.s3.responses import S3Response

    monkeypatch.setattr(S3Response, "put_object", S3Response.put_object)
    if request.param:
        _moto_server.serialize_s3_puts_per_key()
        _moto_server.serialize_s3_puts_per_key()  # a second call wraps nothing twice
    return bool(request.param)


def _s3_put_landing_inside_the_first(
    monkeypatch: pytest.MonkeyPatch, second: threading.Thread, *, held: bool = True
) -> None:
    """Make the first ``PutObject`` that reaches moto's store (its ``If-None-Match`` check passed, nothing written
    yet) start ``second`` before writing. ``held``: the second waits for the first one's lock (the fix), so the first
    gives it 0.3 s and goes on; else the first waits until the second is done (up to 10 s: on a loaded machine 0.3 s
    was not always enough, and both then ran inside moto's store at once)."""
    from moto.s3.models import S3Backend

    put_object = S3Backend.put_object

    def put_object_after_the_second(self: Any, *args: Any, **kwargs: Any) -> Any:
        if second.ident is None:
            second.start()
            second.join(timeout=0.3 if held else 10)
        return put_object(self, *args, **kwargs)

    monkeypatch.setattr(S3Backend, "put_object", put_object_after_the_second)


def _conditional_put(s3: Any, outcomes: list[str], who: str, key: str) -> None:
    from botocore.exceptions import ClientError

    try:
        s3.put_object(Bucket="effects", Key=key, Body=who.encode(), IfNoneMatch="*")
        outcomes.append(f"{who} written")
    except ClientError as error:
        outcomes.append(f"{who} refused {error.response['ResponseMetadata']['HTTPStatusCode']}")


def test_two_concurrent_conditional_s3_puts_on_one_key_let_one_through(
    s3_fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The S3 effect adapter's write: PutObject with If-None-Match "*". S3 lets one of two concurrent ones through and
    # answers the other 412 (or 409); the second lands after the first passed its check and before its write.
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="effects")
        outcomes: list[str] = []
        second = threading.Thread(target=_conditional_put, args=(s3, outcomes, "second", "k"))
        _s3_put_landing_inside_the_first(monkeypatch, second, held=s3_fixed)

        _conditional_put(s3, outcomes, "first", "k")
        second.join(timeout=10)
        stored = s3.get_object(Bucket="effects", Key="k")["Body"].read()

    assert not second.is_alive()
    if s3_fixed:
        assert outcomes == ["first written", "second refused 412"]
        assert stored == b"first"
        assert len(_moto_server.S3_PUT_LOCKS) == 0, "no lock is kept once its puts are done"
    else:
        assert outcomes == ["second written", "first written"], (
            "moto as is lets both through: the reason for the fix (if this fails, moto fixed it)"
        )
        assert stored == b"first", "the later write replaced the earlier"


@pytest.mark.usefixtures("s3_fixed")
def test_conditional_s3_puts_on_other_keys_are_not_held_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # The lock is per bucket and key: a put on another key, landing inside the first, finishes before it (with the
    # fix and without).
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="effects")
        outcomes: list[str] = []
        second = threading.Thread(target=_conditional_put, args=(s3, outcomes, "second", "other"))
        _s3_put_landing_inside_the_first(monkeypatch, second, held=False)  # a held second would come second

        _conditional_put(s3, outcomes, "first", "k")
        second.join(timeout=10)

    assert outcomes == ["second written", "first written"]


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def counted(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, list[int]]:
    """Whether the attribute fixes are applied, and a counter of full-queue counts (``ApproximateNumberOfMessages``;
    the other two counts scan the queue as often)."""
    monkeypatch.setattr(models.Queue, "attributes", models.Queue.attributes)
    monkeypatch.setattr(
        models.SQSBackend,
        "is_message_valid_based_on_retention_period",
        models.SQSBackend.is_message_valid_based_on_retention_period,
    )
    count = models.Queue.approximate_number_of_messages.fget
    counts = [0]

    def counting(self: Any) -> int:
        counts[0] += 1
        return count(self)  # type: ignore[misc]

    monkeypatch.setattr(models.Queue, "approximate_number_of_messages", property(counting))
    if request.param:
        _moto_server.lazy_queue_attributes()
        _moto_server.direct_retention_check()
    return bool(request.param), counts


def test_a_send_does_not_count_the_queue(counted: tuple[bool, list[int]]) -> None:
    fixed, counts = counted
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="payments.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        for n in range(20):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g", MessageDeduplicationId=f"d{n}")
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]

    assert attributes["ApproximateNumberOfMessages"] == "20", "what the API answers is unchanged"
    assert attributes["ContentBasedDeduplication"] == "false"
    if fixed:
        assert counts[0] == 1, "only GetQueueAttributes counts the queue"
    else:
        assert counts[0] > 20, "moto as is counts the queue on every send (if this fails, moto fixed it)"


def test_a_receive_does_not_count_the_queue(counted: tuple[bool, list[int]]) -> None:
    fixed, counts = counted
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="payments", Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": f"m{n}"} for n in range(10)])
        before = counts[0]
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]

    assert len(received) == 10
    if fixed:
        assert counts[0] == before
    else:
        assert counts[0] - before >= 10, "moto as is counts the queue once per message returned"


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def deduplication_fixed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the FIFO deduplication fixes are applied (moto's classes and window are restored after the test)."""
    from moto.sns.models import Topic

    monkeypatch.setattr(models.Queue, "add_message", models.Queue.add_message)
    monkeypatch.setattr(Topic, "publish", Topic.publish)
    monkeypatch.setattr(models, "DEDUPLICATION_TIME_IN_SECONDS", models.DEDUPLICATION_TIME_IN_SECONDS)
    if request.param:
        for _ in (1, 2):  # a second call wraps nothing twice
            _moto_server.remember_deduplication_ids()
            _moto_server.sns_content_based_deduplication_ids()
    return bool(request.param)


def _fifo_queue(sqs: Any, name: str = "payments.fifo", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", **attributes})["QueueUrl"])


def _receive_and_delete(sqs: Any, url: str) -> list[str]:
    """The bodies of the visible messages, each deleted after its receive."""
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    for m in messages:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return [m["Body"] for m in messages]


def test_a_resend_after_the_delete_is_dropped(deduplication_fixed: bool) -> None:
    # SQS keeps a deduplication id for 5 minutes after its first send, "even after the message has been received and
    # deleted" (Amazon SQS FIFO queue key terms): the producer's retry of a payment already processed is dropped.
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = _fifo_queue(sqs)
        send = {"QueueUrl": url, "MessageGroupId": "acct-1", "MessageDeduplicationId": "pay-1"}
        sqs.send_message(MessageBody="first", **send)
        assert _receive_and_delete(sqs, url) == ["first"]

        resent = sqs.send_message(MessageBody="resent", **send)

        assert resent["MessageId"], "accepted with a message id either way"
        if deduplication_fixed:
            assert _receive_and_delete(sqs, url) == []
        else:
            assert _receive_and_delete(sqs, url) == ["resent"], "moto as is queues it (if this fails, moto fixed it)"
        sqs.send_message(MessageBody="next", **{**send, "MessageDeduplicationId": "pay-2"})
        assert _receive_and_delete(sqs, url) == ["next"], "another id is queued"


def test_a_resend_after_the_deduplication_window_is_queued(
    deduplication_fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window is moto's constant, read on every send: 3 s here. It runs from the first send; a duplicate dropped
    # within it does not extend it. (Wide margins: a loaded 2-core machine can stall a thread for most of a second.)
    monkeypatch.setattr(models, "DEDUPLICATION_TIME_IN_SECONDS", 3)
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = _fifo_queue(sqs)
        send = {"QueueUrl": url, "MessageGroupId": "acct-1", "MessageDeduplicationId": "pay-1"}
        started = time.monotonic()
        sqs.send_message(MessageBody="first", **send)
        assert _receive_and_delete(sqs, url) == ["first"]
        time.sleep(1.0)
        sqs.send_message(MessageBody="within", **send)
        within = _receive_and_delete(sqs, url)
        time.sleep(max(0.0, started + 3.5 - time.monotonic()))  # past the window, under 3 s after the dropped one
        sqs.send_message(MessageBody="after", **send)
        after = _receive_and_delete(sqs, url)

    assert after == ["after"], "the id is forgotten once the window has passed"
    if deduplication_fixed:
        assert within == []
    else:
        assert within == ["within"], "moto as is queues it (if this fails, moto fixed it)"


def test_a_content_based_resend_after_the_delete_is_dropped(deduplication_fixed: bool) -> None:
    # ContentBasedDeduplication: the id is the SHA-256 of the body.
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = _fifo_queue(sqs, ContentBasedDeduplication="true")
        sqs.send_message(QueueUrl=url, MessageBody="pay-1", MessageGroupId="acct-1")
        assert _receive_and_delete(sqs, url) == ["pay-1"]

        sqs.send_message(QueueUrl=url, MessageBody="pay-1", MessageGroupId="acct-1")
        sqs.send_message(QueueUrl=url, MessageBody="pay-2", MessageGroupId="acct-1")

        if deduplication_fixed:
            assert _receive_and_delete(sqs, url) == ["pay-2"]
        else:
            assert _receive_and_delete(sqs, url) == ["pay-1", "pay-2"], "moto as is queues the resend"


def _subscribed_fifo_queue(sns: Any, sqs: Any, topic: str, raw: bool, **queue_attributes: str) -> str:
    url = _fifo_queue(sqs, **queue_attributes)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": str(raw).lower()})
    return url


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "envelope"])
def test_an_sns_fifo_publish_after_the_delete_is_dropped(deduplication_fixed: bool, raw: bool) -> None:
    # moto hands the publish's deduplication id on to the subscribed FIFO queue's SendMessage: the queue's window
    # covers SNS FIFO -> SQS FIFO.
    with mock_aws():
        sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
        topic = sns.create_topic(Name="payments.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
        url = _subscribed_fifo_queue(sns, sqs, topic, raw)
        publish = {"TopicArn": topic, "MessageGroupId": "acct-1", "MessageDeduplicationId": "pay-1"}
        sns.publish(Message="first", **publish)
        [body] = _receive_and_delete(sqs, url)
        assert (body if raw else json.loads(body)["Message"]) == "first"

        sns.publish(Message="resent", **publish)

        if deduplication_fixed:
            assert _receive_and_delete(sqs, url) == []
        else:
            assert len(_receive_and_delete(sqs, url)) == 1, "moto as is delivers it (if this fails, moto fixed it)"


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "envelope"])
def test_an_sns_content_based_publish_after_the_delete_is_dropped(deduplication_fixed: bool, raw: bool) -> None:
    # A FIFO topic with ContentBasedDeduplication: SNS makes the id (the body's SHA-256) and delivers it to the
    # subscribed FIFO queue, which needs no ContentBasedDeduplication of its own.
    import hashlib

    from botocore.exceptions import ClientError

    with mock_aws():
        sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
        topic = sns.create_topic(
            Name="payments.fifo", Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "true"}
        )["TopicArn"]
        url = _subscribed_fifo_queue(sns, sqs, topic, raw)
        if not deduplication_fixed:
            with pytest.raises(ClientError, match="ContentBasedDeduplication enabled or MessageDeduplicationId"):
                sns.publish(TopicArn=topic, Message="pay-1", MessageGroupId="acct-1")
            return  # moto as is: the publish fails (if this fails, moto fixed it)

        sns.publish(TopicArn=topic, Message="pay-1", MessageGroupId="acct-1")
        [first] = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["MessageDeduplicationId"])["Messages"]
        assert first["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(b"pay-1").hexdigest()
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])

        sns.publish(TopicArn=topic, Message="pay-1", MessageGroupId="acct-1")
        sns.publish(TopicArn=topic, Message="pay-2", MessageGroupId="acct-1")
        sns.publish(TopicArn=topic, Message="pay-2", MessageGroupId="acct-1", MessageDeduplicationId="explicit")

        assert len(_receive_and_delete(sqs, url)) == 2, "pay-1 dropped; pay-2 queued, and again with its own id"


def test_message_group_scope_deduplicates_within_a_group_only(deduplication_fixed: bool) -> None:
    # DeduplicationScope=messageGroup (high-throughput FIFO): the same id in two groups is two messages; in one
    # group, one (also after the delete). The default scope (queue) keeps one across groups.
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        scoped = _fifo_queue(
            sqs, "scoped.fifo", DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId"
        )
        whole = _fifo_queue(sqs, "whole.fifo")
        for url in (scoped, whole):
            for group in ("acct-1", "acct-2"):
                sqs.send_message(QueueUrl=url, MessageBody=group, MessageGroupId=group, MessageDeduplicationId="d")

        assert _receive_and_delete(sqs, whole) == ["acct-1"]
        if deduplication_fixed:
            assert sorted(_receive_and_delete(sqs, scoped)) == ["acct-1", "acct-2"]
            sqs.send_message(QueueUrl=scoped, MessageBody="again", MessageGroupId="acct-1", MessageDeduplicationId="d")
            assert _receive_and_delete(sqs, scoped) == []
        else:
            assert _receive_and_delete(sqs, scoped) == ["acct-1"], "moto as is ignores the scope"


def test_the_local_aws_server_drops_a_resend_after_the_delete() -> None:
    # The server the tooling starts (python -m effectively_once_local.aws.moto_patches, every patch applied).
    from effectively_once_local.aws.server import MotoServer, aws_env

    with MotoServer() as aws:
        env = aws_env(aws.endpoint)
        sqs = boto3.client(
            "sqs",
            endpoint_url=aws.endpoint,
            region_name=REGION,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        url = _fifo_queue(sqs)
        send = {"QueueUrl": url, "MessageGroupId": "acct-1", "MessageDeduplicationId": "pay-1"}
        sqs.send_message(MessageBody="first", **send)
        assert _receive_and_delete(sqs, url) == ["first"]
        assert sqs.send_message(MessageBody="resent", **send)["MessageId"]
        assert _receive_and_delete(sqs, url) == []


def test_a_rule_on_a_custom_bus_deploys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack whose rule sits on a custom bus ({"Ref": <bus>}, as CDK emits it) is created, the rule on that bus
    (moto 5.2.5 as is: a 500 on CreateStack; docs/moto-bugs.md, report 8)."""
    from moto.events import models as events_models

    if "physical_resource_id" in vars(events_models.EventBus):
        monkeypatch.delattr(events_models.EventBus, "physical_resource_id")
    template = {
        "Resources": {
            "Bus": {"Type": "AWS::Events::EventBus", "Properties": {"Name": "payments"}},
            "Rule": {
                "Type": "AWS::Events::Rule",
                "Properties": {"EventBusName": {"Ref": "Bus"}, "EventPattern": {"source": ["shop"]}},
            },
        }
    }
    with mock_aws():
        cfn = boto3.client("cloudformation", region_name=REGION)
        with pytest.raises(Exception, match="split"):
            cfn.create_stack(StackName="as-is", TemplateBody=json.dumps(template))
        _moto_server.event_bus_ref_is_its_name()
        template["Resources"]["Bus"]["Properties"]["Name"] = "orders"
        cfn.create_stack(StackName="fixed", TemplateBody=json.dumps(template))
        rules = boto3.client("events", region_name=REGION).list_rules(EventBusName="orders")["Rules"]

    assert len(rules) == 1
    monkeypatch.delattr(events_models.EventBus, "physical_resource_id")
