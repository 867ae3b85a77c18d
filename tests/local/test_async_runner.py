"""The runner's asynchronous mode (``batch_poller.poller_main`` with ``MappingConfig.async_config``, issue 23 item 2):
Lambda's asynchronous queue played from the function's inbox against the local AWS, with a tiny handler whose every
call is logged to a file: success, retries after the scaled delays, the last attempt's on-failure record, the
maximum event age, a killed attempt retried, and duplicate deliveries."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from effectively_once_local.aws.async_inbox import (
    EVENT_AGE_EXCEEDED,
    EVENTBRIDGE,
    RETRIES_EXHAUSTED,
    SOURCE_ATTRIBUTE,
    inbox_name,
)
from effectively_once_local.aws.server import ACCOUNT, REGION, MotoServer, aws_env
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.runner.mapping_runner import (
    AsyncConfig,
    PollerPool,
    PollerSpec,
    async_event_id,
    async_event_key,
)
from effectively_once_local.traffic.chaos_input import compile_key

from .conftest import PARTITION, mapping_config

#: 1 minute -> 0.6 s, 2 minutes -> 1.2 s: each rounded up to a whole second of SQS visibility.
SCALE = 0.01
FUNCTION_ARN = f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:fn"

#: The function under test: logs each call (time, event, remaining time), then does what the event's
#: ``detail.plan`` says for this call (the last step repeats): ``ok``, ``raise`` or ``hang`` (past the deadline).
HANDLER = """
import json, os, time

def handler(event, context):
    path = os.environ["CALLS_FILE"]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": time.time(), "event": event, "ms": context.get_remaining_time_in_millis()}) + "\\n")
    with open(path, encoding="utf-8") as fh:
        n = sum(1 for _ in fh)
    plan = event["detail"]["plan"]
    step = plan[min(n, len(plan)) - 1]
    if step == "raise":
        raise ValueError(f"call {n} failed")
    if step == "hang":
        time.sleep(30)
    return {"call": n}
