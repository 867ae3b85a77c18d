"""The local runner's own rules (no AWS needed): input checking, routing, event shape, Lambda's partial-batch
semantics, the verdict, and that the local AWS is on loopback and gone after use."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from effectively_once_local.aws.server import MotoServer
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.payments.backlog import DEFAULT_BACKLOG
from effectively_once_local.payments.payments_input import (
    FIFO,
    STANDARD,
    PaymentsFileError,
    generate_sample,
    load_payments,
    plan_messages,
    route,
)
from effectively_once_local.payments.payments_report import verdict
from effectively_once_local.runner.mapping_runner import failed_ids, to_lambda_record

from .conftest import SOURCE_PATH, mapping_config

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
        [
            sys.executable,
            "-m",
            "effectively_once_local",
            "demo",
            "--payments",
            str(path),
            "--run-dir",
            str(tmp_path / "run"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: argument --payments: {path}:1: a line must be a JSON object; nothing was sent")
    assert not (tmp_path / "run" / "moto.log").exists(), "no local AWS may be started for a bad file"


def test_raw_body_lines_are_sent_verbatim(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"raw_body": "{broken", "account_id": "acct-1"}))

    [line] = load_payments(path)

    assert line.body == "{broken" and line.payment_id is None


def test_line_with_a_repeated_key_is_sent_as_written_not_re_encoded_with_the_last_value(tmp_path: Path) -> None:
    raw = '{"payment_id": "p-rep", "account_id": "acct-1", "amount": 1, "amount": 100000000, "currency": "EUR"}'
    path = write(tmp_path, raw)

    [line] = load_payments(path)

    assert line.body == raw and line.payment_id is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [('{"account_id": "a", "amount": ' + "1" * 5000 + "}", "Exceeds the limit"), ("[" * 100_000, "nested too deeply")],
    ids=["5000 digits", "deep nesting"],
)
def test_payments_file_line_python_cannot_read_names_the_line(tmp_path: Path, text: str, reason: str) -> None:
    path = write(tmp_path, json.dumps({"payment_id": "a", "account_id": "x", "amount": 1, "currency": "EUR"}), text)

    with pytest.raises(PaymentsFileError, match=rf"p\.jsonl:2: cannot be read \({reason}.*nothing was sent"):
        load_payments(path)


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
    mapping = mapping_config(label="fifo", queue_arn="arn:aws:sqs:us-east-1:123456789012:q.fifo")
    message = {
        "MessageId": "m1",
        "ReceiptHandle": "rh",
        "Body": "{}",
        "MD5OfBody": "99914b932bd37a50b983c5e7c90ae93b",
        "Attributes": {
            "ApproximateReceiveCount": "2",
            "MessageGroupId": "g",
            "MessageDeduplicationId": "d",
            "SequenceNumber": "1",
        },
        "MessageAttributes": {"trace": {"StringValue": "t", "DataType": "String"}},
    }

    record = to_lambda_record(message, mapping)

    assert set(record) == {
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
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
        "PYTHONPATH": SOURCE_PATH,
        "AWS_ENDPOINT_URL": "http://localhost:9",  # discard port on loopback: nothing listens
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "effectively_once_local",
            "report",
            "--wait",
            "1",
            "--payments",
            str(REPO / "samples" / "payments.jsonl"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
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

    from effectively_once_local.aws.readback import queue_depth, read_dlq

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
        assert queue_depth(sqs, url) == 15
        if fifo:
            assert first == bodies, "FIFO order is kept"
            assert read_dlq(sqs, url) == bodies, "the messages are back, in order"
        else:
            assert sorted(read_dlq(sqs, url)) == bodies, "a second report reads them again at once"


class _Interrupting:
    """Wraps an SQS client: the ``nth`` call of ``operation`` raises ``error`` instead of reaching SQS, or, with
    ``fail_entry``, reaches SQS without that entry and reports it failed (a partial batch failure)."""

    def __init__(
        self, client: object, operation: str, nth: int, error: BaseException | None, fail_entry: str | None = None
    ) -> None:
        self._client, self._operation, self._nth, self._error, self._fail_entry = (
            client,
            operation,
            nth,
            error,
            fail_entry,
        )
        self.calls = 0

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._client, name)
        if name != self._operation:
            return attr

        def call(**kwargs: object) -> object:
            self.calls += 1
            if self.calls != self._nth:
                return attr(**kwargs)
            if self._error is not None:
                raise self._error
            entries = [e for e in kwargs["Entries"] if e["Id"] != self._fail_entry]  # type: ignore[attr-defined]
            result = attr(**{**kwargs, "Entries": entries})
            result["Failed"] = [
                {"Id": self._fail_entry, "Code": "InternalError", "SenderFault": False, "Message": "boom"}
            ]
            return result

        return call


def _fifo_dlq(sqs: object, groups: dict[str, int]) -> tuple[str, list[str]]:
    url = sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]  # type: ignore[attr-defined]
    bodies = []
    for group, count in groups.items():
        for i in range(count):
            body = f"{group}-m{i:02d}"
            sqs.send_message(  # type: ignore[attr-defined]
                QueueUrl=url,
                MessageBody=body,
                MessageGroupId=group,
                MessageDeduplicationId=body,
                MessageAttributes={"trace": {"DataType": "String", "StringValue": f"t-{body}"}},
            )
            bodies.append(body)
    return url, bodies


def _drain(sqs: object, url: str) -> list[dict]:
    """Everything in the queue, by receiving and deleting until it is empty (the queue is emptied)."""
    out: list[dict] = []
    while True:
        messages = sqs.receive_message(  # type: ignore[attr-defined]
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["MessageGroupId"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return out
        out.extend(messages)
        sqs.delete_message_batch(  # type: ignore[attr-defined]
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        )


def _access_denied() -> BaseException:
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "not authorized to perform sqs:SendMessage"}}, "SendMessageBatch"
    )


def _throttled() -> BaseException:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": "RequestThrottled", "Message": "Rate exceeded"}}, "DeleteMessageBatch")


@pytest.mark.parametrize(
    ("operation", "nth", "error"),
    [
        ("send_message_batch", 1, _access_denied),
        ("send_message_batch", 2, KeyboardInterrupt),
        ("delete_message_batch", 1, KeyboardInterrupt),
        ("delete_message_batch", 2, _throttled),
        ("receive_message", 3, KeyboardInterrupt),
        ("send_message_batch", 2, None),  # SQS stores all copies but one
    ],
    ids=[
        "no-SendMessage-permission",
        "ctrl-c-in-send",
        "ctrl-c-before-delete",
        "throttled-delete",
        "ctrl-c-in-receive",
        "partial-send",
    ],
)
def test_interrupted_fifo_dlq_read_loses_no_message(operation: str, nth: int, error: object) -> None:
    # Reading a FIFO DLQ must delete (groups lock while in flight); a message may only go once its copy is stored.
    import boto3
    from moto import mock_aws

    from effectively_once_local.aws.readback import DlqReadError, read_dlq

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url, bodies = _fifo_dlq(sqs, {"acct-1": 15, "acct-2": 3})
        client = _Interrupting(sqs, operation, nth, error() if callable(error) else None, fail_entry="1")

        expected = KeyboardInterrupt if error is KeyboardInterrupt else DlqReadError
        with pytest.raises(expected):
            read_dlq(client, url)

        assert client.calls >= nth, "the fault was injected"
        left = _drain(sqs, url)
        left_bodies = [m["Body"] for m in left]
        assert set(left_bodies) == set(bodies), "no message lost (a message may be there twice)"
        for m in left:
            assert m["Attributes"]["MessageGroupId"] == m["Body"].split("-m")[0]
            assert m["MessageAttributes"]["trace"]["StringValue"] == f"t-{m['Body']}"


def test_fifo_dlq_read_after_an_interrupted_one_reads_every_message() -> None:
    import boto3
    from moto import mock_aws

    from effectively_once_local.aws.readback import read_dlq

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url, bodies = _fifo_dlq(sqs, {"acct-1": 15})
        with pytest.raises(KeyboardInterrupt):
            read_dlq(_Interrupting(sqs, "delete_message_batch", 2, KeyboardInterrupt()), url)

        again = read_dlq(sqs, url)

        assert set(again) == set(bodies)
        assert [m["Body"] for m in _drain(sqs, url)] == again, "the queue holds what was read, in order"


def test_fifo_dlq_copies_keep_group_and_attributes() -> None:
    import boto3
    from moto import mock_aws

    from effectively_once_local.aws.readback import read_dlq

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url, bodies = _fifo_dlq(sqs, {"acct-1": 12, "acct-2": 12})

        assert sorted(read_dlq(sqs, url)) == sorted(bodies)

        left = _drain(sqs, url)
        assert sorted(m["Body"] for m in left) == sorted(bodies)
        for group in ("acct-1", "acct-2"):
            assert [m["Body"] for m in left if m["Attributes"]["MessageGroupId"] == group] == [
                b for b in bodies if b.startswith(group)
            ]
        assert all(m["MessageAttributes"]["trace"]["StringValue"] == f"t-{m['Body']}" for m in left)


# --- every argument checked up front; every expected error one line and exit 2 ------------------------------

VALID = json.dumps({"payment_id": "pay-1", "account_id": "acct-1", "amount": 100, "currency": "EUR"})


def _inputs(tmp_path: Path) -> dict[str, str]:
    """The files and folders the bad inputs point at."""
    made = {
        "not_utf8": b'{"payment_id": "p\xff", "account_id": "acct-1"}\n',
        "huge_number": ('{"account_id": "acct-1", "amount": ' + "9" * 5000 + "}\n").encode(),
        "deep": ('{"account_id": "acct-1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n").encode(),
        "no_valid": (
            json.dumps({"payment_id": "pay-1", "account_id": "acct-1", "amount": -5, "currency": "EUR"})
            + "\n"
            + json.dumps({"raw_body": "{broken", "account_id": "acct-2"})
            + "\n"
            + json.dumps({"raw_body": '{"amount": ' + "9" * 5000 + "}", "account_id": "acct-3"})
            + "\n"
        ).encode(),
        "valid": (VALID + "\n").encode(),
        "a_file": b"x",
    }
    out = {}
    for name, data in made.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        out[name] = str(path)
    for name in ("empty_dir", "a_dir"):
        (tmp_path / name).mkdir()
        out[name] = str(tmp_path / name)
    out["under_a_file"] = str(tmp_path / "a_file.jsonl" / "out.json")
    return out


BAD_INPUTS = [
    # (argv, with {name} placeholders filled from _inputs, the argument the one line must name)
    (["demo", "--payments", "{not_utf8}"], "--payments"),
    (["demo", "--payments", "{huge_number}"], "--payments"),
    (["demo", "--payments", "{deep}"], "--payments"),
    (["demo", "--payments", "{no_valid}"], "--payments"),
    (["demo", "--payments", "{a_dir}"], "--payments"),
    (["demo", "--payments", "{a_dir}/missing.jsonl"], "--payments"),
    (["demo", "--crash-after-charge", "0.6", "--crash-after-complete", "0.6"], "--crash-after-charge"),
    (["demo", "--timeouts", "0.5", "--crash-after-charge", "0.3", "--crash-after-complete", "0.3"], "--timeouts"),
    (["demo", "--handler-root", "{empty_dir}"], "--handler-root"),
    (["demo", "--handler-root", "{a_file}"], "--handler-root"),
    (["demo", "--run-dir", "{a_file}"], "--run-dir"),
    (["demo", "--run-dir", "{under_a_file}"], "--run-dir"),
    (["demo", "--report", "{a_dir}"], "--report"),
    (["demo", "--report", "{under_a_file}"], "--report"),
    (["demo", "--concurrency", "0"], "--concurrency"),
    (["demo", "--concurrency", "two"], "--concurrency"),
    (["demo", "--function-timeout", "0"], "--function-timeout"),
    (["demo", "--function-timeout", "901"], "--function-timeout"),
    (["demo", "--max-receive-count", "0"], "--max-receive-count"),
    (["demo", "--max-receive-count", "1001"], "--max-receive-count"),
    (["demo", "--drain-timeout", "0"], "--drain-timeout"),
    (["demo", "--resend", "nan"], "--resend"),
    (["demo", "--resend", "1.5"], "--resend"),
    (["demo", "--seed", "x"], "--seed"),
    (["demo", "--stack", "1-not-a-stack"], "--stack"),
    (["demo", "--app-dir", "{empty_dir}"], "--app-dir"),
    (["demo", "--app-dir", "{a_file}"], "--app-dir"),
    (["report", "--report", "{a_dir}"], "--report"),
    (["report", "--report", "{valid}", "--payments", "{valid}"], "--report"),
    (["demo", "--report", "{valid}", "--payments", "{valid}"], "--report"),
    (["report", "--payments", "{no_valid}"], "--payments"),
    (["report", "--payments", "{deep}"], "--payments"),
    (["report", "--wait", "-1"], "--wait"),
    (["report", "--handler-root", "{empty_dir}"], "--handler-root"),
    (["produce", "--payments", "{not_utf8}"], "--payments"),
    (["produce", "--payments", "{no_valid}"], "--payments"),
    (["produce", "--stack", ""], "--stack"),
    (["produce", "--concurrent-duplicates", "-0.1"], "--concurrent-duplicates"),
    (["sample", "--count", "-5"], "--count"),
    (["sample", "--count", "0"], "--count"),
    (["sample", "--accounts", "0"], "--accounts"),
    (["sample", "--out", "{a_dir}"], "--out"),
    (["sample", "--out", "{under_a_file}"], "--out"),
    # flags another flag would silently ignore
    (["demo", "--unsafe", "--redrive-backlog", "3"], "--redrive-backlog"),
    (["demo", "--no-chaos", "--resend", "0.2"], "--resend"),
    (["demo", "--no-chaos", "--concurrent-duplicates", "0.2"], "--concurrent-duplicates"),
    (["demo", "--no-chaos", "--crash-after-charge", "0.1"], "--crash-after-charge"),
    (["demo", "--no-chaos", "--crash-after-complete", "0.1"], "--crash-after-complete"),
    (["demo", "--no-chaos", "--timeouts", "0.1"], "--timeouts"),
    # Issue 56, item 1: the fraction was accepted and silently dropped.
    (["demo", "--no-chaos", "--async-duplicate", "0.5"], "--async-duplicate"),
    (["demo", "--no-chaos", "--seed", "3"], "--seed"),
    (
        ["chaos", "--app-dir", "{empty_dir}", "--stack", "S", "--input", "{valid}", "--key", "payment_id"]
        + ["--effect-table", "T", "--effect-key", "k", "--effect-takes-key"],
        "--effect-takes-key",
    ),
    (
        ["chaos", "--app-dir", "{empty_dir}", "--stack", "S", "--input", "{valid}", "--key", "payment_id"]
        + ["--no-redrive", "--redrive-rounds", "2"],
        "--redrive-rounds",
    ),
    (
        ["chaos", "--app-dir", "{empty_dir}", "--stack", "S", "--input", "{valid}", "--key", "payment_id", "--seed"]
        + ["3", "--resend", "0", "--concurrent-duplicates", "0", "--crash-after-effect", "0", "--crash-after-complete"]
        + ["0", "--timeouts", "0", "--async-duplicate", "0", "--crash-after-write", "0", "--crash-random", "0"],
        "--seed",
    ),
]


def _call_cli(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[object, str]:
    """``main(argv)`` in this process with nothing able to start: no deploy, no AWS call."""
    from effectively_once_local.cli import main as cli
    from effectively_once_local.payments import demo, remote

    def must_not_start(*args: object, **kwargs: object) -> None:
        raise AssertionError("started although an argument is bad")

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(demo, "run_demo", must_not_start)
    monkeypatch.setattr(remote, "_session", must_not_start)
    try:
        code: object = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "argument"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_fails_bad_argument_in_one_line_before_anything_starts(
    argv: list[str], argument: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _inputs(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    if argv[0] == "sample" and "--out" not in argv:
        argv = [*argv, "--out", str(tmp_path / "sample.jsonl")]  # never the repository's sample

    code, err = _call_cli([a.format(**paths) for a in argv], capsys, monkeypatch)

    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"argument {argument}" in lines[0] or (argument in lines[0] and "arguments" in lines[0]), err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before, "nothing written for a bad argument"


def test_default_and_valid_arguments_pass_the_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from effectively_once_local.cli import main as cli
    from effectively_once_local.payments import demo

    started = []
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(demo, "run_demo", lambda opts: (started.append(opts), (0, {}))[1])

    assert cli.main(["demo", "--run-dir", str(tmp_path / "run"), "--report", str(tmp_path / "r" / "x.json")]) == 0
    assert (
        cli.main(
            [
                "demo",
                "--payments",
                _inputs(tmp_path)["valid"],
                "--concurrency",
                "1",
                "--timeouts",
                "1",
                "--crash-after-charge",
                "0",
                "--crash-after-complete",
                "0",
            ]
        )
        == 0
    )

    assert [o.concurrency for o in started] == [2, 1]
    assert started[0].handler_root == REPO / "lambda_src"
    assert not (tmp_path / "run").exists(), "checks create nothing"
    assert capsys.readouterr().err == ""


def test_flags_that_agree_with_no_chaos_and_unsafe_pass_the_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from effectively_once_local.cli import main as cli
    from effectively_once_local.payments import demo

    started = []
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(demo, "run_demo", lambda opts: (started.append(opts), (0, {}))[1])
    out = ["--run-dir", str(tmp_path / "run"), "--report", str(tmp_path / "x.json")]

    assert cli.main(["demo", "--no-chaos", "--resend", "0", *out]) == 0
    assert cli.main(["demo", "--unsafe", "--redrive-backlog", "0", *out]) == 0
    assert cli.main(["demo", "--unsafe", *out]) == 0

    assert [o.chaos.enabled for o in started] == [False, True, True]
    assert [o.redrive_backlog for o in started] == [DEFAULT_BACKLOG, 0, DEFAULT_BACKLOG]
    assert capsys.readouterr().err == ""


def test_every_option_of_every_subcommand_has_help_and_shows_its_default() -> None:
    from effectively_once_local.cli import main as cli

    _, commands = cli._parser()

    assert set(commands) == {"demo", "chaos", "sample", "produce", "report", "redrive"}
    missing = []
    for name, sub in commands.items():
        formatter = sub._get_formatter()
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = formatter._expand_help(action) if action.help else ""
            flag = f"{name} {action.option_strings[0]}"
            if not text:
                missing.append(f"{flag}: no help")
            elif action.default is not None and action.nargs != 0 and f"default: {action.default}" not in text:
                missing.append(f"{flag}: default {action.default!r} not shown in {text!r}")

    assert missing == []
    demo_help, chaos_help = (" ".join(commands[c].format_help().split()) for c in ("demo", "chaos"))
    assert (
        "seconds to wait for the queues to drain; past it the run exits 4 naming what is left where (default: 600)"
        in demo_help
    )
    assert "(default: the stack's: max(600, the longest (maxReceiveCount + 1) x visibility timeout" in chaos_help


def test_sample_writes_count_valid_payments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from effectively_once_local.cli import main as cli

    out = tmp_path / "new" / "s.jsonl"

    assert cli.main(["sample", "--count", "1", "--accounts", "1", "--out", str(out)]) == 0

    lines = load_payments(out)
    assert sum(1 for ln in lines if ln.payment_id and ln.payment_id.startswith("pay-0")) == 1


@pytest.mark.parametrize("argv", [["sample", "--accounts", "0"], ["demo", "--concurrency", "0"]])
def test_bad_argument_is_one_line_from_the_command_line(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "effectively_once_local", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and argv[1] in proc.stderr, proc.stderr


def test_fifo_line_with_an_id_sqs_refuses_is_rejected_before_sending(tmp_path: Path) -> None:
    account = next(a for a in (f"acct {i}" for i in range(100)) if route(a) == FIFO)  # a space: not a group id
    path = write(tmp_path, json.dumps({"payment_id": "p1", "account_id": account, "amount": 1, "currency": "EUR"}))

    with pytest.raises(PaymentsFileError, match=r":1: account_id goes to a FIFO queue as its MessageGroupId"):
        load_payments(path)


def test_new_run_removes_only_the_previous_runs_files(tmp_path: Path) -> None:
    # `--run-dir .` or a run folder holding the payments file must not lose the user's files.
    from effectively_once_local.engine.pipeline import clear_run_dir

    keep = [tmp_path / "payments.jsonl", tmp_path / "notes.log", tmp_path / "moto.log"]
    stale = [
        tmp_path / "deliveries-fifo-1.jsonl",
        tmp_path / "provider-standard-2.jsonl",
        tmp_path / "chaos-fifo-3.jsonl",
        tmp_path / "function-fifo-4.log",
        tmp_path / "sent-standard.jsonl",
    ]
    for path in keep + stale:
        path.write_text("x")

    clear_run_dir(tmp_path)

    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in keep)


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
    from effectively_once_local.payments.remote import wait_for_drain

    sqs, clock = _Counts([3, 0, 2, 0, 0, 0, 0, 0]), _Clock()

    wait_for_drain(sqs, ["q"], wait_seconds=600, settle_seconds=10, sleep=clock.sleep, clock=lambda: clock.now)

    zero_from = 3 * 5.0  # the counts stay at 0 from the fourth reading on, polled every 5 s
    assert clock.now >= zero_from + 10
    assert sqs.calls >= 6


def test_report_gives_up_when_the_queues_never_drain() -> None:
    from effectively_once_local.aws.server import LocalAwsError
    from effectively_once_local.payments.remote import wait_for_drain

    clock = _Clock()

    with pytest.raises(LocalAwsError, match="not drained after 30s"):
        wait_for_drain(
            _Counts([1]), ["q"], wait_seconds=30, settle_seconds=10, sleep=clock.sleep, clock=lambda: clock.now
        )


def test_report_default_wait_covers_a_poison_message_on_the_sandbox_defaults() -> None:
    # PaymentsSandbox's defaults: 30 s function timeout, so a 180 s visibility timeout, and maxReceiveCount 5: a
    # poison message is received 5 times, 180 s apart, before SQS moves it to the DLQ.
    from effectively_once_local.payments.payments_view import Pipeline
    from effectively_once_local.payments.remote import SETTLE_SECONDS, drain_wait_seconds

    def pipeline(label: str, visibility: int, receives: int) -> Pipeline:
        mapping = mapping_config(
            label=label,
            queue_url="u",
            visibility_timeout_seconds=visibility,
            max_receive_count=receives,
            function_timeout_seconds=30,
        )
        return Pipeline(mapping=mapping, mapping_uuid="x", dlq_url="d", idempotency_table="i", ledger_table="l")

    wait = drain_wait_seconds({"standard": pipeline("standard", 180, 5), "fifo": pipeline("fifo", 60, 3)})

    assert wait >= 5 * 180 + SETTLE_SECONDS


def test_deploy_writes_cdk_out_where_the_caller_looks_whatever_the_app_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `chaos --app-dir examples/orders` with the default relative --run-dir: the CLI runs in the app folder, so a
    # relative --output landed under it while the runner looked under the working folder.
    from effectively_once_local.aws import deploy as deploy_module

    calls: list[tuple[list[str], Path]] = []

    def run(cmd: list[str], cwd: Path, env: object, log: object, what: str) -> None:
        calls.append((cmd, cwd))
        if "synth" in cmd:  # the synth writes the stack's template where --output says
            out = Path(cmd[cmd.index("--output") + 1])
            out.mkdir(parents=True)
            (out / "OrdersExample.template.json").write_text("{}")

    monkeypatch.setattr(deploy_module, "_run", run)
    monkeypatch.setattr(deploy_module, "cdk_command", lambda app_dir: ["cdk"])
    monkeypatch.chdir(tmp_path)
    app = tmp_path / "examples" / "orders"
    app.mkdir(parents=True)

    deploy_module.deploy("http://localhost:1", app, "OrdersExample", {}, Path(".local-aws/chaos/cdk.log"))

    # One synth into the run's folder; the bootstrap and the deploy read that cloud assembly (--app).
    folders = [cmd[cmd.index(flag) + 1] for cmd, _ in calls for flag in ("--output", "--app") if flag in cmd]
    assert [cmd[1] for cmd, _ in calls] == ["synth", "bootstrap", "deploy"]
    assert folders == [str(tmp_path / ".local-aws" / "chaos" / "cdk.out")] * 3
    assert {cwd for _, cwd in calls} == {app}


@pytest.mark.parametrize(
    ("env", "region"),
    [
        ({"AWS_REGION": "eu-west-1"}, "eu-west-1"),
        ({"AWS_DEFAULT_REGION": "eu-central-1", "AWS_REGION": "eu-west-1"}, "eu-central-1"),
    ],
    ids=["AWS_REGION alone (as the README says)", "AWS_DEFAULT_REGION first"],
)
def test_real_account_commands_take_the_region_the_cdk_cli_takes(
    env: dict[str, str], region: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from effectively_once_local.aws.deploy import aws_session

    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))  # no profile region
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert aws_session().region_name == region


@pytest.mark.parametrize("before", [None, "http://localhost:1"], ids=["unset before", "set before"])
def test_local_endpoint_leaves_the_environment_as_it_was(before: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    # run_demo and run_chaos run in a test's process: a leaked AWS_ENDPOINT_URL sent every later moto-mocked
    # client to a stopped server.
    import os

    from effectively_once_local.aws.server import local_endpoint

    if before is None:
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL", before)

    with pytest.raises(KeyboardInterrupt), local_endpoint("http://localhost:2"):
        assert os.environ["AWS_ENDPOINT_URL"] == "http://localhost:2"
        raise KeyboardInterrupt

    assert os.environ.get("AWS_ENDPOINT_URL") == before


def test_mapping_in_provisioned_mode_with_metrics_deploys_and_is_discovered(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's CloudFormation takes a mapping's MetricsConfig and ProvisionedPollerConfig (the consumer's defaults
    and its provisioned mode), and the local tooling still finds the mapping, reads it and switches it off."""
    import boto3
    from moto import mock_aws

    from effectively_once_local.aws.discovery import disable, discover_mappings

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    template = {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 60}},
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "lambda.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ],
                    }
                },
            },
            "Function": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Runtime": "python3.13",
                    "Handler": "index.handler",
                    "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                    "Timeout": 10,
                    "Code": {"ZipFile": "def handler(event, context):\n    return {}\n"},
                },
            },
            "Mapping": {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {
                    "EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]},
                    "FunctionName": {"Ref": "Function"},
                    "BatchSize": 10,
                    "FunctionResponseTypes": ["ReportBatchItemFailures"],
                    "MetricsConfig": {"Metrics": ["EventCount"]},
                    "ProvisionedPollerConfig": {"MinimumPollers": 2, "MaximumPollers": 20},
                },
            },
        }
    }
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        session.client("cloudformation").create_stack(StackName="Provisioned", TemplateBody=json.dumps(template))
        (found,) = discover_mappings(session, "Provisioned", None)
        assert (found.label, found.mapping.batch_size, found.mapping.function_timeout_seconds) == ("Queue", 10, 10)
        disable(session, [found])
        esm = session.client("lambda").get_event_source_mapping(UUID=found.mapping_uuid)
        assert esm["State"] == "Disabled"
        assert esm["ProvisionedPollerConfig"] == {"MinimumPollers": 2, "MaximumPollers": 20}
        assert esm["MetricsConfig"] == {"Metrics": ["EventCount"]}


