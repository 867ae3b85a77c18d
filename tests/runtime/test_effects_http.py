"""The HTTP effect adapter (issue 24, item 5): a JSON ``POST`` with an ``Idempotency-Key`` header against the
project's provider stand-in (``effectively_once_local.aws.provider_stand_in``), counted from the stand-in's call log.
Waits go through an injected clock, so no test sleeps but the in-flight one (a fraction of a second)."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.aws.provider_stand_in import ProviderStandIn, executions_per_key, read_calls
from effectively_once_runtime import Consumer, InvalidEffectCall, PermanentError
from effectively_once_runtime.effects import _context
from effectively_once_runtime.effects.http import (
    MIN_ATTEMPT_SECONDS,
    HttpPermanentError,
    HttpTransientError,
    canonical_json,
    post_json,
    retry_after_seconds,
    sf_string,
)

from .conftest import HANDLER_ENV, IDEMPOTENCY_TABLE, REGION, FakeClock, FakeLambdaContext, create_table, sqs_record

PATH = "/v1/charges"
CHARGE = {"amount": 4242, "currency": "EUR", "customer": {"id": "cus-1", "tier": "gold"}}


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "provider.jsonl"


@pytest.fixture
def provider(log: Path) -> Iterator[ProviderStandIn]:
    with ProviderStandIn(log) as stand_in:
        yield stand_in


def _post(provider: ProviderStandIn, clock: FakeClock, payload: Any = CHARGE, **options: Any) -> Any:
    options.setdefault("idempotency_key", "shop#charge#o-1")
    return post_json(provider.url + PATH, payload, sleep=clock.sleep, clock=clock, **options)


def _statuses(log: Path) -> list[int]:
    return [call["status"] for call in read_calls(log)]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- replays ------------------------------------------------------------------------------------------------------


def test_first_call_executes_and_a_retry_with_the_key_is_replayed(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    first = _post(provider, clock)
    # The same data built in another key order: the canonical body is the same bytes, so the same fingerprint.
    again = _post(provider, clock, {"customer": {"tier": "gold", "id": "cus-1"}, "currency": "EUR", "amount": 4242})

    assert (first.status, first.replayed, first.attempts) == (201, False, 1)
    assert first.body["request"] == CHARGE and first.body["key"] == "shop#charge#o-1"
    assert (again.status, again.replayed) == (201, True)
    assert again.body == first.body and again.raw == first.raw
    assert again.headers["idempotent-replayed"] == "true"
    assert executions_per_key(log) == {"shop#charge#o-1": 1}
    assert [(c["status"], c["replayed"], c["executed"]) for c in read_calls(log)] == [
        (201, False, True),
        (201, True, False),
    ]


def test_body_is_canonical_json() -> None:
    assert canonical_json({"b": [1, {"d": 2, "c": "é"}], "a": None}) == '{"a":null,"b":[1,{"c":"é","d":2}]}'.encode()


def test_fails_permanently_when_the_key_comes_back_with_another_body(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    _post(provider, clock)

    with pytest.raises(HttpPermanentError) as raised:
        _post(provider, clock, {**CHARGE, "amount": 9999})

    error = raised.value
    assert isinstance(error, PermanentError)
    assert (error.status, error.code, error.title) == (422, "idempotency_key_reused", "Idempotency-Key is already used")
    assert error.url == provider.url + PATH and error.idempotency_key == "shop#charge#o-1"
    assert f"POST {provider.url}{PATH} answered 422" in str(error) and "another body" in str(error)
    reason = str(error).replace(provider.url, "")  # the port is random: it may hold 4242
    assert "9999" not in reason and "4242" not in reason, "no body values in the reason"
    assert _statuses(log) == [201, 422], "a 422 is not retried"
    assert executions_per_key(log) == {"shop#charge#o-1": 1}
    assert clock.waits == []


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_fails_permanently_on_the_other_4xx(
    provider: ProviderStandIn, clock: FakeClock, log: Path, status: int
) -> None:
    provider.fail_next(1, status)

    with pytest.raises(HttpPermanentError) as raised:
        _post(provider, clock)

    assert raised.value.status == status and raised.value.code is None
    assert _statuses(log) == [status]
    assert clock.waits == []


def test_permanent_error_names_the_url_without_query(provider: ProviderStandIn, clock: FakeClock) -> None:
    """Credentials in a URL are refused before any request (test_effects_http_edges.py)."""
    provider.fail_next(1, 404)

    with pytest.raises(HttpPermanentError) as raised:
        post_json(f"{provider.url}{PATH}?api_key=secret", CHARGE, idempotency_key="k", sleep=clock.sleep)

    assert raised.value.url == provider.url + PATH
    assert "secret" not in str(raised.value)


# --- transient failures ---------------------------------------------------------------------------------------------


def test_retries_503_then_succeeds(provider: ProviderStandIn, clock: FakeClock, log: Path) -> None:
    provider.fail_next(2, 503)

    result = _post(provider, clock)

    assert (result.status, result.replayed, result.attempts) == (201, False, 3)
    assert _statuses(log) == [503, 503, 201]
    assert executions_per_key(log) == {"shop#charge#o-1": 1}
    # Exponential backoff with equal jitter: 0.2 s then 0.4 s, each between half and all of it.
    assert len(clock.waits) == 2
    assert 0.1 <= clock.waits[0] <= 0.2 and 0.2 <= clock.waits[1] <= 0.4


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 504])
def test_retries_each_transient_status(provider: ProviderStandIn, clock: FakeClock, log: Path, status: int) -> None:
    provider.fail_next(1, status)

    assert _post(provider, clock).attempts == 2
    assert _statuses(log) == [status, 201]


def test_honours_retry_after_in_seconds(provider: ProviderStandIn, clock: FakeClock, log: Path) -> None:
    provider.fail_next(1, 429, retry_after=3)

    result = _post(provider, clock)

    assert result.attempts == 2
    assert clock.waits == [3.0], "Retry-After is longer than the backoff, so it is the wait"
    assert _statuses(log) == [429, 201]


def test_reads_retry_after_as_seconds_or_an_http_date() -> None:
    now = 1_700_000_000.0

    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds(formatdate(now + 7, usegmt=True), now) == 7.0
    assert retry_after_seconds(formatdate(now - 60, usegmt=True), now) == 0.0, "a past date: retry now"
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds("-5", now) is None
    assert retry_after_seconds(None, now) is None


def test_retry_after_longer_than_the_time_left_ends_the_retries(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    provider.fail_next(1, 503, retry_after=60)

    with pytest.raises(HttpTransientError) as raised:
        _post(provider, clock, deadline=5.0)

    error = raised.value
    assert not isinstance(error, PermanentError)
    assert (error.status, error.attempts, error.retry_after) == (503, 1, 60.0)
    assert clock.waits == [], "no wait that cannot end in an attempt"
    assert _statuses(log) == [503]


def test_transient_failures_exhaust_the_deadline(provider: ProviderStandIn, clock: FakeClock, log: Path) -> None:
    provider.fail_next(100, 503)

    with pytest.raises(HttpTransientError) as raised:
        _post(provider, clock, deadline=3.0, max_attempts=100)

    error = raised.value
    assert error.status == 503 and 2 <= error.attempts < 100
    assert error.attempts == len(clock.waits) + 1 == len(read_calls(log))
    assert sum(clock.waits) <= 3.0 - MIN_ATTEMPT_SECONDS
    assert "failed after" in str(error) and "503" in str(error)
    assert executions_per_key(log) == {}


def test_transient_failures_stop_at_max_attempts(provider: ProviderStandIn, clock: FakeClock, log: Path) -> None:
    provider.fail_next(5, 500)

    with pytest.raises(HttpTransientError) as raised:
        _post(provider, clock, max_attempts=3)

    assert (raised.value.status, raised.value.attempts) == (500, 3)
    assert _statuses(log) == [500, 500, 500]
    assert "3 attempts made" in str(raised.value)


def test_a_key_in_flight_is_retried_after_409(log: Path) -> None:
    """Two calls with one key at once: the stand-in executes the first and answers the other 409 while it runs; the
    409 is retried and answered with the stored response."""
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(0.05)

    with ProviderStandIn(log, processing_seconds=0.3) as provider:
        results: list[Any] = []

        def call() -> None:
            results.append(
                post_json(provider.url + PATH, CHARGE, idempotency_key="k-flight", sleep=sleep, max_attempts=30)
            )

        threads = [threading.Thread(target=call) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)

    assert len(results) == 2
    assert results[0].body == results[1].body
    assert sorted(r.replayed for r in results) == [False, True]
    assert max(r.attempts for r in results) >= 2 and waits
    assert 409 in _statuses(log) and _statuses(log)[-1] == 201
    assert executions_per_key(log) == {"k-flight": 1}


def test_connection_refused_is_transient(clock: FakeClock) -> None:
    with pytest.raises(HttpTransientError) as raised:
        post_json(
            f"http://127.0.0.1:{_closed_port()}{PATH}",
            CHARGE,
            idempotency_key="k",
            max_attempts=3,
            sleep=clock.sleep,
            clock=clock,
        )

    assert (raised.value.status, raised.value.attempts) == (None, 3)
    assert "ConnectionRefusedError" in str(raised.value)
    assert len(clock.waits) == 2


def test_a_read_timeout_is_transient(clock: FakeClock) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with pytest.raises(HttpTransientError) as raised:
            post_json(
                f"http://127.0.0.1:{port}{PATH}",
                CHARGE,
                idempotency_key="k",
                timeout=0.1,
                max_attempts=2,
                sleep=clock.sleep,
                clock=clock,
            )

    assert (raised.value.status, raised.value.attempts) == (None, 2)
    assert "timed out" in str(raised.value)


# --- keys and the request -------------------------------------------------------------------------------------------


def test_name_gives_each_call_its_own_key(provider: ProviderStandIn, clock: FakeClock, log: Path) -> None:
    first = _post(provider, clock, idempotency_key="k", name="charge")
    second = _post(provider, clock, idempotency_key="k", name="refund")

    assert (first.idempotency_key, second.idempotency_key) == ("k#charge", "k#refund")
    assert not first.replayed and not second.replayed
    assert executions_per_key(log) == {"k#charge": 1, "k#refund": 1}


def test_fails_when_one_effect_calls_it_twice_with_one_name(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    with _context.running(_context.EffectCall("charge", "k", record_key="r")):
        _post(provider, clock, idempotency_key="k", name="a")
        with pytest.raises(InvalidEffectCall, match="called twice in effect 'charge' with name='a'"):
            _post(provider, clock, idempotency_key="k", name="a")

    assert len(read_calls(log)) == 1


def test_key_header_is_a_quoted_sf_string(recorder: Any, provider: ProviderStandIn, log: Path) -> None:
    key = 'ord"er\\1'

    result = post_json(recorder.url + PATH, {"b": [1, 2], "a": 1}, idempotency_key=key, headers={"X-Trace": "t"})
    post_json(provider.url + PATH, CHARGE, idempotency_key=key)

    headers, body = recorder.requests[0]
    assert headers.get_all("Idempotency-Key") == ['"ord\\"er\\\\1"']
    assert body == b'{"a":1,"b":[1,2]}'
    assert headers["Content-Type"] == "application/json" and headers["X-Trace"] == "t"
    assert (result.status, result.body, result.replayed) == (200, {"ok": True}, False)
    assert executions_per_key(log) == {key: 1}, "the stand-in unquotes it back to the key"


def test_a_key_beyond_printable_ascii_is_sent_in_its_stable_form(recorder: Any) -> None:
    first = post_json(recorder.url + PATH, CHARGE, idempotency_key="ordre-été")
    again = post_json(recorder.url + PATH, CHARGE, idempotency_key="ordre-été")

    assert first.idempotency_key == again.idempotency_key
    assert first.idempotency_key == "ordre-_t_~" + hashlib.sha256("ordre-été".encode()).hexdigest()
    assert recorder.requests[0][0]["Idempotency-Key"] == f'"{first.idempotency_key}"'


def test_a_redirect_is_not_followed_and_is_permanent(recorder: Any) -> None:
    recorder.answer = (302, [("Location", "/elsewhere")], b"")

    with pytest.raises(HttpPermanentError) as raised:
        post_json(recorder.url + PATH, CHARGE, idempotency_key="k")

    assert raised.value.status == 302
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"url": "ftp://127.0.0.1/x"}, "url must be an http:// or https:// URL"),
        ({"headers": {"idempotency-key": "mine"}}, "headers must not carry Idempotency-Key"),
        ({"timeout": 0}, "timeout must be more than 0 seconds"),
        ({"deadline": -1}, "deadline must be more than 0 seconds"),
        ({"max_attempts": 0}, "max_attempts must be 1 or more"),
        ({"idempotency_key": ""}, "idempotency_key must be the non-empty key"),
    ],
)
def test_fails_on_bad_arguments_before_any_request(recorder: Any, options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"url": recorder.url + PATH, "idempotency_key": "k", **options}
    url = arguments.pop("url")

    with pytest.raises(ValueError, match=message):
        post_json(url, CHARGE, **arguments)

    assert recorder.requests == []


def test_fails_on_a_payload_json_cannot_carry(recorder: Any) -> None:
    with pytest.raises(TypeError):
        post_json(recorder.url + PATH, {"at": object()}, idempotency_key="k")
    with pytest.raises(ValueError):
        post_json(recorder.url + PATH, {"amount": float("nan")}, idempotency_key="k2")

    assert recorder.requests == []


# --- inside a Consumer's effect ------------------------------------------------------------------------------------


def test_inside_an_effect_the_context_deadline_bounds_the_retries(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    call = _context.EffectCall("charge", "k", record_key="r", deadline=time.monotonic() + 2.0)
    provider.fail_next(100, 503)

    with _context.running(call), pytest.raises(HttpTransientError):
        _post(provider, clock, idempotency_key="k", deadline=60.0, max_attempts=100)

    assert clock.waits, "it retried"
    assert sum(clock.waits) <= 2.0 - MIN_ATTEMPT_SECONDS
    assert len(read_calls(log)) == len(clock.waits) + 1


def test_fails_to_bound_the_retries_when_the_context_lacks_the_deadline(
    provider: ProviderStandIn, clock: FakeClock
) -> None:
    """The control of the test above: the same call with no deadline in its context keeps retrying past 2 s, so the
    bound there comes through ``EffectCall.deadline`` and nothing else. Its own deadline is 30 s: the waits have
    equal jitter and stop when the next would leave less than an attempt, so under a 5 s deadline they could sum to
    under 2 s; under 30 s they sum to more than 30 - BACKOFF_MAX_SECONDS - MIN_ATTEMPT_SECONDS."""
    provider.fail_next(100, 503)

    with _context.running(_context.EffectCall("charge", "k", record_key="r")), pytest.raises(HttpTransientError):
        _post(provider, clock, idempotency_key="k", deadline=30.0, max_attempts=100)

    assert sum(clock.waits) > 2.0


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), IDEMPOTENCY_TABLE, "id")
        yield


def _charging_consumer(url: str, clock: FakeClock, **options: Any) -> Consumer:
    consumer = Consumer(key="order_id", key_prefix="shop/http", service="http", effect_key="scoped", **options)

    @consumer.effect
    def charge(body: dict[str, Any], *, idempotency_key: str) -> Any:
        return post_json(url + PATH, body, idempotency_key=idempotency_key, sleep=clock.sleep, clock=clock).body

    @consumer.record
    def handle(body: dict[str, Any]) -> Any:
        return charge(body)

    return consumer


@pytest.mark.usefixtures("aws")
def test_a_record_replayed_after_the_crash_window_is_answered_not_executed_again(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    consumer = _charging_consumer(provider.url, clock)
    order = {"order_id": "o-7", "amount": 12}

    first = consumer.handler(order, FakeLambdaContext())
    # A kill after the effect, before the record's completion: the record is not there when the message returns (a
    # kill leaves no effect results either), so only the provider's own key answers the replay.
    for item_id in _ids():
        boto3.client("dynamodb", region_name=REGION).delete_item(
            TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": item_id}}
        )
    again = consumer.handler(order, FakeLambdaContext())

    assert again == first
    assert [c["replayed"] for c in read_calls(log)] == [False, True]
    assert executions_per_key(log) == {"shop/http#charge#o-7": 1}


def _ids() -> list[str]:
    """The idempotency table's ids: the record alone (a first delivery writes no item of its effects' results)."""
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert [item["status"]["S"] for item in items] == ["COMPLETED"]
    return [str(item["id"]["S"]) for item in items]


@pytest.mark.usefixtures("aws")
def test_a_consumer_retries_transient_failures_within_its_invocation(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    consumer = _charging_consumer(provider.url, clock, deadline_margin=4.0)
    provider.fail_next(100, 503)

    response = consumer.handler(
        {"Records": [sqs_record({"order_id": "o-8"}, message_id="m-8")]}, FakeLambdaContext(5000)
    )

    assert response == {"batchItemFailures": [{"itemIdentifier": "m-8"}]}, "transient: SQS retries the record"
    # The consumer's deadline_margin leaves 1 s of the 5 s: without it, 4 s would allow waits of 0.7 s or more.
    assert clock.waits and sum(clock.waits) <= 5.0 - 4.0 - MIN_ATTEMPT_SECONDS
    assert executions_per_key(log) == {}


@pytest.mark.usefixtures("aws")
def test_a_consumer_raises_422_to_a_direct_caller_as_permanent(
    provider: ProviderStandIn, clock: FakeClock, log: Path
) -> None:
    consumer = _charging_consumer(provider.url, clock)
    post_json(provider.url + PATH, {"order_id": "o-9", "amount": 1}, idempotency_key="shop/http#charge#o-9")

    with pytest.raises(HttpPermanentError) as raised:
        consumer.handler({"order_id": "o-9", "amount": 2}, FakeLambdaContext())

    assert raised.value.status == 422 and consumer.is_permanent(raised.value)
    assert executions_per_key(log) == {"shop/http#charge#o-9": 1}


# --- each :raises condition of the docstrings (issue 55, item 6b) ---------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 425, 429])
def test_each_transient_4xx_on_the_last_attempt_is_a_transient_error(
    recorder: Any, clock: FakeClock, status: int
) -> None:
    recorder.answer = (status, [("Content-Type", "application/json")], b"{}")

    with pytest.raises(HttpTransientError) as raised:
        post_json(recorder.url + PATH, CHARGE, idempotency_key="k", max_attempts=2, sleep=clock.sleep, clock=clock)

    assert (raised.value.status, raised.value.attempts) == (status, 2)
    assert not isinstance(raised.value, PermanentError), "SQS redelivers the record"
    assert len(recorder.requests) == 2 and len(clock.waits) == 1


def test_a_1xx_final_answer_is_permanent(recorder: Any, clock: FakeClock) -> None:
    """``http.client`` reads past ``100 Continue`` only: any other ``1xx`` is the final answer, never a success."""
    recorder.answer = (103, [], b"")

    with pytest.raises(HttpPermanentError, match="answered 103") as raised:
        post_json(recorder.url + PATH, CHARGE, idempotency_key="k", sleep=clock.sleep, clock=clock)

    assert raised.value.status == 103 and isinstance(raised.value, PermanentError)
    assert len(recorder.requests) == 1 and clock.waits == [], "not retried"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"payload": {"amount": float("inf")}}, "the payload is not JSON"),
        ({"payload": {"amount": float("-inf")}}, "the payload is not JSON"),
        ({"name": ""}, "name must be a non-empty string or None"),
    ],
    ids=["infinity", "minus-infinity", "empty-name"],
)
def test_fails_before_any_request_on_infinity_or_an_empty_name(
    recorder: Any, options: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"payload": CHARGE, "idempotency_key": "k", **options}

    with pytest.raises(InvalidEffectCall, match=message):
        post_json(recorder.url + PATH, arguments.pop("payload"), **arguments)

    assert recorder.requests == []


def test_the_helpers_refuse_what_json_and_an_sf_string_cannot_carry() -> None:
    with pytest.raises(TypeError):
        canonical_json({"at": object()})
    with pytest.raises(ValueError, match="Out of range float values"):
        canonical_json(float("nan"))
    for value in ("ordre-été", "a\nb", "\x7f"):
        with pytest.raises(ValueError, match="an sf-string holds printable ASCII only"):
            sf_string(value)
    assert sf_string(' !"~') == '" !\\"~"'
