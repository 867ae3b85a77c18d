"""An HTTP provider stand-in on 127.0.0.1 that honours ``Idempotency-Key``, for the functions under test.

A run starts it (:class:`ProviderStandIn`, a context manager) and hands its URL to the functions under test; the
HTTP effect adapter is tested against it. ``POST`` to any path with a JSON body and an ``Idempotency-Key`` header
"executes" once per key: it makes a result ``{"id": <uuid4>, "key": <key>, "request": <the parsed body>}`` and
answers ``201`` with it. What the key means follows draft-ietf-httpapi-idempotency-key-header (the IETF httpapi
working group's Internet-Draft "The Idempotency-Key HTTP Header Field", -07; section numbers as in that draft):

- 2.1 (Syntax): the field is an sf-string (RFC 8941), ``Idempotency-Key: "8e03978e-..."``; the quotes are taken off
  (and ``\\"``, ``\\\\`` unescaped). A bare value is taken as the key too, as providers commonly do; a malformed
  quoted string, an empty key or more than one ``Idempotency-Key`` field (clients MUST NOT send more than one) is
  ``400``.
- 2.4 (Idempotency Fingerprint): the fingerprint is the SHA-256 of the request target (path and query) and the body
  bytes, so a different body or path under the same key is another request.
- 2.6 (Idempotency Enforcement Scenarios): a first request is processed normally; a retry after it completed gets
  the stored result (status and body, byte for byte), marked with ``Idempotent-Replayed: true`` (the header Stripe
  and others send; the draft names none); a retry while it is still processing gets a conflict.
- 2.7 (Error Scenarios), each a problem+json body (RFC 9457: ``type``, ``title``, ``status``, ``detail``, and a
  ``code`` member naming the case) with ``Link: <draft>; rel="describedby"``: the header missing on a resource that
  requires it is ``400``; the key reused with a different payload is ``422`` (nothing is executed); the key retried
  while its first request is still being processed is ``409``. A reused key with a different fingerprint is ``422``
  even while the first request is in flight: no retry of that request can succeed, which ``409`` would suggest.

Resources that take no key: a ``POST`` under :data:`KEYLESS_PATH_PREFIX` (``/unkeyed/``) without an
``Idempotency-Key`` is executed every time it comes (``key`` ``null`` in the log, nothing stored), as a webhook or
an SMS gateway that takes no key does: the un-keyed effects of an app are counted from those calls. With a key, such
a path honours it as any other.

A body that is not JSON is ``400`` (``about:blank``); so is a bad ``Content-Length``. None of these ``400``
answers, nor a ``409`` or ``422``, is stored against the key: only an executed request is. ``GET``, ``PUT``,
``PATCH`` and ``DELETE`` are ``405`` (logged); other methods get ``http.server``'s ``501``, not logged.
:meth:`ProviderStandIn.fail_next` injects faults for tests of clients: the next requests answer a status (``503``
by default, with ``Retry-After`` if given) without executing or storing anything. ``byte_seconds=`` makes a slow
provider: every answer (status line, headers and body) is written one byte at a time, that many seconds apart, so
that no single read of the client waits long and only a deadline over the whole call ends it.

What it logs: one :class:`~effectively_once_local.chaos.fault_model.EventLog` line per request, written before the
response is sent (a client that has its answer finds the line), ``{"event": "call", "method", "path", "key",
"fingerprint", "status", "replayed", "executed", "ts"}``; ``key`` is ``null`` when there is none. The effects are
counted from that log, never from memory: :func:`read_calls`, :func:`executions_per_key`.

Limits: the key table is in memory and keys are kept for the process's life, with no expiry (draft 2.3 allows a
policy; this one is "never", and it is lost on a restart); one process, so no shared store; ``Content-Length``
bodies only (no chunked requests); HTTP/1.0, a connection per request. It binds 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
import json
import socketserver
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from ..chaos.fault_model import EventLog

HOST = "127.0.0.1"
DRAFT = "https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-idempotency-key-header-07"
#: The problem type of the draft's error scenarios (section 2.7); the ``code`` member tells them apart.
PROBLEM_TYPE = f"{DRAFT}#section-2.7"
KEY_HEADER = "Idempotency-Key"
#: The environment variable a chaos run sets in each execution environment to the stand-in's URL.
URL_ENV = "EFFECTIVELY_ONCE_PROVIDER_URL"
REPLAYED_HEADER = "Idempotent-Replayed"
PROBLEM_JSON = "application/problem+json"
#: The paths that do not require ``Idempotency-Key``: a ``POST`` under this prefix without one executes each time.
KEYLESS_PATH_PREFIX = "/unkeyed/"


@dataclass
class _Entry:
    """One key's request: its fingerprint, and once executed its stored response."""

    fingerprint: str
    status: int = 0
    body: bytes = b""
    done: bool = False


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()
    replayed: bool = False
    executed: bool = False


