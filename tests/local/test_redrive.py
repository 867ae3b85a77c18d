"""The ``redrive`` command: SQS's message move task against AWS (botocore's Stubber), the local move against moto
(in process): bodies, attributes, FIFO group ids and order kept, a FIFO deduplication id per DLQ message, nothing
lost."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from effectively_once_local.aws.discovery import DeadLetterQueue, DeployedMapping
from effectively_once_local.cli import main as cli
from effectively_once_local.redrive import dlq_redrive as redrive_module
from effectively_once_local.redrive.dlq_redrive import (
    Target,
    is_local,
    local_move,
    move_task,
    redrive,
    redrive_dedup_id,
)
from effectively_once_local.runner.mapping_runner import MappingConfig

from ..sqs_answers import refuse_as_aws

REGION = "us-east-1"
DLQ_ARN = "arn:aws:sqs:us-east-1:123456789012:orders-dlq"
SOURCE_ARN = "arn:aws:sqs:us-east-1:123456789012:orders"
TARGET = Target(
    "standard",
    "https://sqs.us-east-1.amazonaws.com/123456789012/orders-dlq",
    DLQ_ARN,
    "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
    SOURCE_ARN,
)


# --- against AWS: StartMessageMoveTask, polled with ListMessageMoveTasks ------------------------------
def _aws_client() -> Any:
    return boto3.client("sqs", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


def _task(status: str, moved: int, to_move: int | None = 3, **extra: Any) -> dict[str, Any]:
    entry = {
        "Status": status,
        "SourceArn": DLQ_ARN,
        "DestinationArn": SOURCE_ARN,
        "ApproximateNumberOfMessagesMoved": moved,
    }
    if to_move is not None:
        entry["ApproximateNumberOfMessagesToMove"] = to_move
    return {**entry, **extra}


def _stubbed(start: dict[str, Any], *tasks: dict[str, Any]) -> tuple[Any, Stubber]:
    client = _aws_client()
    stubber = Stubber(client)
    stubber.add_response("start_message_move_task", {"TaskHandle": "handle-1"}, start)
    for task in tasks:
        stubber.add_response("list_message_move_tasks", {"Results": [task]}, {"SourceArn": DLQ_ARN, "MaxResults": 1})
    stubber.activate()
    return client, stubber


def test_move_task_names_the_source_queue_explicitly_and_waits_for_completion() -> None:
    # Copies the runtime sent to the DLQ have no recorded source: DestinationArn is always given.
    client, stubber = _stubbed(
        {"SourceArn": DLQ_ARN, "DestinationArn": SOURCE_ARN},
        _task("RUNNING", 1, TaskHandle="handle-1"),
        _task("COMPLETED", 3),
    )
    sleeps: list[float] = []

    outcome = move_task(client, TARGET, sleep=sleeps.append)

    stubber.assert_no_pending_responses()
    assert (outcome.status, outcome.moved, outcome.left, outcome.ok) == ("COMPLETED", 3, 0, True)
    assert sleeps == [redrive_module.POLL_SECONDS]
    assert outcome.line() == "standard: completed (StartMessageMoveTask), moved 3"


def test_move_task_passes_the_rate_limit_through() -> None:
    client, stubber = _stubbed(
        {"SourceArn": DLQ_ARN, "DestinationArn": SOURCE_ARN, "MaxNumberOfMessagesPerSecond": 7}, _task("COMPLETED", 3)
    )

    assert move_task(client, TARGET, max_per_second=7, sleep=lambda s: None).moved == 3
    stubber.assert_no_pending_responses()


def test_failed_move_task_reports_moved_left_and_reason() -> None:
    client, _ = _stubbed(
        {"SourceArn": DLQ_ARN, "DestinationArn": SOURCE_ARN},
        _task("FAILED", 1, 3, FailureReason="AWS.SimpleQueueService.NonExistentQueue"),
    )

    outcome = move_task(client, TARGET, sleep=lambda s: None)

    assert not outcome.ok
    assert (outcome.moved, outcome.left) == (1, 2)
    assert (
        outcome.line()
        == "standard: failed (StartMessageMoveTask), moved 1, not moved 2: AWS.SimpleQueueService.NonExistentQueue"
    )


def test_a_refused_move_task_is_an_error_not_a_fallback() -> None:
    client = _aws_client()
    stubber = Stubber(client)
    stubber.add_client_error(
        "start_message_move_task", "AWS.SimpleQueueService.UnsupportedOperation", "one task per queue"
    )
    stubber.activate()

    with pytest.raises(ClientError, match="one task per queue"):
        move_task(client, TARGET, sleep=lambda s: None)


def test_the_path_is_chosen_by_endpoint() -> None:
    assert not is_local(_aws_client())
    for endpoint in ("http://localhost:4566", "http://127.0.0.1:5000", "http://[::1]:5000"):
        assert is_local(
            boto3.client(
                "sqs", region_name=REGION, endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x"
            )
        )


# --- locally: receive, send, delete ---------------------------------------------------------------------
def _queues(sqs: Any, fifo: bool) -> Target:
    suffix = ".fifo" if fifo else ""
    attributes = {"FifoQueue": "true"} if fifo else {}
    dlq = sqs.create_queue(QueueName=f"orders-dlq{suffix}", Attributes=attributes)["QueueUrl"]
    source = sqs.create_queue(QueueName=f"orders{suffix}", Attributes=attributes)["QueueUrl"]
    arn = lambda url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]  # noqa: E731
    return Target("fifo" if fifo else "standard", dlq, arn(dlq), source, arn(source))


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
    ).get("Messages", []):
        for message in batch:
            out.append(message)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return out


def _attrs(i: int) -> dict[str, Any]:
    return {
        "reason": {"DataType": "String", "StringValue": f"not JSON {i}"},
        "blob": {"DataType": "Binary", "BinaryValue": bytes([i])},
    }


def test_local_move_keeps_bodies_and_attributes_of_a_standard_queue() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        target = _queues(sqs, fifo=False)
        for i in range(13):
            sqs.send_message(QueueUrl=target.dlq_url, MessageBody=f"m{i:02d}", MessageAttributes=_attrs(i))

        outcome = local_move(sqs, target)

        assert (outcome.status, outcome.moved) == ("COMPLETED", 13)
        moved = _drain(sqs, target.source_url)
        assert sorted(m["Body"] for m in moved) == [f"m{i:02d}" for i in range(13)]
        for message in moved:
            i = int(message["Body"][1:])
            assert message["MessageAttributes"]["reason"]["StringValue"] == f"not JSON {i}"
            assert message["MessageAttributes"]["blob"]["BinaryValue"] == bytes([i])
        assert _drain(sqs, target.dlq_url) == []


def test_local_move_of_a_fair_queue_keeps_the_group_id_and_sends_no_deduplication_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 55, item 5: a standard (fair) queue's message carries a MessageGroupId; the move sent it back with a
    MessageDeduplicationId, which SQS refuses on a standard queue (and moto here, with the local AWS's refusals):
    nothing moved."""
    refuse_as_aws(monkeypatch)
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        target = _queues(sqs, fifo=False)
        sqs.send_message(QueueUrl=target.dlq_url, MessageBody="p-1", MessageGroupId="tenant-7")

        outcome = local_move(sqs, target)

        assert outcome.moved == 1
        [moved] = _drain(sqs, target.source_url)
        assert moved["Attributes"]["MessageGroupId"] == "tenant-7"
        assert "MessageDeduplicationId" not in moved["Attributes"]


