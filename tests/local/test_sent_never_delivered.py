"""``sent_never_delivered``: first sends SQS accepted that no delivery and no DLQ message shows (the local AWS
dropped them; a resend can hide such a loss from ``lost``). Pure functions on synthetic run logs."""

from __future__ import annotations

import json
from typing import Any

from effectively_once_local.aws.readback import DlqMessage
from effectively_once_local.payments.payments_report import verdict
from effectively_once_local.proof.attribution import sent_never_delivered
from effectively_once_runtime import names


def _sent(message_id: str, kind: str = "original", dedup: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"queue": "fifo" if dedup else "standard", "kind": kind, "message_id": message_id}
    if dedup:
        row["deduplication_id"] = dedup
    return row


def _delivered(*ids: str) -> list[dict[str, Any]]:
    return [{"message_id": i, "receive_count": 1} for i in ids]


def test_a_first_send_no_delivery_shows_is_counted_even_when_its_resend_was_delivered() -> None:
    sent = [_sent("m1"), _sent("m2"), _sent("r1", kind="resend")]

    missing = sent_never_delivered(sent, _delivered("m1", "r1"), [])

    assert [row["message_id"] for row in missing] == ["m2"]


def test_messages_in_the_dlq_count_as_delivered_by_their_own_id_or_the_runtimes_reason() -> None:
    reason = json.dumps({"error_type": "InvalidRecord", "message_id": "m2", "receive_count": 1})
    copy = DlqMessage(
        message_id="copy-of-m2",
        body="{oops",
        attributes={names.DEAD_LETTER_REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason}},
    )
    moved = DlqMessage(message_id="m3", body="{}")

    assert sent_never_delivered([_sent("m2"), _sent("m3")], [], [copy, moved]) == []


def test_fifo_sends_of_a_deduplication_id_already_sent_and_duplicates_are_left_out() -> None:
    # A second line with the payment id of an earlier one: SQS drops it within the 5-minute deduplication interval.
    sent = [
        _sent("m1", dedup="pay-1"),
        _sent("m2", dedup="pay-1"),
        _sent("r1", kind="resend", dedup="pay-1"),
        _sent("c1", kind="concurrent_duplicate"),
        _sent("m3", dedup="pay-3"),
    ]

    missing = sent_never_delivered(sent, _delivered("m1"), [])

    assert [row["message_id"] for row in missing] == ["m3"]


def test_an_accepted_first_send_never_delivered_fails_the_run_safe_or_unsafe() -> None:
    report = {"total": {"lost": 0, "double_charged": 1, "sent_never_delivered": 1}}

    for unsafe in (False, True):
        code, reasons = verdict(report, unsafe=unsafe)
        assert code == 1
        assert any(r.startswith("1 first sends SQS accepted were never delivered") for r in reasons), reasons
    assert verdict({"total": {"lost": 0, "sent_never_delivered": 0}}, unsafe=False) == (0, [])
