"""The local runner's own rules (no AWS needed): input checking, routing, event shape, Lambda's partial-batch
semantics, the verdict, and that the local AWS is on loopback and gone after use."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from effectively_once.local.chaos import ChaosConfig
from effectively_once.local.esm import MappingConfig, failed_ids, to_lambda_record
from effectively_once.local.producer import FIFO, STANDARD, PaymentsFileError, generate_sample, load_payments, plan_messages, route
from effectively_once.local.report import verdict
from effectively_once.local.server import MotoServer

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_payments_file_with_invalid_line_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"payment_id": "a", "account_id": "x", "amount": 1, "currency": "EUR"}), "{oops")

    with pytest.raises(PaymentsFileError, match=r"p\.jsonl:2: not valid JSON"):
        load_payments(path)


def test_payments_file_line_without_account_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"payment_id": "a", "amount": 1, "currency": "EUR"}))

    with pytest.raises(PaymentsFileError, match=r":1: account_id"):
        load_payments(path)


def test_cli_rejects_bad_file_before_starting_anything(tmp_path: Path) -> None:
    path = write(tmp_path, "[1, 2]")

    proc = subprocess.run(
        [sys.executable, "-m", "effectively_once.local", "demo", "--payments", str(path), "--run-dir", str(tmp_path / "run")],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )

    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {path}:1: a line must be a JSON object; nothing was sent"]
    assert not (tmp_path / "run" / "moto.log").exists(), "no local AWS may be started for a bad file"


def test_raw_body_lines_are_sent_verbatim(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"raw_body": "{broken", "account_id": "acct-1"}))

    [line] = load_payments(path)

    assert line.body == "{broken" and line.payment_id is None


def test_routing_is_stable_and_uses_both_pipelines() -> None:
    accounts = [f"acct-{i:03d}" for i in range(40)]

    routes = [route(a) for a in accounts]

    assert routes == [route(a) for a in accounts]
    assert {STANDARD, FIFO} == set(routes)


def test_plan_sends_each_line_once_plus_the_chosen_duplicates(tmp_path: Path) -> None:
    rows = generate_sample(count=300, accounts=10, seed=1)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = load_payments(path)

    plan = plan_messages(lines, ChaosConfig(resend=0.2, concurrent_duplicates=0.2, seed=3))

    originals = [m for msgs in plan.values() for m in msgs if m.kind == "original"]
    assert len(originals) == len(lines) == 306
    assert all(m.kind != "concurrent_duplicate" for m in plan[FIFO])
    assert sum(m.kind == "resend" for msgs in plan.values() for m in msgs) > 30


def test_lambda_record_has_the_real_shape() -> None:
    mapping = MappingConfig(
        label="fifo", queue_url="http://localhost/q", queue_arn="arn:aws:sqs:us-east-1:123456789012:q.fifo",
        batch_size=10, batching_window_seconds=0, visibility_timeout_seconds=12, max_receive_count=5,
        function_name="f", function_timeout_seconds=2, function_memory_mb=256, function_env={},
    )
    message = {
        "MessageId": "m1", "ReceiptHandle": "rh", "Body": "{}", "MD5OfBody": "99914b932bd37a50b983c5e7c90ae93b",
        "Attributes": {"ApproximateReceiveCount": "2", "MessageGroupId": "g", "MessageDeduplicationId": "d", "SequenceNumber": "1"},
        "MessageAttributes": {"trace": {"StringValue": "t", "DataType": "String"}},
    }

    record = to_lambda_record(message, mapping)

    assert set(record) == {
        "messageId", "receiptHandle", "body", "attributes", "messageAttributes", "md5OfBody",
        "eventSource", "eventSourceARN", "awsRegion",
    }
    assert record["eventSource"] == "aws:sqs" and record["awsRegion"] == "us-east-1"
    assert record["attributes"]["MessageGroupId"] == "g"
    assert record["messageAttributes"]["trace"]["stringValue"] == "t"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"batchItemFailures": []}, set()),
        ({"batchItemFailures": [{"itemIdentifier": "b"}]}, {"b"}),
        ({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, {"a", "b", "c"}),
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, {"a", "b", "c"}),
        ("not a dict", {"a", "b", "c"}),
        (None, set()),
    ],
)
def test_partial_batch_response_rules(response: object, expected: set[str]) -> None:
    assert failed_ids(response, {"a", "b", "c"}) == expected


def test_verdict_fails_on_loss_double_charge_or_unexplained_replays() -> None:
    ok = {"total": {"lost": 0, "double_charged": 0, "provider_replays": 2, "kills_between_charge_and_completion": 2}}
    assert verdict(ok, unsafe=False)[0] == 0
    for key, value in (("lost", 1), ("double_charged", 1), ("provider_replays", 3)):
        bad = {"total": {**ok["total"], key: value}}
        assert verdict(bad, unsafe=False)[0] == 1
    assert verdict({"total": {"double_charged": 4}}, unsafe=True)[0] == 0
    assert verdict({"total": {"double_charged": 0}}, unsafe=True)[0] == 1
    assert verdict({"total": {"double_charged": 4, "lost": 1}}, unsafe=True)[0] == 1, "the control may lose nothing"
    assert verdict({"total": {**ok["total"], "unexplained_replays": 1}}, unsafe=False)[0] == 1
    assert verdict({"total": {**ok["total"], "dlq_unread": 2}}, unsafe=False)[0] == 1


def test_local_aws_listens_on_loopback_only_and_stops() -> None:
    with MotoServer() as aws:
        assert aws.endpoint == f"http://localhost:{aws.port}"
        proc = aws._proc
        assert proc is not None and "127.0.0.1" in proc.args
        with socket.create_connection(("127.0.0.1", aws.port), timeout=2):
            pass
    assert proc.poll() is not None, "the server process must be gone after the context exits"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", aws.port), timeout=1)


def test_unreachable_endpoint_is_a_one_line_error(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_ENDPOINT_URL": "http://localhost:9",  # discard port on loopback: nothing listens
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }

    proc = subprocess.run(
        [sys.executable, "-m", "effectively_once.local", "report", "--wait", "1", "--payments", str(REPO / "samples" / "payments.jsonl")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False, env=env,
    )

    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Could not connect to the endpoint URL"), proc.stderr


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_dlq_is_read_whole_and_left_holding_the_same_messages(fifo: bool) -> None:
    # A FIFO queue locks a message group while any of its messages is in flight: a reader that only receives
    # sees at most 10 messages of one group, and the report would call the rest lost.
    import boto3
    from moto import mock_aws

    from effectively_once.local.report import dlq_depth, read_dlq

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        attributes = {"FifoQueue": "true"} if fifo else {}
        url = sqs.create_queue(QueueName="dlq.fifo" if fifo else "dlq", Attributes=attributes)["QueueUrl"]
        bodies = [f"m{i:02d}" for i in range(15)]
        for i, body in enumerate(bodies):
            extra = {"MessageGroupId": "acct-1", "MessageDeduplicationId": f"d{i}"} if fifo else {}
            sqs.send_message(QueueUrl=url, MessageBody=body, **extra)

        first = read_dlq(sqs, url)

        assert sorted(first) == bodies
        assert dlq_depth(sqs, url) == 15
        if fifo:
            assert first == bodies, "FIFO order is kept"
            assert read_dlq(sqs, url) == bodies, "the messages are back, in order"
        else:
            assert sorted(read_dlq(sqs, url)) == bodies, "a second report reads them again at once"


class _Counts:
    """A fake SQS client whose queues hold the given message counts, one per GetQueueAttributes round."""

    def __init__(self, rounds: list[int]) -> None:
        self.rounds = rounds
        self.calls = 0

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict:
        value = self.rounds[min(self.calls, len(self.rounds) - 1)]
        self.calls += 1
        return {"Attributes": {"ApproximateNumberOfMessages": str(value)}}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_report_waits_until_the_queues_stay_empty_for_the_settle_time() -> None:
    # SQS's approximate counts may read 0 before they are consistent: one zero must not end the wait.
    from effectively_once.local.remote import wait_for_drain

    sqs, clock = _Counts([3, 0, 2, 0, 0, 0, 0, 0]), _Clock()

    wait_for_drain(sqs, ["q"], wait_seconds=600, settle_seconds=10, sleep=clock.sleep, clock=lambda: clock.now)

    zero_from = 3 * 5.0  # the counts stay at 0 from the fourth reading on, polled every 5 s
    assert clock.now >= zero_from + 10
    assert sqs.calls >= 6


def test_report_gives_up_when_the_queues_never_drain() -> None:
    from effectively_once.local.remote import wait_for_drain
    from effectively_once.local.server import LocalAwsError

    clock = _Clock()

    with pytest.raises(LocalAwsError, match="not drained after 30s"):
        wait_for_drain(_Counts([1]), ["q"], wait_seconds=30, settle_seconds=10, sleep=clock.sleep, clock=lambda: clock.now)


def test_report_default_wait_covers_a_poison_message_on_the_sandbox_defaults() -> None:
    # PaymentsSandbox's defaults: 30 s function timeout, so a 180 s visibility timeout, and maxReceiveCount 5: a
    # poison message is received 5 times, 180 s apart, before SQS moves it to the DLQ.
    from effectively_once.local.deploy import Pipeline
    from effectively_once.local.remote import SETTLE_SECONDS, drain_wait_seconds

    def pipeline(label: str, visibility: int, receives: int) -> Pipeline:
        mapping = MappingConfig(
            label=label, queue_url="u", queue_arn="arn:aws:sqs:us-east-1:123456789012:q", batch_size=10,
            batching_window_seconds=0, visibility_timeout_seconds=visibility, max_receive_count=receives,
            function_name="f", function_timeout_seconds=30, function_memory_mb=256, function_env={},
        )
        return Pipeline(mapping=mapping, mapping_uuid="x", dlq_url="d", idempotency_table="i", ledger_table="l")

    wait = drain_wait_seconds({"standard": pipeline("standard", 180, 5), "fifo": pipeline("fifo", 60, 3)})

    assert wait >= 5 * 180 + SETTLE_SECONDS
