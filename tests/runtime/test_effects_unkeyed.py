"""Un-keyed effects (issue 24, item 6): ``delivery=`` has no default; ``at_most_once`` claims a marker before the call
and counts a replay that finds the claim as possibly lost; ``at_least_once`` counts every repeat. Against moto's
DynamoDB in process, outside a Consumer (``markers=``) and inside one (the consumer's idempotency table)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from effectively_once_runtime import Consumer, InvalidEffectCall, PermanentError, names
from effectively_once_runtime.effects.unkeyed import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    DELIVERY_MODES,
    DONE,
    LOST,
    MAX_STORED_RESULT_BYTES,
    PENDING,
    MarkerTable,
    MarkerUnavailable,
    marker_id,
    rejected_by_aws,
    unkeyed,
)

from .conftest import (
    HANDLER_ENV,
    IDEMPOTENCY_TABLE,
    REGION,
    FakeLambdaContext,
    create_table,
    failures,
    lose_responses,
    redeliver,
    sqs_record,
)
from .orders_domain import KEY_PREFIX, Orders, order

PREFIX = "shop/mail"
EXPIRY = 600
LOGGER = "effectively_once_runtime.effects.unkeyed"


class Killed(BaseException):
    """The execution environment dying mid-call (a kill is no ``Exception``: nothing may catch it as one)."""


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client, IDEMPOTENCY_TABLE, "id")
        yield client


@pytest.fixture
def markers(ddb: Any) -> MarkerTable:
    return MarkerTable(table_name=IDEMPOTENCY_TABLE, key_prefix=PREFIX, client=ddb, expiry_seconds=EXPIRY)


class Mailer:
    """An un-keyed provider: every call sends (its log is the witness); it can fail before or after sending."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.fail_before: list[BaseException] = []
        self.fail_after: list[BaseException] = []

    def send(self, to: str) -> dict[str, str]:
        if self.fail_before:
            raise self.fail_before.pop(0)
        self.sent.append(to)
        if self.fail_after:
            raise self.fail_after.pop(0)
        return {"MessageId": f"m-{len(self.sent)}"}


def _items(ddb: Any) -> list[dict[str, Any]]:
    return ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]  # type: ignore[no-any-return]


