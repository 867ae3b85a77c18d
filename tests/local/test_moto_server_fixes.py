"""The local AWS's fixes for moto 5.2.5 (docs/moto-bugs.md has each as an upstream report).

Cost (``lazy_queue_attributes``, ``direct_retention_check``): a send or a receive no longer counts the whole queue.
Under concurrent calls (moto's server answers each request on its own thread):
- SQS (``serialize_queue_mutations``): ``DeleteMessage`` rebuilds a queue's message list and assigns it back
  without a lock; a send, or a receive that moves a message to the DLQ, that lands in between is undone (the soak
  lost a payment SQS had accepted);
- DynamoDB (``serialize_dynamodb_item_calls``): a conditional write reads, checks and writes without a lock, so two
  concurrent ``attribute_not_exists`` puts on one key both pass.
Each test makes the other call land exactly inside the first (from a second thread) and checks the outcome with and
without the fix."""

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

from effectively_once_local import _moto_server

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
