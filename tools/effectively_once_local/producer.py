"""The payments file and the producer.

``samples/payments.jsonl``: one JSON object per line. A line is sent as the message body, except a line of the form
``{"raw_body": "<text>", "account_id": "..."}``, whose ``raw_body`` is sent verbatim (how the file carries a
deliberately malformed message), and a line with a repeated key, sent as written (re-encoding it would keep only
the last value, and the handler must see the repetition to reject it). Lines that are not JSON objects are errors:
the whole file is checked before anything is sent, and the error names the line.

Each payment goes to exactly one pipeline, chosen by its account (``route``): the standard or the FIFO queue
(``MessageGroupId`` = account id, ``MessageDeduplicationId`` = payment id).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .chaos import ChaosConfig
from .json_lines import JsonLinesError, read_json_lines
from .limits import SQS_FIFO_ID_PATTERN

STANDARD = "standard"
FIFO = "fifo"
SEND_BATCH_MAX = 10  # SendMessageBatch takes at most 10 entries (SQS API reference)


class PaymentsFileError(ValueError):
    """The payments file cannot be used; the message names the file and the line."""


class SendError(RuntimeError):
    """SQS rejected a message of the payments file; the message names its line."""


_FIFO_ID = re.compile(SQS_FIFO_ID_PATTERN)


@dataclass(frozen=True)
class Line:
    number: int
    body: str
    account_id: str
    payment_id: str | None

    @property
    def dedup_id(self) -> str:
        return self.payment_id or hashlib.sha256(self.body.encode()).hexdigest()


def route(account_id: str) -> str:
    """The pipeline of an account: stable across runs and machines (CRC-32 of the account id)."""
    return FIFO if zlib.crc32(account_id.encode()) % 2 else STANDARD


def load_payments(path: Path) -> list[Line]:
    """Read and check the whole file.

    :raises PaymentsFileError: the file is missing, a folder, not UTF-8 or empty, or a line is not a JSON object
        (an integer over 4,300 digits and nesting too deep count as not JSON), has no string ``account_id`` (needed
        to route it), or, routed to the FIFO queue, has an ``account_id`` or ``payment_id`` that SQS refuses as a
        group or deduplication id — naming ``path:line``.
    """
    try:
        parsed = read_json_lines(path, unreadable_hint="use raw_body")
    except JsonLinesError as exc:
        raise PaymentsFileError(f"{exc}; nothing was sent") from exc
    lines: list[Line] = []
    for item in parsed:
        number, data, repeated = item.number, item.data, item.repeated
        if not isinstance(data, dict):
            raise PaymentsFileError(f"{path}:{number}: a line must be a JSON object; nothing was sent")
        account = data.get("account_id")
        if not isinstance(account, str) or not account:
            raise PaymentsFileError(
                f"{path}:{number}: account_id (a string) is needed to route the payment; nothing was sent"
            )
        if repeated:
            # Re-encoding would keep only the last value of a repeated key: send the line as written instead.
            body, pid = item.raw, None
        elif "raw_body" in data:
            if not isinstance(data["raw_body"], str):
                raise PaymentsFileError(f"{path}:{number}: raw_body must be a string; nothing was sent")
            body, pid = data["raw_body"], None
        else:
            body = json.dumps(data, separators=(",", ":"))
            pid = data.get("payment_id") if isinstance(data.get("payment_id"), str) else None
        line = Line(number=number, body=body, account_id=account, payment_id=pid)
        if route(account) == FIFO:
            # SQS refuses a FIFO message whose group or deduplication id breaks its rules: checked before sending.
            for name, value in (("account_id", account), ("payment_id", line.dedup_id)):
                if not _FIFO_ID.fullmatch(value):
                    as_what = "MessageGroupId" if name == "account_id" else "MessageDeduplicationId"
                    raise PaymentsFileError(
                        f"{path}:{number}: {name} goes to a FIFO queue as its {as_what} and must be 1-128 characters"
                        " of letters, digits and punctuation; nothing was sent"
                    )
        lines.append(line)
    if not lines:
        raise PaymentsFileError(f"{path}: no payments in the file")
    return lines


@dataclass(frozen=True)
class Message:
    line: Line
    kind: str  # "original", "concurrent_duplicate" or "resend"


def plan_messages(lines: list[Line], chaos: ChaosConfig) -> dict[str, list[Message]]:
    """What each queue is sent, in order: every line once; a fraction sent twice back to back (standard queue only:
    a FIFO group is processed one at a time); a fraction resent after all originals, like a producer retrying."""
    rng = random.Random(chaos.seed)
    plan: dict[str, list[Message]] = {STANDARD: [], FIFO: []}
    resends: dict[str, list[Message]] = {STANDARD: [], FIFO: []}
    for line in lines:
        queue = route(line.account_id)
        plan[queue].append(Message(line, "original"))
        if line.payment_id is None:
            continue
        if queue == STANDARD and rng.random() < chaos.concurrent_duplicates:
            plan[queue].append(Message(line, "concurrent_duplicate"))
        if rng.random() < chaos.resend:
            resends[queue].append(Message(line, "resend"))
    for queue in plan:
        plan[queue].extend(resends[queue])
    return plan


def send(
    sqs: Any,
    queue_urls: dict[str, str],
    plan: dict[str, list[Message]],
    progress: Callable[[int], None],
    record: Callable[..., None] | None = None,
) -> dict[str, int]:
    """Send the plan with ``SendMessageBatch``; returns messages sent per queue.

    :param record: called once per accepted message with ``queue``, ``line``, ``payment_id``, ``kind``,
        ``message_id`` (the id SQS returned) and, for FIFO, ``deduplication_id`` (``EventLog.write``: the run's
        ``sent-<queue>.jsonl``, which ties a payment to the message ids the delivery log shows). SQS answers a FIFO
        message dropped as a duplicate of its deduplication id with an id too.
    :raises SendError: SQS rejected an entry (named with its line).
    """
    sent = {}
    for queue, messages in plan.items():
        sent[queue] = 0
        for start in range(0, len(messages), SEND_BATCH_MAX):
            chunk = messages[start : start + SEND_BATCH_MAX]
            entries = []
            for i, msg in enumerate(chunk):
                entry: dict[str, Any] = {"Id": str(i), "MessageBody": msg.line.body}
                if queue == FIFO:
                    entry["MessageGroupId"] = msg.line.account_id
                    entry["MessageDeduplicationId"] = msg.line.dedup_id
                entries.append(entry)
            result = sqs.send_message_batch(QueueUrl=queue_urls[queue], Entries=entries)
            if result.get("Failed"):
                bad = result["Failed"][0]
                line = chunk[int(bad["Id"])].line.number
                raise SendError(f"SQS rejected the message of line {line}: {bad.get('Message', bad.get('Code'))}")
            if record is not None:
                for ok in result.get("Successful", []):
                    msg = chunk[int(ok["Id"])]
                    record(
                        queue=queue,
                        line=msg.line.number,
                        payment_id=msg.line.payment_id,
                        kind=msg.kind,
                        message_id=ok.get("MessageId"),
                        **({"deduplication_id": msg.line.dedup_id} if queue == FIFO else {}),
                    )
            sent[queue] += len(chunk)
            progress(len(chunk))
    return sent


def generate_sample(count: int = 1000, accounts: int = 40, seed: int = 2026) -> list[dict[str, Any]]:
    """The demo input: ``count`` valid payments over ``accounts`` accounts plus six poison messages (two malformed
    JSON bodies, two without ``payment_id``, two with a negative amount), deterministic for a seed."""
    rng = random.Random(seed)
    currencies = ["EUR", "USD", "GBP", "JPY", "CHF"]
    rows: list[dict[str, Any]] = []
    for i in range(1, count + 1):
        rows.append(
            {
                "payment_id": f"pay-{i:05d}",
                "account_id": f"acct-{rng.randrange(accounts):03d}",
                "amount": rng.randrange(100, 250_000),
                "currency": rng.choice(currencies),
            }
        )
    poison: list[dict[str, Any]] = [
        {"raw_body": '{"payment_id": "pay-broken-1", "amount": ', "account_id": "acct-000"},
        {"raw_body": "payment pay-broken-2 for 10 EUR", "account_id": "acct-001"},
        {"account_id": "acct-002", "amount": 1500, "currency": "EUR"},
        {"account_id": "acct-003", "amount": 900, "currency": "USD", "reference": "no id"},
        {"payment_id": "pay-negative-1", "account_id": "acct-004", "amount": -500, "currency": "EUR"},
        {"payment_id": "pay-negative-2", "account_id": "acct-005", "amount": -1, "currency": "GBP"},
    ]
    for k, row in enumerate(poison):
        rows.insert(rng.randrange(len(rows)) if k % 2 else len(rows) - 10 * k, row)
    return rows
