"""A local stand-in for Lambda's SQS event source mapping (moto cannot run Lambda code without Docker).

It follows the deployed mapping's rules: receive up to the batch size, invoke the handler in process with records
shaped exactly like the real event and a Lambda context whose remaining time follows the function timeout, delete
the successes, leave batch item failures to reappear after the visibility timeout, and return the whole batch when
the handler raises (or reports an identifier that is not in the batch). Each poller is its own process — one
process is one execution environment, since Powertools keeps per-process state — and a poller that dies (a crash,
a deadline kill) is replaced by a fresh one, as Lambda starts a new environment.

What the poller sees is written as JSON Lines under the run folder: ``deliveries-*.jsonl`` (what SQS handed out,
the service's side), ``provider-*.jsonl`` (the simulated provider's call log), ``chaos-*.jsonl`` (injected kills)
and ``function-*.log`` (the handler's stdout: its structured logs and EMF metrics, the CloudWatch Logs stand-in).

The handler is loaded in process from its code folder (the function's CDK asset) with the runtime package
(``effectively_once_runtime``) after it on ``sys.path``, where a Lambda layer would put it (``/opt/python`` comes
after the function's own code): locally moto ignores layers, so the runner plays the layer's part. The handler's
stdout passes through ``EffectTap``, which sees the runtime's effect lines as they are written.

With ``MappingConfig.async_config`` the poller plays Lambda's asynchronous queue instead (``runner/async_inbox.py``): it
takes one event at a time from the function's inbox and follows Lambda's rules for asynchronous invocation (AWS
Lambda Developer Guide, "Invoking a Lambda function asynchronously", "Configuring error handling for asynchronous
invocation", "Capturing records of Lambda asynchronous invocations"): retries after an error, a kill or a timeout
with the scaled delays, the maximum event age, the destination record after the last attempt, and a share of
duplicate deliveries (``ChaosConfig.async_duplicate``). See :func:`poller_main`.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import math
import multiprocessing as mp
import os
import random
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effectively_once_runtime import events, names
from effectively_once_runtime.consumer import key_text
from effectively_once_runtime.errors import InvalidRecord, UnsupportedEvent

from ..base.run_figures import record_peak
from ..chaos.fault_model import AFTER_COMPLETE, DEADLINE, TIMEOUT, ChaosConfig, EventLog, InvocationChaos
from ..chaos.faults import SqlCommitWatch, WriteWatch
from ..traffic.chaos_input import body_key, compile_key
from .async_inbox import (
    EVENT_AGE_EXCEEDED,
    RETRIES_EXHAUSTED,
    SOURCE_ATTRIBUTE,
    destination_record,
    retry_delay_seconds,
)

SQS_RECEIVE_MAX = 10  # ReceiveMessage returns at most 10 messages (SQS API reference)
#: A message's visibility timeout is at most 12 hours (Amazon SQS Developer Guide, "Amazon SQS visibility timeout":
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html).
SQS_MAX_VISIBILITY_SECONDS = 43_200
#: Opt-in (benchmarks): a folder; each poller then counts its AWS requests and invocations into it.
COUNT_REQUESTS_ENV = "EFFECTIVELY_ONCE_COUNT_REQUESTS"


@dataclass(frozen=True)
class AsyncConfig:
    """A function's asynchronous invocation, as the synthesized template configures it (moto skips
    ``AWS::Lambda::EventInvokeConfig``): the runner plays Lambda's asynchronous queue from the function's inbox
    (``runner/async_inbox.py``).

    :ivar function_arn: the function's ARN (unqualified).
    :ivar max_retry_attempts: ``MaximumRetryAttempts`` (0..2; Lambda's default 2).
    :ivar max_event_age_seconds: ``MaximumEventAgeInSeconds`` (60..21600; Lambda's default 21600), before scaling.
    :ivar on_failure_queue_url: the on-failure destination (an SQS queue), or ``None`` (records are dropped, as
        Lambda drops them without a destination).
    :ivar time_scale: the factor applied to the retry delays and the maximum event age (``async_queue.time_scale``).
    """

    function_arn: str
    max_retry_attempts: int = 2
    max_event_age_seconds: int = 21600
    on_failure_queue_url: str | None = None
    time_scale: float = 0.05


@dataclass(frozen=True)
class MappingConfig:
    """One deployed event source mapping, as read back from the local AWS; or, with ``async_config``, a function's
    asynchronous invocation (``queue_url``/``queue_arn``: its inbox, ``async_queue.inbox_name``; ``batch_size`` 1)."""

    label: str
    queue_url: str
    queue_arn: str
    batch_size: int
    batching_window_seconds: int
    visibility_timeout_seconds: int
    max_receive_count: int
    function_name: str
    function_timeout_seconds: int
    function_memory_mb: int
    function_env: dict[str, str]
    handler: str  # module.attribute, as the function's Handler
    #: Set for an asynchronous target: the poller invokes one event at a time with Lambda's async retry policy.
    async_config: AsyncConfig | None = None


@dataclass(frozen=True)
class PollerSpec:
    mapping: MappingConfig
    run_dir: str
    handler_root: str
    aws_env: dict[str, str]
    chaos: ChaosConfig = field(default_factory=ChaosConfig)
    #: Environment variables set in the poller after the function's own (a profile's switches, e.g. the payments
    #: control run's guards off). :default: none.
    env_overrides: dict[str, str] = field(default_factory=dict)
    #: ``module:function`` the poller calls as ``function(chaos, provider_log)`` before it imports the handler: a
    #: profile's seam around the side effect (the payments gateway, ``sandbox.install_gateway_seam``); the kills
    #: "after the effect" then strike there. :default: ``None``: at the runtime's effect line, for any handler.
    seam: str | None = None
    #: JMESPath over a message body giving its business key (booked with each kill: the keys of the killed batch).
    key_expression: str | None = None
    #: The business-identity steps applied to that key (``chaos_input.compile_key``). :default: none.
    key_normalize: tuple[str, ...] = ()


def packaged_lambda_src() -> Path:
    """The sample's source inside the installed library (``effectively_once/_lambda_src``, the wheel's package data),
    found without importing the library."""
    spec = importlib.util.find_spec("effectively_once")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return (Path(locations[0]) if locations else Path(__file__).resolve().parent) / "_lambda_src"


def runtime_root() -> str | None:
    """The folder holding the ``effectively_once_runtime`` package: the installed one, else the repository's
    ``lambda_src``, else the copy inside the wheel (``effectively_once/_lambda_src``)."""
    spec = importlib.util.find_spec("effectively_once_runtime")
    if spec is not None and spec.submodule_search_locations:
        return str(Path(list(spec.submodule_search_locations)[0]).parent)
    # tools/effectively_once_local/runner/mapping_runner.py: the repository is three folders up.
    for candidate in (Path(__file__).resolve().parents[3] / "lambda_src", packaged_lambda_src()):
        if (candidate / "effectively_once_runtime" / "__init__.py").is_file():
            return str(candidate)
    return None


#: The runtime's effect line carries this message; matched as text first so that the tap parses only the lines that
#: may be effect lines.
EFFECT_MESSAGE = names.EFFECT_EXECUTED


class EffectTap(io.TextIOBase):
    """The handler's stdout: every write goes to ``sink`` at once; each complete line that is the runtime's effect
    line (JSON, ``message`` = ``effect executed``) is then handed to ``on_effect(idempotency_key, effect)``. The
    runtime flushes the line right after the effect returned, so the callback runs after the effect and before the
    record is completed — where a kill is "after the effect, before completion"."""

    def __init__(self, sink: Any, on_effect: Callable[[Any, Any], None], message: str = EFFECT_MESSAGE) -> None:
        super().__init__()
        self._sink = sink
        self._on_effect = on_effect
        self._message = message
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._sink.write(text)
        self._partial += text
        if "\n" in self._partial:
            self._sink.flush()
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                if self._message in line:
                    self._effect_line(line)
        return len(text)

    def _effect_line(self, line: str) -> None:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            return
        if isinstance(doc, dict) and doc.get(names.FIELD_MESSAGE) == self._message:
            self._on_effect(doc.get(names.FIELD_IDEMPOTENCY_KEY), doc.get(names.FIELD_EFFECT))

    def flush(self) -> None:
        self._sink.flush()


class LocalLambdaContext:
    """Lambda context with a real deadline: ``get_remaining_time_in_millis`` counts down from the timeout."""

    def __init__(self, mapping: MappingConfig, deadline: float) -> None:
        self.function_name = mapping.function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = mapping.function_memory_mb
        # The function lives in the queue's partition, region and account (arn:<partition>:sqs:<region>:<account>:...).
        partition, _, region, account = mapping.queue_arn.split(":")[1:5]
        self.invoked_function_arn = f"arn:{partition}:lambda:{region}:{account}:function:{mapping.function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{mapping.function_name}"
        self.log_stream_name = f"local/{os.getpid()}"
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def to_lambda_record(message: dict[str, Any], mapping: MappingConfig) -> dict[str, Any]:
    """An SQS ``ReceiveMessage`` message as the event source mapping hands it to Lambda."""
    attributes = dict(message.get("Attributes", {}))
    message_attributes = {
        name: {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": value.get("BinaryListValues", []),
            "dataType": value.get("DataType"),
        }
        for name, value in message.get("MessageAttributes", {}).items()
    }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": mapping.queue_arn,
        "awsRegion": mapping.queue_arn.split(":")[3],
    }


def failed_ids(response: Any, batch_ids: set[str]) -> set[str]:
    """Message ids to return to the queue, by Lambda's rules for ReportBatchItemFailures: a malformed response or
    an identifier outside the batch fails the whole batch."""
    if response is None:
        return set()
    if not isinstance(response, dict):
        return set(batch_ids)
    items = response.get("batchItemFailures")
    if items is None:
        return set()
    ids = set()
    for item in items:
        ident = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not ident or ident not in batch_ids:
            return set(batch_ids)
        ids.add(ident)
    return ids


class RequestCounter:
    """Counts this process's AWS requests by ``service.Operation`` with a botocore ``before-call`` hook registered
    on every boto3 session created from now on (the default session, and the one Powertools builds), plus
    ``lambda.Invoke`` (handler invocations), ``sqs.ReceiveMessage.empty``, and for each invocation that returned
    or raised, ``lambda.Invoke.timed`` (one) and ``lambda.Invoke.duration_us`` (its wall time in microseconds:
    the handler call alone, as Lambda bills it), written as JSON at every count."""

    def __init__(self, path: Path) -> None:
        import boto3.session

        self.path = path
        self.counts: Counter[str] = Counter()
        original = boto3.session.Session.__init__

        def init(session: Any, *args: Any, **kwargs: Any) -> None:
            original(session, *args, **kwargs)
            session.events.register("before-call", self._count)

        boto3.session.Session.__init__ = init

    def _count(self, event_name: str, **_: Any) -> None:  # event_name: before-call.<service>.<Operation>
        self.add(event_name.split(".", 1)[1])

    def add(self, key: str, n: int = 1) -> None:
        """Add ``n`` to ``key`` and write the counts at once: a killed process keeps every request it made."""
        self.counts[key] += n
        self.flush()

    def flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(self.counts)), encoding="utf-8")
        tmp.replace(self.path)


def _load_handler(spec: PollerSpec, chaos: InvocationChaos, provider_log: EventLog) -> Callable[..., Any]:
    # The function's code first, then the runtime where its layer would be (after the code, like /opt/python).
    root = runtime_root()
    if root is not None and root not in sys.path:
        sys.path.insert(0, root)
    sys.path.insert(0, spec.handler_root)
    if spec.seam:
        module, _, function = spec.seam.partition(":")
        getattr(importlib.import_module(module), function)(chaos, provider_log)
    module_name, _, attr = spec.mapping.handler.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]


def poller_main(spec: PollerSpec, stop: Any, peak_rss: Any = None) -> None:
    """Body of one poller process: one execution environment polling one queue until ``stop`` is set. ``peak_rss``
    (a shared ``multiprocessing`` value): raised to this process's ``ru_maxrss`` after the handler is loaded and
    after every invocation (``figures.record_peak``).

    With ``spec.mapping.async_config`` set, the queue is the function's inbox and the poller plays Lambda's
    asynchronous queue (:class:`AsyncPoller`): one event per invocation, the event being the message body as JSON,
    with the same chaos, write watch, effect tap and deadline watchdog as an SQS batch."""
    mapping = spec.mapping
    run_dir = Path(spec.run_dir)
    pid = os.getpid()
    os.environ.update(spec.aws_env)
    os.environ.update(mapping.function_env)
    os.environ.update(spec.env_overrides)
    # The handler's stdout is its CloudWatch log stream.
    function_log = open(run_dir / f"function-{mapping.label}-{pid}.log", "a", buffering=1, encoding="utf-8")
    chaos = (InvocationChaos if mapping.async_config is None else AsyncChaos)(
        spec.chaos,
        EventLog(run_dir / f"chaos-{mapping.label}-{pid}.jsonl"),
        mapping.label,
        at_effect_line=spec.seam is None,
    )
    if spec.seam is None:
        # Faults from outside the app: every write the local AWS accepts is numbered and logged (also without chaos:
        # the stores tie their items to executions by it), and may be a kill point (faults.py). Before the
        # handler's import and its clients, so that every session is watched.
        WriteWatch(chaos.on_write).install()
        SqlCommitWatch(chaos.on_write).install()
    # Powertools' Logger binds sys.stdout when the handler module creates it: the tap is in place before the import.
    sys.stdout = EffectTap(function_log, chaos.on_effect)
    sys.stderr = function_log
    key_path = compile_key(spec.key_expression, spec.key_normalize) if spec.key_expression else None

    count_dir = os.environ.get(COUNT_REQUESTS_ENV)
    counter = RequestCounter(Path(count_dir) / f"requests-{mapping.label}-{pid}.json") if count_dir else None
    import boto3  # after the environment is set

    deliveries = EventLog(run_dir / f"deliveries-{mapping.label}-{pid}.jsonl")
    provider_log = EventLog(run_dir / f"provider-{mapping.label}-{pid}.jsonl")
    handler = _load_handler(spec, chaos, provider_log)
    sqs = boto3.client("sqs")
    if peak_rss is not None:
        record_peak(peak_rss)
    if mapping.async_config is not None:
        assert isinstance(chaos, AsyncChaos)
        AsyncPoller(spec, mapping.async_config, handler, chaos, sqs, deliveries, counter, key_path, peak_rss).run(stop)
        return
    receive_max = min(mapping.batch_size, SQS_RECEIVE_MAX)

    while not stop.is_set():
        messages = sqs.receive_message(
            QueueUrl=mapping.queue_url,
            MaxNumberOfMessages=receive_max,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            if counter is not None:
                counter.add("sqs.ReceiveMessage.empty")
            continue
        if counter is not None:
            counter.add("lambda.Invoke")
        for m in messages:
            deliveries.write(message_id=m["MessageId"], receive_count=int(m["Attributes"]["ApproximateReceiveCount"]))
        event = {"Records": [to_lambda_record(m, mapping) for m in messages]}
        deadline = time.monotonic() + mapping.function_timeout_seconds
        context = LocalLambdaContext(mapping, deadline)
        chaos.begin(
            deadline,
            [body_key(key_path, m["Body"]) or "" for m in messages] if key_path else None,
            context.aws_request_id,
        )

        def on_deadline() -> None:
            # An injected stall is a planned timeout; anything else is a real one (a slow machine).
            phase = TIMEOUT if chaos.stalling else DEADLINE
            chaos.crash(phase)

        watchdog = threading.Timer(mapping.function_timeout_seconds, on_deadline)
        watchdog.daemon = True
        watchdog.start()
        batch_ids = {m["MessageId"] for m in messages}
        started = time.perf_counter()
        try:
            response = handler(event, context)
            to_retry = failed_ids(response, batch_ids)
        except Exception:  # the whole batch returns to the queue, as when a Lambda invocation errors
            traceback.print_exc()
            to_retry = set(batch_ids)
        finally:
            watchdog.cancel()
            chaos.end()
            if counter is not None:
                counter.add("lambda.Invoke.duration_us", round((time.perf_counter() - started) * 1e6))
                counter.add("lambda.Invoke.timed")
        if chaos.fate == AFTER_COMPLETE:
            chaos.crash(AFTER_COMPLETE)
        done = [m for m in messages if m["MessageId"] not in to_retry]
        for start in range(0, len(done), SQS_RECEIVE_MAX):
            chunk = done[start : start + SQS_RECEIVE_MAX]
            sqs.delete_message_batch(
                QueueUrl=mapping.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
        if peak_rss is not None:
            record_peak(peak_rss)


def async_event_id(event: Any) -> str | None:
    """The id of an asynchronously invoked event: an EventBridge event's ``id``, an SNS event's first record's
    ``Sns.MessageId``; ``None`` for anything else (a direct ``Invoke``)."""
    if not isinstance(event, dict):
        return None
    if "detail-type" in event:
        found = event.get("id")
    else:
        records = event.get("Records")
        first = records[0] if isinstance(records, list) and records and isinstance(records[0], dict) else {}
        sns = first.get("Sns")
        found = sns.get("MessageId") if isinstance(sns, dict) else None
    return found if isinstance(found, str) else None


def async_event_key(path: events.Expression, event: Any) -> str | None:
    """The business key of an asynchronously invoked event: ``path`` searched over an EventBridge event's ``detail``
    (an event with ``detail-type``), over an SNS event's first record's ``Sns.Message`` (parsed as strict JSON),
    else over the event itself; ``None`` when the runtime would reject the event or find no key there (the rules are
    the runtime's own: ``effectively_once_runtime.events`` and ``consumer.key_text``)."""
    try:
        if isinstance(event, dict) and "detail-type" in event:
            data = events.payload(events.EVENTBRIDGE, event, events.EVENTBRIDGE)
        elif isinstance(event, dict) and "Records" in event and events.classify(event) == events.SNS:
            data = events.payload(events.SNS, event["Records"][0], events.SNS)
        else:
            data = event
        return key_text(path.search(data))
    except (InvalidRecord, UnsupportedEvent):
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
    """Lambda's asynchronous queue for one function, in one execution environment (:func:`poller_main` with
    ``MappingConfig.async_config``). The inbox (``mapping.queue_url``) holds one message per event
    (``runner/async_inbox.py``); its ``ApproximateReceiveCount`` is the attempt and its ``SentTimestamp`` starts the
    event's age. For each message received, one at a time:

    - it is received with a visibility timeout of the function timeout plus the wait that follows this attempt
      (``async_queue.retry_delay_seconds``, scaled by ``AsyncConfig.time_scale``; none after the last attempt),
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
    (the inbox message's ``async_queue.SOURCE_ATTRIBUTE``), ``event_id`` (:func:`async_event_id`), ``duplicate``
    (``true``, the extra delivery only), ``request_id`` (the invocation's Lambda request id; ``null`` without
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
        source = message.get("MessageAttributes", {}).get(SOURCE_ATTRIBUTE, {}).get("StringValue")
        return {
            "message_id": message["MessageId"],
            "receive_count": attempt,
            "async": True,
            "attempt": attempt,
            "source": source,
            "event_id": async_event_id(event),
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
        if chaos.fate == AFTER_COMPLETE:
            chaos.crash(AFTER_COMPLETE)
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


class PollerPool:
    """Runs ``concurrency`` pollers per mapping, replacing any that die, until ``stop()``."""

    def __init__(self, specs: list[tuple[PollerSpec, int]]) -> None:
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._slots: list[tuple[PollerSpec, Any]] = []
        self._specs = specs
        self.restarts = 0
        #: The largest ``ru_maxrss`` any of its pollers reached (``figures``); 0 until one reports.
        self.peak_rss = self._ctx.Value("q", 0)

    def _spawn(self, spec: PollerSpec) -> Any:
        proc = self._ctx.Process(target=poller_main, args=(spec, self._stop, self.peak_rss), daemon=True)
        proc.start()
        return proc

    def start(self) -> None:
        for spec, concurrency in self._specs:
            for _ in range(concurrency):
                self._slots.append((spec, self._spawn(spec)))

    def supervise(self) -> None:
        """Replace dead pollers (call periodically)."""
        if self._stop.is_set():
            return
        for i, (spec, proc) in enumerate(self._slots):
            if not proc.is_alive():
                self.restarts += 1
                self._slots[i] = (spec, self._spawn(spec))

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for _, proc in self._slots:
            proc.join(max(0.1, deadline - time.monotonic()))
        for _, proc in self._slots:
            if proc.is_alive():
                proc.kill()
                proc.join(2)
