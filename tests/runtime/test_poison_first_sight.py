"""Poison on first sight under load (issue 31, item 3). In the soak, poison reached the DLQ after up to 4 receives:

- the batch put it last (fresh records have the lowest receive count), so a short batch deferred it before it was
  looked at, once per receive;
- a kill or a timeout later in the batch handed out again a poison message already copied to the DLQ (another
  receive, and on a standard queue a second copy);
- a payment the record function refused (a negative amount) was found only when its turn came.

The fix, for the whole class: every record of a batch is screened before the first runs (no I/O: strict JSON
object, a key, the consumer's ``check``), bad input is dead-lettered at once, and the original is deleted right
after its copy is sent. Against moto's SQS and DynamoDB in process, with messages received from real queues.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_runtime import Consumer, PermanentError, names

from .conftest import (
    IDEMPOTENCY_TABLE,
    REGION,
    FakeLambdaContext,
    _CurrentStdout,
    create_table,
    failures,
    receive_records,
    runtime_env,
)

#: Less than the default margin (1 s): every record after the first would be deferred.
SHORT_MS = 500


class NotAnOrder(PermanentError):
    """The consumer's own check refused the payload."""


def check_order(payload: dict[str, Any]) -> None:
    total = payload.get("total", 1)
    if not isinstance(total, int) or total <= 0:
        raise NotAnOrder(f"total must be a positive integer, got {total!r}")
    if payload.get("check_crashes"):
        raise RuntimeError("the check itself failed")  # transient: left to the full path


@dataclass
class Queues:
    consumer: Consumer
    sqs: Any
    urls: dict[str, str]
    arns: dict[str, str]
    ran: list[str] = field(default_factory=list)

    def send(self, name: str, *bodies: Any, group: str | None = None) -> None:
        for n, body in enumerate(bodies):
            text = body if isinstance(body, str) else json.dumps(body)
            extra = {"MessageGroupId": group, "MessageDeduplicationId": f"{group}-{n}"} if group else {}
            self.sqs.send_message(QueueUrl=self.urls[name], MessageBody=text, **extra)

    def receive(self, name: str) -> list[dict[str, Any]]:
        return receive_records(self.sqs, self.urls[name], self.arns[name])

    def invoke(self, records: list[dict[str, Any]], remaining_ms: int = SHORT_MS) -> set[str]:
        response = self.consumer.handler({"Records": records}, FakeLambdaContext(remaining_ms=remaining_ms))
        return failures(response)

    def bodies(self, name: str) -> list[str]:
        """Every body still in queue ``name`` (visible or not), from moto's backend."""
        from moto.sqs.models import sqs_backends

        queue = sqs_backends["123456789012"][REGION].queues[self.urls[name].rsplit("/", 1)[1]]
        return [m.body for m in queue._messages]

    def dead_lettered(self, name: str) -> list[str]:
        return self.bodies(name + "-dlq" if not name.endswith(".fifo") else name[:-5] + "-dlq.fifo")


@pytest.fixture
def queues(monkeypatch: pytest.MonkeyPatch) -> Iterator[Queues]:
    runtime_env(monkeypatch)
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), IDEMPOTENCY_TABLE, "id")
        sqs = boto3.client("sqs", region_name=REGION)
        urls, arns = {}, {}
        for name, fifo in (("orders", False), ("orders-dlq", False), ("orders.fifo", True), ("orders-dlq.fifo", True)):
            urls[name] = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
            arns[name] = f"arn:aws:sqs:{REGION}:123456789012:{name}"
        consumer = Consumer(key="order_id", key_prefix="test/poison", effect_key="scoped", check=check_order)
        monkeypatch.setattr(consumer.logger.registered_handler, "stream", _CurrentStdout())
        world = Queues(consumer, sqs, urls, arns)

        @consumer.record
        def handle(body: dict[str, Any]) -> dict[str, Any]:
            if body.get("fail"):
                raise RuntimeError("provider unavailable")
            world.ran.append(body["order_id"])
            return {"ok": body["order_id"]}

        yield world


