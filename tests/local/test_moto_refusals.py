"""The local AWS refuses what AWS refuses (issue 58, item 1a: SQS). docs/local-aws-limits.md lists the rules, each
with its source; docs/moto-bugs.md has each gap moto 5.2.5 leaves as an upstream report (reports 14 to 18).

Each rule is shown with boto3 against moto in process, as it is and with the local AWS's refusals
(``moto_refusals.apply_refusals``): a gap is accepted by moto as it is (the reason for its patch: if such a test
fails, moto fixed it) and refused with AWS's error code, HTTP status and message once patched; a rule moto already
refuses is refused either way. The last test sends every refused request to the server the tooling starts (every
patch of ``moto_patches.apply``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.sqs import models

from effectively_once_local.aws import moto_refusals

from ..sqs_answers import refuse_as_aws

REGION = "us-east-1"
#: Bytes over AWS's 1 MiB message (and batch) limit.
MIB = 1_048_576
#: A message attribute as SendMessage takes it.
ATTRIBUTE = {"DataType": "String", "StringValue": "v"}
#: AWS's answer to a deduplication id on a standard queue, for the id "pay-1" (cdklabs/construct-hub#905).
DEDUP_ON_STANDARD = (
    "Value pay-1 for parameter MessageDeduplicationId is invalid. "
    "Reason: The request include parameter that is not valid for this queue type."
)
#: AWS's answer to a message over the queue's maximum (inferablehq/inferable#306 quotes it for 262144).
TOO_LONG = f"One or more parameters are invalid. Reason: Message must be shorter than {MIB} bytes."
#: AWS's answer to a visibility past 12 hours from the receive (localstack/localstack#3956 quotes it).
PAST_TWELVE_HOURS = (
    "Value 43200 for parameter VisibilityTimeout is invalid. "
    "Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]"
)


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def refusing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the refusals are applied (moto's classes are restored after the test)."""
    for cls, name in moto_refusals.patched_attributes():
        monkeypatch.setattr(cls, name, getattr(cls, name))
    if request.param:
        refuse_as_aws(monkeypatch)
        moto_refusals.apply_refusals()  # a second call wraps nothing twice
    return bool(request.param)


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def refused(call: Callable[[], Any]) -> tuple[str, int, str]:
    """The error code, HTTP status and message of ``call``'s refusal."""
    with pytest.raises(ClientError) as caught:
        call()
    answer = caught.value.response
    return answer["Error"]["Code"], answer["ResponseMetadata"]["HTTPStatusCode"], answer["Error"]["Message"]


def _standard(sqs: Any) -> str:
    return str(sqs.create_queue(QueueName="payments")["QueueUrl"])


def _fifo(sqs: Any) -> str:
    return str(sqs.create_queue(QueueName="payments.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"])


def _bodies(sqs: Any, url: str) -> list[str]:
    return [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]


# --- MessageDeduplicationId: FIFO queues only; MessageGroupId on a standard queue (fair queues) accepted --------------


def test_a_deduplication_id_on_a_standard_queue_is_refused(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)
    send = {"QueueUrl": url, "MessageBody": "m", "MessageDeduplicationId": "pay-1"}
    batch = {"QueueUrl": url, "Entries": [{"Id": "1", "MessageBody": "m", "MessageDeduplicationId": "pay-1"}]}

    if not refusing:
        sqs.send_message(**send)
        assert sqs.send_message_batch(**batch)["Successful"], "moto as is accepts it (if this fails, moto fixed it)"
        return
    assert refused(lambda: sqs.send_message(**send)) == ("InvalidParameterValue", 400, DEDUP_ON_STANDARD)
    assert refused(lambda: sqs.send_message_batch(**batch)) == ("InvalidParameterValue", 400, DEDUP_ON_STANDARD)
    assert _bodies(sqs, url) == [], "nothing was sent"


def test_a_group_id_on_a_standard_queue_is_accepted_for_fair_queues(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)

    sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="tenant-1")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "n", "MessageGroupId": "tenant-2"}])

    assert sorted(_bodies(sqs, url)) == ["m", "n"]


