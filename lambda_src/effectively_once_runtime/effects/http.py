"""HTTP APIs: a JSON ``POST`` with an ``Idempotency-Key`` header, retried within the remaining time. No third-party
import of its own: ``http.client`` for the request; the invocation's deadline comes with the per-call context
(``EffectCall.deadline``).

The header is the one of the IETF httpapi working group's Internet-Draft "The Idempotency-Key HTTP Header Field"
(draft-ietf-httpapi-idempotency-key-header-07, section numbers as in -07:
https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/). Its value is an RFC 8941 sf-string
(section 2.1), so the key goes in quotes. A provider that honours it executes a key once and answers a retry with
the stored response (Stripe and others mark it ``Idempotent-Replayed: true``), answers ``409`` while the key's first
request is still processing and ``422`` when the key comes back with another body (section 2.7). The body is
serialized deterministically (sorted keys, compact separators), so the same payload is the same request fingerprint
(section 2.4) on every retry and every replay.

Why the standard library (``http.client``) and not urllib3: it is in every Python, at one version, while urllib3
comes with botocore at 1.26 or 2.x depending on the botocore a function bundles (their APIs differ), and the
runtime promises Powertools + boto3 + the standard library only. ``http.client`` also never follows redirects
(``urllib.request`` turns a redirected ``POST`` into a ``GET`` without its body or key) and retries nothing on its
own, so every retry is this module's, counted and bounded by the remaining time. It uses no proxy (``HTTPS_PROXY``
is not read).
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import ipaddress
import json
import random
import re
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

from .. import effect_keys
from ..errors import InvalidEffectCall, PermanentError
from ._context import adapter_key, current
from ._wire import AttemptClock, TimedHTTPConnection, TimedHTTPSConnection

ADAPTER = "http.post_json"
KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
#: Statuses retried (besides connection errors and timeouts): every 5xx, and these 4xx. 408 Request Timeout,
#: 425 Too Early and 429 Too Many Requests (RFC 9110, RFC 8470, RFC 6585) ask for a later retry; 409 Conflict is
#: the draft's "the key's first request is still being processed" (section 2.7).
TRANSIENT_4XX = frozenset({408, 409, 425, 429})
#: Seconds one socket operation (connect, a send, a read) may wait idle; the whole call is bounded by the deadline.
DEFAULT_TIMEOUT_SECONDS = 10.0
#: Attempts in all, the first included.
DEFAULT_MAX_ATTEMPTS = 5
#: Seconds the retries may take outside a Lambda invocation when no ``deadline=`` is given.
DEFAULT_DEADLINE_SECONDS = 30.0
#: First backoff delay, in seconds; it doubles per attempt up to ``BACKOFF_MAX_SECONDS`` ("equal jitter": a wait is
#: half the delay plus a random part of the other half).
BACKOFF_BASE_SECONDS = 0.2
BACKOFF_MAX_SECONDS = 5.0
#: The least time an attempt is given: a retry that would have less is not made.
MIN_ATTEMPT_SECONDS = 0.5
_TITLE_CHARS = 200
#: A header name: an RFC 9110 token (section 5.6.2).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: What no URL or header value may hold: controls (C0 and DEL) and, in a URL, the space (RFC 3986 section 2).
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class HttpResult:
    """A ``2xx`` answer.

    :ivar status: the HTTP status (``200`` to ``299``).
    :ivar body: the parsed JSON body; ``None`` when it is empty or not JSON.
    :ivar raw: the body's bytes, as received.
    :ivar headers: the response headers, names in lower case (repeated fields joined with ``", "``).
    :ivar replayed: the provider said ``Idempotent-Replayed: true``: it answered with the stored response of an
        earlier request with this key, without executing again.
    :ivar attempts: requests sent, the first included.
    :ivar idempotency_key: the key sent (the effect's key, or ``<key>#<name>`` with ``name=``).
    """

    status: int
    body: Any
    raw: bytes = field(repr=False)
    headers: Mapping[str, str] = field(repr=False)
    replayed: bool
    attempts: int
    idempotency_key: str


class HttpTransientError(Exception):
    """The call did not succeed and may later: a ``5xx``, ``408``, ``409``, ``425`` or ``429``, a connection error
    or a timeout, still there after the last attempt the remaining time or ``max_attempts`` allowed. Not a
    ``PermanentError``: the record is retried (by SQS, with the same key).

    :ivar url: the URL without its query and credentials.
    :ivar status: the last answer's status; ``None`` when the last attempt got no answer (connection error, timeout).
    :ivar attempts: requests sent.
    :ivar retry_after: the last ``Retry-After``, in seconds; ``None`` without one.
    """

    def __init__(self, message: str, *, url: str, status: int | None, attempts: int, retry_after: float | None):
        super().__init__(message)
        self.url = url
        self.status = status
        self.attempts = attempts
        self.retry_after = retry_after


class HttpPermanentError(PermanentError):
    """A ``4xx`` other than ``408``, ``409``, ``425`` and ``429`` (``422``: the key was used before with another
    body), or a ``1xx``/``3xx`` final answer (redirects are not followed): no retry with this key and body can
    succeed. The message names the status, the URL (without query and credentials), the key, and of a problem
    details body (RFC 9457) only its ``title`` and ``code``, never other values of the body.

    :ivar url: the URL without its query and credentials.
    :ivar status: the answer's status.
    :ivar idempotency_key: the key sent.
    :ivar title: the problem's ``title`` (at most 200 characters), or ``None``.
    :ivar code: the problem's ``code`` member (the draft's error scenarios name their case with one), or ``None``.
    """

    def __init__(
        self, message: str, *, url: str, status: int, idempotency_key: str, title: str | None, code: str | None
    ):
        super().__init__(message)
        self.url = url
        self.status = status
        self.idempotency_key = idempotency_key
        self.title = title
        self.code = code


def post_json(
    url: str,
    payload: Any,
    *,
    idempotency_key: str,
    name: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    deadline: float | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> HttpResult:
    """``POST`` ``payload`` as JSON to ``url`` with ``Idempotency-Key: "<key>"``; retried on transient failures.

    :param url: an ``http(s)://`` URL (certificates verified with the system's CA store), printable ASCII (quote
        data with ``urllib.parse.quote``), credentials in ``headers=``, an IPv6 host in brackets (``[::1]:8080``).
    :param payload: JSON-ready data, serialized with sorted keys and compact separators (UTF-8): the same payload is
        the same body byte for byte, so a retry or a replay is the same request to the provider.
    :param idempotency_key: the key the declared effect was handed. The key sent is it, or ``<key>#<name>``; either
        becomes ``effect_keys.form`` of itself when it is not 1 to 128 characters of ``!`` to ``~`` (scoped effect
        keys always are), so it fits the header and the 255-character limit of providers such as Stripe.
    :param name: names this call when one effect calls the adapter more than once. :default: ``None``.
    :param headers: extra request headers (``Authorization``, ...); ``Content-Type: application/json``,
        ``Accept: application/json`` and ``User-Agent: effectively-once`` are sent unless given here.
        :default: ``None``.
    :param timeout: seconds one socket operation (connect, a send, a read) may wait idle. Each attempt as a whole
        (connect, TLS handshake, send and every read) ends by the time left, so a provider that answers byte by
        byte cannot hold the call past its deadline. :default: ``DEFAULT_TIMEOUT_SECONDS`` (10).
    :param deadline: seconds from now the attempts and waits may take. Inside a declared effect run by a Lambda
        invocation, the invocation's remaining time less the consumer's deadline margin (``deadline_margin=``, by
        default the larger of 1 s and 10 % of the time at the invocation's start) bounds them too: the per-call
        context's ``EffectCall.deadline``. A retry is made only when its wait leaves ``MIN_ATTEMPT_SECONDS`` for it.
        :default: ``None``: that remaining time, or ``DEFAULT_DEADLINE_SECONDS`` (30) outside an invocation.
    :param max_attempts: requests in all, the first included. :default: ``DEFAULT_MAX_ATTEMPTS`` (5).
    :param sleep: waits between attempts (tests pass a recorder). :default: ``time.sleep``.
    :param clock: monotonic seconds the deadline is measured on. :default: ``time.monotonic``.
    :returns: the ``2xx`` answer; ``replayed`` tells whether the provider answered from its key store.
    :raises HttpPermanentError: a ``4xx`` but ``408``/``409``/``425``/``429`` (``422``: the key came with another
        body before), or a ``1xx``/``3xx``.
    :raises HttpTransientError: a ``5xx``, ``408``, ``409``, ``425``, ``429``, connection error or timeout on the
        last attempt: ``max_attempts`` made, or no time left for another (a ``Retry-After``, in seconds or an HTTP
        date, is waited for, and one longer than the time left ends the retries at once).
    :raises InvalidEffectCall: (a ``ValueError`` and a ``PermanentError``: an SQS record goes to the DLQ on first
        sight) before any request: a URL not ``http(s)://host...``, with a space, a control, a non-ASCII path,
        credentials, a bad port; a header not a token, a value not str/bytes/int, with a control or outside Latin-1;
        an ``Idempotency-Key`` in ``headers``; a limit out of range; NaN or infinity; ``adapter_key``'s errors.
    :raises TypeError: ``payload`` is not JSON-ready.
    """
    key = adapter_key(ADAPTER, idempotency_key, name)
    sent_key = effect_keys.form(key)
    target = _Target.parse(url)
    _check_limits(timeout, deadline, max_attempts)
    try:
        body = canonical_json(payload)
    except ValueError as error:  # NaN or infinity (a TypeError, a value JSON cannot carry, is the caller's bug)
        raise InvalidEffectCall(f"{ADAPTER}: the payload is not JSON: {error}") from None
    request_headers = _request_headers(sent_key, headers)
    budget = _Budget(clock, _seconds_allowed(deadline))
    return _send(_Request(target, body, request_headers, sent_key), timeout, budget, max_attempts, sleep)


def canonical_json(payload: Any) -> bytes:
    """``payload`` as JSON with sorted keys and no spaces, UTF-8: the same data gives the same bytes.

    :raises TypeError: a value JSON cannot carry. :raises ValueError: NaN or infinity (not JSON).
    """
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def is_transient(status: int) -> bool:
    """Whether a non-``2xx`` status is retried: every ``5xx``, and ``408``, ``409``, ``425``, ``429``."""
    return 500 <= status <= 599 or status in TRANSIENT_4XX


def sf_string(value: str) -> str:
    """``value`` as an RFC 8941 sf-string (section 3.3.3): in double quotes, ``"`` and ``\\`` escaped.

    :raises ValueError: a character outside printable ASCII (``0x20`` to ``0x7E``), which an sf-string cannot hold.
    """
    if not all(" " <= char <= "~" for char in value):
        raise ValueError(f"an sf-string holds printable ASCII only, but {value!r} was given")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- one request ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    target: _Target
    body: bytes
    headers: dict[str, str]
    key: str


def _send(
    request: _Request, timeout: float, budget: _Budget, max_attempts: int, sleep: Callable[[float], None]
) -> HttpResult:
    """Attempts until a ``2xx`` (returned), a permanent answer, or no attempt or time left (raised)."""
    attempts = 0
    while True:
        attempts += 1
        outcome = _attempt(request, budget.attempt(timeout))
        if isinstance(outcome, _Response) and 200 <= outcome.status < 300:
            return _result(outcome, attempts, request.key)
        if isinstance(outcome, _Response) and not is_transient(outcome.status):
            raise _permanent(outcome, request.target, request.key)
        retry_after = outcome.retry_after(time.time()) if isinstance(outcome, _Response) else None
        wait = max(_backoff(attempts), retry_after or 0.0)
        if attempts >= max_attempts or not budget.allows(wait):
            raise _transient(outcome, request.target, attempts, retry_after, budget, wait, max_attempts)
        sleep(wait)


@dataclass(frozen=True)
class _Target:
    """Where the request goes; ``shown`` is the URL without its query and credentials, for messages."""

    https: bool
    host: str
    port: int
    path: str
    shown: str

    @classmethod
    def parse(cls, url: str) -> _Target:
        """``url`` checked before any request: every error is an :class:`InvalidEffectCall`, never retried."""
        if not isinstance(url, str) or _CONTROLS.search(url) or " " in url:
            raise InvalidEffectCall(
                f"url must not hold a space or a control character, but {url!r} was given: percent-encode what is "
                "built from data (urllib.parse.quote)"
            )
        try:
            parts = urlsplit(url)
        except ValueError as error:  # an unclosed or malformed IPv6 literal ("http://[::1/")
            raise InvalidEffectCall(f"url is not a URL: {error} in {url!r}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidEffectCall(f"url must be an http:// or https:// URL with a host, but {url!r} was given")
        _check_host(parts.hostname, url)
        if parts.username is not None or parts.password is not None:
            raise InvalidEffectCall(
                "url must not carry credentials (user:password@): http.client would drop them; send them in "
                f"headers= (headers={{'Authorization': ...}}), but {_without_credentials(parts)!r} had some"
            )
        if not (parts.path + parts.query).isascii():
            raise InvalidEffectCall(
                f"url's path and query must be ASCII, but {url!r} was given: percent-encode them (urllib.parse.quote)"
            )
        try:
            port = parts.port
        except ValueError as error:  # not a number, or out of range
            raise InvalidEffectCall(f"url has a bad port: {error} in {url!r}") from None
        https = parts.scheme == "https"
        host = parts.hostname
        shown_host = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
        path = parts.path or "/"
        return cls(
            https=https,
            host=host,
            port=port if port is not None else (443 if https else 80),  # given, so a bare IPv6 host is never split
            path=path + (f"?{parts.query}" if parts.query else ""),
            shown=f"{parts.scheme}://{shown_host}{'' if port is None else f':{port}'}{path}",
        )


def _check_host(host: str, url: str) -> None:
    """A host name the resolver can take: an IP literal, or labels IDNA can encode (``a..b`` and a label over 63
    characters cannot: ``getaddrinfo`` would raise ``UnicodeError``, neither an ``OSError`` nor retried sense)."""
    if ":" in host:
        try:
            ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            raise InvalidEffectCall(f"url's host {host!r} is not an IPv6 address, in {url!r}") from None
        return
    try:
        host.encode("idna")
    except UnicodeError as error:
        raise InvalidEffectCall(f"url's host {host!r} is not a host name ({error}), in {url!r}") from None


def _without_credentials(parts: Any) -> str:
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


@dataclass(frozen=True)
class _Response:
    status: int
    reason: str
    headers: dict[str, str]
    raw: bytes

    def retry_after(self, now: float) -> float | None:
        return retry_after_seconds(self.headers.get("retry-after"), now)

    def problem(self) -> tuple[str | None, str | None]:
        """The ``title`` and ``code`` of a problem details body (RFC 9457), each ``None`` when absent."""
        parsed = _parse(self.raw)
        if not isinstance(parsed, dict):
            return None, None
        title, code = parsed.get("title"), parsed.get("code")
        return (
            title[:_TITLE_CHARS] if isinstance(title, str) else None,
            code[:_TITLE_CHARS] if isinstance(code, str) else None,
        )


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context per process (loading the CA store costs milliseconds)."""
    return ssl.create_default_context()


def _attempt(request: _Request, deadline: AttemptClock) -> _Response | Exception:
    """One ``POST``, its connect, send and reads all ended by ``deadline``: its answer, or the connection error or
    timeout it met."""
    target = request.target
    connection: http.client.HTTPConnection | None = None
    try:
        # Built inside the try: a connection reads the time left (a TimeoutError once it has passed) and loads the
        # TLS context (an SSLError), both failures of this attempt.
        if target.https:
            connection = TimedHTTPSConnection(target.host, target.port, deadline, _tls())
        else:
            connection = TimedHTTPConnection(target.host, target.port, deadline)
        connection.request("POST", target.path, body=request.body, headers=request.headers)
        response = connection.getresponse()
        raw = response.read()
        fields: dict[str, str] = {}
        for header, value in response.getheaders():
            lower = header.lower()
            fields[lower] = f"{fields[lower]}, {value}" if lower in fields else value
        return _Response(response.status, response.reason, fields, raw)
    except (OSError, http.client.HTTPException) as error:  # refused, reset, DNS, TLS, timeouts, bad answers
        return error
    finally:
        if connection is not None:
            connection.close()


def _request_headers(key: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    given = dict(extra or {})
    lower = {header.lower() for header in given}
    if KEY_HEADER.lower() in lower:
        raise InvalidEffectCall(f"headers must not carry {KEY_HEADER}: the adapter sends the effect's key")
    for header, value in given.items():
        _check_header(header, value)
    defaults = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "effectively-once"}
    return {
        **{header: value for header, value in defaults.items() if header.lower() not in lower},
        **given,
        KEY_HEADER: sf_string(key),
    }


def _check_header(header: Any, value: Any) -> None:
    """What ``http.client`` would refuse at send time (or send broken), refused before the first attempt."""
    if not isinstance(header, str) or not _TOKEN.fullmatch(header):
        raise InvalidEffectCall(f"headers: {header!r} is not a header name (an RFC 9110 token)")
    text = value.decode("latin-1") if isinstance(value, bytes) else str(value) if isinstance(value, int) else value
    if not isinstance(text, str) or _CONTROLS.search(text.replace("\t", " ")) or not _latin1(text):
        raise InvalidEffectCall(
            f"headers: the value of {header!r} must be text (a str, bytes or an int, as http.client takes) in "
            f"Latin-1 without control characters (CR, LF, NUL), but a {type(value).__name__} was given"
        )


def _latin1(value: str) -> bool:
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):
        return None


