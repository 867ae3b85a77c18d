"""Runtime tests: the payment handler against moto's DynamoDB, in process, with real-shaped SQS events.

moto refuses here what AWS refuses, as in the local AWS's server: the DynamoDB refusals
(``effectively_once_local.aws.moto_dynamodb_refusals``: ``BatchWriteItem``'s 25 requests and keys, a transaction's
``ClientRequestToken``, item sizes as AWS counts them; docs/local-aws-limits.md) are applied once, on import, so a
runtime that sends what AWS refuses fails here as it would on AWS."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.aws.moto_dynamodb_refusals import apply_dynamodb_refusals
from payments import gateway as gateway_module
from payments import handler as handler_module

from ..sqs_answers import refuse_as_aws

REGION = "us-east-1"
PARTITION = "aws"  # REGION's partition: ARNs are built from it, never from a literal "arn:aws:"
ACCOUNT = "123456789012"
IDEMPOTENCY_TABLE = "idempotency"
LEDGER_TABLE = "ledger"
STANDARD_ARN = f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:payments"
FIFO_ARN = f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:payments.fifo"

apply_dynamodb_refusals()


class FakeLambdaContext:
    """The parts of the Lambda context Powertools reads; remaining time follows a fixed deadline."""

    def __init__(self, remaining_ms: int = 30_000) -> None:
        self.function_name = "payments"
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:payments"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = "/aws/lambda/payments"
        self.log_stream_name = "local"
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


@pytest.fixture(autouse=True)
def aws_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every runtime test's in-process moto refuses what AWS refuses, as the local AWS's server does
    (``moto_refusals.apply_refusals``, ``moto_sns_lambda_refusals.apply_sns_lambda_refusals``; the rules:
    docs/local-aws-limits.md): a request the runtime sends that SQS, SNS or Lambda would refuse fails here too.
    moto's classes are restored after the test."""
    refuse_as_aws(monkeypatch)


def sqs_record(
    body: str | dict[str, Any],
    *,
    message_id: str | None = None,
    receive_count: int = 1,
    fifo_group: str | None = None,
    dedup_id: str | None = None,
    sequence: int = 1,
) -> dict[str, Any]:
    """A record exactly as the SQS event source mapping hands it to Lambda."""
    text = body if isinstance(body, str) else json.dumps(body)
    attributes: dict[str, Any] = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": "1764403200000",
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": "1764403200100",
    }
    if fifo_group is not None:
        attributes.update(
            {
                "MessageGroupId": fifo_group,
                "MessageDeduplicationId": dedup_id or hashlib.sha256(text.encode()).hexdigest(),
                "SequenceNumber": str(18_800_000_000_000_000_000 + sequence),
            }
        )
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": f"AQEB{uuid.uuid4().hex}",
        "body": text,
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(text.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": FIFO_ARN if fifo_group is not None else STANDARD_ARN,
        "awsRegion": REGION,
    }


def redeliver(record: dict[str, Any]) -> dict[str, Any]:
    """The same message received again: new receipt handle, receive count + 1."""
    again = json.loads(json.dumps(record))
    again["receiptHandle"] = f"AQEB{uuid.uuid4().hex}"
    count = int(again["attributes"]["ApproximateReceiveCount"]) + 1
    again["attributes"]["ApproximateReceiveCount"] = str(count)
    return again


def lose_responses(
    client: Any,
    operation: str,
    matching: bytes = b"",
    before_retry: Callable[[], None] | None = None,
) -> list[int]:
    """Lose the first successful answer to ``operation`` (its API name, ``"PutItem"``) on ``client`` (a
    JSON-protocol client: DynamoDB) whose request body holds ``matching``, on its way back, as a read timeout after
    the service performed the request: botocore's retry handler is told to send the request again (``needs-retry``,
    registered first), so the retry meets what the lost attempt wrote, as on AWS when a response is lost ("Error
    retries and exponential backoff in AWS", AWS SDKs and Tools Reference Guide: the SDKs retry timeouts). The answer
    the caller gets is the retry's. ``before_retry`` runs between the lost answer and the retry (another writer's
    turn; give it a client of its own).

    :returns: a list the hook appends the lost attempt's number to (1 for the first attempt)."""
    lost: list[int] = []
    service = client.meta.service_model.service_id.hyphenize()

    def send_again(response: Any, attempts: int, caught_exception: Any, request_dict: Any, **_: Any) -> int | None:
        answered = caught_exception is None and response is not None and response[0].status_code < 300
        body = request_dict.get("body") or b""
        if not lost and answered and matching in (body.encode() if isinstance(body, str) else body):
            lost.append(attempts)
            if before_retry is not None:
                before_retry()
            return 0  # retry now
        return None

    client.meta.events.register_first(f"needs-retry.{service}.{operation}", send_again)
    return lost


