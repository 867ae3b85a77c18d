"""The HTTP provider stand-in (``effectively_once_local.aws.provider_stand_in``): ``Idempotency-Key`` as the httpapi
draft has it (a replay gets the stored response, another body under the key 422, a key in flight 409, no key 400), one
execution per key under concurrency, injected faults, and the call log the effects are counted from."""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.aws.provider_stand_in import ProviderStandIn, executions_per_key, read_calls
from effectively_once_local.chaos.fault_model import EventLog

# No proxy from the environment: every request goes straight to the stand-in on 127.0.0.1.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
PATH = "/v1/charges"


class Reply:
    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def post(url: str, body: bytes | None = b'{"amount":100}', key: str | None = "k-1", path: str = PATH) -> Reply:
    request = urllib.request.Request(url + path, data=body if body is not None else b"", method="POST")
    request.add_header("Content-Type", "application/json")
    if key is not None:
        request.add_header("Idempotency-Key", key)
    try:
        with OPENER.open(request, timeout=10) as response:
            return Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, error.headers, error.read())


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "provider.jsonl"


@pytest.fixture
def provider(log_path: Path) -> Iterator[ProviderStandIn]:
    with ProviderStandIn(log_path=log_path) as stand_in:
        yield stand_in


def test_a_first_call_executes_and_answers_201(provider: ProviderStandIn, log_path: Path) -> None:
    reply = post(provider.url, b'{"amount":100}', key="k-1")

    assert reply.status == 201
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.headers["Idempotent-Replayed"] is None
    result = reply.json()
    assert result["key"] == "k-1" and result["request"] == {"amount": 100}
    assert uuid.UUID(result["id"]).version == 4
    [call] = read_calls(log_path)
    assert {k: call[k] for k in ("event", "method", "path", "key", "status", "replayed", "executed")} == {
        "event": "call",
        "method": "POST",
        "path": PATH,
        "key": "k-1",
        "status": 201,
        "replayed": False,
        "executed": True,
    }
    assert call["fingerprint"] == hashlib.sha256(PATH.encode() + b"\0" + b'{"amount":100}').hexdigest()


def test_a_replay_gets_the_stored_response_byte_for_byte(provider: ProviderStandIn, log_path: Path) -> None:
    first = post(provider.url)
    replay = post(provider.url)

    assert (replay.status, replay.body) == (201, first.body)
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert [(c["replayed"], c["executed"]) for c in read_calls(log_path)] == [(False, True), (True, False)]
    assert executions_per_key(log_path) == Counter({"k-1": 1})


def test_the_key_with_another_body_is_422_and_executes_nothing(provider: ProviderStandIn, log_path: Path) -> None:
    first = post(provider.url, b'{"amount":100}')
    changed = post(provider.url, b'{"amount":999}')

    assert changed.status == 422
    assert changed.headers["Content-Type"] == "application/problem+json"
    problem = changed.json()
    assert {"type", "title", "detail"} <= problem.keys() and problem["status"] == 422
    assert "Idempotency-Key" in problem["title"]
    assert read_calls(log_path)[-1]["executed"] is False
    assert executions_per_key(log_path) == Counter({"k-1": 1})
    # The stored response is untouched: the original request still replays it.
    assert post(provider.url, b'{"amount":100}').body == first.body


def test_the_same_body_on_another_path_is_another_request(provider: ProviderStandIn) -> None:
    post(provider.url, path="/v1/charges")

    assert post(provider.url, path="/v1/refunds").status == 422


def test_a_request_without_the_key_is_400_naming_the_header(provider: ProviderStandIn, log_path: Path) -> None:
    reply = post(provider.url, key=None)

    assert reply.status == 400
    assert reply.headers["Content-Type"] == "application/problem+json"
    assert "Idempotency-Key" in reply.json()["title"]
    [call] = read_calls(log_path)
    assert (call["key"], call["status"], call["executed"]) == (None, 400, False)


def test_a_body_that_is_not_json_is_400_and_not_stored(provider: ProviderStandIn, log_path: Path) -> None:
    reply = post(provider.url, b"amount=100", key="k-2")

    assert reply.status == 400
    assert reply.json()["status"] == 400
    assert read_calls(log_path)[0]["executed"] is False
    # Nothing was kept for the key: a corrected request executes.
    assert post(provider.url, b'{"amount":100}', key="k-2").status == 201
    assert executions_per_key(log_path) == Counter({"k-2": 1})


def test_a_key_still_in_flight_is_409(log_path: Path) -> None:
    replies: list[Reply] = []

    with ProviderStandIn(log_path=log_path, processing_seconds=0.5) as provider:

        def send() -> None:
            replies.append(post(provider.url))

        threads = [threading.Thread(target=send) for _ in range(2)]
        threads[0].start()
        time.sleep(0.1)  # the first is executing (0.5 s) when the second arrives
        threads[1].start()
        for thread in threads:
            thread.join()
        after = post(provider.url)

    assert sorted(r.status for r in replies) == [201, 409]
    conflict = next(r for r in replies if r.status == 409)
    assert conflict.headers["Content-Type"] == "application/problem+json"
    assert {"type", "title", "detail"} <= conflict.json().keys()
    # Once the first completed, the retry gets its result.
    assert after.headers["Idempotent-Replayed"] == "true"
    assert after.body == next(r for r in replies if r.status == 201).body
    assert executions_per_key(log_path) == Counter({"k-1": 1})