def test_a_deduplication_id_on_a_fifo_queue_is_accepted(refusing: bool, sqs: Any) -> None:
    url = _fifo(sqs)

    sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g", MessageDeduplicationId="pay-1")

    assert _bodies(sqs, url) == ["m"]


def test_a_fifo_send_without_a_group_id_is_refused(refusing: bool, sqs: Any) -> None:
    url = _fifo(sqs)
    entry = {"MessageBody": "m", "MessageDeduplicationId": "pay-1"}

    for call in (
        lambda: sqs.send_message(QueueUrl=url, **entry),
        lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", **entry}]),
    ):
        code, status, message = refused(call)
        assert (code, status) == ("MissingParameter", 400)
        assert "MessageGroupId" in message


# --- at most 10 message attributes -----------------------------------------------------------------------------------


def test_eleven_message_attributes_are_refused(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)
    eleven = {f"a{i}": ATTRIBUTE for i in range(11)}
    send = {"QueueUrl": url, "MessageBody": "m", "MessageAttributes": eleven}
    batch = {"QueueUrl": url, "Entries": [{"Id": "1", "MessageBody": "m", "MessageAttributes": eleven}]}

    sqs.send_message(QueueUrl=url, MessageBody="ten", MessageAttributes={f"a{i}": ATTRIBUTE for i in range(10)})
    if not refusing:
        sqs.send_message(**send)
        assert sqs.send_message_batch(**batch)["Successful"], "moto as is accepts them (if this fails, moto fixed it)"
        return
    expected = ("InvalidParameterValue", 400, "Number of message attributes [11] exceeds the allowed maximum [10].")
    assert refused(lambda: sqs.send_message(**send)) == expected
    assert refused(lambda: sqs.send_message_batch(**batch)) == expected
    assert _bodies(sqs, url) == ["ten"]


# --- message size: body and attributes, in bytes, at most the queue's maximum (1 MiB); a batch 1 MiB in all ----------


def test_a_message_counts_its_attributes_and_its_bytes(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)
    # A 1 MiB body alone is accepted; with one attribute (name "k", type "String", value "v": 8 bytes) it is over.
    sqs.send_message(QueueUrl=url, MessageBody="x" * MIB)
    with_attribute = {"QueueUrl": url, "MessageBody": "x" * MIB, "MessageAttributes": {"k": ATTRIBUTE}}
    # 600,000 characters, 1,200,000 bytes in UTF-8.
    multibyte = {"QueueUrl": url, "MessageBody": "é" * 600_000}
    binary = {  # a binary value counts its bytes
        "QueueUrl": url,
        "MessageBody": "x" * (MIB - 16),
        "MessageAttributes": {"b": {"DataType": "Binary", "BinaryValue": b"\x00" * 10}},
    }

    if not refusing:
        for request in (with_attribute, multibyte, binary):
            sqs.send_message(**request)  # moto as is counts the body's characters only (if this fails, moto fixed it)
        return
    for request in (with_attribute, multibyte, binary):
        assert refused(lambda request=request: sqs.send_message(**request)) == ("InvalidParameterValue", 400, TOO_LONG)
    sqs.send_message(QueueUrl=url, MessageBody="x" * (MIB - 8), MessageAttributes={"k": ATTRIBUTE})  # exactly 1 MiB