def payment(pid: str, amount: int = 1000, currency: str = "EUR", account: str = "acct-1") -> dict[str, Any]:
    return {"payment_id": pid, "account_id": account, "amount": amount, "currency": currency}


@dataclass
class Env:
    dynamodb: Any
    gateway: gateway_module.LedgerGateway
    wrappers: list[Any] = field(default_factory=list)

    def invoke(self, records: list[dict[str, Any]], context: FakeLambdaContext | None = None) -> dict[str, Any]:
        return handler_module.lambda_handler({"Records": records}, context or FakeLambdaContext())

    def invoke_direct(self, event: dict[str, Any], context: FakeLambdaContext | None = None) -> dict[str, Any]:
        return handler_module.lambda_handler(event, context or FakeLambdaContext())

    def ledger(self) -> list[dict[str, Any]]:
        return self.dynamodb.scan(TableName=LEDGER_TABLE)["Items"]

    def charges_for(self, payment_id: str) -> int:
        return sum(1 for item in self.ledger() if item["payment_id"]["S"] == payment_id)

    def idempotency_items(self) -> list[dict[str, Any]]:
        """The Powertools records in the idempotency table (not the effects' result markers)."""
        return [item for item in self.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] if is_record(item)]


def is_record(item: dict[str, Any]) -> bool:
    """Whether an idempotency-table item is a Powertools record, not an un-keyed effect's marker or a result marker
    of before issue 55, item 8 (``<prefix>#effect-result#...``: effect results now travel in the record)."""
    return "#effect-result#" not in item["id"]["S"] and "#effect-marker#" not in item["id"]["S"]


def failures(response: dict[str, Any]) -> set[str]:
    return {f["itemIdentifier"] for f in response["batchItemFailures"]}


#: The environment the handler runs with against moto in process (the benchmarks reuse it).
HANDLER_ENV = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "IDEMPOTENCY_TABLE_NAME": IDEMPOTENCY_TABLE,
    "LEDGER_TABLE_NAME": LEDGER_TABLE,
    "IDEMPOTENCY_EXPIRY_SECONDS": "345600",
    "POWERTOOLS_METRICS_NAMESPACE": "EffectivelyOnceTest",
}