def test_send_records_each_accepted_message_with_the_id_sqs_returned(tmp_path: Path) -> None:
    # The sent log ties a payment to the message ids the delivery log shows: a payment the report calls lost can
    # then be followed (never delivered, or delivered and never processed).
    import boto3
    from moto import mock_aws

    from effectively_once_local.chaos.fault_model import EventLog
    from effectively_once_local.payments.payments_input import QUEUES, Line
    from effectively_once_local.traffic.producer import Outgoing, send

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        urls = {
            STANDARD: sqs.create_queue(QueueName="std")["QueueUrl"],
            FIFO: sqs.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"],
        }
        line = Line(number=3, body='{"payment_id":"p-1"}', account_id="acct-1", payment_id="p-1")
        plan = {STANDARD: [Outgoing(line, "original")] * 11, FIFO: [Outgoing(line, "original")]}
        log = EventLog(tmp_path / "sent.jsonl")

        send(sqs, urls, QUEUES, plan, lambda n: None, log.write)

        rows = [json.loads(r) for r in (tmp_path / "sent.jsonl").read_text().splitlines()]
        received = sqs.receive_message(QueueUrl=urls[FIFO], MaxNumberOfMessages=1)["Messages"][0]
    assert [r["queue"] for r in rows] == [STANDARD] * 11 + [FIFO]
    assert {r["key"] for r in rows} == {"p-1"} and {r["line"] for r in rows} == {3}
    assert len({r["message_id"] for r in rows}) == 12, "one id per accepted message"
    assert rows[-1]["message_id"] == received["MessageId"] and rows[-1]["deduplication_id"] == "p-1"
    assert all("ts" in r for r in rows)
