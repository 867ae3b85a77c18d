"""The outage backlog after the demo's main run (``--redrive-backlog K``): a redrive of what an outage leaves in
the DLQs, checked end to end.

Into each DLQ go K payments that were charged (from the ledger) and K valid payments never sent before (fresh ids,
accounts routed to that queue; FIFO: the account is the group). Then both DLQs are redriven to their source queues
with the code the ``redrive`` command runs locally (:func:`.redrive.local_move`), the runner polls until the queues
drain, and the ledgers, the provider's call log and the DLQs say what happened (:func:`counts`):

- ``charged_resent``, ``charged_new_provider_calls``: the charged payments sent again, and the provider calls made
  for them during the redrive (must be 0: each is answered from its idempotency record);
- ``new_sent``, ``new_charged``: the new payments, and those with exactly one ledger item (must be all of them);
- ``poison_redriven``, ``poison_back_in_dlq``: the poison messages the DLQ held before the redrive, and those the
  runtime dead-lettered again on the first receive it processed them (must be all of them). The DLQ copy's reason
  attribute names the original and the receive it was sent on, and the earliest counts; the function log names
  each receive the runtime reached a record on (``message_id``, ``receive_count``, ``function_request_id``), and a
  receive counts as processed when its invocation was not killed (``chaos-*.jsonl``: a real deadline kill on a
  loaded machine can cut a batch before the runtime reaches the poison, or between its log line and its DLQ send;
  the next receive is then its first). A kill after the send and before the delete adds a receive and a second
  copy, but the earlier receive already sent it. Not counted: a message SQS moved after maxReceiveCount receives
  (no reason attribute, or the reason it was redriven with, naming a message of the main run), and one the runtime
  processed on an earlier receive than its first copy (it was returned to the queue instead of dead-lettered);
- ``valid_in_dlq``: valid payments in the DLQ after the redrive (must be 0);
- ``double_charged``: backlog payments with more than one ledger item (must be 0).

The redrive phase runs without injected chaos: its checks are exact (no provider call, dead letters on the first
processed receive). Real deadline kills cannot be turned off; the checks hold through them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..aws.readback import DlqMessage
from ..base.json_lines import read_jsonl
from ..traffic.producer import ORIGINAL, Outgoing, send
from .payments_input import FIFO, Line, route

#: The ``--redrive-backlog`` default: K charged and K new payments per DLQ.
DEFAULT_BACKLOG = 5


def charged_lines(
    lines: list[Line], label: str, ledger_ids: set[str], k: int, is_valid: Callable[[str], bool]
) -> list[Line]:
    """The first ``k`` valid payments routed to ``label`` that the ledger holds (one line per payment id)."""
    picked: dict[str, Line] = {}
    for ln in lines:
        if len(picked) == k:
            break
        pid = ln.payment_id
        if pid and pid not in picked and pid in ledger_ids and route(ln.account_id) == label and is_valid(ln.body):
            picked[pid] = ln
    return list(picked.values())


def new_lines(lines: list[Line], label: str, k: int, taken: set[str]) -> list[Line]:
    """``k`` valid payments never sent: ids ``backlog-<label>-<n>`` not in ``taken``, over the accounts routed to
    ``label`` (round robin); empty when no account of the input routes there."""
    accounts = sorted({ln.account_id for ln in lines if route(ln.account_id) == label})
    out: list[Line] = []
    n = 0
    while accounts and len(out) < k:
        n += 1
        pid = f"backlog-{label}-{n:04d}"
        if pid in taken:
            continue
        account = accounts[len(out) % len(accounts)]
        body = json.dumps({"payment_id": pid, "account_id": account, "amount": 1000 + n, "currency": "EUR"})
        out.append(Line(number=0, body=body, account_id=account, payment_id=pid))
    return out


@dataclass(frozen=True)
class _Injected:
    """A backlog line as the producer (``producer.send``) takes it: the payment's own line with a deduplication id of
    its own (``backlog-<payment id>``), so SQS does not drop it as a resend of the run's message."""

    payment: Line

    @property
    def number(self) -> int:
        return self.payment.number

    @property
    def body(self) -> str:
        return self.payment.body

    @property
    def key(self) -> str | None:
        return self.payment.key

    @property
    def group_id(self) -> str:
        return self.payment.group_id

    @property
    def dedup_id(self) -> str:
        return f"backlog-{self.payment.payment_id}"