"""


@dataclass
class Aws:
    endpoint: str
    sqs: Any


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    """The local AWS (moto server on loopback) and an SQS client for it."""
    with MotoServer() as server:
        env = aws_env(server.endpoint)
        session = boto3.Session(
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=env["AWS_SESSION_TOKEN"],
            region_name=REGION,
        )
        yield Aws(server.endpoint, session.client("sqs", endpoint_url=server.endpoint))


def _event(plan: list[str], **detail: Any) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "payment",
        "source": "test.async",
        "account": ACCOUNT,
        "time": "2026-12-01T00:00:00Z",
        "region": REGION,
        "resources": [],
        "detail": {"plan": plan, **detail},
    }


@dataclass
class Run:
    calls: list[dict[str, Any]]
    lines: list[dict[str, Any]]
    kills: list[dict[str, Any]]
    records: list[dict[str, Any]]
    inbox_left: int
    restarts: int


def _read_lines(folder: Path, pattern: str) -> list[dict[str, Any]]:
    found = []
    for path in sorted(folder.glob(pattern)):
        found += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return sorted(found, key=lambda line: line["ts"])


def _run(
    aws: Aws,
    tmp_path: Path,
    event: dict[str, Any],
    done: Callable[[list[dict[str, Any]]], bool],
    *,
    max_retry_attempts: int = 2,
    max_event_age_seconds: int = 21600,
    time_scale: float = SCALE,
    chaos: ChaosConfig | None = None,
    key_expression: str | None = None,
    aged: float = 0.0,
    timeout: float = 20.0,
) -> Run:
    """Send ``event`` to a fresh inbox, run one poller (replaced when it dies, as Lambda starts a new environment)
    until ``done(delivery lines)`` and the inbox is empty, then read what happened."""
    suffix = uuid.uuid4().hex[:8]
    inbox_url = aws.sqs.create_queue(QueueName=inbox_name(f"fn-{suffix}"))["QueueUrl"]
    on_failure_url = aws.sqs.create_queue(QueueName=f"on-failure-{suffix}")["QueueUrl"]
    code, run_dir = tmp_path / "code", tmp_path / "run"
    code.mkdir()
    run_dir.mkdir()
    (code / "async_fn.py").write_text(HANDLER, encoding="utf-8")
    calls_file = tmp_path / "calls.jsonl"
    calls_file.touch()
    mapping = mapping_config(
        label="async",
        queue_url=inbox_url,
        queue_arn=f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{inbox_name(f'fn-{suffix}')}",
        batch_size=1,
        function_name="fn",
        function_timeout_seconds=1,
        function_env={"CALLS_FILE": str(calls_file)},
        handler="async_fn.handler",
        async_config=AsyncConfig(
            function_arn=FUNCTION_ARN,
            max_retry_attempts=max_retry_attempts,
            max_event_age_seconds=max_event_age_seconds,
            on_failure_queue_url=on_failure_url,
            time_scale=time_scale,
        ),
    )
    spec = PollerSpec(
        mapping=mapping,
        run_dir=str(run_dir),
        handler_root=str(code),
        aws_env=aws_env(aws.endpoint),
        chaos=chaos or ChaosConfig(),
        key_expression=key_expression,
    )
    aws.sqs.send_message(
        QueueUrl=inbox_url,
        MessageBody=json.dumps(event),
        MessageAttributes={SOURCE_ATTRIBUTE: {"DataType": "String", "StringValue": EVENTBRIDGE}},
    )
    time.sleep(aged)
    pool = PollerPool([(spec, 1)])
    pool.start()
    try:
        deadline = time.monotonic() + timeout
        while not (done(_read_lines(run_dir, "deliveries-*.jsonl")) and _inbox_depth(aws, inbox_url) == 0):
            assert time.monotonic() < deadline, f"not done in {timeout}s: {_read_lines(run_dir, 'deliveries-*.jsonl')}"
            pool.supervise()
            time.sleep(0.05)
    finally:
        pool.stop(timeout=0.2)  # all is logged and deleted: no need to wait out the long poll
    records = []
    while batch := aws.sqs.receive_message(QueueUrl=on_failure_url, MaxNumberOfMessages=10).get("Messages", []):
        records += [json.loads(m["Body"]) for m in batch]
    return Run(
        calls=[json.loads(line) for line in calls_file.read_text(encoding="utf-8").splitlines()],
        lines=_read_lines(run_dir, "deliveries-*.jsonl"),
        kills=[k for k in _read_lines(run_dir, "chaos-*.jsonl") if k.get("event") == "kill"],
        records=records,
        inbox_left=_inbox_depth(aws, inbox_url),
        restarts=pool.restarts,
    )


def _inbox_depth(aws: Aws, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


def _outcomes(lines: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(line["attempt"], line["outcome"]) for line in lines]


def _has(outcome: str, n: int = 1) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda lines: sum(line["outcome"] == outcome for line in lines) >= n


def test_an_event_that_succeeds_is_invoked_once_and_deleted(aws: Aws, tmp_path: Path) -> None:
    event = _event(["ok"])

    run = _run(aws, tmp_path, event, _has("ok"))

    assert [call["event"] for call in run.calls] == [event], "the handler gets the EventBridge event as it is"
    assert 0 < run.calls[0]["ms"] <= 1000, "the context counts down from the function timeout"
    [line] = run.lines
    assert line["outcome"] == "ok" and line["attempt"] == 1 and line["receive_count"] == 1
    assert line["async"] is True and line["invoked"] is True and "duplicate" not in line
    assert line["source"] == EVENTBRIDGE and line["event_id"] == event["id"]
    assert run.inbox_left == 0 and run.records == []


def test_an_error_is_retried_after_the_scaled_delay_and_the_second_attempt_succeeds(aws: Aws, tmp_path: Path) -> None:
    run = _run(aws, tmp_path, _event(["raise", "ok"]), _has("ok"))

    assert _outcomes(run.lines) == [(1, "error"), (2, "ok")]
    assert run.lines[0]["error_type"] == "ValueError" and run.lines[0]["error_message"] == "call 1 failed"
    gap = run.calls[1]["t"] - run.calls[0]["t"]
    assert gap >= 60 * SCALE, f"the second attempt came {gap:.2f}s after the first, before Lambda's scaled delay"
    assert run.inbox_left == 0 and run.records == []


def test_an_event_that_always_fails_gets_three_attempts_then_one_retries_exhausted_record(
    aws: Aws, tmp_path: Path
) -> None:
    event = _event(["raise"])

    run = _run(aws, tmp_path, event, _has("on_failure"), timeout=25)

    assert _outcomes(run.lines) == [(1, "error"), (2, "error"), (3, "on_failure")]
    assert len(run.calls) == 3
    gaps = [later["t"] - earlier["t"] for earlier, later in zip(run.calls, run.calls[1:], strict=False)]
    assert gaps[0] >= 60 * SCALE and gaps[1] >= 120 * SCALE, f"retry gaps {gaps} shorter than Lambda's scaled delays"
    [record] = run.records
    assert record["requestContext"]["condition"] == RETRIES_EXHAUSTED
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert record["requestContext"]["functionArn"] == f"{FUNCTION_ARN}:$LATEST"
    assert record["requestPayload"] == event
    assert record["responsePayload"]["errorType"] == "ValueError"
    assert record["responsePayload"]["errorMessage"] == "call 3 failed"
    assert run.inbox_left == 0


def test_maximum_retry_attempts_zero_invokes_once(aws: Aws, tmp_path: Path) -> None:
    event = _event(["raise"])

    run = _run(aws, tmp_path, event, _has("on_failure"), max_retry_attempts=0)

    assert len(run.calls) == 1
    assert _outcomes(run.lines) == [(1, "on_failure")]
    assert run.lines[0]["condition"] == RETRIES_EXHAUSTED and run.lines[0]["destination"] is True
    [record] = run.records
    assert record["requestContext"]["approximateInvokeCount"] == 1
    assert record["requestPayload"] == event


def test_an_event_older_than_the_maximum_age_is_not_invoked_and_gets_an_event_age_exceeded_record(
    aws: Aws, tmp_path: Path
) -> None:
    event = _event(["ok"])

    # 60 s scaled by 0.001: 0.06 s; the event waits 0.1 s before any poller runs.
    run = _run(aws, tmp_path, event, _has("on_failure"), max_event_age_seconds=60, time_scale=0.001, aged=0.1)

    assert run.calls == []
    [line] = run.lines
    assert line["invoked"] is False and line["condition"] == EVENT_AGE_EXCEEDED
    [record] = run.records
    assert record["requestContext"]["condition"] == EVENT_AGE_EXCEEDED
    assert record["requestContext"]["approximateInvokeCount"] == 0
    assert record["requestPayload"] == event and record["responsePayload"] is None
    assert run.inbox_left == 0


def test_an_attempt_killed_at_its_deadline_is_retried_by_a_new_environment(aws: Aws, tmp_path: Path) -> None:
    run = _run(aws, tmp_path, _event(["hang", "ok"], payment_id="p-1"), _has("ok"), key_expression="payment_id")

    assert _outcomes(run.lines) == [(1, "killed"), (2, "ok")]
    assert run.lines[0]["phase"] == "deadline"
    [kill] = run.kills
    assert kill["phase"] == "deadline" and kill["batch_keys"] == ["p-1"], "the kill names the event's business key"
    assert kill["request_id"] == run.lines[0]["request_id"]
    assert run.restarts >= 1, "the killed environment was replaced"
    gap = run.calls[1]["t"] - run.calls[0]["t"]
    assert gap >= 1 + 60 * SCALE, f"the retry came {gap:.2f}s after the killed attempt: before timeout + delay"
    assert run.inbox_left == 0 and run.records == []


def test_a_killed_last_attempt_gets_a_retries_exhausted_record_without_another_invocation(
    aws: Aws, tmp_path: Path
) -> None:
    event = _event(["hang"])

    run = _run(aws, tmp_path, event, _has("on_failure"), max_retry_attempts=0)

    assert len(run.calls) == 1
    assert _outcomes(run.lines) == [(1, "killed"), (2, "on_failure")]
    assert run.lines[1]["invoked"] is False
    [record] = run.records
    assert record["requestContext"]["condition"] == RETRIES_EXHAUSTED
    assert record["requestContext"]["approximateInvokeCount"] == 1
    assert record["requestPayload"] == event


def test_async_duplicate_one_delivers_a_successful_event_twice(aws: Aws, tmp_path: Path) -> None:
    event = _event(["ok"])

    run = _run(aws, tmp_path, event, _has("ok", 2), chaos=ChaosConfig(async_duplicate=1.0))

    assert [call["event"] for call in run.calls] == [event, event]
    assert [(line["outcome"], line.get("duplicate", False)) for line in run.lines] == [("ok", False), ("ok", True)]
    assert run.lines[0]["request_id"] != run.lines[1]["request_id"], "each delivery is its own invocation"
    assert run.inbox_left == 0 and run.records == []


# --- the event's id and business key ----------------------------------------------------------------------------------
def _sns_event(message: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:t:sub",
                "Sns": {
                    "Type": "Notification",
                    "MessageId": "sns-1",
                    "TopicArn": f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:t",
                    "Message": message,
                    "Timestamp": "2026-12-01T00:00:00.000Z",
                },
            }
        ]
    }


@pytest.mark.parametrize(
    ("event", "event_id", "key"),
    [
        (_event(["ok"], payment_id="p-7") | {"id": "eb-1"}, "eb-1", "p-7"),
        (_sns_event(json.dumps({"payment_id": "p-8"})), "sns-1", "p-8"),
        ({"payment_id": "p-9"}, None, "p-9"),
        (_sns_event("not json"), "sns-1", None),
        (_event(["ok"]) | {"id": None}, None, None),
        ({"Records": [{"eventSource": "aws:s3", "s3": {}}], "payment_id": "p-10"}, None, "p-10"),
        ({"eventSource": "aws:kinesis", "payment_id": "p-11"}, None, None),
    ],
    ids=["eventbridge", "sns", "direct", "sns-not-json", "eventbridge-without-key", "s3-whole-event", "rejected"],
)
def test_event_id_and_business_key_per_source(event: dict[str, Any], event_id: str | None, key: str | None) -> None:
    assert async_event_id(event) == event_id
    assert async_event_key(compile_key("payment_id"), event) == key


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_async_duplicate_is_a_fraction(value: float) -> None:
    with pytest.raises(ValueError, match="async_duplicate"):
        ChaosConfig(async_duplicate=value)
