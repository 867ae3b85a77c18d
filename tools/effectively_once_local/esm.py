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
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import multiprocessing as mp
import os
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

from effectively_once_runtime import names

from .chaos import AFTER_COMPLETE, DEADLINE, TIMEOUT, ChaosConfig, EventLog, InvocationChaos
from .chaos_input import body_key, compile_key
from .faults import SqlCommitWatch, WriteWatch
from .figures import record_peak

SQS_RECEIVE_MAX = 10  # ReceiveMessage returns at most 10 messages (SQS API reference)
#: Opt-in (benchmarks): a folder; each poller then counts its AWS requests and invocations into it.
COUNT_REQUESTS_ENV = "EFFECTIVELY_ONCE_COUNT_REQUESTS"


@dataclass(frozen=True)
class AsyncConfig:
    """A function's asynchronous invocation, as the synthesized template configures it (moto skips
    ``AWS::Lambda::EventInvokeConfig``): the runner plays Lambda's asynchronous queue from the function's inbox
    (``async_queue.py``).

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
    # tools/effectively_once_local/esm.py: the repository is two folders up.
    for candidate in (Path(__file__).resolve().parents[2] / "lambda_src", packaged_lambda_src()):
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
    after every invocation (``figures.record_peak``)."""
    mapping = spec.mapping
    run_dir = Path(spec.run_dir)
    pid = os.getpid()
    os.environ.update(spec.aws_env)
    os.environ.update(mapping.function_env)
    os.environ.update(spec.env_overrides)
    # The handler's stdout is its CloudWatch log stream.
    function_log = open(run_dir / f"function-{mapping.label}-{pid}.log", "a", buffering=1, encoding="utf-8")
    chaos = InvocationChaos(
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