def test_local_move_keeps_fifo_order_and_group_ids_with_a_deduplication_id_per_dlq_message() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        target = _queues(sqs, fifo=True)
        sent = []
        in_dlq: dict[str, str] = {}
        for i in range(12):  # two groups interleaved, more than one receive batch
            group = f"acct-{i % 2}"
            dedup = f"pay-{i:02d}"
            answer = sqs.send_message(
                QueueUrl=target.dlq_url,
                MessageBody=f"{group}/{i:02d}",
                MessageGroupId=group,
                MessageDeduplicationId=dedup,
                MessageAttributes=_attrs(i),
            )
            sent.append((group, f"{group}/{i:02d}"))
            in_dlq[f"{group}/{i:02d}"] = answer["MessageId"]

        assert local_move(sqs, target).moved == 12

        moved = _drain(sqs, target.source_url)
        got = [(m["Attributes"]["MessageGroupId"], m["Body"]) for m in moved]
        for group in ("acct-0", "acct-1"):
            assert [g for g in got if g[0] == group] == [s for s in sent if s[0] == group], "order within a group"
        assert [m["Attributes"]["MessageDeduplicationId"] for m in moved] == [
            redrive_dedup_id(in_dlq[m["Body"]]) for m in moved
        ]
        assert all(m["MessageAttributes"]["reason"]["StringValue"].startswith("not JSON") for m in moved)