def test_a_message_over_a_smaller_queue_maximum_is_refused_in_bytes(refusing: bool, sqs: Any) -> None:
    url = str(sqs.create_queue(QueueName="small", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"])
    over = {"QueueUrl": url, "MessageBody": "é" * 600}  # 600 characters, 1,200 bytes

    if not refusing:
        sqs.send_message(**over)  # moto as is counts characters (if this fails, moto fixed it)
        return
    expected = "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."
    assert refused(lambda: sqs.send_message(**over)) == ("InvalidParameterValue", 400, expected)


def test_a_batch_counts_its_messages_bytes_and_attributes(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)
    half = MIB // 2
    # Two halves of 1 MiB are accepted; with an attribute, or in two-byte characters, they are over.
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x" * half} for i in (1, 2)])
    with_attribute = [{"Id": "1", "MessageBody": "x" * half}, {"Id": "2", "MessageBody": "x" * half}]
    with_attribute[1]["MessageAttributes"] = {"k": ATTRIBUTE}
    multibyte = [{"Id": str(i), "MessageBody": "é" * (half // 2 + 1)} for i in (1, 2)]  # 1 MiB + 4 bytes

    if not refusing:
        for entries in (with_attribute, multibyte):
            assert sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"], "moto as is counts characters"
        return
    for entries, total in ((with_attribute, MIB + 8), (multibyte, MIB + 4)):
        expected = (
            "AWS.SimpleQueueService.BatchRequestTooLong",
            400,
            f"Batch requests cannot be longer than {MIB} bytes. You have sent {total} bytes.",
        )
        assert refused(lambda entries=entries: sqs.send_message_batch(QueueUrl=url, Entries=entries)) == expected


def test_the_size_of_a_message_is_its_body_and_attributes_in_bytes() -> None:
    entry = {
        "MessageBody": "é",
        "MessageAttributes": {
            "k": {"DataType": "String", "StringValue": "v"},
            "n": {"DataType": "Number.int", "StringValue": "12"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        },
        "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-x"}},
    }

    # body 2; k + String + v = 8; n + Number.int + 12 = 13; b + Binary + 2 bytes = 9; system attributes: none.
    assert moto_refusals.message_size(entry) == 2 + 8 + 13 + 9


# --- batches of 10 entries at most, ids distinct: SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch --


def _batch_calls(sqs: Any, url: str, ids: list[str]) -> dict[str, Callable[[], Any]]:
    return {
        "SendMessageBatch": lambda: sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": i, "MessageBody": "m"} for i in ids]
        ),
        "DeleteMessageBatch": lambda: sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": i, "ReceiptHandle": f"handle-{n}"} for n, i in enumerate(ids)]
        ),
        "ChangeMessageVisibilityBatch": lambda: sqs.change_message_visibility_batch(
            QueueUrl=url,
            Entries=[{"Id": i, "ReceiptHandle": f"handle-{n}", "VisibilityTimeout": 1} for n, i in enumerate(ids)],
        ),
    }


def test_a_batch_of_eleven_entries_is_refused(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)
    expected = (
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        400,
        "Maximum number of entries per request are 10. You have sent 11.",
    )

    for operation, call in _batch_calls(sqs, url, [str(i) for i in range(11)]).items():
        if refusing or operation == "SendMessageBatch":
            assert refused(call) == expected, operation
        else:
            call()  # moto as is answers (if this fails, moto fixed it)


def test_a_batch_with_a_repeated_id_is_refused(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)
    expected = ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, "Id a repeated.")

    for operation, call in _batch_calls(sqs, url, ["a", "a"]).items():
        if refusing or operation == "SendMessageBatch":
            assert refused(call) == expected, operation
        else:
            call()  # moto as is answers (if this fails, moto fixed it)


def test_a_refused_batch_sends_nothing(refusing: bool, sqs: Any) -> None:
    url = _standard(sqs)
    entries = [{"Id": "1", "MessageBody": "first"}, {"Id": "2", "MessageBody": "m", "MessageDeduplicationId": "d"}]

    if refusing:
        refused(lambda: sqs.send_message_batch(QueueUrl=url, Entries=entries))
    else:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)

    assert sorted(_bodies(sqs, url)) == ([] if refusing else ["first", "m"])


# --- the 12-hour visibility limit, counted from the receive -----------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """moto's SQS clock (milliseconds), moved by the test: ``clock[0] += ...``."""
    now = [float(int(models.unix_time_millis()))]  # whole milliseconds, as moto stores a send's
    monkeypatch.setattr(models, "unix_time_millis", lambda dt=None: now[0])
    return now


HOUR_MS = 3_600_000


