"""Per-record backoff (issue 31, item 1): a returned record comes back after its own delay, not the queue's whole
visibility timeout; on FIFO a group's returned records share one delay in one call; a failed backoff loses nothing.
Against moto's SQS and DynamoDB in process, with records received from real queues (real receipt handles)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from moto import mock_aws
from moto.sqs.models import sqs_backends

from effectively_once_runtime import Consumer, names
from effectively_once_runtime.backoff import (
    BASE_SECONDS,
    MAX_BACKOFF_SECONDS,
    Backoff,
    Returned,
    Timing,
    cap_seconds,
    delay_seconds,
    queue_url,
)
from effectively_once_runtime.settings import QueueFacts, parse_source_queues

from .conftest import (
    ACCOUNT,
    IDEMPOTENCY_TABLE,
    REGION,
    FakeLambdaContext,
    _CurrentStdout,
    create_table,
    failures,
    receive_records,
    runtime_env,
)

VISIBILITY = 60
#: The 12-hour ceiling of a message's total visibility (SQS), and the longest invocation and batching window.
TWELVE_HOURS, LONGEST_INVOCATION, LONGEST_WINDOW = 43_200, 900, 300


# --- the delay ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8])
def test_the_delay_is_exponential_with_equal_jitter(count: int) -> None:
    ceiling = BASE_SECONDS * 2 ** (count - 1)
    low = delay_seconds(count, cap=10_000, draw=lambda: 0.0)
    high = delay_seconds(count, cap=10_000, draw=lambda: 0.999999)
    assert low == -(-ceiling // 2)  # half the ceiling, rounded up
    assert high == ceiling
    assert low <= delay_seconds(count, cap=10_000) <= high


@pytest.mark.parametrize(("count", "ceiling"), [(1, 3.75), (2, 7.5), (3, 15), (4, 30), (5, 60), (9, 60)])
def test_a_failed_record_s_delay_spreads_the_receives_left_over_the_cap(count: int, ceiling: float) -> None:
    # maxReceiveCount 5, a 60 s cap: the retry before the last receive waits the whole cap, each earlier one half.
    def delay(draw: float) -> int:
        return delay_seconds(count, cap=60, max_receive_count=5, attempted=True, draw=lambda: draw)

    assert delay(0.0) == -(-ceiling // 2) and delay(0.999999) == -(-ceiling // 1)


def test_a_failed_record_without_a_known_budget_backs_off_as_a_deferred_one() -> None:
    assert delay_seconds(3, cap=60, attempted=True, draw=lambda: 0.999999) == 4


def test_the_delay_is_capped_and_floored() -> None:
    assert delay_seconds(30, cap=45, draw=lambda: 0.999999) == 45
    assert delay_seconds(10_000, cap=45) <= 45  # no overflow on a huge receive count
    assert delay_seconds(1, cap=45, floor=20) == 20
    assert delay_seconds(1, cap=10, floor=20) == 10  # the floor stays within the cap
    assert delay_seconds(0, cap=45, draw=lambda: 0.0) == 1  # a missing count counts as the first receive


def test_the_cap_is_what_the_visibility_timeout_has_left_and_never_near_twelve_hours() -> None:
    assert cap_seconds(QueueFacts(5, 30)) == 30
    assert cap_seconds(QueueFacts(5, 30), elapsed_seconds=12.5) == 17  # never longer than doing nothing
    assert cap_seconds(QueueFacts(5, 30), elapsed_seconds=31) == 0
    assert cap_seconds(QueueFacts(5, 7200)) == MAX_BACKOFF_SECONDS
    assert cap_seconds(QueueFacts(5, None), function_timeout_seconds=20) == 20  # unknown: the function timeout
    assert cap_seconds(QueueFacts(5, None)) == MAX_BACKOFF_SECONDS
    # SQS counts the 12 hours from the receive: the longest delay after the longest invocation and window fits.
    assert MAX_BACKOFF_SECONDS + LONGEST_INVOCATION + LONGEST_WINDOW < TWELVE_HOURS


@pytest.mark.parametrize(
    ("arn", "url"),
    [
        ("arn:aws:sqs:eu-west-1:123456789012:q", "https://sqs.eu-west-1.amazonaws.com/123456789012/q"),
        (
            "arn:aws-cn:sqs:cn-north-1:123456789012:q.fifo",
            "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q.fifo",
        ),
        ("arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q", "https://sqs.us-gov-west-1.amazonaws.com/123456789012/q"),
    ],
)
def test_queue_url_from_the_arn(arn: str, url: str) -> None:
    assert queue_url(arn) == (arn.split(":")[3], url)


@pytest.mark.parametrize("arn", ["arn:aws:sns:us-east-1:123456789012:t", "arn:aws-iso:sqs:us-iso-east-1:1:q", "q"])
def test_queue_url_refuses_what_it_cannot_locate(arn: str) -> None:
    assert queue_url(arn) is None


def test_source_queues_parse_and_refuse() -> None:
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q"
    assert parse_source_queues(None) == {}
    assert parse_source_queues(json.dumps({arn: {"maxReceiveCount": 5, "visibilityTimeout": 30}})) == {
        arn: QueueFacts(5, 30)
    }
    assert parse_source_queues(json.dumps({arn: {}})) == {arn: QueueFacts(None, None)}
    for bad in ("[]", "{", json.dumps({"q": {}}), json.dumps({arn: {"maxReceiveCount": 0}})):
        with pytest.raises(ValueError, match="SOURCE_QUEUES"):
            parse_source_queues(bad)
    with pytest.raises(ValueError, match="maxReceiveCount"):
        parse_source_queues(json.dumps({arn: {"maxReceiveCount": True}}))
    # A fact a later construct adds is left out, not refused: an older runtime layer keeps working.
    assert parse_source_queues(json.dumps({arn: {"retries": 3, "maxReceiveCount": 4}})) == {arn: QueueFacts(4, None)}


# --- end to end: a consumer, real queues ------------------------------------------------------------------------------


@dataclass
class World:
    consumer: Consumer
    sqs: Any
    urls: dict[str, str]
    arns: dict[str, str]

    def receive(self, name: str, count: int = 10) -> list[dict[str, Any]]:
        """Records as the event source mapping hands them over, from a real receive of queue ``name``."""
        return receive_records(self.sqs, self.urls[name], self.arns[name], count)

    def hidden_for(self, name: str) -> dict[str, float]:
        """Each message body of queue ``name`` and the seconds until it is visible again (moto's own clock)."""
        queue = sqs_backends[ACCOUNT][REGION].queues[self.urls[name].rsplit("/", 1)[1]]
        now = time.time() * 1000
        return {m.body: (m.visible_at - now) / 1000 for m in queue._messages}

    def invoke(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        return self.consumer.handler({"Records": records}, FakeLambdaContext(remaining_ms=30_000))  # type: ignore[no-any-return]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[World]:
    runtime_env(monkeypatch)
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), IDEMPOTENCY_TABLE, "id")
        sqs = boto3.client("sqs", region_name=REGION)
        urls, arns = {}, {}
        for name, attributes in (("work", {}), ("work.fifo", {"FifoQueue": "true"}), ("unnamed", {})):
            attributes = {**attributes, "VisibilityTimeout": str(VISIBILITY)}
            urls[name] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            arns[name] = sqs.get_queue_attributes(QueueUrl=urls[name], AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
        known = {arns[n]: {"maxReceiveCount": 5, "visibilityTimeout": VISIBILITY} for n in ("work", "work.fifo")}
        monkeypatch.setenv(names.ENV_SOURCE_QUEUES, json.dumps(known))
        consumer = Consumer(key="order_id", key_prefix="test/backoff", effect_key="scoped", service="backoff")
        # The Logger's handler holds the stdout of import time; point it at the one capsys captures.
        monkeypatch.setattr(consumer.logger.registered_handler, "stream", _CurrentStdout())

        @consumer.record
        def handle(body: dict[str, Any]) -> dict[str, Any]:
            if body.get("busy"):
                raise IdempotencyAlreadyInProgressError("another invocation holds it")
            if body.get("fail"):
                raise RuntimeError("provider unavailable")
            return {"ok": body["order_id"]}

        yield World(consumer, sqs, urls, arns)


def send(world: World, name: str, *bodies: dict[str, Any], group: str | None = None) -> None:
    for body in bodies:
        extra = {"MessageGroupId": group, "MessageDeduplicationId": body["order_id"]} if group else {}
        world.sqs.send_message(QueueUrl=world.urls[name], MessageBody=json.dumps(body), **extra)


def test_a_failed_record_comes_back_after_its_backoff_not_the_visibility_timeout(world: World) -> None:
    send(world, "work", {"order_id": "ok-1"}, {"order_id": "bad-1", "fail": True})
    records = world.receive("work")
    response = world.invoke(records)
    failed = [r["body"] for r in records if r["messageId"] in failures(response)]
    assert failed == [json.dumps({"order_id": "bad-1", "fail": True})]
    hidden = world.hidden_for("work")
    # First receive of five, a 60 s visibility timeout: 2 to 4 s (60 / 2 ** 4, jittered), not 60.
    assert 2 - 0.5 <= hidden[failed[0]] <= 4 + 0.5


def test_a_deferred_record_comes_back_within_a_second(world: World) -> None:
    send(world, "work", {"order_id": "first"}, {"order_id": "second"})
    records = world.receive("work")
    response = world.consumer.handler({"Records": records}, FakeLambdaContext(remaining_ms=500))
    (deferred,) = [r["body"] for r in records if r["messageId"] in failures(response)]
    assert world.hidden_for("work")[deferred] <= BASE_SECONDS + 0.5


def test_the_delay_grows_with_the_receive_count(world: World) -> None:
    send(world, "work", {"order_id": "bad-2", "fail": True})
    for _ in range(3):
        world.sqs.receive_message(QueueUrl=world.urls["work"], VisibilityTimeout=0)
    (record,) = world.receive("work")
    assert record["attributes"]["ApproximateReceiveCount"] == "4"
    world.invoke([record])
    (hidden,) = world.hidden_for("work").values()
    assert 15 - 0.5 <= hidden <= 30 + 0.5  # the fourth receive of five: between 15 and 30 s


def test_an_in_progress_duplicate_waits_out_the_function_timeout(world: World) -> None:
    send(world, "work", {"order_id": "busy-1", "busy": True})
    world.invoke(world.receive("work"))
    (hidden,) = world.hidden_for("work").values()
    assert 30 - 1 <= hidden <= 30 + 0.5  # the context's 30 s: the holder has finished or expired by then


def test_a_queue_the_constructs_did_not_name_keeps_its_visibility_timeout(world: World) -> None:
    send(world, "unnamed", {"order_id": "bad-3", "fail": True})
    world.invoke(world.receive("unnamed"))
    (hidden,) = world.hidden_for("unnamed").values()
    assert hidden > VISIBILITY - 5


def test_fifo_group_shares_one_delay_in_one_call(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    send(world, "work.fifo", {"order_id": "g1-a", "fail": True}, {"order_id": "g1-b"}, {"order_id": "g1-c"}, group="g1")
    send(world, "work.fifo", {"order_id": "g2-a"}, group="g2")
    records = world.receive("work.fifo")
    assert len(records) == 4
    calls: list[list[dict[str, Any]]] = []
    real = world.sqs.change_message_visibility_batch

    def record_call(**request: Any) -> Any:
        calls.append(request["Entries"])
        return real(**request)

    backoff = world.consumer.state.backoff
    assert backoff is not None
    recording = type("Recording", (), {"change_message_visibility_batch": staticmethod(record_call)})()
    monkeypatch.setattr(backoff, "_client", lambda region: recording)
    response = world.invoke(records)
    assert len(failures(response)) == 3  # g1's three: the failure and the two skipped behind it
    assert len(calls) == 1 and len(calls[0]) == 3
    assert len({entry["VisibilityTimeout"] for entry in calls[0]}) == 1
    hidden = world.hidden_for("work.fifo")  # g2-a too: the event source mapping, not the handler, deletes it
    group = [json.dumps(b) for b in ({"order_id": "g1-a", "fail": True}, {"order_id": "g1-b"}, {"order_id": "g1-c"})]
    assert max(hidden[body] for body in group) <= 4 + 0.5
    assert hidden[json.dumps({"order_id": "g2-a"})] > VISIBILITY - 5


def test_a_failed_backoff_call_loses_nothing(world: World, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    send(world, "work", {"order_id": "bad-4", "fail": True})
    records = world.receive("work")
    backoff = world.consumer.state.backoff
    assert backoff is not None

    class Down:
        def change_message_visibility_batch(self, **request: Any) -> Any:
            raise ConnectionError("SQS unreachable")

    monkeypatch.setattr(backoff, "_client", lambda region: Down())
    response = world.invoke(records)
    assert failures(response) == {records[0]["messageId"]}
    (hidden,) = world.hidden_for("work").values()
    assert hidden > VISIBILITY - 5
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert any(line.get("message") == names.MSG_BACKOFF_FAILED for line in lines)


def test_a_failed_entry_keeps_its_record_and_the_others_change() -> None:
    logged: list[tuple[str, dict[str, Any]]] = []

    class Logger:
        def info(self, message: str, extra: dict[str, Any]) -> None:
            logged.append((message, extra))

        warning = info

    class Client:
        def change_message_visibility_batch(self, **request: Any) -> Any:
            return {"Successful": [{"Id": "0"}], "Failed": [{"Id": "1", "Code": "ReceiptHandleIsInvalid"}]}

    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q"
    backoff = Backoff({arn: QueueFacts(5, 30)}, lambda region: Client(), Logger(), None, draw=lambda: 0.0)
    returned = [Returned("m1", "h1", arn, 1), Returned("m2", "h2", arn, 1)]
    assert backoff.apply(returned, Timing(), lambda: 5_000) == 1
    assert [message for message, _ in logged] == [names.MSG_BACKOFF_FAILED, names.MSG_RECORDS_BACKED_OFF]
    assert logged[0][1][names.FIELD_MESSAGE_IDS] == ["m2"]
    logged.clear()
    assert backoff.apply(returned, Timing(), lambda: 100) == 0  # too little time left: no call, and it is said
    assert [message for message, _ in logged] == [names.MSG_BACKOFF_FAILED]


def test_before_a_last_receive_runs_without_the_time_the_done_records_are_deleted(world: World) -> None:
    # The receive budget's step: the second record is on its last receive (5 of 5) and the time is short, so it runs
    # anyway; the first, done, is deleted before, so a timeout now could not hand it out again.
    send(world, "work", {"order_id": "done-1"}, {"order_id": "last-1"})
    for _ in range(4):
        world.sqs.receive_message(QueueUrl=world.urls["work"], MaxNumberOfMessages=10, VisibilityTimeout=0)
    records = world.receive("work")
    assert {r["attributes"]["ApproximateReceiveCount"] for r in records} == {"5"}
    response = world.consumer.handler({"Records": records}, FakeLambdaContext(remaining_ms=500))
    assert failures(response) == set()
    assert world.hidden_for("work") == {json.dumps({"order_id": "last-1"}): pytest.approx(VISIBILITY, abs=5)}