def test_local_move_rate_limit_sleeps_between_sends() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        target = _queues(sqs, fifo=False)
        for i in range(3):
            sqs.send_message(QueueUrl=target.dlq_url, MessageBody=str(i))
        sleeps: list[float] = []

        local_move(sqs, target, max_per_second=4, sleep=sleeps.append)

        assert sleeps == [0.25, 0.25, 0.25]


class _FailingOn:
    """An SQS client whose ``nth`` call of ``operation`` raises."""

    def __init__(self, client: Any, operation: str, nth: int = 1) -> None:
        self._client, self._operation, self._nth, self.calls = client, operation, nth, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name != self._operation:
            return attr

        def call(**kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self._nth:
                raise ClientError({"Error": {"Code": "InternalError", "Message": "boom"}}, name)
            return attr(**kwargs)

        return call


def test_a_failed_send_leaves_the_message_in_the_dead_letter_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    # Received messages visible again at once, so the test can read what stayed behind.
    monkeypatch.setattr(redrive_module, "LOCAL_VISIBILITY_SECONDS", 0)
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        target = _queues(sqs, fifo=True)
        for i in range(3):
            sqs.send_message(
                QueueUrl=target.dlq_url, MessageBody=f"m{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}"
            )

        with pytest.raises(ClientError, match="boom"):
            local_move(_FailingOn(sqs, "send_message", nth=2), target)

        assert [m["Body"] for m in _drain(sqs, target.source_url)] == ["m0"]
        # not lost (moto, unlike SQS, does not keep a FIFO group's order for messages that became visible again)
        assert sorted(m["Body"] for m in _drain(sqs, target.dlq_url)) == ["m1", "m2"]


def test_an_interrupted_delete_leaves_a_duplicate_never_a_loss() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        target = _queues(sqs, fifo=False)
        sqs.send_message(QueueUrl=target.dlq_url, MessageBody="m0")

        with pytest.raises(ClientError):
            local_move(_FailingOn(sqs, "delete_message"), target)

        assert [m["Body"] for m in _drain(sqs, target.source_url)] == ["m0"]
        sqs.set_queue_attributes(QueueUrl=target.dlq_url, Attributes={"VisibilityTimeout": "0"})
        in_dlq = sqs.get_queue_attributes(
            QueueUrl=target.dlq_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
        )
        assert in_dlq["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"


# --- the command: discovery, path, output ----------------------------------------------------------------
def _mapping(target: Target) -> DeployedMapping:
    mapping = MappingConfig(
        label=target.label,
        queue_url=target.source_url,
        queue_arn=target.source_arn,
        batch_size=10,
        batching_window_seconds=0,
        visibility_timeout_seconds=30,
        max_receive_count=5,
        function_name="f",
        function_timeout_seconds=3,
        function_memory_mb=128,
        function_env={},
        handler="h.h",
    )
    name = target.source_arn.split(":")[5]
    return DeployedMapping(target.label, name, name.endswith(".fifo"), mapping, "u", target.dlq_url, None)


def _found(*targets: Target) -> Any:
    """A stand-in for the stack's one discovery (``discovery.StackDiscovery``): its mappings and their DLQs."""
    mappings = tuple(_mapping(t) for t in targets)
    dlqs = tuple(DeadLetterQueue(t.dlq_url, t.dlq_arn, m) for t, m in zip(targets, mappings, strict=True))
    return SimpleNamespace(stack="PaymentsSandbox", mappings=mappings, dlqs=dlqs)


def test_redrive_moves_every_dead_letter_queue_of_the_stack_locally(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        sqs = session.client("sqs")
        queues = {fifo: _queues(sqs, fifo) for fifo in (False, True)}
        sqs.send_message(QueueUrl=queues[False].dlq_url, MessageBody="s")
        sqs.send_message(QueueUrl=queues[True].dlq_url, MessageBody="f", MessageGroupId="g", MessageDeduplicationId="d")
        found = _found(*queues.values())
        monkeypatch.setattr(redrive_module, "discover", lambda s, stack, cdk_out=None: found)
        monkeypatch.setattr(redrive_module, "is_local", lambda client: True)  # moto in process answers on amazonaws.com

        assert redrive("PaymentsSandbox", None, None, session=session) == 0
        assert redrive("PaymentsSandbox", "fifo", None, session=session) == 0

        out = capsys.readouterr().out.splitlines()
        assert out[1] == "fifo: completed (local move: receive, send, delete), moved 1"
        assert out[3] == "standard: completed (local move: receive, send, delete), moved 1"
        assert out[5] == "fifo: completed (local move: receive, send, delete), moved 0"
        with pytest.raises(redrive_module.RedriveError, match="stack PaymentsSandbox has no other queue"):
            redrive("PaymentsSandbox", "other", None, session=session)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-per-second", "0"], "argument --max-per-second: must be an integer from 1 to 500, got 0"),
        (["--max-per-second", "501"], "argument --max-per-second: must be an integer from 1 to 500, got 501"),
        (["--queue", "both"], "argument --queue: invalid choice: 'both'"),
        (["--stack", "1bad"], "argument --stack: '1bad' is not a CloudFormation stack name"),
    ],
)
def test_cli_rejects_bad_arguments_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["redrive", *argv])
    assert exit_.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {message}")


