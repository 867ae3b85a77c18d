"""One poller process (:func:`poller_main`): its execution environment set up, then Lambda's SQS event source mapping
played batch by batch, or, with ``MappingConfig.async_config``, Lambda's asynchronous queue
(:class:`.async_poller.AsyncPoller`).

What the poller sees is written as JSON Lines under the run folder: ``deliveries-*.jsonl`` (what SQS handed out,
the service's side), ``provider-*.jsonl`` (the simulated provider's call log), ``chaos-*.jsonl`` (injected kills)
and ``function-*.log`` (the handler's stdout: its structured logs and EMF metrics, the CloudWatch Logs stand-in).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectively_once_runtime import events

from ..aws.mapping_config import SQS_RECEIVE_MAX, MappingConfig
from ..base.run_figures import record_peak
from ..chaos.fault_model import DEADLINE, TIMEOUT, EventLog, InvocationChaos
from ..chaos.faults import WriteWatch
from ..chaos.forced_strikes import ForcedStrikes
from ..chaos.sdk_faults import SdkFaults
from ..chaos.sql_watch import SqlCommitWatch
from ..traffic.chaos_input import body_key, compile_key
from .async_poller import AsyncChaos, AsyncPoller
from .execution_environment import EffectTap, LocalLambdaContext, load_handler
from .poller_spec import COUNT_REQUESTS_ENV, PollerSpec
from .request_counter import RequestCounter


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


@dataclass(frozen=True)
class _Environment:
    """One poller process's execution environment, as :func:`_open_environment` set it up."""

    chaos: InvocationChaos
    handler: Callable[..., Any]
    sqs: Any
    deliveries: EventLog
    counter: RequestCounter | None
    key_path: events.Expression | None


def poller_main(spec: PollerSpec, stop: Any, peak_rss: Any = None) -> None:
    """Body of one poller process: one execution environment polling one queue until ``stop`` is set. ``peak_rss``
    (a shared ``multiprocessing`` value): raised to this process's ``ru_maxrss`` after the handler is loaded and
    after every invocation (``run_figures.record_peak``).

    With ``spec.mapping.async_config`` set, the queue is the function's inbox and the poller plays Lambda's
    asynchronous queue (:class:`AsyncPoller`): one event per invocation, the event being the message body as JSON,
    with the same chaos, write watch, effect tap and deadline watchdog as an SQS batch."""
    mapping = spec.mapping
    env = _open_environment(spec)
    if peak_rss is not None:
        record_peak(peak_rss)
    if mapping.async_config is not None:
        assert isinstance(env.chaos, AsyncChaos)
        AsyncPoller(
            spec,
            mapping.async_config,
            env.handler,
            env.chaos,
            env.sqs,
            env.deliveries,
            env.counter,
            env.key_path,
            peak_rss,
        ).run(stop)
        return
    _poll_batches(mapping, env, stop, peak_rss)


def _open_environment(spec: PollerSpec) -> _Environment:
    """The poller process's execution environment, in this order: the function's environment variables, its log
    (the handler's stdout and stderr), the chaos and, without a seam, its write watches, the effect tap, the request
    counter (opt-in: :data:`COUNT_REQUESTS_ENV`), the run's logs, the handler and the SQS client."""
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
        forcing=ForcedStrikes.load(run_dir),
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
    # The answers AWS gives under load, to the handler's calls only (sdk_faults.py); after the request counter,
    # whose hooks then still count a throttled call, and before the handler's import and its clients. With a seam
    # too (the demo): its chaos asks for per-entry failures alone (the demo has no flag for the others).
    SdkFaults(spec.chaos, chaos.on_sdk_fault, running=lambda: chaos.running, on_call=chaos.on_batch_call).install()
    import boto3  # after the environment is set

    deliveries = EventLog(run_dir / f"deliveries-{mapping.label}-{pid}.jsonl")
    provider_log = EventLog(run_dir / f"provider-{mapping.label}-{pid}.jsonl")
    handler = load_handler(spec, chaos, provider_log)
    sqs = boto3.client("sqs")
    return _Environment(chaos, handler, sqs, deliveries, counter, key_path)


def _poll_batches(mapping: MappingConfig, env: _Environment, stop: Any, peak_rss: Any) -> None:
    """The event source mapping's loop until ``stop`` is set: receive up to the batch size, invoke the handler with
    the batch, delete the messages that did not fail."""
    while not stop.is_set():
        messages = receive_batch(env.sqs, mapping, stop)
        if not messages:
            if env.counter is not None:
                env.counter.add("sqs.ReceiveMessage.empty")
            continue
        to_retry = _invoke_batch(mapping, env, messages)
        done = [m for m in messages if m["MessageId"] not in to_retry]
        for start in range(0, len(done), SQS_RECEIVE_MAX):
            chunk = done[start : start + SQS_RECEIVE_MAX]
            env.sqs.delete_message_batch(
                QueueUrl=mapping.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
        if peak_rss is not None:
            record_peak(peak_rss)


def receive_batch(
    sqs: Any, mapping: MappingConfig, stop: Any, clock: Callable[[], float] = time.monotonic
) -> list[Any]:
    """One batch as the event source mapping gathers it: a receive of up to the batch size (at most
    ``SQS_RECEIVE_MAX`` a receive, long polling for 1 s); with a batching window (the mapping's
    ``MaximumBatchingWindowInSeconds``), more receives until the batch is full or the window, counted from the
    first message, has passed (AWS Lambda Developer Guide, "Using Lambda with Amazon SQS": batching behavior). So
    messages sent back to back share a batch, as they do in Lambda with a window. ``stop`` (an event) ends the wait.

    :returns: the messages received, ``[]`` when none came within the first receive's wait."""

    def receive(count: int, wait: int) -> list[Any]:
        found: list[Any] = sqs.receive_message(
            QueueUrl=mapping.queue_url,
            MaxNumberOfMessages=min(count, SQS_RECEIVE_MAX),
            WaitTimeSeconds=wait,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        return found

    messages = receive(mapping.batch_size, 1)
    if not messages or mapping.batching_window_seconds <= 0:
        return messages
    until = clock() + mapping.batching_window_seconds
    while len(messages) < mapping.batch_size and not stop.is_set() and (left := until - clock()) > 0:
        more = receive(mapping.batch_size - len(messages), 1 if left >= 1 else 0)
        if not more and left < 1:
            time.sleep(min(left, 0.1))  # a short poll found nothing: no busy loop to the window's end
        messages += more
    return messages


def _invoke_batch(mapping: MappingConfig, env: _Environment, messages: list[dict[str, Any]]) -> set[str]:
    """One invocation of the handler with a received batch, under the chaos and the deadline watchdog: the ids of
    the messages to return to the queue (:func:`failed_ids`; the whole batch when the handler raised)."""
    counter, chaos, key_path = env.counter, env.chaos, env.key_path
    if counter is not None:
        counter.add("lambda.Invoke")
    for m in messages:
        env.deliveries.write(message_id=m["MessageId"], receive_count=int(m["Attributes"]["ApproximateReceiveCount"]))
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
        response = env.handler(event, context)
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
    chaos.on_return()
    return to_retry
