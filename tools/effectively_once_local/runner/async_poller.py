"""Lambda's asynchronous queue for one function, in one execution environment (:class:`AsyncPoller`).

With ``MappingConfig.async_config`` the poller plays Lambda's asynchronous queue instead (``aws/async_inbox.py``): it
takes one event at a time from the function's inbox and follows Lambda's rules for asynchronous invocation (AWS
Lambda Developer Guide, "Invoking a Lambda function asynchronously", "Configuring error handling for asynchronous
invocation", "Capturing records of Lambda asynchronous invocations"): retries after an error, a kill or a timeout
with the scaled delays, the maximum event age, the destination record after the last attempt, and a share of
duplicate deliveries (``ChaosConfig.async_duplicate``). See :func:`.batch_poller.poller_main`.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from effectively_once_runtime import events
from effectively_once_runtime.consumer import key_text
from effectively_once_runtime.errors import InvalidRecord, UnsupportedEvent

from ..aws.async_inbox import (
    EVENT_AGE_EXCEEDED,
    EVENT_ID_ATTRIBUTE,
    RETRIES_EXHAUSTED,
    SOURCE_ATTRIBUTE,
    destination_record,
    retry_delay_seconds,
)
from ..aws.mapping_config import SQS_MAX_VISIBILITY_SECONDS, AsyncConfig
from ..base.run_figures import record_peak
from ..chaos.fault_model import DEADLINE, TIMEOUT, EventLog, InvocationChaos
from ..traffic.source_kinds import kind_of_trigger
from .execution_environment import LocalLambdaContext
from .poller_spec import PollerSpec
from .request_counter import RequestCounter


def _first_item(event: Any) -> tuple[str, Any] | None:
    """The trigger of ``event`` and its first item, as the runtime reads them (``events.classify``, ``events.items``);
    ``None`` for an event the runtime rejects (``UnsupportedEvent``)."""
    try:
        trigger = events.classify(event)
    except UnsupportedEvent:
        return None
    return trigger, events.items(trigger, event)[0]


def async_event_id(event: Any) -> str | None:
    """The id of an asynchronously invoked event: its first item's delivery id as the runtime reads it
    (``events.delivery_id``: an EventBridge event's ``id``, an SNS event's first record's ``Sns.MessageId``) when it
    is a string; ``None`` for anything else (a direct ``Invoke``, an event the runtime rejects)."""
    first = _first_item(event)
    found = events.delivery_id(*first) if first is not None else None
    return found if isinstance(found, str) else None


def async_event_key(path: events.Expression, event: Any) -> str | None:
    """The business key of an asynchronously invoked event: ``path`` searched over what its source's producer
    published (the kind of source delivering the trigger's events says, ``traffic/source_kinds.py``): for an
    enveloped one the first item's payload under the envelope (``events.payload``: an EventBridge event's ``detail``,
    an SNS record's ``Sns.Message`` parsed as strict JSON); else over the event itself. ``None`` when the runtime
    would reject the event or find no key there (the rules are the runtime's own: ``effectively_once_runtime.events``
    and ``consumer.key_text``)."""
    first = _first_item(event)
    if first is None:
        return None
    trigger, item = first
    try:
        kind = kind_of_trigger(trigger)
        data = kind.published(item, event) if kind is not None else event
        return key_text(path.search(data))
    except InvalidRecord:
        return None


def _whole_seconds(seconds: float) -> int:
    """A wait as an SQS visibility timeout: whole seconds (rounded up, so never shorter than the wait), at most
    :data:`SQS_MAX_VISIBILITY_SECONDS`."""
    return min(SQS_MAX_VISIBILITY_SECONDS, max(0, math.ceil(seconds - 1e-9)))


class _Line:
    """One invocation's delivery line, written once: by the kill that ends the invocation (outcome ``killed``) or
    by the poller once the outcome is known, whichever comes first."""

    def __init__(self, log: EventLog, fields: dict[str, Any]) -> None:
        self._log = log
        self._fields = fields
        self._lock = threading.Lock()
        self._written = False

    def write(self, outcome: str, **extra: Any) -> None:
        with self._lock:
            if self._written:
                return
            self._written = True
            self._log.write(**self._fields, outcome=outcome, **extra)


class AsyncChaos(InvocationChaos):
    """:class:`~effectively_once_local.chaos.fault_model.InvocationChaos` for an asynchronous target: before any kill
    (injected, or the deadline watchdog's) it calls ``before_kill(phase)``, which writes the killed invocation's
    delivery line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Called with the kill's phase just before the process is killed; ``None``: nothing to write.
        self.before_kill: Callable[[str], None] | None = None

    def crash(self, phase: str) -> None:
        hook = self.before_kill
        if hook is not None:
            hook(phase)
        super().crash(phase)


class AsyncPoller:
    """Lambda's asynchronous queue for one function, in one execution environment
    (:func:`.batch_poller.poller_main` with ``MappingConfig.async_config``). The inbox (``mapping.queue_url``) holds
    one message per event (``aws/async_inbox.py``); its ``ApproximateReceiveCount`` is the attempt and its
    ``SentTimestamp`` starts the event's age. For each message received, one at a time:

    - it is received with a visibility timeout of the function timeout plus the wait that follows this attempt
      (``async_inbox.retry_delay_seconds``, scaled by ``AsyncConfig.time_scale``; none after the last attempt),
      rounded up to whole seconds: an attempt killed by chaos or by the deadline watchdog reappears as the next
      attempt after Lambda's delay;
    - an event older than ``max_event_age_seconds * time_scale`` gets an ``EventAgeExceeded`` record, and an
      attempt past ``max_retry_attempts + 1`` (the last attempt was killed) a ``RetriesExhausted`` record, both
      without an invocation (``approximateInvokeCount``: the attempts made; the error: the previous attempt's when
      this environment saw it, else none). A record goes to ``on_failure_queue_url`` (dropped when ``None``, as
      Lambda drops it without a destination) and the message is deleted;
    - otherwise the handler is invoked with the body as JSON. It returns: the message is deleted, and with the
      odds ``ChaosConfig.async_duplicate`` the event is invoked once more at once in this environment (a duplicate
      delivery: its outcome is logged, never retried). It raises: with attempts left the message is made visible
      again after the retry delay (``ChangeMessageVisibility``), else it gets a ``RetriesExhausted`` record with the
      error's type and message, and is deleted.

    The delivery log (``deliveries-<label>-<pid>.jsonl``) gets one line per invocation and per record sent without
    one: ``message_id``, ``receive_count`` (as an SQS delivery), ``async`` (``true``), ``attempt``, ``source``
    (the inbox message's ``async_inbox.SOURCE_ATTRIBUTE``), ``event_id`` (:func:`async_event_id`; for a direct
    ``Invoke``, the inbox message's ``async_inbox.EVENT_ID_ATTRIBUTE``), ``duplicate`` (``true``, the extra delivery
    only), ``request_id`` (the invocation's Lambda request id; ``null`` without
    one), ``invoked`` and ``outcome``: ``ok``, ``error`` (with ``error_type``, ``error_message``), ``killed`` (with
    the kill's ``phase``, written just before the kill), ``on_failure`` (with ``condition``,
    ``approximate_invoke_count``, the error when known and ``destination``: whether a record was sent) or
    ``rejected`` (a body that is not JSON, which Lambda's ``Invoke`` refuses: dropped, never invoked).

    The records are sent with a botocore client of their own, outside the write watch (``faults.WriteWatch``
    hooks boto3 sessions): they are Lambda's sends, not the function's writes.
    """

    def __init__(
        self,
        spec: PollerSpec,
        config: AsyncConfig,
        handler: Callable[..., Any],
        chaos: AsyncChaos,
        sqs: Any,
        deliveries: EventLog,
        counter: RequestCounter | None,
        key_path: events.Expression | None,
        peak_rss: Any = None,
    ) -> None:
        self.spec = spec
        self.mapping = spec.mapping
        self.config = config
        self.handler = handler
        self.chaos = chaos
        self.sqs = sqs
        self.deliveries = deliveries
        self.counter = counter
        self.key_path = key_path
        self.peak_rss = peak_rss
        #: The last error this environment saw per inbox message id: (attempt, (type, message)), for the on-failure
        #: record of the attempt after it.
        self.errors: dict[str, tuple[int, tuple[str, str]]] = {}
        self.duplicate_rng = random.Random(f"{spec.chaos.seed}-async-duplicate-{os.getpid()}-{time.time_ns()}")
        self._destinations: Any = None

    def visibility(self, attempt: int) -> int:
        """Seconds attempt ``attempt`` stays invisible: the function timeout plus the wait after it (none after the
        last attempt), whole seconds."""
        wait = (
            retry_delay_seconds(attempt, self.config.time_scale) if attempt <= self.config.max_retry_attempts else 0.0
        )
        return _whole_seconds(self.mapping.function_timeout_seconds + wait)

    def run(self, stop: Any) -> None:
        """Receive and handle one message at a time until ``stop`` is set."""
        while not stop.is_set():
            messages = self.sqs.receive_message(
                QueueUrl=self.mapping.queue_url,
                MaxNumberOfMessages=1,
                WaitTimeSeconds=1,
                VisibilityTimeout=self.visibility(1),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                if self.counter is not None:
                    self.counter.add("sqs.ReceiveMessage.empty")
                continue
            self.handle(messages[0])
            if self.peak_rss is not None:
                record_peak(self.peak_rss)

    def handle(self, message: dict[str, Any]) -> None:
        """One received inbox message: a record without an invocation, or an invocation and its outcome."""
        attributes = message.get("Attributes", {})
        attempt = int(attributes["ApproximateReceiveCount"])
        try:
            event = json.loads(message["Body"])
        except ValueError:
            # Lambda refuses a payload that is not JSON at Invoke (InvalidRequestContentException): it never
            # enters the queue, so it is dropped here, logged.
            fields = self._fields(message, None, attempt)
            _Line(self.deliveries, {**fields, "request_id": None, "invoked": False}).write("rejected")
            self._delete(message)
            return
        fields = self._fields(message, event, attempt)
        age = time.time() - int(attributes["SentTimestamp"]) / 1000
        seen = self.errors.get(message["MessageId"])
        previous = seen[1] if seen is not None and seen[0] == attempt - 1 else None
        if age > self.config.max_event_age_seconds * self.config.time_scale:
            self._give_up(message, event, fields, EVENT_AGE_EXCEEDED, attempt - 1, previous)
            return
        if attempt > self.config.max_retry_attempts + 1:
            self._give_up(message, event, fields, RETRIES_EXHAUSTED, attempt - 1, previous)
            return
        if self.visibility(attempt) != self.visibility(1):
            self.sqs.change_message_visibility(
                QueueUrl=self.mapping.queue_url,
                ReceiptHandle=message["ReceiptHandle"],
                VisibilityTimeout=self.visibility(attempt),
            )
        try:
            self._invoke_and_settle(message, event, fields, attempt)
        finally:
            self.chaos.before_kill = None

    def _invoke_and_settle(self, message: dict[str, Any], event: Any, fields: dict[str, Any], attempt: int) -> None:
        error, line = self.invoke(event, fields)
        if error is None:
            line.write("ok")
            self._delete(message)
            if self.duplicate_rng.random() < self.spec.chaos.async_duplicate:
                duplicate_error, duplicate = self.invoke(event, {**fields, "duplicate": True})
                self._write_outcome(duplicate, duplicate_error)
        elif attempt <= self.config.max_retry_attempts:
            self.errors[message["MessageId"]] = (attempt, error)
            self._write_outcome(line, error)
            self.sqs.change_message_visibility(
                QueueUrl=self.mapping.queue_url,
                ReceiptHandle=message["ReceiptHandle"],
                VisibilityTimeout=_whole_seconds(retry_delay_seconds(attempt, self.config.time_scale)),
            )
        else:
            self._give_up(message, event, fields, RETRIES_EXHAUSTED, attempt, error, line)

    @staticmethod
    def _write_outcome(line: _Line, error: tuple[str, str] | None) -> None:
        if error is None:
            line.write("ok")
        else:
            line.write("error", error_type=error[0], error_message=error[1])

    def _fields(self, message: dict[str, Any], event: Any, attempt: int) -> dict[str, Any]:
        attributes = message.get("MessageAttributes", {})
        source = attributes.get(SOURCE_ATTRIBUTE, {}).get("StringValue")
        # A direct Invoke's event holds no id: the local AWS gave it one (async_inbox.EVENT_ID_ATTRIBUTE).
        given = attributes.get(EVENT_ID_ATTRIBUTE, {}).get("StringValue")
        return {
            "message_id": message["MessageId"],
            "receive_count": attempt,
            "async": True,
            "attempt": attempt,
            "source": source,
            "event_id": async_event_id(event) or given,
        }

    def invoke(self, event: Any, fields: dict[str, Any]) -> tuple[tuple[str, str] | None, _Line]:
        """One invocation of the handler with ``event``, under the same chaos, watchdog and counters as an SQS
        batch: the error it raised (type name, message) or ``None``, and its delivery line (not written yet unless
        a kill wrote it)."""
        if self.counter is not None:
            self.counter.add("lambda.Invoke")
        deadline = time.monotonic() + self.mapping.function_timeout_seconds
        context = LocalLambdaContext(self.mapping, deadline)
        line = _Line(self.deliveries, {**fields, "request_id": context.aws_request_id, "invoked": True})
        self.chaos.before_kill = lambda phase: line.write("killed", phase=phase)
        keys = [async_event_key(self.key_path, event) or ""] if self.key_path is not None else None
        self.chaos.begin(deadline, keys, context.aws_request_id)
        chaos = self.chaos

        def on_deadline() -> None:
            # An injected stall is a planned timeout; anything else is a real one (a slow machine).
            chaos.crash(TIMEOUT if chaos.stalling else DEADLINE)

        watchdog = threading.Timer(self.mapping.function_timeout_seconds, on_deadline)
        watchdog.daemon = True
        watchdog.start()
        started = time.perf_counter()
        error: tuple[str, str] | None = None
        try:
            self.handler(event, context)
        except Exception as exc:  # Lambda's "Unhandled" function error: errorType is the exception's class name
            traceback.print_exc()
            error = (type(exc).__name__, str(exc))
        finally:
            watchdog.cancel()
            chaos.end()
            if self.counter is not None:
                self.counter.add("lambda.Invoke.duration_us", round((time.perf_counter() - started) * 1e6))
                self.counter.add("lambda.Invoke.timed")
        chaos.on_return()
        return error, line

    def _give_up(
        self,
        message: dict[str, Any],
        event: Any,
        fields: dict[str, Any],
        condition: str,
        invoke_count: int,
        error: tuple[str, str] | None,
        line: _Line | None = None,
    ) -> None:
        """The on-failure record: logged, sent to the destination (when there is one), and the message deleted."""
        destination = self.config.on_failure_queue_url
        extra: dict[str, Any] = {"condition": condition, "approximate_invoke_count": invoke_count}
        if error is not None:
            extra.update(error_type=error[0], error_message=error[1])
        extra["destination"] = destination is not None
        if line is None:
            line = _Line(self.deliveries, {**fields, "request_id": None, "invoked": False})
        line.write("on_failure", **extra)
        if destination is not None:
            record = destination_record(
                event,
                function_arn=self.config.function_arn,
                condition=condition,
                approximate_invoke_count=invoke_count,
                error_type=error[0] if error else None,
                error_message=error[1] if error else None,
                request_id=message["MessageId"],
            )
            self._destination_client().send_message(QueueUrl=destination, MessageBody=json.dumps(record))
        self._delete(message)

    def _destination_client(self) -> Any:
        if self._destinations is None:
            import botocore.session

            self._destinations = botocore.session.get_session().create_client("sqs")
        return self._destinations

    def _delete(self, message: dict[str, Any]) -> None:
        self.sqs.delete_message(QueueUrl=self.mapping.queue_url, ReceiptHandle=message["ReceiptHandle"])
        self.errors.pop(message["MessageId"], None)
