"""Valid keys SQS dead-lettered by itself (issue 55, item 4b; ``proof/dead_letters.py``): every message a queue's
redrive policy moved to its DLQ without the runtime's reason is listed per key with what explains it, and a key no
fault of the run touched (nor its FIFO group) fails the run: the app dead-lettered valid work without a word."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from effectively_once_local.aws.readback import DlqMessage
from effectively_once_local.proof.dead_letters import (
    dead_letter_totals,
    dead_lettered_without_reason,
    moved_by_sqs,
)
from effectively_once_local.proof.key_check import build, render, verdict
from effectively_once_runtime import names


def _dlq(message_id: str, key: str | None, reason: dict[str, Any] | None = None, group: str | None = None) -> Any:
    attributes = {}
    if reason is not None:
        attributes[names.DEAD_LETTER_REASON_ATTRIBUTE] = {"DataType": "String", "StringValue": json.dumps(reason)}
    body = json.dumps({"order_id": key}) if key is not None else "not json"
    return DlqMessage(message_id=message_id, body=body, attributes=attributes, group_id=group)


def _key_of(body: str) -> str | None:
    try:
        return json.loads(body).get("order_id")
    except (ValueError, AttributeError):
        return None


def _sent(key: str, n: int, *, queue: str = "Orders", group: str | None = None) -> dict[str, Any]:
    return {"key": key, "queue": queue, "kind": "original", "message_id": f"m-{key}-{n}", "group": group}


def test_only_keyed_messages_sqs_moved_count_and_never_an_on_failure_queue() -> None:
    held = {
        "orders-dlq": [
            _dlq("1", "a"),  # SQS moved it after maxReceiveCount
            _dlq("2", "b", {"error_type": "PermanentError"}),  # the runtime moved it, with its reason
            _dlq("3", None),  # no key: an invalid line, not valid work
        ],
        "fifo-dlq.fifo": [_dlq("4", "c", group="g1")],
        "events-on-failure": [_dlq("5", "d")],  # Lambda's record after its retries
    }

    moved = moved_by_sqs(held, _key_of, on_failure={"events-on-failure"})

    assert moved == {
        "1": {"dlq": "orders-dlq", "key": "a", "group": None},
        "4": {"dlq": "fifo-dlq.fifo", "key": "c", "group": "g1"},
    }


def test_each_key_gets_its_cause_from_what_the_run_did_to_it_or_its_fifo_group() -> None:
    moved = {
        "1": {"dlq": "q-dlq", "key": "killed", "group": None},
        "2": {"dlq": "q-dlq", "key": "in-a-killed-batch", "group": None},
        "3": {"dlq": "q-dlq", "key": "throttled", "group": None},
        "4": {"dlq": "q-dlq", "key": "resent", "group": None},
        "5": {"dlq": "f-dlq.fifo", "key": "behind", "group": "g1"},
        "6": {"dlq": "q-dlq", "key": "slow", "group": None},
        "7": {"dlq": "q-dlq", "key": "alone", "group": None},
        "8": {"dlq": "q-dlq", "key": "alone", "group": None},  # redriven, then moved again
        "9": {"dlq": "f-dlq.fifo", "key": "other-group", "group": "g2"},
        "10": {"dlq": "q-dlq", "key": "deferred", "group": None},
        "11": {"dlq": "q-dlq", "key": "started-before-the-deferred", "group": None},
        "12": {"dlq": "f-dlq.fifo", "key": "first-in-g3", "group": "g3"},
        "13": {"dlq": "q-dlq", "key": "deferred-and-failed", "group": None},
    }
    kills = [
        {"phase": "after_write", "key": "killed", "batch_keys": ["killed", "in-a-killed-batch"]},
        {"phase": "after_write", "key": None, "batch_keys": ["ahead"]},
        {"phase": "deadline", "key": None, "batch_keys": ["slow"]},
        {"phase": "after_write", "key": None, "batch_keys": ["killed-behind"]},
    ]
    sent = [
        _sent(k, 1)
        for k in ("killed", "in-a-killed-batch", "throttled", "slow", "alone", "deferred", "deferred-and-failed")
    ]
    sent += [_sent("started-before-the-deferred", 1)]
    sent += [_sent("resent", 1), _sent("resent", 2)]
    sent += [_sent(k, 1, queue="Fifo", group="g1") for k in ("ahead", "behind")]
    sent += [_sent("other-group", 1, queue="Fifo", group="g2")]
    sent += [_sent(k, 1, queue="Fifo", group="g3") for k in ("first-in-g3", "killed-behind")]

    rows = dead_lettered_without_reason(
        moved,
        kill_records=kills,
        sdk_faults=[{"kind": "throttled", "request_id": "r-7"}],
        invocations={
            "r-7": ["throttled"],
            "r-8": ["alone"],
            "r-9": ["started-before-the-deferred", "deferred-and-failed", "deferred"],
        },
        sent_rows=sent,
        deferred={"r-9": 2},  # its runtime returned the last records: its remaining time could not fit them
        failed={"deferred-and-failed", "killed"},  # the runtime's "record failed" lines
    )

    causes = {row["key"]: row["cause"] for row in rows}
    assert causes == {
        "killed": "faults",
        "in-a-killed-batch": "faults",
        "throttled": "faults",
        "resent": "faults",
        "behind": "faults",  # a key ahead of it in its group was killed
        "slow": "deadline",
        "deferred": "deadline",
        "deferred-and-failed": "app",  # deferred once, and failed by the app on another receive
        "started-before-the-deferred": "app",  # started, so not deferred: it failed by itself
        "alone": "app",
        "other-group": "app",  # another group's kill explains nothing
        "first-in-g3": "app",  # a key killed behind it in its group cannot have held it back
    }
    alone = next(row for row in rows if row["key"] == "alone")
    assert alone == {"key": "alone", "messages": 2, "dlqs": ["q-dlq"], "cause": "app"}


def _report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    report = build(
        sent=Counter({row["key"]: 1 for row in rows}),
        invalid_lines=0,
        messages_sent=len(rows),
        dlq_keys=set(),
        dead_lettered=0,
        log_counts=Counter({row["key"]: 1 for row in rows}),
        store_counts=None,
        kill_records=[],
        effect_takes_key=False,
    )
    report |= {"total": report["total"] | dead_letter_totals(rows), "dead_lettered_without_reason": rows}
    return report


def test_a_key_the_app_dead_lettered_by_itself_fails_the_run_and_is_named() -> None:
    rows = [
        {"key": "k1", "messages": 1, "dlqs": ["q-dlq"], "cause": "app"},
        {"key": "k2", "messages": 1, "dlqs": ["q-dlq"], "cause": "faults"},
    ]
    report = _report(rows)

    code, reasons = verdict(report)

    assert code == 1
    assert len(reasons) == 1 and "1 valid keys dead-lettered by their queue's redrive policy" in reasons[0]
    assert reasons[0].endswith(": k1")
    assert report["total"]["dead_lettered_without_reason"] == 2
    assert report["total"]["dead_lettered_by_cause"] == {"faults": 1, "deadline": 0, "app": 1}
    assert "2 valid keys, 1 struck by the run's faults, 0 killed at their deadline, 1 by the app alone" in render(
        report
    )


def test_keys_the_run_struck_or_killed_at_their_deadline_are_listed_without_failing() -> None:
    rows = [
        {"key": "k1", "messages": 1, "dlqs": ["q-dlq"], "cause": "faults"},
        {"key": "k2", "messages": 2, "dlqs": ["q-dlq"], "cause": "deadline"},
    ]
    report = _report(rows)

    assert verdict(report) == (0, [])
    assert "dead-lettered without a reason (moved by the redrive policy): 2 valid keys" in render(report)