def _result(response: _Response, attempts: int, key: str) -> HttpResult:
    return HttpResult(
        status=response.status,
        body=_parse(response.raw),
        raw=response.raw,
        headers=response.headers,
        replayed=response.headers.get(REPLAYED_HEADER.lower(), "").strip().lower() == "true",
        attempts=attempts,
        idempotency_key=key,
    )


def _permanent(response: _Response, target: _Target, key: str) -> HttpPermanentError:
    title, code = response.problem()
    problem = ", ".join(part for part in (title and f"title {title!r}", code and f"code {code!r}") if part)
    hint = (
        ": the key was used before with another body (the payload of this effect changed between executions; "
        "make it deterministic, or give each call its own name=)"
        if response.status == 422
        else ""
    )
    return HttpPermanentError(
        f"POST {target.shown} answered {response.status} {response.reason}"
        f"{f' ({problem})' if problem else ''} for {KEY_HEADER} {key!r}{hint}",
        url=target.shown,
        status=response.status,
        idempotency_key=key,
        title=title,
        code=code,
    )


def _transient(
    outcome: _Response | Exception,
    target: _Target,
    attempts: int,
    retry_after: float | None,
    budget: _Budget,
    wait: float,
    max_attempts: int,
) -> HttpTransientError:
    if isinstance(outcome, _Response):
        status: int | None = outcome.status
        last = f"{outcome.status} {outcome.reason}"
    else:
        status, last = None, f"{type(outcome).__name__}: {outcome}"
    why = (
        f"{max_attempts} attempts made"
        if attempts >= max_attempts
        else f"a retry in {wait:.1f} s would leave less than {MIN_ATTEMPT_SECONDS} s of the "
        f"{max(0.0, budget.left()):.1f} s left"
    )
    return HttpTransientError(
        f"POST {target.shown} failed after {attempts} attempt(s), the last with {last} ({why})",
        url=target.shown,
        status=status,
        attempts=attempts,
        retry_after=retry_after,
    )


