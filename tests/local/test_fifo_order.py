"""The local AWS keeps a FIFO message group's order after a visibility timeout (``aws/fifo_order.py``;
docs/moto-bugs.md, report 11). Each test runs on moto as it is and with the fix: as it is, a later message of the
group comes back before an earlier one; with the fix, in the order they were sent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.sqs import models

from effectively_once_local.aws import fifo_order, moto_patches

VISIBILITY = 1


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def fixed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """moto's SQS classes, restored after the test; the fix (and the serialization it runs under locally) applied
    when the parameter is true."""
    monkeypatch.setattr(models.Queue, "pending_message_groups", models.Queue.pending_message_groups)
    for name in (*moto_patches.SQS_BACKEND_MUTATIONS, "receive_message"):
        monkeypatch.setattr(models.SQSBackend, name, getattr(models.SQSBackend, name))
    for name in moto_patches.SQS_QUEUE_MUTATIONS:
        monkeypatch.setattr(models.Queue, name, getattr(models.Queue, name))
    if request.param:
        fifo_order.fifo_groups_keep_their_order()
        fifo_order.fifo_groups_keep_their_order()  # a second call wraps nothing twice
        fifo_order.sequence_numbers_increase()
        fifo_order.sequence_numbers_increase()
        moto_patches.serialize_queue_mutations()
    return bool(request.param)


@pytest.fixture
def queue() -> Iterator[tuple[Any, str]]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(
            QueueName="orders.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": str(VISIBILITY)}
        )["QueueUrl"]
        for n in range(1, 5):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g", MessageDeduplicationId=f"d{n}")
        yield sqs, url


def _bodies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["Body"] for m in messages]


def _first_batch_then_timeout(sqs: Any, url: str) -> None:
    """Receive the group's four messages, delete the first (the others' handler was killed), let the rest time
    out."""
    batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert _bodies(batch) == ["m1", "m2", "m3", "m4"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=batch[0]["ReceiptHandle"])
    time.sleep(VISIBILITY + 0.2)


def test_a_group_timed_out_together_comes_back_in_order(fixed: bool, queue: tuple[Any, str]) -> None:
    sqs, url = queue
    _first_batch_then_timeout(sqs, url)

    again = _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))

    if fixed:
        assert again == ["m2", "m3", "m4"]
    else:
        assert again[0] != "m2", "moto as it is delivers a later message of the group first"


def test_a_long_poll_gets_the_group_back_in_order(fixed: bool, queue: tuple[Any, str]) -> None:
    sqs, url = queue
    batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=batch[0]["ReceiptHandle"])

    # The rest of the batch times out during the poll's wait.
    again = _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=3).get("Messages", []))

    if fixed:
        assert again == ["m2", "m3", "m4"]
    else:
        assert again[:1] != ["m2"], "moto as it is delivers a later message of the group first"


def test_a_group_stays_held_while_a_message_is_in_flight(fixed: bool, queue: tuple[Any, str]) -> None:
    sqs, url = queue
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]

    held = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])

    assert _bodies(first) == ["m1"]
    assert held == []


def test_a_message_made_visible_again_waits_for_the_group_in_flight(fixed: bool, queue: tuple[Any, str]) -> None:
    sqs, url = queue
    batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=batch[0]["ReceiptHandle"])
    # A partial batch response: m2 failed and is visible again at once; m3 and m4 are still in flight.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=batch[1]["ReceiptHandle"], VisibilityTimeout=0)

    again = _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))

    assert again == [], "m3 and m4 are in flight: the group is held"


def test_the_local_aws_server_keeps_the_group_in_order() -> None:
    # The server the tooling starts (python -m effectively_once_local.aws.moto_patches, every patch applied).
    from effectively_once_local.aws.server import MotoServer, aws_env

    with MotoServer() as aws:
        env = aws_env(aws.endpoint)
        sqs = boto3.client(
            "sqs",
            endpoint_url=aws.endpoint,
            region_name="us-east-1",
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        url = sqs.create_queue(
            QueueName="orders.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": str(VISIBILITY)}
        )["QueueUrl"]
        for n in range(1, 5):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g", MessageDeduplicationId=f"d{n}")
        _first_batch_then_timeout(sqs, url)

        again = _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))

    assert again == ["m2", "m3", "m4"]


def test_sequence_numbers_increase_in_the_order_messages_were_sent(fixed: bool) -> None:
    """Report 13: SQS's SequenceNumber "continues to increase for a particular MessageGroupId"; moto's are random
    digits. The chaos run orders a group's keys by it (``proof/group_order.py``)."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="seq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        numbers = []
        for n in range(12):
            entries = [
                {"Id": str(i), "MessageBody": f"m{n}-{i}", "MessageGroupId": "g", "MessageDeduplicationId": f"{n}-{i}"}
                for i in range(3)
            ]
            numbers += [
                int(ok["SequenceNumber"]) for ok in sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]
            ]
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3, AttributeNames=["SequenceNumber"])

    if not fixed:
        assert numbers != sorted(numbers), "moto as is: random digits (36 in increasing order: 1 in 36!)"
        return
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert all(len(str(n)) == 20 for n in numbers)
    assert [int(m["Attributes"]["SequenceNumber"]) for m in received["Messages"]] == numbers[:3]
