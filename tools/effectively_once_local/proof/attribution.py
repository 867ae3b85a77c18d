"""What the platform's logs say about each message and each kill: the receives a poison message took, the first
sends SQS accepted and never handed out, the payment a kill interrupted (the payments gateway seam's provider log),
and EMF metric sums (what CloudWatch would aggregate from the function logs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..aws.readback import DlqMessage
from ..base.json_lines import read_jsonl


def emf_sum(log_paths: list[Path], metric: str) -> int:
    """Sum a metric over the EMF documents in function logs (what CloudWatch would aggregate)."""
    total = 0
    for doc in read_jsonl(log_paths):
        if isinstance(doc, dict) and "_aws" in doc and metric in doc:
            value = doc[metric]
            total += int(sum(value) if isinstance(value, list) else value)
    return total


def poison_receives(poison: list[DlqMessage], deliveries: list[dict[str, Any]]) -> dict[str, int]:
    """How many receives each poison message in a DLQ took before it got there: original message id -> receives.

    The original is the message the runtime's reason attribute names (``message_id``; a copy sent on first sight),
    else the DLQ message itself (SQS moves a message after ``maxReceiveCount`` receives with its message id). Its
    receives are the highest ``ApproximateReceiveCount`` of the platform's delivery log for that id
    (``deliveries-*.jsonl``: one line per message handed to the function) and the reason's ``receive_count``
    (the receive on which the runtime dead-lettered it), whichever is higher: a kill after the copy was sent and
    before the delete adds a receive the log shows. A poison message the delivery log never saw and without a
    reason counts 0 (it was sent straight to the DLQ).
    """
    seen: dict[str, int] = {}
    for d in deliveries:
        mid = d.get("message_id")
        if isinstance(mid, str):
            seen[mid] = max(seen.get(mid, 0), int(d.get("receive_count", 0)))
    result: dict[str, int] = {}
    for m in poison:
        reason = m.reason() or {}
        original = str(reason.get("message_id") or m.message_id)
        count = max(int(reason.get("receive_count") or 0), seen.get(original, 0))
        result[original] = max(result.get(original, 0), count)
    return result


def sent_never_delivered(
    sent: list[dict[str, Any]], deliveries: list[dict[str, Any]], dlq: list[DlqMessage]
) -> list[dict[str, Any]]:
    """The first sends of payment lines that SQS accepted and never handed out: rows of the run's send log
    (``sent-<queue>.jsonl``: ``kind``, ``message_id``, FIFO ``deduplication_id``, in send order) of kind
    ``original`` whose message id is in no delivery (``deliveries-*.jsonl``) and no DLQ message (its own id: moved
    by SQS; or the runtime's reason ``message_id``: a copy). A FIFO send whose deduplication id was sent before in
    the run is left out: SQS may drop it as a duplicate. Resends and concurrent duplicates are left out too. A
    payment whose first send vanished can still be charged through its resend, so ``lost`` does not show it: this
    count does (must be 0: anything else means the local AWS dropped an accepted message)."""
    seen = {d.get("message_id") for d in deliveries}
    seen |= {m.message_id for m in dlq} | {(m.reason() or {}).get("message_id") for m in dlq}
    seen.discard(None)
    sent_dedup_ids: set[str] = set()
    out = []
    for row in sent:
        dedup = row.get("deduplication_id")
        repeated = dedup is not None and dedup in sent_dedup_ids
        if dedup is not None:
            sent_dedup_ids.add(dedup)
        if row.get("kind") == "original" and not repeated and row.get("message_id") not in seen:
            out.append(row)
    return out


def provider_calls_by_pid(run_dir: Path, label: str) -> dict[int, list[dict[str, Any]]]:
    """Each poller's provider calls, in the order it made them (its own file: ``provider-<label>-<pid>.jsonl``)."""
    calls: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(run_dir.glob(f"provider-{label}-*.jsonl")):
        pid = int(path.stem.rsplit("-", 1)[1])
        calls[pid] = [c for c in read_jsonl([path]) if c.get("event") == "call"]
    return calls


def inflight_at_kill(kill: dict[str, Any], calls: dict[int, list[dict[str, Any]]]) -> str | None:
    """The payment a kill may have interrupted between its charge and its completion: the last provider call the
    killed process logged in the killed invocation. Read from the process's own log, which ends where the kill
    struck: a marker kept in memory can be read by the watchdog thread while the handler already logged the call
    of the next payment (a kill would then be booked to the previous payment, and the next one's replay look
    unexplained). The logs are per pid, and a long run reuses pids: two pollers' calls can share one file, each
    numbering its invocations from 1, so a call is matched by the kill's Lambda request id (unique per invocation)
    when both carry one. Kill records without an invocation number (older runs) keep their marker."""
    if "invocation" not in kill:
        return kill.get("inflight_payment")
    mine = [c for c in calls.get(int(kill.get("pid", -1)), []) if c.get("invocation") == kill["invocation"]]
    request_id = kill.get("request_id")
    if request_id is not None:
        mine = [c for c in mine if c.get("request_id", request_id) == request_id]
    return str(mine[-1]["payment_id"]) if mine else None


def log_line_count(log_paths: list[Path], message: str) -> int:
    """The function log lines with ``message`` (e.g. ``duplicate suppressed``): written and flushed one per event,
    so they survive a kill, where an EMF blob buffered for the end of the invocation dies with it."""
    return sum(1 for doc in read_jsonl(log_paths) if isinstance(doc, dict) and doc.get("message") == message)