def test_a_visibility_change_counts_from_the_receive_not_the_send(refusing: bool, sqs: Any, clock: list[float]) -> None:
    # A message that waited 11 hours in the queue is received; an hour more of visibility is 1 hour (and a second)
    # from the receive, within 12 hours, on AWS.
    url = _standard(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="waited")
    clock[0] += 11 * HOUR_MS
    [message] = sqs.receive_message(QueueUrl=url)["Messages"]
    clock[0] += 1000
    change = {"QueueUrl": url, "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 3600}

    if not refusing:
        code, status, _ = refused(lambda: sqs.change_message_visibility(**change))
        assert (code, status) == ("InvalidParameterValue", 400), "moto as is counts from the send"
        return
    sqs.change_message_visibility(**change)
    clock[0] += 1000
    assert _bodies(sqs, url) == [], "the message is invisible for the hour"


def test_a_visibility_past_twelve_hours_from_the_receive_is_refused(
    refusing: bool, sqs: Any, clock: list[float]
) -> None:
    url = _standard(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="m")
    [message] = sqs.receive_message(QueueUrl=url)["Messages"]
    clock[0] += 1000
    change = {"QueueUrl": url, "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 43200}

    assert refused(lambda: sqs.change_message_visibility(**change)) == ("InvalidParameterValue", 400, PAST_TWELVE_HOURS)
    sqs.change_message_visibility(**{**change, "VisibilityTimeout": 43199})  # 12 hours from the receive: accepted
    clock[0] += 43199 * 1000 - 1
    assert _bodies(sqs, url) == [], "invisible until 12 hours after the receive"


def test_a_batch_visibility_past_twelve_hours_fails_its_entry_only(
    refusing: bool, sqs: Any, clock: list[float]
) -> None:
    url = _standard(sqs)
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in (1, 2)])
    first, second = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    clock[0] += 1000
    entries = [
        {"Id": "over", "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 43200},
        {"Id": "within", "ReceiptHandle": second["ReceiptHandle"], "VisibilityTimeout": 600},
    ]

    if not refusing:
        code, status, _ = refused(lambda: sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries))
        assert (code, status) == ("InvalidParameterValue", 400), "moto as is fails the whole request"
        return
    answer = sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
    assert answer["Successful"] == [{"Id": "within"}]
    assert answer["Failed"] == [
        {"Id": "over", "SenderFault": True, "Code": "InvalidParameterValue", "Message": PAST_TWELVE_HOURS}
    ]


# --- the server the tooling starts ----------------------------------------------------------------------------------


def test_the_local_aws_server_refuses_what_aws_refuses() -> None:
    # python -m effectively_once_local.aws.moto_patches: every patch applied, requests over HTTP.
    import time

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
        url, fifo = _standard(sqs), _fifo(sqs)
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="tenant-1")  # a fair queue's tenant
        [message] = sqs.receive_message(QueueUrl=url)["Messages"]
        time.sleep(0.05)
        eleven = {f"a{i}": ATTRIBUTE for i in range(11)}
        eleven_ids = [str(i) for i in range(11)]
        calls: dict[str, Callable[[], Any]] = {
            "dedup id on a standard queue": lambda: sqs.send_message(
                QueueUrl=url, MessageBody="m", MessageDeduplicationId="pay-1"
            ),
            "11 attributes": lambda: sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes=eleven),
            "over 1 MiB": lambda: sqs.send_message(QueueUrl=url, MessageBody="é" * 600_000),
            "batch over 1 MiB": lambda: sqs.send_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "é" * 300_000} for i in (1, 2)]
            ),
            "past 12 hours": lambda: sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=43200
            ),
            "no group id": lambda: sqs.send_message(QueueUrl=fifo, MessageBody="m", MessageDeduplicationId="d"),
            **{f"{name}, 11 entries": call for name, call in _batch_calls(sqs, url, eleven_ids).items()},
            **{f"{name}, repeated id": call for name, call in _batch_calls(sqs, url, ["a", "a"]).items()},
        }
        answers = {name: refused(call)[:2] for name, call in calls.items()}

    prefix = "AWS.SimpleQueueService."
    batches = ("SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch")
    assert answers == {
        "dedup id on a standard queue": ("InvalidParameterValue", 400),
        "11 attributes": ("InvalidParameterValue", 400),
        "over 1 MiB": ("InvalidParameterValue", 400),
        "batch over 1 MiB": (f"{prefix}BatchRequestTooLong", 400),
        "past 12 hours": ("InvalidParameterValue", 400),
        "no group id": ("MissingParameter", 400),
        **{f"{name}, 11 entries": (f"{prefix}TooManyEntriesInBatchRequest", 400) for name in batches},
        **{f"{name}, repeated id": (f"{prefix}BatchEntryIdsNotDistinct", 400) for name in batches},
    }