def _item(ddb: Any, marker: str) -> dict[str, Any]:
    return ddb.get_item(TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": marker}})["Item"]  # type: ignore[no-any-return]


def _warnings(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.getMessage() == message]


def _send(mailer: Mailer, markers: MarkerTable, delivery: str, key: str = "o-1", **options: Any) -> Any:
    return unkeyed(
        lambda: mailer.send("a@example.com"), delivery=delivery, idempotency_key=key, markers=markers, **options
    )


# --- delivery= has no default ---------------------------------------------------------------------------------------
def test_fails_without_delivery(markers: MarkerTable, ddb: Any) -> None:
    mailer = Mailer()

    with pytest.raises(TypeError, match="delivery"):
        unkeyed(lambda: mailer.send("x"), idempotency_key="o-1", markers=markers)  # type: ignore[call-arg]

    assert mailer.sent == [] and _items(ddb) == []


@pytest.mark.parametrize("delivery", ["exactly_once", "AT_MOST_ONCE", "", None])
def test_fails_with_a_delivery_that_is_not_a_mode(markers: MarkerTable, ddb: Any, delivery: Any) -> None:
    mailer = Mailer()

    with pytest.raises(InvalidEffectCall, match=re.escape("delivery must be one of ('at_most_once', 'at_least_once')")):
        _send(mailer, markers, delivery)

    assert mailer.sent == [] and _items(ddb) == []


def test_fails_outside_a_consumer_without_a_marker_table() -> None:
    with pytest.raises(InvalidEffectCall, match=re.escape("markers=MarkerTable(table_name=..., key_prefix=...)")):
        unkeyed(lambda: 1, delivery=AT_MOST_ONCE, idempotency_key="o-1")


# --- at_most_once ----------------------------------------------------------------------------------------------------
def test_at_most_once_calls_once_and_marks_the_marker_done(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    before = int(time.time())

    result = _send(mailer, markers, AT_MOST_ONCE)

    assert result == {"MessageId": "m-1"} and mailer.sent == ["a@example.com"]
    [item] = _items(ddb)
    assert item["id"]["S"] == f"{PREFIX}#effect-marker#unkeyed#-#o-1"
    assert item["status"]["S"] == DONE and item["delivery"]["S"] == AT_MOST_ONCE
    assert before + EXPIRY <= int(item["expiration"]["N"]) <= int(time.time()) + EXPIRY
    assert caplog.records == []


def test_at_most_once_replay_after_completion_is_skipped_silently_with_the_stored_result(
    markers: MarkerTable, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    first = _send(mailer, markers, AT_MOST_ONCE)

    again = [_send(mailer, markers, AT_MOST_ONCE) for _ in range(2)]

    assert mailer.sent == ["a@example.com"], "sent once"
    assert again == [first, first]
    assert _warnings(caplog, names.MSG_EFFECT_POSSIBLY_LOST) == []


def test_at_most_once_replay_after_a_crash_between_claim_and_call_skips_and_counts_possibly_lost_once(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    mailer.fail_before.append(Killed())
    with pytest.raises(Killed):
        _send(mailer, markers, AT_MOST_ONCE)
    marker = f"{PREFIX}#effect-marker#unkeyed#-#o-1"
    assert _item(ddb, marker)["status"]["S"] == PENDING

    replays = [_send(mailer, markers, AT_MOST_ONCE) for _ in range(3)]

    assert replays == [None, None, None] and mailer.sent == [], "never sent: at most once"
    [line] = _warnings(caplog, names.MSG_EFFECT_POSSIBLY_LOST)
    assert line.levelno == logging.WARNING
    assert (line.idempotency_key, line.effect, line.effect_marker, line.delivery) == (  # type: ignore[attr-defined]
        "o-1",
        "unkeyed",
        marker,
        AT_MOST_ONCE,
    )
    assert _item(ddb, marker)["status"]["S"] == LOST, "counted once: later replays skip silently"


def test_at_most_once_counts_a_kill_after_the_send_as_possibly_lost_an_upper_bound(
    markers: MarkerTable, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    mailer.fail_after.append(Killed())
    with pytest.raises(Killed):
        _send(mailer, markers, AT_MOST_ONCE)

    assert _send(mailer, markers, AT_MOST_ONCE) is None

    lost = len(_warnings(caplog, names.MSG_EFFECT_POSSIBLY_LOST))
    assert mailer.sent == ["a@example.com"], "never twice"
    assert lost == 1 >= 1 - len(mailer.sent), "the count bounds the sends that did not happen"


def test_at_most_once_releases_the_claim_when_the_call_provably_sent_nothing(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    mailer.fail_before.append(_client_error(400, retries=0))
    with pytest.raises(ClientError):
        _send(mailer, markers, AT_MOST_ONCE, not_sent=rejected_by_aws)
    assert _items(ddb) == [], "the claim was released"

    assert _send(mailer, markers, AT_MOST_ONCE, not_sent=rejected_by_aws) == {"MessageId": "m-1"}
    assert mailer.sent == ["a@example.com"] and _warnings(caplog, names.MSG_EFFECT_POSSIBLY_LOST) == []


@pytest.mark.parametrize(("status", "retries"), [(500, 0), (400, 2)])
def test_at_most_once_keeps_the_claim_when_the_error_may_follow_a_send(
    markers: MarkerTable, caplog: pytest.LogCaptureFixture, status: int, retries: int
) -> None:
    mailer = Mailer()
    mailer.fail_before.append(_client_error(status, retries=retries))
    with pytest.raises(ClientError):
        _send(mailer, markers, AT_MOST_ONCE, not_sent=rejected_by_aws)

    assert _send(mailer, markers, AT_MOST_ONCE, not_sent=rejected_by_aws) is None
    assert mailer.sent == [] and len(_warnings(caplog, names.MSG_EFFECT_POSSIBLY_LOST)) == 1


def test_an_expired_marker_counts_as_absent(markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture) -> None:
    marker = f"{PREFIX}#effect-marker#unkeyed#-#o-1"
    ddb.put_item(
        TableName=IDEMPOTENCY_TABLE,
        Item={"id": {"S": marker}, "status": {"S": PENDING}, "expiration": {"N": str(int(time.time()) - 5)}},
    )
    mailer = Mailer()

    assert _send(mailer, markers, AT_MOST_ONCE) == {"MessageId": "m-1"}
    assert mailer.sent == ["a@example.com"] and _warnings(caplog, names.MSG_EFFECT_POSSIBLY_LOST) == []
    assert _item(ddb, marker)["status"]["S"] == DONE


def test_a_marker_table_that_cannot_be_written_is_transient_and_nothing_is_called(ddb: Any) -> None:
    mailer = Mailer()
    missing = MarkerTable(table_name="no-such-table", key_prefix=PREFIX, client=ddb)

    with pytest.raises(MarkerUnavailable, match="put_item on marker"):
        _send(mailer, missing, AT_MOST_ONCE)

    assert mailer.sent == []


def test_a_result_too_large_to_store_is_returned_once_and_replays_get_none(markers: MarkerTable) -> None:
    big = "x" * (MAX_STORED_RESULT_BYTES + 1)

    first = unkeyed(lambda: big, delivery=AT_MOST_ONCE, idempotency_key="o-big", markers=markers)
    again = unkeyed(lambda: "sent again", delivery=AT_MOST_ONCE, idempotency_key="o-big", markers=markers)

    assert first == big and again is None


def test_marker_table_defaults_to_the_record_expiry_and_a_shared_client(ddb: Any) -> None:
    table = MarkerTable(table_name=IDEMPOTENCY_TABLE, key_prefix=PREFIX)
    before = int(time.time())

    unkeyed(lambda: 1, delivery=AT_MOST_ONCE, idempotency_key="o-1", markers=table)

    assert table.expiry_seconds == names.DEFAULT_EXPIRY_SECONDS == 3600 and table.client is None
    [item] = _items(ddb)
    assert before + 3600 <= int(item["expiration"]["N"]) <= int(time.time()) + 3600


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"key_prefix": "shop mail"}, "key_prefix must be printable characters without whitespace"),
        ({"key_prefix": PREFIX, "expiry_seconds": 0}, "expiry_seconds must be a positive integer"),
    ],
)
def test_fails_on_a_marker_table_that_breaks_the_rules(options: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        MarkerTable(table_name=IDEMPOTENCY_TABLE, **options)


# --- at_least_once ---------------------------------------------------------------------------------------------------
def test_at_least_once_first_call_is_no_repeat(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()

    assert _send(mailer, markers, AT_LEAST_ONCE) == {"MessageId": "m-1"}

    [item] = _items(ddb)
    assert (item["status"]["S"], item["attempts"]["N"], item["delivery"]["S"]) == (DONE, "1", AT_LEAST_ONCE)
    assert _warnings(caplog, names.MSG_EFFECT_REPEATED) == []


def test_at_least_once_repeats_after_a_crash_and_counts_each_repeat(
    markers: MarkerTable, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    mailer.fail_after.extend([Killed(), Killed()])
    for _ in range(2):
        with pytest.raises(Killed):
            _send(mailer, markers, AT_LEAST_ONCE)

    assert _send(mailer, markers, AT_LEAST_ONCE) == {"MessageId": "m-3"}

    repeats = _warnings(caplog, names.MSG_EFFECT_REPEATED)
    assert [r.attempts for r in repeats] == [2, 3]  # type: ignore[attr-defined]
    assert len(mailer.sent) - 1 <= len(repeats), "every repeat counted"


def test_at_least_once_replay_after_completion_is_skipped_with_the_stored_result(
    markers: MarkerTable, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    first = _send(mailer, markers, AT_LEAST_ONCE)

    assert _send(mailer, markers, AT_LEAST_ONCE) == first
    assert len(mailer.sent) == 1 and _warnings(caplog, names.MSG_EFFECT_REPEATED) == []


def test_at_least_once_does_not_count_an_attempt_that_provably_sent_nothing(
    markers: MarkerTable, caplog: pytest.LogCaptureFixture
) -> None:
    mailer = Mailer()
    mailer.fail_before.append(_client_error(429, retries=0))
    with pytest.raises(ClientError):
        _send(mailer, markers, AT_LEAST_ONCE, not_sent=rejected_by_aws)

    assert _send(mailer, markers, AT_LEAST_ONCE, not_sent=rejected_by_aws) == {"MessageId": "m-1"}
    assert _warnings(caplog, names.MSG_EFFECT_REPEATED) == []


# --- an SDK retry of the runtime's own write (issue 55, item 1a) ------------------------------------------------------
@pytest.mark.parametrize("delivery", DELIVERY_MODES)
def test_a_retry_of_the_lost_claim_meets_its_own_claim_and_calls_uncounted(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture, delivery: str
) -> None:
    """The claim's (or first attempt's) PutItem lands and its answer is lost; botocore sends it again and the retry
    is refused by the item it wrote itself. That is no earlier attempt: the call is made once, nothing counted."""
    mailer = Mailer()
    lost = lose_responses(ddb, "PutItem")

    assert _send(mailer, markers, delivery) == {"MessageId": "m-1"}

    assert lost == [1], "the first attempt's answer was lost, and the write sent again"
    assert mailer.sent == ["a@example.com"]
    [item] = _items(ddb)
    assert (item["status"]["S"], item["attempts"]["N"]) == (DONE, "1")
    for message in (names.MSG_EFFECT_POSSIBLY_LOST, names.MSG_EFFECT_REPEATED):
        assert _warnings(caplog, message) == []


def test_a_retry_of_the_lost_attempt_count_counts_the_attempt_once(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """at_least_once after a kill: the replay's UpdateItem (ADD attempts) lands and its answer is lost; the retry
    must not add a third attempt for the second."""
    mailer = Mailer()
    mailer.fail_after.append(Killed())
    with pytest.raises(Killed):
        _send(mailer, markers, AT_LEAST_ONCE)
    lost = lose_responses(ddb, "UpdateItem")

    assert _send(mailer, markers, AT_LEAST_ONCE) == {"MessageId": "m-2"}

    assert lost == [1]
    assert [r.attempts for r in _warnings(caplog, names.MSG_EFFECT_REPEATED)] == [2]  # type: ignore[attr-defined]
    [item] = _items(ddb)
    assert (item["status"]["S"], item["attempts"]["N"]) == (DONE, "2")


def test_a_retry_refused_by_another_attempts_claim_is_a_replay(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The token tells one's own write from another attempt's: between the lost answer and the retry, the marker
    became another attempt's claim (its token), so the retry's refusal is a replay, counted possibly lost."""
    mailer = Mailer()
    other = boto3.client("dynamodb", region_name=REGION)

    def another_attempt_claims() -> None:
        [claim] = other.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
        other.put_item(TableName=IDEMPOTENCY_TABLE, Item={**claim, "attempt_token": {"S": "another-attempt"}})

    lose_responses(ddb, "PutItem", before_retry=another_attempt_claims)

    assert _send(mailer, markers, AT_MOST_ONCE) is None

    assert mailer.sent == [] and len(_warnings(caplog, names.MSG_EFFECT_POSSIBLY_LOST)) == 1


def test_a_count_sent_again_after_another_attempt_completed_returns_the_stored_result(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """at_least_once: A sends and is slow; B counts (its token on the marker), the answer is lost, and before the
    retry A marks the marker done. B's retry is refused by a done marker holding B's token: that is A's completion,
    not B's claim, so B returns A's stored result and calls nothing."""
    mailer = Mailer()
    mailer.fail_after.append(Killed())
    with pytest.raises(Killed):
        _send(mailer, markers, AT_LEAST_ONCE)  # A: sent, not yet done
    other = boto3.client("dynamodb", region_name=REGION)

    def a_completes() -> None:
        [marker] = other.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
        done = {"status": {"S": DONE}, "stored_result": {"S": '{"MessageId":"m-1"}'}}
        other.put_item(TableName=IDEMPOTENCY_TABLE, Item={**marker, **done})

    lost = lose_responses(ddb, "UpdateItem", before_retry=a_completes)

    assert _send(mailer, markers, AT_LEAST_ONCE) == {"MessageId": "m-1"}

    assert lost == [1] and mailer.sent == ["a@example.com"], "B called nothing"


def test_a_release_sent_again_undoes_the_attempt_once(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """at_least_once: A sends and is killed (1), B counts 2 and its call provably sends nothing, B's undo lands and
    is sent again. Undone twice, the count fell to 0 and C's real repeat went uncounted."""
    mailer = Mailer()
    mailer.fail_after.append(Killed())
    with pytest.raises(Killed):
        _send(mailer, markers, AT_LEAST_ONCE)
    mailer.fail_before.append(_client_error(429, retries=0))
    lost = lose_responses(ddb, "UpdateItem", matching=b'"-1"')
    with pytest.raises(ClientError):
        _send(mailer, markers, AT_LEAST_ONCE, not_sent=rejected_by_aws)

    assert _send(mailer, markers, AT_LEAST_ONCE) == {"MessageId": "m-2"}

    assert lost == [1]
    assert [r.attempts for r in _warnings(caplog, names.MSG_EFFECT_REPEATED)] == [2, 2]  # type: ignore[attr-defined]
    assert _warnings(caplog, names.MSG_EFFECT_MARKER_NOT_UPDATED) == []


def test_a_released_claim_sent_again_leaves_the_next_claim_alone(
    markers: MarkerTable, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """at_most_once: the undo of a claim (DeleteItem) lands and its answer is lost; before it is sent again, the
    next attempt claims the marker. The retried undo must not delete that claim (a third attempt would call again)."""
    mailer = Mailer()
    other = boto3.client("dynamodb", region_name=REGION)
    other_markers = MarkerTable(table_name=IDEMPOTENCY_TABLE, key_prefix=PREFIX, client=other, expiry_seconds=EXPIRY)
    second = Mailer()
    second.fail_after.append(Killed())  # the next attempt claims and sends, then dies before done

    def next_attempt() -> None:
        with pytest.raises(Killed):
            _send(second, other_markers, AT_MOST_ONCE)

    lose_responses(ddb, "DeleteItem", before_retry=next_attempt)
    mailer.fail_before.append(_client_error(429, retries=0))
    with pytest.raises(ClientError):
        _send(mailer, markers, AT_MOST_ONCE, not_sent=rejected_by_aws)

    assert _send(Mailer(), markers, AT_MOST_ONCE) is None, "the next attempt's claim stands: possibly lost"
    assert second.sent == ["a@example.com"] and mailer.sent == []
    assert _warnings(caplog, names.MSG_EFFECT_MARKER_NOT_UPDATED) == []


# --- marker ids ------------------------------------------------------------------------------------------------------
def test_marker_ids_have_their_own_prefix_and_never_look_like_a_powertools_record(
    markers: MarkerTable, ddb: Any
) -> None:
    mailer = Mailer()
    _send(mailer, markers, AT_MOST_ONCE, name="welcome")
    _send(mailer, markers, AT_MOST_ONCE, name="receipt")
    _send(mailer, markers, AT_LEAST_ONCE, key="x" * 300)

    ids = sorted(item["id"]["S"] for item in _items(ddb))

    assert len(ids) == 3 and len(mailer.sent) == 3, "each name and key has its own marker"
    assert all(i.startswith(f"{PREFIX}#effect-marker#unkeyed#") for i in ids), ids
    assert not any(re.fullmatch(re.escape(PREFIX) + "#[0-9a-f]{32}", i) for i in ids)
    assert max(len(i) for i in ids) == len(PREFIX) + len("#effect-marker#") + 128, "long keys are hashed to 128"
    assert marker_id(PREFIX, "unkeyed", "-", "o-1#welcome") in ids


# --- inside a Consumer -------------------------------------------------------------------------------------------
def _consumer(orders: Orders, mailer: Mailer, delivery: str, **options: Any) -> Consumer:
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped", **options)
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream

    @consumer.effect
    def notify(item: dict[str, Any], *, idempotency_key: str) -> Any:
        return unkeyed(lambda: mailer.send(item["id"]), delivery=delivery, idempotency_key=idempotency_key)

    @consumer.record
    def handle(body: dict[str, Any]) -> Any:
        return {"sent": notify(body["order"])}

    orders.consumer = consumer
    return consumer


def _emf(lines: list[dict[str, Any]], metric: str) -> list[float]:
    return [value for line in lines if "_aws" in line and metric in line for value in line[metric]]


def test_inside_a_consumer_the_marker_lands_in_its_table_and_a_possibly_lost_send_is_logged_and_counted(
    orders: Orders,
) -> None:
    mailer = Mailer()
    mailer.fail_before.append(RuntimeError("mail relay timed out"))  # the send's outcome is unknown
    _consumer(orders, mailer, AT_MOST_ONCE)
    record = sqs_record(order("o-7"))

    first = orders.invoke([record])
    again = orders.invoke([redeliver(record)])
    lines = [json.loads(line) for line in orders.capsys.readouterr().out.splitlines() if line.startswith("{")]

    assert failures(first) == {record["messageId"]} and failures(again) == set()
    assert mailer.sent == [], "at most once: the unknown send is not made again"
    stored = {item["id"]["S"]: item for item in orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]}
    [marker] = [k for k in stored if "#effect-marker#" in k]
    assert marker == f"{KEY_PREFIX}#effect-marker#unkeyed#notify#{KEY_PREFIX}#notify#o-7"
    assert stored[marker]["status"]["S"] == LOST and stored[marker]["effect"]["S"] == "notify"
    assert stored[marker]["idempotency_key"]["S"] == "o-7"
    assert any(re.fullmatch(re.escape(KEY_PREFIX) + "#[0-9a-f]{32}", k) for k in stored), "the record beside it"
    [line] = [line for line in lines if line.get("message") == names.MSG_EFFECT_POSSIBLY_LOST]
    assert line["level"] == "WARNING"
    assert (line["idempotency_key"], line["effect"], line["effect_marker"]) == ("o-7", "notify", marker)
    assert _emf(lines, names.METRIC_EFFECTS_POSSIBLY_LOST) == [1.0]
    assert orders.invoke_direct(order("o-7")) == {"sent": None}, "the record stored the skipped result"


def test_inside_a_consumer_at_least_once_counts_the_repeat(orders: Orders) -> None:
    mailer = Mailer()
    mailer.fail_after.append(RuntimeError("connection reset after the relay accepted the mail"))
    _consumer(orders, mailer, AT_LEAST_ONCE)
    record = sqs_record(order("o-8"))

    orders.invoke([record])
    again = orders.invoke([redeliver(record)])
    lines = [json.loads(line) for line in orders.capsys.readouterr().out.splitlines() if line.startswith("{")]

    assert failures(again) == set() and mailer.sent == ["o-8", "o-8"]
    [line] = [line for line in lines if line.get("message") == names.MSG_EFFECT_REPEATED]
    assert (line["effect"], line["attempts"], line["delivery"]) == ("notify", 2, AT_LEAST_ONCE)
    assert _emf(lines, names.METRIC_EFFECTS_REPEATED) == [1.0]


def test_inside_a_consumer_a_lost_answer_to_the_claim_still_sends_on_the_first_delivery(orders: Orders) -> None:
    """Issue 55, item 1a, through the handler: the consumer's marker claim lands, its answer is lost and botocore
    sends it again. Before the token, the first delivery skipped the send as possibly lost."""
    client = boto3.client("dynamodb", region_name=REGION)
    lost = lose_responses(client, "PutItem", matching=b"#effect-marker#")
    mailer = Mailer()
    _consumer(orders, mailer, AT_MOST_ONCE, persistence_layer=partial(DynamoDBPersistenceLayer, boto3_client=client))

    response = orders.invoke([sqs_record(order("o-9"))])

    assert lost == [1] and failures(response) == set()
    assert mailer.sent == ["o-9"]
    assert orders.messages(names.MSG_EFFECT_POSSIBLY_LOST) == []


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_one_effect_calling_unkeyed_twice_needs_names(orders: Orders) -> None:
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped")

    @consumer.effect
    def twice(*, idempotency_key: str) -> None:
        unkeyed(lambda: 1, delivery=AT_MOST_ONCE, idempotency_key=idempotency_key)
        unkeyed(lambda: 2, delivery=AT_MOST_ONCE, idempotency_key=idempotency_key)

    @consumer.record
    def handle(body: dict[str, Any]) -> None:
        twice()

    with pytest.raises(InvalidEffectCall, match="give each call its own name="):
        consumer.handler(order("o-9"), FakeLambdaContext())


def _client_error(status: int, *, retries: int) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "Throttling" if status == 429 else "Rejected", "Message": "no"},
            "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": retries},
        },
        "SendEmail",
    )


# --- each :raises condition of the docstrings (issue 55, item 6b) ---------------------------------------------------
def test_fails_on_a_call_that_is_not_callable(markers: MarkerTable, ddb: Any) -> None:
    not_callable: Any = {"to": "a@example.com"}

    with pytest.raises(TypeError, match="unkeyed takes a callable of no arguments, but dict was given"):
        unkeyed(not_callable, delivery=AT_MOST_ONCE, idempotency_key="o-1", markers=markers)

    assert _items(ddb) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key": ""}, "idempotency_key must be the non-empty key"),
        ({"name": ""}, "name must be a non-empty string or None"),
    ],
    ids=["empty-key", "empty-name"],
)
def test_fails_on_an_empty_key_or_name_before_any_marker(
    markers: MarkerTable, ddb: Any, options: dict[str, Any], message: str
) -> None:
    mailer = Mailer()

    with pytest.raises(InvalidEffectCall, match=message):
        _send(mailer, markers, AT_MOST_ONCE, **options)

    assert mailer.sent == [] and _items(ddb) == []


@pytest.mark.parametrize(
    ("layout", "limit"),
    [
        ({"key_prefix": "p" * 2000}, 2048),
        ({"key_prefix": "p" * 1000, "sort_key_attr": "sk", "static_pk_value": "m"}, 1024),
    ],
    ids=["partition-key", "sort-key"],
)
def test_fails_on_a_marker_id_too_long_for_the_tables_key(ddb: Any, layout: dict[str, Any], limit: int) -> None:
    mailer = Mailer()
    table = MarkerTable(table_name=IDEMPOTENCY_TABLE, client=ddb, **layout)

    with pytest.raises(InvalidEffectCall, match=f"more than the {limit} a DynamoDB key holds"):
        _send(mailer, table, AT_LEAST_ONCE, key="k" * 100)

    assert mailer.sent == [] and _items(ddb) == []


def test_a_marker_that_cannot_be_read_back_is_transient_and_nothing_is_called() -> None:
    """The claim refused without the old item (a store that returns none), then the read fails: the marker could
    not be read, so the call is not made."""
    client = boto3.client("dynamodb", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_client_error("put_item", service_error_code="ConditionalCheckFailedException", http_status_code=400)
    stub.add_client_error("get_item", service_error_code="InternalServerError", http_status_code=500)
    mailer = Mailer()
    table = MarkerTable(table_name=IDEMPOTENCY_TABLE, key_prefix=PREFIX, client=client)

    with stub, pytest.raises(MarkerUnavailable, match="get_item on marker") as raised:
        _send(mailer, table, AT_MOST_ONCE)
        stub.assert_no_pending_responses()

    assert mailer.sent == []
    assert not isinstance(raised.value, PermanentError)