def test_cli_reports_an_expected_error_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(*args: Any, **kwargs: Any) -> int:
        raise redrive_module.RedriveError("stack S has no fifo queue (it has: standard)")

    monkeypatch.setattr(redrive_module, "redrive", fail)
    assert cli.main(["redrive", "--stack", "S", "--queue", "fifo"]) == 2
    assert capsys.readouterr().err == "error: stack S has no fifo queue (it has: standard)\n"


def test_against_a_moto_server_on_loopback_the_local_move_is_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Why the fallback exists: moto 5.2.5's server answers StartMessageMoveTask with a 500 (NotImplementedError).
    from botocore.config import Config
    from moto.server import ThreadedMotoServer

    from effectively_once_local.aws.server import LOOPBACK, free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address=LOOPBACK, port=port)
    server.start()
    try:
        session = boto3.session.Session(region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://localhost:{port}")
        sqs = session.client("sqs", config=Config(retries={"max_attempts": 1}))
        target = _queues(sqs, fifo=True)
        with pytest.raises(ClientError):
            sqs.start_message_move_task(SourceArn=target.dlq_arn, DestinationArn=target.source_arn)
        for i in range(3):
            sqs.send_message(
                QueueUrl=target.dlq_url, MessageBody=f"m{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}"
            )
        monkeypatch.setattr(redrive_module, "discover", lambda s, stack, cdk_out=None: _found(target))

        assert redrive("PaymentsSandbox", None, None, session=session) == 0

        assert (
            capsys.readouterr().out.splitlines()[-1] == "fifo: completed (local move: receive, send, delete), moved 3"
        )
        assert [m["Body"] for m in _drain(sqs, target.source_url)] == ["m0", "m1", "m2"]
    finally:
        server.stop()


def test_local_move_of_a_fifo_message_within_its_deduplication_window_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SQS moved it to the DLQ after maxReceiveCount with the deduplication id it was first sent with; the source
    # still remembers that id (5 minutes, deleted or not: the local AWS does too). Resent with it, it would be
    # dropped, and lost with the delete.
    from moto.sqs import models

    from effectively_once_local.aws import moto_patches as _moto_server

    monkeypatch.setattr(models.Queue, "add_message", models.Queue.add_message)
    _moto_server.remember_deduplication_ids()
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        target = _queues(sqs, fifo=True)
        sqs.send_message(QueueUrl=target.source_url, MessageBody="p-1", MessageGroupId="g", MessageDeduplicationId="d")
        for m in sqs.receive_message(QueueUrl=target.source_url).get("Messages", []):
            sqs.delete_message(QueueUrl=target.source_url, ReceiptHandle=m["ReceiptHandle"])
        sqs.send_message(QueueUrl=target.dlq_url, MessageBody="p-1", MessageGroupId="g", MessageDeduplicationId="d")

        assert local_move(sqs, target).moved == 1

        assert [m["Body"] for m in _drain(sqs, target.source_url)] == ["p-1"]
        assert _drain(sqs, target.dlq_url) == []
