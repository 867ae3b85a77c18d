"""Issue 14, the demo's side: how many receives a poison message took (``poison_receives_max``), the FIFO DLQ
reader keeping each message's deduplication id readable without ever losing a message, and the outage backlog's
``redrive`` block with its verdict (pure functions on synthetic inputs; the reader against moto)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.aws.readback import (
    MAX_MESSAGE_ATTRIBUTES,
    ORIGINAL_DEDUP_ATTRIBUTE,
    DlqMessage,
    read_dlq_messages,
)
from effectively_once_local.payments.backlog import (
    charged_lines,
    counts,
    first_processed_receive,
    named_originals,
    new_lines,
    read_first_processed_receive,
)
from effectively_once_local.payments.payments_input import FIFO, STANDARD, Line, route
from effectively_once_local.payments.payments_report import redrive_problems, render_redrive, verdict
from effectively_once_local.proof.attribution import poison_receives
from effectively_once_runtime import names

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def is_valid() -> Callable[[str], bool]:
    from effectively_once_local.payments.payments_view import validity_check

    return validity_check(REPO / "lambda_src")


def dead_lettered(original_id: str, receive_count: int, body: str = "{oops", dlq_id: str = "dlq-copy") -> DlqMessage:
    """A copy the runtime sent to the DLQ, its reason naming the original and the receive it was sent on."""
    reason = json.dumps({"error_type": "InvalidPayment", "message_id": original_id, "receive_count": receive_count})
    return DlqMessage(
        message_id=dlq_id,
        body=body,
        attributes={names.DEAD_LETTER_REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason}},
    )


def delivered(message_id: str, *counts: int) -> list[dict[str, Any]]:
    return [{"message_id": message_id, "receive_count": n} for n in counts]


# --- poison_receives ---------------------------------------------------------------------------------------------


def test_poison_sent_on_first_sight_took_one_receive() -> None:
    # A run without chaos: each poison message is received once and copied to the DLQ on that receive.
    poison = [dead_lettered("m1", 1, dlq_id="c1"), dead_lettered("m2", 1, dlq_id="c2")]
    log = delivered("m1", 1) + delivered("m2", 1) + delivered("valid", 1, 2, 3)

    receives = poison_receives(poison, log)

    assert receives == {"m1": 1, "m2": 1}
    assert max(receives.values()) == 1


def test_poison_receives_count_a_redelivery_after_the_copy_was_sent() -> None:
    # A kill after the DLQ send and before the delete: the original comes back once more (its copy is deduplicated).
    receives = poison_receives([dead_lettered("m1", 1)], delivered("m1", 1, 2))

    assert receives == {"m1": 2}


def test_poison_moved_by_sqs_counts_its_deliveries() -> None:
    # No reason attribute: SQS moved it after maxReceiveCount receives, keeping its message id.
    moved = DlqMessage(message_id="m9", body="{oops")

    assert poison_receives([moved], delivered("m9", 1, 2, 3, 4, 5)) == {"m9": 5}


def test_poison_copied_twice_counts_once_per_original() -> None:
    copies = [dead_lettered("m1", 1, dlq_id="c1"), dead_lettered("m1", 2, dlq_id="c2")]

    assert poison_receives(copies, delivered("m1", 1, 2)) == {"m1": 2}


# --- the FIFO DLQ reader -----------------------------------------------------------------------------------------


def _fifo(sqs: Any) -> str:
    return str(sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"])


def _string_attributes(count: int) -> dict[str, dict[str, str]]:
    return {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(count)}


def _send_fifo(sqs: Any, url: str, body: str, dedup: str, attributes: dict[str, Any] | None = None) -> None:
    """One message in group ``g``, with ``attributes`` when given."""
    extra = {"MessageAttributes": attributes} if attributes else {}
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=dedup, **extra)


def test_fifo_reader_reports_each_original_dedup_id_on_every_read() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = _fifo(sqs)
        for i in range(12):
            _send_fifo(sqs, url, f"m{i:02d}", f"d{i}")

        first = read_dlq_messages(sqs, url)
        second = read_dlq_messages(sqs, url)

        expected = [f"d{i}" for i in range(12)]
        assert [m.deduplication_id for m in first] == expected
        assert [m.deduplication_id for m in second] == expected, "a read's copies carry the original id"
        assert [m.body for m in second] == [f"m{i:02d}" for i in range(12)], "nothing lost, order kept"
        assert all(m.copy_deduplication_id not in expected for m in second), (
            "a copy takes a new id: SQS drops a FIFO message whose id was used in the last 5 minutes"
        )
        assert all(m.group_id == "g" for m in second)


@pytest.mark.parametrize("count", [MAX_MESSAGE_ATTRIBUTES, MAX_MESSAGE_ATTRIBUTES - 1], ids=["ten", "nine"])
def test_fifo_reader_never_drops_a_message_with_many_attributes(count: int) -> None:
    # Nine attributes: the id would make ten, and a redriven copy could no longer take the runtime's reason.
    full = _string_attributes(count)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = _fifo(sqs)
        _send_fifo(sqs, url, "full", "d-full", full)
        _send_fifo(sqs, url, "room", "d-room")

        first = read_dlq_messages(sqs, url)
        second = read_dlq_messages(sqs, url)

        assert [m.deduplication_id for m in first] == ["d-full", "d-room"]
        assert [m.body for m in second] == ["full", "room"]
        assert second[0].attributes == full, "the attributes are kept unchanged, none added"
        assert second[0].deduplication_id is None, "no room to carry the old id: it is reported unknown, not wrong"
        assert second[1].deduplication_id == "d-room"
        assert ORIGINAL_DEDUP_ATTRIBUTE in second[1].attributes


def test_standard_reader_reports_no_dedup_id() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x")

        [message] = read_dlq_messages(sqs, url)

        assert (message.body, message.deduplication_id, message.attributes) == ("x", None, {})


# --- the outage backlog --------------------------------------------------------------------------------------------


def _lines() -> list[Line]:
    out = []
    for i in range(40):
        account = f"acct-{i % 8:03d}"
        pid = f"pay-{i:03d}"
        body = json.dumps({"payment_id": pid, "account_id": account, "amount": 100 + i, "currency": "EUR"})
        out.append(Line(number=i + 1, body=body, account_id=account, payment_id=pid))
    return out


@pytest.mark.parametrize("label", [STANDARD, FIFO])
def test_backlog_picks_charged_payments_and_fresh_valid_ones_of_its_queue(
    label: str, is_valid: Callable[[str], bool]
) -> None:
    lines = _lines()
    mine = [ln for ln in lines if route(ln.account_id) == label]
    ledger_ids = {str(ln.payment_id) for ln in mine[1::2]}

    charged = charged_lines(lines, label, ledger_ids, 3, is_valid)
    new = new_lines(lines, label, 3, {str(ln.payment_id) for ln in lines})

    assert [ln.payment_id for ln in charged] == [ln.payment_id for ln in mine[1::2][:3]]
    assert len(new) == 3 and len({ln.payment_id for ln in new}) == 3
    assert all(route(ln.account_id) == label and is_valid(ln.body) for ln in new)
    assert not {ln.payment_id for ln in new} & {ln.payment_id for ln in lines}, "never sent before"


def _good(**changes: Any) -> dict[str, Any]:
    """Inputs of a redrive that did what it must: 2 charged, 2 new, 1 poison message back after one receive."""
    base: dict[str, Any] = {
        "charged": ["p1", "p2"],
        "new": ["n1", "n2"],
        "ledger": Counter({"p1": 1, "p2": 1, "n1": 1, "n2": 1, "other": 1}),
        "calls_before": Counter({"p1": 1, "p2": 2}),
        "calls_after": Counter({"p1": 1, "p2": 2, "n1": 1, "n2": 1}),
        "poison_redriven": 1,
        "dlq_after": [dead_lettered("src-7", 1)],
        "processed": {"src-7": 1},
        "named_before": {"main-run-7"},
    }
    base.update(changes)
    return base


def test_redrive_counts_of_a_clean_redrive(is_valid: Callable[[str], bool]) -> None:
    row = counts(**_good(), is_valid=is_valid)

    assert row == {
        "charged_resent": 2,
        "charged_new_provider_calls": 0,
        "new_sent": 2,
        "new_charged": 2,
        "poison_redriven": 1,
        "poison_back_in_dlq": 1,
        "valid_in_dlq": 0,
        "double_charged": 0,
    }
    assert redrive_problems({"standard": row, "fifo": row}) == []
    assert verdict({"total": {}, "redrive": {"standard": row}}, unsafe=False) == (0, [])
    assert "poison_back_in_dlq" in render_redrive({"standard": row})


def test_poison_dead_lettered_on_first_sight_counts_though_a_kill_added_a_receive(
    is_valid: Callable[[str], bool],
) -> None:
    # A real deadline kill after the runtime's DLQ send and before the delete (a loaded machine) returns the batch:
    # the poison is received again and copied again. It was still dead-lettered on its first receive.
    dlq_after = [dead_lettered("src-7", 1, dlq_id="c1"), dead_lettered("src-7", 2, dlq_id="c2")]
    row = counts(**_good(dlq_after=dlq_after), is_valid=is_valid)

    assert row["poison_back_in_dlq"] == 1
    assert redrive_problems({"standard": row}) == []


def test_poison_dead_lettered_on_its_first_processed_receive_counts_though_a_kill_cut_an_earlier_one(
    is_valid: Callable[[str], bool],
) -> None:
    # Soak run 4: a real deadline kill cut the batch holding the redriven poison before the runtime reached it (or
    # between its log line and its DLQ send). Receive 2 was the first the runtime processed, and it sent the copy.
    rows = [
        {"message_id": "src-7", "receive_count": 1, "function_request_id": "killed"},
        {"message_id": "src-7", "receive_count": 2, "function_request_id": "ok"},
    ]
    processed = first_processed_receive(rows, killed_request_ids={"killed"})
    row = counts(**_good(dlq_after=[dead_lettered("src-7", 2)], processed=processed), is_valid=is_valid)

    assert processed == {"src-7": 2}
    assert row["poison_back_in_dlq"] == 1
    assert redrive_problems({"standard": row}) == []


def test_first_processed_receive_skips_killed_invocations_and_lines_without_a_receive() -> None:
    rows: list[Any] = [
        {"message_id": "a", "receive_count": 3, "function_request_id": "r3"},
        {"message_id": "a", "receive_count": 1, "function_request_id": "r1"},
        {"message_id": "a", "receive_count": 2, "function_request_id": "r2"},
        {"message_id": "b", "receive_count": 1, "function_request_id": "r1"},
        {"message_id": "c", "function_request_id": "r4"},
        {"message": "no record"},
        ["not", "a", "log", "line"],
    ]

    assert first_processed_receive(rows, killed_request_ids={"r1"}) == {"a": 2}
    assert first_processed_receive(rows, killed_request_ids=set()) == {"a": 1, "b": 1}


def test_first_processed_receive_reads_one_pipelines_function_and_chaos_logs(tmp_path: Path) -> None:
    def write(name: str, rows: list[dict[str, Any]]) -> None:
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"cut by a kill')

    write(
        "function-fifo-11.log",
        [
            {"message_id": "m", "receive_count": 1, "function_request_id": "r1"},
            {"message_id": "m", "receive_count": 2, "function_request_id": "r2"},
        ],
    )
    write("function-standard-12.log", [{"message_id": "m", "receive_count": 1, "function_request_id": "s1"}])
    write("chaos-fifo-11.jsonl", [{"event": "kill", "phase": "deadline", "pid": 11, "request_id": "r1"}])

    assert read_first_processed_receive(tmp_path, FIFO) == {"m": 2}
    assert read_first_processed_receive(tmp_path, STANDARD) == {"m": 1}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"calls_after": Counter({"p1": 2, "p2": 2, "n1": 1, "n2": 1})},
            "1 provider calls for payments already charged",
        ),
        ({"ledger": Counter({"p1": 1, "p2": 1, "n1": 1})}, "1 of 2 new payments charged exactly once"),
        ({"ledger": Counter({"p1": 1, "p2": 1, "n1": 1, "n2": 2})}, "1 payments charged more than once"),
        ({"ledger": Counter({"p1": 2, "p2": 1, "n1": 1, "n2": 1})}, "1 payments charged more than once"),
        (
            {"dlq_after": [dead_lettered("src-7", 2)]},
            "0 of 1 poison messages dead-lettered on the first receive the runtime processed them",
        ),
        (
            {"dlq_after": [DlqMessage("src-7", "{oops")]},
            "0 of 1 poison messages dead-lettered on the first receive the runtime processed them",
        ),
        ({"dlq_after": []}, "0 of 1 poison messages dead-lettered on the first receive the runtime processed them"),
        (
            # The runtime returned the redriven poison instead of dead-lettering it: SQS moved it after
            # maxReceiveCount receives with the reason it was redriven with, naming the main run's message.
            {"dlq_after": [dead_lettered("main-run-7", 1, dlq_id="src-7")], "processed": {"main-run-7": 1}},
            "0 of 1 poison messages dead-lettered on the first receive the runtime processed them",
        ),
        (
            {
                "dlq_after": [
                    dead_lettered("src-7", 1),
                    DlqMessage(
                        "v", json.dumps({"payment_id": "n9", "account_id": "acct-1", "amount": 5, "currency": "EUR"})
                    ),
                ]
            },
            "1 valid payments in the DLQ after the redrive",
        ),
    ],
    ids=[
        "charged-called-again",
        "new-not-charged",
        "new-charged-twice",
        "charged-twice",
        "poison-processed-on-receive-1-dead-lettered-on-receive-2",
        "poison-moved-by-sqs-after-max-receives",
        "poison-gone",
        "poison-moved-by-sqs-with-the-reason-it-was-redriven-with",
        "valid-in-dlq",
    ],
)
def test_fails_redrive_violation(changes: dict[str, Any], message: str, is_valid: Callable[[str], bool]) -> None:
    row = counts(**_good(**changes), is_valid=is_valid)

    found = redrive_problems({"fifo": row})
    code, reasons = verdict({"total": {}, "redrive": {"fifo": row}}, unsafe=False)

    assert any(line.startswith(f"redrive fifo: {message}") for line in found), found
    assert code == 1 and reasons == found


def test_report_takes_poison_receives_from_the_dlq_and_the_delivery_log(
    tmp_path: Path, is_valid: Callable[[str], bool]
) -> None:
    # GIVEN one poison message per queue type, each copied to its DLQ by the runtime; the FIFO one was received
    # twice (a kill after the copy, before the delete), the standard one once.
    from types import SimpleNamespace

    from effectively_once_local.payments.payments_report import build_report

    names_ = [f"acct-{i:03d}" for i in range(50)]
    accounts = {label: next(a for a in names_ if route(a) == label) for label in (STANDARD, FIFO)}
    lines = []
    for label, account in accounts.items():
        body = json.dumps({"payment_id": f"ok-{label}", "account_id": account, "amount": 10, "currency": "EUR"})
        lines += [Line(1, body, account, f"ok-{label}"), Line(2, "{oops", account, None)]
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        sqs, dynamodb = session.client("sqs"), session.client("dynamodb")
        pipelines = {}
        for label in (STANDARD, FIFO):
            table = f"ledger-{label}"
            dynamodb.create_table(
                TableName=table,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "payment_id", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "payment_id", "KeyType": "HASH"}],
            )
            dynamodb.put_item(TableName=table, Item={"payment_id": {"S": f"ok-{label}"}})
            fifo = label == FIFO
            url = sqs.create_queue(
                QueueName="dlq.fifo" if fifo else "dlq", Attributes={"FifoQueue": "true"} if fifo else {}
            )["QueueUrl"]
            copy = dead_lettered(f"src-{label}", 1)
            extra = {"MessageGroupId": accounts[label], "MessageDeduplicationId": f"src-{label}"} if fifo else {}
            sqs.send_message(QueueUrl=url, MessageBody=copy.body, MessageAttributes=copy.attributes, **extra)
            pipelines[label] = SimpleNamespace(ledger_table=table, dlq_url=url)
            counts_seen = [1, 2] if fifo else [1]
            (tmp_path / f"deliveries-{label}-1.jsonl").write_text(
                "".join(
                    json.dumps(d) + "\n" for d in delivered(f"src-{label}", *counts_seen) + delivered("other", 1, 2, 3)
                )
            )

        # WHEN the report is built
        report = build_report(session, pipelines, lines, tmp_path, is_valid)

    # THEN each queue shows its poison's receives, the total the highest, and no valid payment waits in a DLQ
    assert report[STANDARD]["poison_receives_max"] == 1
    assert report[FIFO]["poison_receives_max"] == 2
    assert report["total"]["poison_receives_max"] == 2, "a maximum, not a sum"
    assert report["total"]["valid_dead_lettered"] == 0
    assert report["total"]["poison_in_dlq"] == 2


def test_fifo_reader_carries_the_id_of_a_dead_lettered_message_with_nine_attributes() -> None:
    # The runtime's copy already holds its reason: a redrive and a second dead-lettering add none.
    attributes = {**_string_attributes(MAX_MESSAGE_ATTRIBUTES - 2), **dead_lettered("m1", 1).attributes}
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = _fifo(sqs)
        _send_fifo(sqs, url, "{oops", "m1", attributes)

        read_dlq_messages(sqs, url)
        [again] = read_dlq_messages(sqs, url)

        assert again.deduplication_id == "m1"
        assert len(again.attributes) == MAX_MESSAGE_ATTRIBUTES
        assert again.reason() == json.loads(attributes[names.DEAD_LETTER_REASON_ATTRIBUTE]["StringValue"])


def test_named_originals_are_the_reason_attributes_message_ids() -> None:
    moved_by_sqs = DlqMessage(message_id="m9", body="{oops")

    assert named_originals([dead_lettered("m1", 1, dlq_id="c1"), dead_lettered("m2", 3), moved_by_sqs]) == {
        "m1",
        "m2",
    }
