"""The HTTP effect adapter at its edges (issue 33, item 1): one deadline over the whole call, against a provider
stand-in that answers byte by byte; URLs checked before any request (IPv6 literals, credentials, spaces and control
characters, non-ASCII paths, bad ports, header values); and those errors are ``InvalidEffectCall``, a
``PermanentError`` and a ``ValueError``, so an SQS record goes to its DLQ on first sight instead of being redelivered
until ``maxReceiveCount``."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.aws.provider_stand_in import ProviderStandIn, executions_per_key
from effectively_once_runtime import Consumer, InvalidEffectCall, PermanentError
from effectively_once_runtime.effects import http as http_effects
from effectively_once_runtime.effects.http import HttpTransientError, post_json

from .conftest import FakeClock, FakeLambdaContext, Recorder, serve, sqs_record
from .test_effects_http import CHARGE, PATH

#: Seconds between the stand-in's bytes: an answer of some 300 bytes takes about 18 s, each read 0.06 s.
BYTE_SECONDS = 0.06


def test_a_provider_that_answers_byte_by_byte_is_cut_at_the_deadline(tmp_path: Path) -> None:
    """Every read waits 0.06 s, far under the 10 s idle timeout: only a deadline over the whole call ends it. Before
    the change the call read the whole answer (about 18 s) with a 1 s deadline."""
    with ProviderStandIn(tmp_path / "slow.jsonl", byte_seconds=BYTE_SECONDS) as slow:
        started = time.monotonic()
        with pytest.raises(HttpTransientError) as raised:
            post_json(slow.url + PATH, CHARGE, idempotency_key="k-slow", deadline=1.0, timeout=10.0)
        elapsed = time.monotonic() - started

    assert elapsed < 5.0, f"the call took {elapsed:.1f} s with a 1 s deadline"
    assert raised.value.status is None and raised.value.attempts == 1
    assert "TimeoutError" in str(raised.value)
    assert executions_per_key(tmp_path / "slow.jsonl") == {"k-slow": 1}, "it executed: the replay will be answered"


def test_a_slow_answer_within_the_deadline_is_read_whole(tmp_path: Path) -> None:
    """The control: the same trickle, with a deadline the answer fits in, gives the answer."""
    with ProviderStandIn(tmp_path / "slow.jsonl", byte_seconds=0.001) as slow:
        result = post_json(slow.url + PATH, CHARGE, idempotency_key="k-fits", deadline=60.0)

    assert (result.status, result.body["key"]) == (201, "k-fits")


# --- URLs ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def recorder_v6() -> Iterator[Any]:
    class _Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    try:
        server: Any = _Server(("::1", 0), Recorder)
    except OSError as error:  # a host without IPv6 loopback
        pytest.skip(f"no IPv6 loopback here: {error}")
    yield from serve(server)


def test_an_ipv6_literal_with_a_port_is_reached(recorder_v6: Any) -> None:
    port = recorder_v6.server_address[1]

    result = post_json(f"http://[::1]:{port}{PATH}", CHARGE, idempotency_key="k6")

    assert result.status == 200
    [(headers, _body)] = recorder_v6.requests
    assert headers["Host"] == f"[::1]:{port}"


def test_an_ipv6_literal_without_a_port_goes_to_port_80(recorder_v6: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Port 80 needs root to bind, so the address asked for ("::1", 80) is resolved to the recorder's; before the
    change the host was split at its last colon: host ":" and port 1."""
    asked: list[tuple[str, int]] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        asked.append((host, port))
        return real("::1", recorder_v6.server_address[1], *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    result = post_json(f"http://[::1]{PATH}", CHARGE, idempotency_key="k6")

    assert result.status == 200 and asked == [("::1", 80)]
    assert recorder_v6.requests[0][0]["Host"] == "[::1]"


def test_credentials_in_a_url_are_refused_and_never_shown(recorder: Any) -> None:
    host = recorder.url.removeprefix("http://")

    with pytest.raises(InvalidEffectCall, match=r"headers=") as raised:
        post_json(f"http://user:s3cret@{host}{PATH}", CHARGE, idempotency_key="k")

    assert "s3cret" not in str(raised.value) and "user" not in str(raised.value).split("had some")[0][-60:]
    assert recorder.requests == []


@pytest.mark.parametrize(
    ("url_tail", "message"),
    [
        ("/v1/charges/order 17", "must not hold a space or a control character"),
        ("/v1/charges/order\t17", "must not hold a space or a control character"),
        ("/v1/charges/o-17\r\nX-Injected: 1", "must not hold a space or a control character"),
        ("/v1/charges/commande-été", "path and query must be ASCII"),
    ],
)
def test_a_url_a_request_cannot_carry_is_refused_at_once(
    recorder: Any, clock: FakeClock, url_tail: str, message: str
) -> None:
    with pytest.raises(InvalidEffectCall, match=message) as raised:
        post_json(recorder.url + url_tail, CHARGE, idempotency_key="k", sleep=clock.sleep, clock=clock)

    assert isinstance(raised.value, PermanentError) and isinstance(raised.value, ValueError)
    assert recorder.requests == [] and clock.waits == [], "nothing sent, nothing retried"


@pytest.mark.parametrize(
    ("url", "headers", "message"),
    [
        ("http://127.0.0.1:99999/x", None, "bad port"),
        ("http://127.0.0.1:port/x", None, "bad port"),
        ("http://[::1/x", None, "is not a URL"),
        ("http://[fe80::zz]/x", None, "is not a URL|is not an IPv6 address"),
        ("http://provider..example/x", None, "is not a host name"),
        (f"http://{'a' * 64}.example/x", None, "is not a host name"),
        (None, {"X-Trace": "a\r\nX-Injected: 1"}, "without control characters"),
        (None, {"X-Trace": "€"}, "Latin-1"),
        (None, {"X Trace": "a"}, "is not a header name"),
        (None, {"X-Amount": 1.5}, "must be text"),
        (None, {"X-Trace": b"a\r\nX-Injected: 1"}, "without control characters"),
    ],
)
def test_ports_and_headers_a_request_cannot_carry_are_refused(
    recorder: Any, url: str | None, headers: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(InvalidEffectCall, match=message):
        post_json(url or recorder.url + PATH, CHARGE, idempotency_key="k", headers=headers)

    assert recorder.requests == []


def test_header_values_http_client_takes_are_sent(recorder: Any) -> None:
    post_json(recorder.url + PATH, CHARGE, idempotency_key="k", headers={"X-Attempt": 3, "X-Raw": b"r1"})

    headers, _body = recorder.requests[0]
    assert (headers["X-Attempt"], headers["X-Raw"]) == ("3", "r1")


def test_each_address_of_a_host_gets_the_time_left(recorder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first address refuses, the second answers: connect goes on through the addresses, each with the time
    left (socket.create_connection gave each the whole timeout)."""
    port = recorder.server_address[1]
    with socket.socket() as closed:
        closed.bind(("127.0.0.2", 0))
        refused = closed.getsockname()
    real = socket.getaddrinfo

    def two_addresses(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != "provider.test":
            return real(host, *args, **kwargs)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", refused),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)

    result = post_json(f"http://provider.test:{port}{PATH}", CHARGE, idempotency_key="k", max_attempts=1)

    assert result.status == 200 and len(recorder.requests) == 1


class RunningClock(FakeClock):
    """A clock on a machine so loaded that each reading finds a minute gone: every attempt's time has passed by the
    time its connection reads it."""

    def __call__(self) -> float:
        self.now += 60
        return self.now


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_an_attempt_whose_time_ran_out_before_it_connects_is_transient(recorder: Any, scheme: str) -> None:
    """Issue 55, item 6a: the connection reads the attempt's time left when it is built; past the end, that was a
    bare TimeoutError out of post_json instead of its documented HttpTransientError."""
    port = recorder.server_address[1]
    clock = RunningClock()

    with pytest.raises(HttpTransientError, match="deadline") as caught:
        post_json(f"{scheme}://127.0.0.1:{port}{PATH}", CHARGE, idempotency_key="k", sleep=clock.sleep, clock=clock)

    assert (caught.value.attempts, caught.value.status) == (1, None)
    assert recorder.requests == [], "nothing was sent (over http the recorder would have seen it)"


def test_a_tls_context_that_cannot_be_loaded_is_transient(
    recorder: Any, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    """Loading the TLS context (the CA store) is part of the attempt too: its SSLError escaped post_json bare."""

    def broken_ca_store() -> ssl.SSLContext:
        raise ssl.SSLError("unable to load the CA store")

    monkeypatch.setattr(http_effects, "_tls", broken_ca_store)

    with pytest.raises(HttpTransientError, match="CA store") as caught:
        post_json(
            f"https://127.0.0.1:{recorder.server_address[1]}{PATH}",
            CHARGE,
            idempotency_key="k",
            max_attempts=2,
            sleep=clock.sleep,
            clock=clock,
        )

    assert (caught.value.attempts, caught.value.status) == (2, None)


def test_every_argument_error_is_permanent(recorder: Any) -> None:
    """The class: each argument check of the adapter is an ``InvalidEffectCall``, not a plain ``ValueError``."""
    calls: list[dict[str, Any]] = [
        {"url": "ftp://127.0.0.1/x"},
        {"headers": {"Idempotency-Key": "mine"}},
        {"timeout": 0},
        {"deadline": -1},
        {"max_attempts": 0},
        {"payload": {"amount": float("nan")}},
        {"idempotency_key": ""},
    ]
    for options in calls:
        arguments: dict[str, Any] = {"url": recorder.url + PATH, "payload": CHARGE, "idempotency_key": "k", **options}
        with pytest.raises(InvalidEffectCall):
            post_json(arguments.pop("url"), arguments.pop("payload"), **arguments)

    assert recorder.requests == []


# --- inside a consumer --------------------------------------------------------------------------------------------


def test_a_record_whose_url_is_malformed_goes_to_the_dlq_on_first_sight(
    dead_letter_aws: Any, recorder: Any, clock: FakeClock
) -> None:
    """Before the change the space was a transient failure: 5 attempts, then a batch item failure, redelivered
    until maxReceiveCount, though nothing was ever sent."""
    sqs, dlq = dead_letter_aws
    consumer = Consumer(key="order_id", key_prefix="shop/http", service="http", effect_key="scoped")

    @consumer.effect
    def charge(body: dict[str, Any], *, idempotency_key: str) -> Any:
        url = f"{recorder.url}/v1/charges/{body['order_id']}"
        return post_json(url, body, idempotency_key=idempotency_key, sleep=clock.sleep, clock=clock).body

    @consumer.record
    def handle(body: dict[str, Any]) -> Any:
        return charge(body)

    event = {"Records": [sqs_record({"order_id": "o 17"}, message_id="m-17"), sqs_record({"order_id": "o-18"})]}
    response = consumer.handler(event, FakeLambdaContext())

    assert response == {"batchItemFailures": []}
    [moved] = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert '"o 17"' in moved["Body"]
    assert recorder.requests and all(b"o-18" in body for _headers, body in recorder.requests)
    assert clock.waits == []