def create_table(client: Any, name: str, key: str) -> None:
    """An on-demand table with a string partition key ``key`` (the idempotency table: ``id``)."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    # Set only by the tests that want permanent failures sent to a DLQ (use_dead_letter_queue): the others check
    # the behaviour without it (dead_letter_on_first_sight=False), a batch item failure.
    monkeypatch.delenv("DEAD_LETTER_QUEUE_URL", raising=False)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        create_table(ddb, IDEMPOTENCY_TABLE, "id")
        create_table(ddb, LEDGER_TABLE, "charge_id")
        created: list[gateway_module.LedgerGateway] = []

        def factory(settings: Any) -> gateway_module.PaymentGateway:
            gw = gateway_module.LedgerGateway(settings.ledger_table_name, client=ddb, key_prefix=settings.key_prefix)
            created.append(gw)
            return gw

        gateway_module.set_gateway_factory(factory)
        handler_module.reset()
        gateway = handler_module.get_gateway()  # the cold start builds it with the factory
        env = Env(dynamodb=ddb, gateway=created[0])
        assert gateway is env.gateway
        try:
            yield env
        finally:
            gateway_module.set_gateway_factory(None)
            handler_module.reset()


def use_dead_letter_queue(
    monkeypatch: pytest.MonkeyPatch, *, fifo: bool, consumer: Any = None, url: str | None = None
) -> tuple[Any, str]:
    """Create a DLQ in moto (inside ``mock_aws``) and point ``DEAD_LETTER_QUEUE_URL`` at it (or at ``url``), as the
    consumer does; ``consumer`` (default: the payment handler's) reads it at its next cold start. Returns the SQS
    client and the created queue's URL."""
    sqs = boto3.client("sqs", region_name=REGION)
    name, attributes = ("dlq.fifo", {"FifoQueue": "true"}) if fifo else ("dlq", {})
    created = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    monkeypatch.setenv("DEAD_LETTER_QUEUE_URL", url or created)
    (consumer or handler_module.consumer).reset()
    return sqs, created


def runtime_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler's environment (``HANDLER_ENV``) with no local endpoint, no DLQ and no source queues: each test
    sets what it needs (``DEAD_LETTER_QUEUE_URL``, ``SOURCE_QUEUES``)."""
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "DEAD_LETTER_QUEUE_URL", "SOURCE_QUEUES"):
        monkeypatch.delenv(name, raising=False)


def receive_records(sqs: Any, url: str, arn: str, count: int = 10) -> list[dict[str, Any]]:
    """Records as the event source mapping hands them over, from a real receive of up to ``count`` messages of the
    queue at ``url`` (its ARN ``arn``): real receipt handles and receive counts."""
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count, MessageSystemAttributeNames=["All"])
    return [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m["Attributes"],
            "messageAttributes": {},
            "md5OfBody": m["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": arn,
            "awsRegion": arn.split(":")[3],
        }
        for m in got.get("Messages", [])
    ]


def queue_bodies(sqs: Any, url: str) -> list[str]:
    """The bodies of every message in a queue (received once with a long visibility timeout, left there)."""
    bodies: list[str] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300).get("Messages"):
        bodies.extend(m["Body"] for m in batch)
    return bodies


# --- log lines and the orders domain, shared by several test modules ----------------------------------------
class _CurrentStdout:
    """Writes to whatever ``sys.stdout`` is at write time (capsys swaps it in only for the test call)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def log_lines(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    # The Logger's handler holds the stdout of import time; point it at the one capsys captures.
    monkeypatch.setattr(handler_module.logger.registered_handler, "stream", _CurrentStdout())

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]

    return read


@pytest.fixture
def orders(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    from effectively_once_runtime import names

    from .orders_domain import Orders, build_consumer

    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv(names.ENV_KEY_PREFIX, raising=False)
    monkeypatch.delenv(names.ENV_DEAD_LETTER_QUEUE_URL, raising=False)  # test_dead_letter.py sets it
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        create_table(ddb, IDEMPOTENCY_TABLE, "id")
        confirmed: list[str | None] = []
        consumer = build_consumer(confirmed)
        # The Logger's handler holds the stdout of import time; point it at the one capsys captures.
        monkeypatch.setattr(consumer.logger.registered_handler, "stream", _CurrentStdout())
        yield Orders(consumer, ddb, capsys, confirmed)


# --- HTTP: a fake clock and a recording server, shared by the HTTP adapter's test modules -------------------------


class FakeClock:
    """A monotonic clock that only moves when slept on; every wait is recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class Recorder(BaseHTTPRequestHandler):
    """Records each request's raw headers and body and answers ``server.answer`` (status, headers, body)."""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server: Any = self.server
        server.requests.append((self.headers, body))
        status, headers, payload = server.answer
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def serve(server: Any) -> Iterator[Any]:
    """Serve a ``Recorder`` server in a thread (``requests`` recorded, ``answer`` a JSON 200) until closed."""
    server.requests = []
    server.answer = (200, [("Content-Type", "application/json")], b'{"ok":true}')
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def recorder() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield from serve(server)


@pytest.fixture
def dead_letter_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    """moto with the idempotency table and a standard DLQ that ``DEAD_LETTER_QUEUE_URL`` names; yields the SQS
    client and the DLQ's URL (a ``Consumer`` built inside reads it at its cold start)."""
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), IDEMPOTENCY_TABLE, "id")
        sqs = boto3.client("sqs", region_name=REGION)
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        monkeypatch.setenv("DEAD_LETTER_QUEUE_URL", dlq)
        yield sqs, dlq