# --- time ---------------------------------------------------------------------------------------------------------


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A ``Retry-After`` field (RFC 9110 section 10.2.3) in seconds from ``now`` (Unix seconds): delay-seconds, or an
    HTTP date (a past one is ``0``); ``None`` when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: HTTP dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def _backoff(attempts: int) -> float:
    """The wait after ``attempts`` failed attempts: exponential, with equal jitter."""
    delay = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2.0 ** (attempts - 1))
    return delay / 2 + random.uniform(0, delay / 2)  # jitter, not a secret


def _check_limits(timeout: float, deadline: float | None, max_attempts: int) -> None:
    if not timeout > 0:
        raise InvalidEffectCall(f"timeout must be more than 0 seconds, but {timeout!r} was given")
    if deadline is not None and not deadline > 0:
        raise InvalidEffectCall(f"deadline must be more than 0 seconds, but {deadline!r} was given")
    if max_attempts < 1:
        raise InvalidEffectCall(f"max_attempts must be 1 or more, but {max_attempts!r} was given")


def _seconds_allowed(deadline: float | None) -> float:
    """The seconds the attempts may take: the smaller of ``deadline`` and the invocation's time less its margin."""
    limits = [limit for limit in (deadline, _invocation_seconds_left()) if limit is not None]
    return min(limits) if limits else DEFAULT_DEADLINE_SECONDS


def _invocation_seconds_left() -> float | None:
    """Inside a declared effect run by a Lambda invocation: the seconds left before its deadline
    (``EffectCall.deadline``: the invocation's end less the consumer's deadline margin); ``None`` elsewhere."""
    call = current()
    return call.seconds_left() if call is not None else None


class _Budget:
    """The time the attempts and waits may take, on ``clock``."""

    def __init__(self, clock: Callable[[], float], seconds: float) -> None:
        self._clock = clock
        self._end = clock() + seconds

    def left(self) -> float:
        return self._end - self._clock()

    def allows(self, wait: float) -> bool:
        """Whether waiting ``wait`` seconds still leaves an attempt ``MIN_ATTEMPT_SECONDS``."""
        return self.left() - wait >= MIN_ATTEMPT_SECONDS

    def attempt(self, timeout: float) -> AttemptClock:
        """The next attempt's clock: it ends with the time left, never given less than ``MIN_ATTEMPT_SECONDS`` (the
        first attempt is always made), each socket operation idle at most ``timeout``."""
        return AttemptClock(self._clock, max(self.left(), MIN_ATTEMPT_SECONDS), timeout)