def test_concurrent_identical_requests_execute_once(log_path: Path) -> None:
    replies: list[Reply] = []
    barrier = threading.Barrier(8)

    with ProviderStandIn(log_path=log_path, processing_seconds=0.2) as provider:

        def send() -> None:
            barrier.wait()
            replies.append(post(provider.url))

        threads = [threading.Thread(target=send) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert len(replies) == 8  # every client had an answer (a thread that raised appends none)
    calls = read_calls(log_path)
    assert len(calls) == 8
    assert [c["executed"] for c in calls].count(True) == 1
    assert executions_per_key(log_path) == Counter({"k-1": 1})
    assert {r.status for r in replies} <= {201, 409}
    assert len([r for r in replies if r.status == 201 and r.headers["Idempotent-Replayed"] is None]) == 1
    assert len({r.body for r in replies if r.status == 201}) == 1


def test_fail_next_answers_the_fault_then_the_key_executes_once(provider: ProviderStandIn, log_path: Path) -> None:
    provider.fail_next(2, status=503, retry_after=3)

    faults = [post(provider.url), post(provider.url)]
    first = post(provider.url)
    replay = post(provider.url)

    assert [(r.status, r.headers["Retry-After"]) for r in faults] == [(503, "3"), (503, "3")]
    assert first.status == 201 and first.headers["Retry-After"] is None
    assert replay.headers["Idempotent-Replayed"] == "true" and replay.body == first.body
    assert [(c["status"], c["executed"]) for c in read_calls(log_path)] == [
        (503, False),
        (503, False),
        (201, True),
        (201, False),
    ]
    assert executions_per_key(log_path) == Counter({"k-1": 1})


def test_a_fault_without_retry_after_sends_none(provider: ProviderStandIn) -> None:
    provider.fail_next(1, status=500)

    reply = post(provider.url)

    assert (reply.status, reply.headers["Retry-After"]) == (500, None)


def test_it_binds_127_0_0_1_only_and_stops(log_path: Path) -> None:
    with ProviderStandIn(log_path=log_path) as provider:
        host, port = provider.server.server_address[:2]
        assert host == "127.0.0.1"
        assert port != 0 and provider.url == f"http://127.0.0.1:{port}"
        assert post(provider.url).status == 201

    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection("127.0.0.1", int(port), timeout=2).connect()


def test_a_quoted_sf_string_key_and_its_bare_value_are_one_key(provider: ProviderStandIn, log_path: Path) -> None:
    first = post(provider.url, key='"8e03978e-40d5-43e8-bc93-6894a57f9324"')
    bare = post(provider.url, key="8e03978e-40d5-43e8-bc93-6894a57f9324")

    assert first.status == 201 and first.json()["key"] == "8e03978e-40d5-43e8-bc93-6894a57f9324"
    assert bare.headers["Idempotent-Replayed"] == "true"
    assert executions_per_key(log_path) == Counter({"8e03978e-40d5-43e8-bc93-6894a57f9324": 1})


@pytest.mark.parametrize("value", ['"unclosed', '"a"b"', '""'])
def test_a_malformed_key_is_400(provider: ProviderStandIn, value: str) -> None:
    reply = post(provider.url, key=value)

    assert reply.status == 400 and "Idempotency-Key" in reply.json()["title"]


def test_two_key_fields_are_400(provider: ProviderStandIn, log_path: Path) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", provider.server.server_address[1], timeout=10)
    connection.putrequest("POST", PATH)
    connection.putheader("Idempotency-Key", "a")
    connection.putheader("Idempotency-Key", "b")
    connection.putheader("Content-Length", "2")
    connection.endheaders(b"{}")
    status = connection.getresponse().status
    connection.close()

    assert status == 400
    assert executions_per_key(log_path) == Counter()


def test_executions_per_key_counts_every_executed_call(provider: ProviderStandIn, log_path: Path) -> None:
    for key in ("a", "b", "a", "b", "a"):
        post(provider.url, key=key)
    assert executions_per_key(log_path) == Counter({"a": 1, "b": 1})

    # Two executions of one key (a duplicate effect) count twice; other events and a line cut by a kill are skipped.
    other = log_path.with_name("other.jsonl")
    log = EventLog(other)
    log.write(event="call", key="x", executed=True)
    log.write(event="kill", key="x", executed=True)
    log.write(event="call", key="x", executed=True)
    log.write(event="call", key="y", executed=False)
    with other.open("a", encoding="utf-8") as fh:
        fh.write('{"event":"call","key":"x","exec')

    assert executions_per_key(other) == Counter({"x": 2})
    assert len(read_calls(other)) == 3


def test_a_keyless_path_executes_each_call_without_a_key_and_stores_nothing(
    provider: ProviderStandIn, log_path: Path
) -> None:
    first = post(provider.url, key=None, path="/unkeyed/webhook")
    again = post(provider.url, key=None, path="/unkeyed/webhook")
    elsewhere = post(provider.url, key=None, path="/v1/unkeyed/webhook")  # the prefix is the path's start

    assert (first.status, again.status, elsewhere.status) == (201, 201, 400)
    assert first.json()["id"] != again.json()["id"], "each call executed"
    assert first.json()["key"] is None and first.json()["request"] == {"amount": 100}
    executed = [(c["path"], c["key"], c["request"]) for c in read_calls(log_path) if c["executed"]]
    assert executed == [("/unkeyed/webhook", None, {"amount": 100})] * 2
    assert executions_per_key(log_path) == Counter(), "keyless calls have no key to count"
    assert post(provider.url, body=b"not json", key=None, path="/unkeyed/webhook").status == 400
