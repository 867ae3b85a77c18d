"""The payments profile's input: the payments file, its lines and their routes (the producer is
``traffic/producer.py``).

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

from ..base.json_lines import JsonLinesError, read_json_lines
from ..base.tool_limits import SQS_FIFO_ID_PATTERN
from ..chaos.fault_model import ChaosConfig
from ..traffic.producer import Outgoing, plan

STANDARD = "standard"
FIFO = "fifo"


class PaymentsFileError(ValueError):
    """The payments file cannot be used; the message names the file and the line."""


_FIFO_ID = re.compile(SQS_FIFO_ID_PATTERN)


@dataclass(frozen=True)
class Line:
    number: int
    body: str
    account_id: str
    payment_id: str | None

    @property
    def key(self) -> str | None:
        """The business key: the payment id (``None`` for a line without one)."""
        return self.payment_id

    @property
    def group_id(self) -> str:
        """The FIFO message group: the account, so one account's payments are processed in order."""
        return self.account_id

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


#: The payments' queues, each a pipeline of the sandbox stack: standard and FIFO.
QUEUES = {STANDARD: False, FIFO: True}


def plan_messages(lines: list[Line], chaos: ChaosConfig) -> dict[str, list[Outgoing[Line]]]:
    """What each queue is sent (``producer.plan``): a payment goes to its account's queue (:func:`route`)."""
    return plan(lines, lambda line: route(line.account_id), QUEUES, chaos)


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


@dataclass(frozen=True)
class SampleOptions:
    """``sample``'s options (``cli/sample_command.py`` builds them from its arguments): :func:`generate_sample`'s
    ``count``, ``accounts`` and ``seed``, and ``out``, the file written (its folders created)."""

    count: int = 1000
    accounts: int = 40
    seed: int = 2026
    out: Path = Path("samples/payments.jsonl")


def write_sample(opts: SampleOptions, log: Callable[[str], None] = print) -> int:
    """The ``sample`` command: :func:`generate_sample` written to ``opts.out``, a JSON object per line.

    :returns: ``0``.
    :raises OSError: the file cannot be written.
    """
    rows = generate_sample(opts.count, opts.accounts, opts.seed)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    log(f"wrote {len(rows)} lines to {opts.out}")
    return 0