class _BadKey(ValueError):
    """The ``Idempotency-Key`` field is there but not a key."""


def _problem(status: int, title: str, detail: str, *, code: str | None = None, link: bool = False) -> _Answer:
    """An RFC 9457 problem+json answer; ``code`` and ``link`` for the draft's error scenarios."""
    problem: dict[str, Any] = {
        "type": PROBLEM_TYPE if code else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if code:
        problem["code"] = code
    headers = (("Link", f'<{DRAFT}>; rel="describedby"; type="text/html"'),) if link else ()
    return _Answer(status, json.dumps(problem).encode(), PROBLEM_JSON, headers)


def _parse_key(values: list[str]) -> str | None:
    """The key of the ``Idempotency-Key`` fields (draft 2.1), ``None`` if there is none.

    :raises _BadKey: more than one field, an empty key or a malformed sf-string.
    """
    if not values:
        return None
    if len(values) > 1:
        raise _BadKey(f"{len(values)} {KEY_HEADER} fields; a request carries one (draft section 2.1)")
    raw = values[0].strip()
    if raw.startswith('"'):
        raw = _sf_string(raw)
    if not raw:
        raise _BadKey(f"the {KEY_HEADER} field is empty")
    return raw


def _sf_string(text: str) -> str:
    """An RFC 8941 sf-string (section 3.3.3), unquoted and unescaped."""
    out: list[str] = []
    i = 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 >= len(text) or text[i + 1] not in '"\\':
                raise _BadKey(f"{KEY_HEADER} is not a valid sf-string: a backslash escapes only '\"' and '\\\\'")
            out.append(text[i + 1])
            i += 2
        elif char == '"':
            if i != len(text) - 1:
                raise _BadKey(f"{KEY_HEADER} is not a valid sf-string: characters after the closing quote")
            return "".join(out)
        elif not 0x20 <= ord(char) <= 0x7E:
            raise _BadKey(f"{KEY_HEADER} is not a valid sf-string: only printable ASCII is allowed")
        else:
            out.append(char)
            i += 1
    raise _BadKey(f"{KEY_HEADER} is not a valid sf-string: no closing quote")


class _Server(ThreadingHTTPServer):
    """The HTTP server, carrying its stand-in for the handlers. Handler threads are joined on close (an execution
    in flight finishes and logs), each connection with a socket timeout."""

    daemon_threads = False
    block_on_close = True
    request_queue_size = 64  # the listen backlog: a burst of concurrent clients is not made to retry a SYN

    def __init__(self, address: tuple[str, int], provider: ProviderStandIn) -> None:
        self.provider = provider
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    timeout = 10  # a connection that sends nothing cannot hold up stop()
    server_version = "ProviderStandIn/1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: every call goes to the event log instead of stderr."""

    def _read_body(self) -> bytes | None:
        """The request body by ``Content-Length``, ``None`` if that header is malformed."""
        length = self.headers.get("Content-Length", "0").strip() or "0"
        if not (length.isascii() and length.isdigit()):
            return None
        return self.rfile.read(int(length)) if int(length) else b""

    def do_POST(self) -> None:
        provider = cast(_Server, self.server).provider
        body = self._read_body()
        fingerprint = hashlib.sha256(self.path.encode("utf-8") + b"\0" + (body or b"")).hexdigest()
        raw_values = self.headers.get_all(KEY_HEADER) or []
        key: str | None
        try:
            key = _parse_key(raw_values)
            bad_key = None
        except _BadKey as exc:
            key, bad_key = (raw_values[0].strip() if raw_values else None), str(exc)
        answer = provider._answer(key, bad_key, body, fingerprint, self.path)
        self._respond(answer, key, fingerprint, _request(body) if answer.executed else None)

    def _not_allowed(self) -> None:
        answer = _problem(405, "Method Not Allowed", f"{self.command} is not served; POST is")
        answer = _Answer(405, answer.body, answer.content_type, (("Allow", "POST"),))
        self._respond(answer, None, None)

    do_GET = do_PUT = do_PATCH = do_DELETE = _not_allowed

    def _respond(self, answer: _Answer, key: str | None, fingerprint: str | None, request: Any = None) -> None:
        provider = cast(_Server, self.server).provider
        provider._log_call(
            method=self.command,
            path=self.path,
            key=key,
            fingerprint=fingerprint,
            status=answer.status,
            replayed=answer.replayed,
            executed=answer.executed,
            # An executed call's parsed body: a chaos run counts effects per business key from it (--effect).
            **({"request": request} if answer.executed else {}),
        )
        if provider.byte_seconds:
            self.wfile = _Trickle(self.wfile, provider.byte_seconds)  # type: ignore[assignment]
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in answer.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(answer.body)


class _Trickle:
    """A response stream that writes one byte per ``seconds`` and stops quietly when the client has gone."""

    def __init__(self, stream: Any, seconds: float) -> None:
        self._stream = stream
        self._seconds = seconds
        self._gone = False

    def write(self, data: bytes) -> int:
        for index in range(len(data)):
            if self._gone:
                break
            try:
                self._stream.write(data[index : index + 1])
                self._stream.flush()
            except OSError:  # the client closed the connection (its deadline passed)
                self._gone = True
            time.sleep(self._seconds)
        return len(data)

    def flush(self) -> None:
        """Each byte is flushed as it is written."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _request(body: bytes | None) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError:
        return None


class ProviderStandIn:
    """The stand-in provider; ``with ProviderStandIn(log_path=...) as provider:`` serves at ``provider.url``.

    :param log_path: the JSON Lines call log (:class:`~effectively_once_local.chaos.fault_model.EventLog`; appended to).
    :param port: the port on 127.0.0.1; ``None`` or ``0`` for a free one.
    :param processing_seconds: how long each execution takes (a sleep outside the lock), so that a retry can meet
        its first request in flight.
    :param byte_seconds: seconds between the bytes of each answer (``0``: the answer is written at once).
    """

    def __init__(
        self, log_path: Path, port: int | None = None, processing_seconds: float = 0.0, byte_seconds: float = 0.0
    ) -> None:
        for option, value in (("processing_seconds", processing_seconds), ("byte_seconds", byte_seconds)):
            if value < 0:
                raise ValueError(f"{option} must not be negative, but {value!r} was given")
        self.log_path = log_path
        self.port = port or 0
        self.processing_seconds = processing_seconds
        self.byte_seconds = byte_seconds
        self._log = EventLog(log_path)
        self._log_lock = threading.Lock()  # EventLog's writes are not atomic across threads
        self._lock = threading.Lock()  # the key table and the faults
        self._entries: dict[str, _Entry] = {}
        self._faults: deque[tuple[int, int | None]] = deque()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> ProviderStandIn:
        """Bind 127.0.0.1 and serve in a thread; returns ``self``."""
        if self._server is not None:
            raise RuntimeError("the provider stand-in is already started")
        self._server = _Server((HOST, self.port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="provider-stand-in", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wait for the requests being handled, close the socket. Idempotent."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def __enter__(self) -> ProviderStandIn:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def server(self) -> socketserver.TCPServer:
        """The running HTTP server (``server.server_address`` is where it listens)."""
        if self._server is None:
            raise RuntimeError("the provider stand-in is not started")
        return self._server

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, no trailing slash."""
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- faults

    def fail_next(self, n: int, status: int = 503, retry_after: int | None = None) -> None:
        """The next ``n`` requests (after any already queued) answer ``status``, with ``Retry-After: retry_after``
        if given, without executing or storing anything; each is logged with ``executed`` false."""
        if n < 0:
            raise ValueError(f"n must not be negative, but {n!r} was given")
        if not 400 <= status <= 599:
            raise ValueError(f"a fault is a 4xx or 5xx status, but {status!r} was given")
        if retry_after is not None and retry_after < 0:
            raise ValueError(f"retry_after must not be negative, but {retry_after!r} was given")
        with self._lock:
            self._faults.extend([(status, retry_after)] * n)

    # -- the handlers' side

    def _answer(
        self, key: str | None, bad_key: str | None, body: bytes | None, fingerprint: str, path: str = "/"
    ) -> _Answer:
        with self._lock:
            fault = self._faults.popleft() if self._faults else None
        if fault is not None:
            status, retry_after = fault
            answer = _problem(status, HTTPStatus(status).phrase, "an injected fault (fail_next): nothing executed")
            headers = (("Retry-After", str(retry_after)),) if retry_after is not None else ()
            return _Answer(status, answer.body, answer.content_type, headers)
        if bad_key is not None:
            return _problem(400, "Idempotency-Key is malformed", bad_key, code="idempotency_key_malformed", link=True)
        if key is None and path.startswith(KEYLESS_PATH_PREFIX):
            return self._execute_keyless(body)
        if key is None:
            return _problem(
                400,
                "Idempotency-Key is missing",
                f"this resource requires the {KEY_HEADER} request header field",
                code="idempotency_key_missing",
                link=True,
            )
        if body is None:
            return _problem(400, "Bad Request", "the Content-Length header is not a number")
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return _problem(400, "Bad Request", "the request body is not JSON")
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._entries[key] = _Entry(fingerprint)
            elif entry.fingerprint != fingerprint:
                return _problem(
                    422,
                    "Idempotency-Key is already used",
                    f"the key {key!r} was used with another request payload; it must not be reused across payloads",
                    code="idempotency_key_reused",
                    link=True,
                )
            elif not entry.done:
                return _problem(
                    409,
                    "A request is outstanding for this Idempotency-Key",
                    f"the first request with the key {key!r} is still being processed; retry it later",
                    code="idempotency_request_in_flight",
                    link=True,
                )
            else:
                return _Answer(entry.status, entry.body, "application/json", ((REPLAYED_HEADER, "true"),), True)
        return self._execute(key, request, fingerprint)

    def _execute(self, key: str, request: Any, fingerprint: str) -> _Answer:
        """The one execution for ``key``: its entry is in flight, so every other request with it is turned away."""
        if self.processing_seconds:
            time.sleep(self.processing_seconds)
        body = json.dumps({"id": str(uuid.uuid4()), "key": key, "request": request}).encode()
        with self._lock:
            self._entries[key] = _Entry(fingerprint, 201, body, done=True)
        return _Answer(201, body, "application/json", executed=True)

    def _execute_keyless(self, body: bytes | None) -> _Answer:
        """A call on a path that takes no key: executed each time it comes, nothing stored."""
        if body is None:
            return _problem(400, "Bad Request", "the Content-Length header is not a number")
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return _problem(400, "Bad Request", "the request body is not JSON")
        if self.processing_seconds:
            time.sleep(self.processing_seconds)
        answer = json.dumps({"id": str(uuid.uuid4()), "key": None, "request": request}).encode()
        return _Answer(201, answer, "application/json", executed=True)

    def _log_call(self, **fields: Any) -> None:
        with self._log_lock:
            self._log.write(event="call", **fields)


def read_calls(log_path: Path) -> list[dict[str, Any]]:
    """The ``call`` lines of a stand-in's log, in order; a line that is not JSON (cut by a kill) is skipped."""
    calls: list[dict[str, Any]] = []
    for raw in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("event") == "call":
            calls.append(line)
    return calls


def executions_per_key(log_path: Path) -> Counter[str]:
    """How many times each key was executed, from the log: more than one for a key is a duplicate effect. Calls
    without a key (on :data:`KEYLESS_PATH_PREFIX`) are left out."""
    return Counter(
        str(call["key"]) for call in read_calls(log_path) if call.get("executed") and call.get("key") is not None
    )