def inject(sqs: Any, dlq_url: str, label: str, backlog: list[Line]) -> None:
    """Send ``backlog`` straight into a DLQ, as an outage would have left it (FIFO: group = account, a deduplication
    id of its own, ``backlog-<payment id>``), with the one producer (``producer.send``).

    :raises SendError: SQS refused a message.
    """
    outgoing = {label: [Outgoing(_Injected(ln), ORIGINAL) for ln in backlog]}
    send(sqs, {label: dlq_url}, {label: label == FIFO}, outgoing, lambda n: None)


def counts(
    *,
    charged: list[str],
    new: list[str],
    ledger: Counter[str],
    calls_before: Counter[str],
    calls_after: Counter[str],
    poison_redriven: int,
    dlq_after: list[DlqMessage],
    is_valid: Callable[[str], bool],
    processed: dict[str, int],
    named_before: set[str],
) -> dict[str, int]:
    """One queue's ``redrive`` row (see the module docstring) from the ledger items per payment id after the
    redrive, the provider's calls per payment id before and after it, the DLQ after it, and ``processed``
    (:func:`first_processed_receive`: message id -> the first receive the runtime processed it on; a message
    missing there counts on its first copy), and ``named_before``: the originals the DLQ's reason attributes named
    before the redrive (:func:`named_originals`). A copy whose reason still names one of those was not dead-lettered
    again: SQS moved a redriven message after maxReceiveCount receives with the attributes it came with."""
    poison_after = [m for m in dlq_after if not is_valid(m.body)]
    first_sent_on = {
        original: n for original, n in first_dead_letter_receive(poison_after).items() if original not in named_before
    }
    return {
        "charged_resent": len(charged),
        "charged_new_provider_calls": sum(calls_after[p] - calls_before[p] for p in charged),
        "new_sent": len(new),
        "new_charged": sum(1 for p in new if ledger[p] == 1),
        "poison_redriven": poison_redriven,
        "poison_back_in_dlq": sum(1 for original, n in first_sent_on.items() if n <= processed.get(original, n)),
        "valid_in_dlq": sum(1 for m in dlq_after if is_valid(m.body)),
        "double_charged": sum(1 for p in set(charged) | set(new) if ledger[p] > 1),
    }


def first_dead_letter_receive(poison: list[DlqMessage]) -> dict[str, int]:
    """Original message id -> the earliest receive on which the runtime sent a copy of it to the DLQ (its reason
    attribute's ``message_id`` and ``receive_count``); messages without the runtime's reason are left out."""
    first: dict[str, int] = {}
    for m in poison:
        reason = m.reason() or {}
        if reason.get("message_id") and reason.get("receive_count"):
            original, n = str(reason["message_id"]), int(reason["receive_count"])
            first[original] = min(first.get(original, n), n)
    return first


def named_originals(dlq: list[DlqMessage]) -> set[str]:
    """The original message ids the runtime's reason attributes in ``dlq`` name."""
    return {str(reason["message_id"]) for m in dlq for reason in [m.reason() or {}] if reason.get("message_id")}


def first_processed_receive(log_rows: list[dict[str, Any]], killed_request_ids: set[str]) -> dict[str, int]:
    """Message id -> the earliest receive on which the runtime processed the record: the lowest ``receive_count``
    of the function-log lines naming its ``message_id`` in an invocation (``function_request_id``) that was not
    killed. Lines of a killed invocation do not count: the kill may have struck before the runtime finished the
    record (before its DLQ send)."""
    first: dict[str, int] = {}
    for row in log_rows:
        if not isinstance(row, dict) or row.get("function_request_id") in killed_request_ids:
            continue
        mid, n = row.get(names.FIELD_MESSAGE_ID), row.get(names.FIELD_RECEIVE_COUNT)
        if isinstance(mid, str) and isinstance(n, int) and not isinstance(n, bool):
            first[mid] = min(first.get(mid, n), n)
    return first


def read_first_processed_receive(run_dir: Path, label: str) -> dict[str, int]:
    """:func:`first_processed_receive` over one pipeline's function logs (``function-<label>-*.log``) and the
    request ids of its killed invocations (``chaos-<label>-*.jsonl``)."""
    killed = {
        str(k["request_id"])
        for k in read_jsonl(sorted(run_dir.glob(f"chaos-{label}-*.jsonl")))
        if k.get("event") == "kill" and k.get("request_id")
    }
    return first_processed_receive(read_jsonl(sorted(run_dir.glob(f"function-{label}-*.log"))), killed)