def use_dlq(queues: Queues, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(names.ENV_DEAD_LETTER_QUEUE_URL, queues.urls[name])
    queues.consumer.reset()


POISON = {
    "not JSON": '{"order_id": "broken", "total": ',
    "no key": {"total": 100},
    "refused by the consumer's check": {"order_id": "negative", "total": -5},
}


@pytest.mark.parametrize("poison", POISON.values(), ids=POISON.keys())
def test_poison_last_in_a_short_batch_is_dead_lettered_on_first_sight(
    queues: Queues, monkeypatch: pytest.MonkeyPatch, poison: Any
) -> None:
    use_dlq(queues, monkeypatch, "orders-dlq")
    queues.send("orders", {"order_id": "o-1"}, {"order_id": "o-2"}, {"order_id": "o-3"}, poison)
    records = queues.receive("orders")
    returned = queues.invoke(records)
    poison_text = poison if isinstance(poison, str) else json.dumps(poison)
    # Only the first valid record had the time; the poison, though last, was screened before it and is in the DLQ.
    assert queues.ran == ["o-1"]
    assert {r["body"] for r in records if r["messageId"] in returned} == {
        json.dumps({"order_id": "o-2"}),
        json.dumps({"order_id": "o-3"}),
    }
    assert queues.dead_lettered("orders") == [poison_text]
    # The original is gone from the source queue at once: a kill now could not hand it out again.
    assert poison_text not in queues.bodies("orders")


def test_a_transient_check_failure_is_not_poison(queues: Queues, monkeypatch: pytest.MonkeyPatch) -> None:
    use_dlq(queues, monkeypatch, "orders-dlq")
    queues.send("orders", {"order_id": "o-1", "check_crashes": True})
    returned = queues.invoke(queues.receive("orders"), remaining_ms=30_000)
    assert len(returned) == 1 and queues.dead_lettered("orders") == []


def test_fifo_poison_behind_a_failure_of_its_group_is_done_not_returned(
    queues: Queues, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_dlq(queues, monkeypatch, "orders-dlq.fifo")
    queues.send(
        "orders.fifo",
        {"order_id": "g-1", "fail": True},
        {"order_id": "g-2", "total": 0},
        {"order_id": "g-3"},
        group="g",
    )
    records = queues.receive("orders.fifo")
    returned = queues.invoke(records, remaining_ms=30_000)
    by_id = {r["messageId"]: json.loads(r["body"])["order_id"] for r in records}
    # g-1 failed and holds its group: g-3 waits behind it; g-2, bad input, left the group on first sight.
    assert sorted(by_id[m] for m in returned) == ["g-1", "g-3"]
    assert queues.dead_lettered("orders.fifo") == [json.dumps({"order_id": "g-2", "total": 0})]
    assert queues.ran == []


def test_without_a_dead_letter_queue_screened_poison_fails_alone(queues: Queues) -> None:
    queues.send("orders", {"order_id": "o-1"}, {"total": 1})
    records = queues.receive("orders")
    returned = queues.invoke(records, remaining_ms=30_000)
    assert [json.loads(r["body"]) for r in records if r["messageId"] in returned] == [{"total": 1}]
    assert queues.ran == ["o-1"]


def test_check_runs_before_any_write_on_a_direct_invocation(queues: Queues) -> None:
    with pytest.raises(NotAnOrder):
        queues.consumer.handler({"order_id": "d-1", "total": -1}, FakeLambdaContext())
    table = boto3.client("dynamodb", region_name=REGION).scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert table == []  # no in-progress record was written for it


def test_check_must_be_callable() -> None:
    with pytest.raises(TypeError, match="check must be a function"):
        Consumer(key="order_id", key_prefix="test/poison", effect_key="scoped", check="parse")  # type: ignore[arg-type]


def test_a_valid_record_is_parsed_and_checked_once(queues: Queues, monkeypatch: pytest.MonkeyPatch) -> None:
    # The screen's clean delivery is what the record's turn processes: no second parse, no second check (hot path).
    from effectively_once_runtime import events

    parsed: list[Any] = []
    real_payloads = events.payloads
    monkeypatch.setattr(events, "payloads", lambda *args: parsed.append(args) or real_payloads(*args))
    checked: list[Any] = []
    rules = queues.consumer._execution.rules
    monkeypatch.setattr(queues.consumer._execution, "rules", type(rules)(**{**vars(rules), "check": checked.append}))
    queues.send("orders", {"order_id": "o-1"}, {"order_id": "o-2"}, {"order_id": "o-3"})
    returned = queues.invoke(queues.receive("orders"), remaining_ms=30_000)
    assert returned == set() and queues.ran == ["o-1", "o-2", "o-3"]
    assert len(parsed) == 3 and len(checked) == 3
