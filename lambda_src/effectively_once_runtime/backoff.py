"""Per-record backoff on SQS: a record returned to its queue (deferred for time, or failed transiently) comes back
after a delay of its own, set with ``ChangeMessageVisibilityBatch``, instead of the queue's whole visibility
timeout. Standard library and the SQS client only.

- **Which records.** Every record of the batch's ``batchItemFailures`` whose queue is in ``SOURCE_QUEUES``
  (``settings.QueueFacts``, set by ``IdempotentQueueConsumer`` for the queue it wires). A record from a queue the
  constructs did not name (another mapping, an imported function whose environment the caller sets, a record
  without ``eventSourceARN``) is left as it is: it comes back after the queue's visibility timeout.
- **The delay** (whole seconds, ``delay_seconds``) is exponential in the record's ``ApproximateReceiveCount`` ``n``,
  with "equal jitter": a ceiling, then a uniform draw between half the ceiling and the ceiling, rounded up (Amazon
  Builders' Library, "Timeouts, retries, and backoff with jitter"; AWS Architecture Blog, "Exponential Backoff And
  Jitter").
  - A record that never started (deferred for time, or skipped behind its FIFO group's deferral): a ceiling of
    ``BASE_SECONDS * 2 ** (n - 1)``, so 1, 2, 4, 8 ... seconds: nothing is wrong with it, it only needs a batch
    with time.
  - A record that ran and failed: with the queue's ``maxReceiveCount`` known, the ceiling is budget-scaled,
    ``cap / 2 ** (maxReceiveCount - n)``: the last retry waits the whole cap, the one before half of it, and so on,
    so the receives left are spread over half the cap to all of it (with maxReceiveCount 5 and a 60 s cap: up to
    4, 8, 15 and 30 s after receives 1 to 4); without it, as a record that never started.
  - The receive count counts receives, not attempts (a throttled receive raises it too): the cap bounds what that
    costs.
- **The cap** is what the queue would still keep the record without a backoff: its visibility timeout less the time
  since the invocation started, so a backoff never makes a record wait longer than doing nothing would; with the
  visibility timeout unknown, the function timeout stands for it. Never more than ``MAX_BACKOFF_SECONDS``
  (15 minutes): SQS refuses a total visibility of more than 12 hours counted from the receive, and 15 minutes after
  an invocation of at most 15 and a batching window of at most 5 stays far below it. A record with a cap of 0 is
  left alone.
- **An in-progress duplicate** (Powertools' ``IdempotencyAlreadyInProgressError``: another invocation holds the key)
  waits at least the function timeout, within the cap: the holder has then finished, or its in-progress record has
  expired with its invocation.
- **FIFO.** SQS delivers none of a message group's later messages while one is in flight or waiting, so every
  returned record of a group gets the group's one delay (from its highest receive count), in one batch call: the
  followers come back no later than the record they wait behind, and the group resumes in order.
- **Failures never lose a record.** The records stay in ``batchItemFailures`` whatever happens here: a call that
  fails, or a ``Failed`` entry, leaves those records on the queue's visibility timeout, with one WARNING line
  (``backoff failed``, ``message_ids``). Nothing is raised. No call starts with less than ``MIN_REMAINING_MS`` of the
  invocation left; each call has ``CLIENT_TIMEOUT_SECONDS`` to connect and to read, one attempt.
- **The receive budget's step** (``Backoff.delete``): before a record on its last receive runs without the time
  (``sqs_batch.py``), the records already done are deleted, so a timeout then returns only what was not done.

Sources: Amazon SQS API Reference, ``ChangeMessageVisibilityBatch`` (at most 10 entries, the 12-hour limit);
Amazon SQS Developer Guide, "Amazon SQS visibility timeout" and "FIFO queue message grouping".
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from . import names
from .errors import caused_by
from .settings import QueueFacts

#: The first receive's ceiling, in seconds (the delay is drawn between half of it and all of it).
BASE_SECONDS = 1
#: No delay is longer (seconds): 15 minutes.
MAX_BACKOFF_SECONDS = 900
#: ``ChangeMessageVisibilityBatch`` takes at most this many entries.
BATCH_ENTRIES = 10
#: No backoff call with less of the invocation left than this (milliseconds): the records keep the queue's timeout.
MIN_REMAINING_MS = 200
#: The backoff client's connect and read timeouts (seconds).
CLIENT_TIMEOUT_SECONDS = 1
#: ``arn:<partition>:...`` to the DNS suffix of the partition's SQS queue URLs.
_DNS_SUFFIX = {"aws": "amazonaws.com", "aws-cn": "amazonaws.com.cn", "aws-us-gov": "amazonaws.com"}


def delay_seconds(
    receive_count: int,
    *,
    cap: int,
    floor: int = 0,
    max_receive_count: int | None = None,
    attempted: bool = False,
    draw: Callable[[], float] = random.random,
) -> int:
    """The delay, in whole seconds, of a record received ``receive_count`` times (see the module docstring): a
    ceiling, then a uniform draw between half of it and all of it, rounded up, within ``[floor, cap]``.

    :param cap: the longest delay (seconds, 0 or more).
    :param floor: the shortest (seconds), itself within ``cap``.
    :param max_receive_count: the queue's ``maxReceiveCount``, or ``None`` when unknown.
    :param attempted: the record ran and failed (else it was deferred or skipped unstarted). An attempted record's
        ceiling is budget-scaled when ``max_receive_count`` is known: ``cap / 2 ** (max_receive_count - n)``, so the
        retry before the last receive waits the whole cap, the one before half of it, and so on; otherwise, and for
        a record never started, ``BASE_SECONDS * 2 ** (n - 1)``.
    :param draw: a uniform draw in [0, 1). :default: ``random.random``.
    """
    count = max(receive_count, 1)
    if attempted and max_receive_count is not None:
        ceiling = max(float(min(BASE_SECONDS, cap)), cap / (1 << min(max(max_receive_count - count, 0), 30)))
    else:
        ceiling = float(min(cap, BASE_SECONDS << min(count - 1, 30)))
    delay = math.ceil(ceiling / 2 + draw() * ceiling / 2)
    return min(cap, max(floor, delay))


def cap_seconds(facts: QueueFacts, *, elapsed_seconds: float = 0.0, function_timeout_seconds: int | None = None) -> int:
    """The longest delay for a record of the queue ``facts`` describes, in whole seconds (0 or more): what the queue
    would still keep it without a backoff, its visibility timeout less ``elapsed_seconds`` (since the invocation
    started, about since the receive), never more than ``MAX_BACKOFF_SECONDS``. With the visibility timeout unknown,
    the function timeout stands for it (a queue's visibility timeout should be at least that), else
    ``MAX_BACKOFF_SECONDS``."""
    timeout = facts.visibility_timeout_seconds
    if timeout is None:
        timeout = function_timeout_seconds if function_timeout_seconds is not None else MAX_BACKOFF_SECONDS
    return max(0, min(MAX_BACKOFF_SECONDS, math.floor(timeout - elapsed_seconds)))


def queue_url(arn: str) -> tuple[str, str] | None:
    """``(Region, queue URL)`` of the queue ARN ``arn:<partition>:sqs:<region>:<account>:<name>``, in the URL form of
    Amazon SQS Developer Guide, "Queue and message identifiers"; ``None`` for another ARN or partition."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs" or parts[1] not in _DNS_SUFFIX:
        return None
    _, partition, _, region, account, name = parts
    return region, f"https://sqs.{region}.{_DNS_SUFFIX[partition]}/{account}/{name}"


def is_in_progress(error: BaseException) -> bool:
    """Whether ``error``, or an exception in its ``__cause__`` chain, is ``IdempotencyAlreadyInProgressError``."""
    return caused_by(error, (IdempotencyAlreadyInProgressError,))


@dataclass(frozen=True)
class Returned:
    """One record going back to its queue.

    :ivar message_id: the record's ``messageId``.
    :ivar receipt_handle: its ``receiptHandle`` (this receive's).
    :ivar queue_arn: its ``eventSourceARN``.
    :ivar receive_count: its ``ApproximateReceiveCount``.
    :ivar group: its FIFO ``MessageGroupId``, or ``None``.
    :ivar in_progress: it failed because another invocation holds its key.
    :ivar attempted: it ran and failed (else it was deferred, or skipped behind its FIFO group's failure).
    """

    message_id: str
    receipt_handle: str
    queue_arn: str
    receive_count: int
    group: str | None = None
    in_progress: bool = False
    attempted: bool = False


@dataclass(frozen=True)
class Timing:
    """What a batch's backoff knows of its invocation.

    :ivar elapsed_seconds: since the invocation started (about since the receive).
    :ivar function_timeout_seconds: the function timeout, rounded up (the remaining time at the start), or ``None``
        without a Lambda context: the least delay of an in-progress duplicate, and the cap when the visibility
        timeout is unknown.
    """

    elapsed_seconds: float = 0.0
    function_timeout_seconds: int | None = None


class Backoff:
    """Sets each returned record's visibility for its next attempt (see the module docstring).

    :param queues: the known source queues (``RuntimeSettings.source_queues``).
    :param client: the SQS client of a Region, ``client(region)`` (built once per Region by the caller).
    :param logger: the consumer's Logger. :param metrics: its Metrics.
    :param draw: a uniform draw in [0, 1). :default: ``random.random``.
    """

    def __init__(
        self,
        queues: Mapping[str, QueueFacts],
        client: Callable[[str], Any],
        logger: Any,
        metrics: Any,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.queues, self._client, self.logger, self.metrics, self._draw = queues, client, logger, metrics, draw

    def warm(self) -> None:
        """Build the SQS client of every known queue's Region now (the init phase), not on a batch's time."""
        for arn in self.queues:
            located = queue_url(arn)
            if located is not None:
                self._client(located[0])

    def plan(self, returned: list[Returned], timing: Timing) -> dict[str, list[tuple[Returned, int]]]:
        """``{queue ARN: [(record, delay seconds), ...]}`` for the records of known queues, in their order, those
        with nothing to gain left out (a cap of 0); on FIFO every record of a group has the group's one delay."""
        groups: dict[tuple[str, str], list[Returned]] = {}
        for record in returned:
            if record.group is not None:
                groups.setdefault((record.queue_arn, record.group), []).append(record)
        group_delay: dict[tuple[str, str], int] = {}
        plan: dict[str, list[tuple[Returned, int]]] = {}
        for record in returned:
            facts = self.queues.get(record.queue_arn)
            if facts is None or queue_url(record.queue_arn) is None:
                continue
            cap = cap_seconds(
                facts, elapsed_seconds=timing.elapsed_seconds, function_timeout_seconds=timing.function_timeout_seconds
            )
            members = [record] if record.group is None else groups[(record.queue_arn, record.group)]
            key = (record.queue_arn, record.group or record.message_id)
            if key not in group_delay:
                floor = timing.function_timeout_seconds or 0
                group_delay[key] = delay_seconds(
                    max(member.receive_count for member in members),
                    cap=cap,
                    floor=min(cap, floor) if any(member.in_progress for member in members) else 0,
                    max_receive_count=facts.max_receive_count,
                    attempted=any(member.attempted for member in members),
                    draw=self._draw,
                )
            if cap > 0:
                plan.setdefault(record.queue_arn, []).append((record, group_delay[key]))
        return plan

    def apply(self, returned: list[Returned], timing: Timing, remaining_ms: Callable[[], int | None]) -> int:
        """Change the visibility of ``returned`` (see :meth:`plan`); how many records got their delay. Never raises.

        :param remaining_ms: the invocation's time left now (``None``: no limit); no call starts under
            ``MIN_REMAINING_MS``, and the records not reached keep the queue's visibility timeout.
        """
        done: list[int] = []
        for arn, entries in self.plan(returned, timing).items():
            located = queue_url(arn)
            assert located is not None  # plan() keeps only the ARNs it can locate
            for chunk in _chunks(entries):
                if not _time_for_a_call(remaining_ms()):
                    self._failed([record.message_id for record, _ in chunk], "too little of the invocation left")
                    continue
                done += self._change(located, chunk)
        if done:
            if self.metrics is not None:
                self.metrics.add_metric(name=names.METRIC_RECORDS_BACKED_OFF, unit=MetricUnit.Count, value=len(done))
            self.logger.info(
                names.MSG_RECORDS_BACKED_OFF,
                extra={names.FIELD_BACKED_OFF: len(done), names.FIELD_DELAY_SECONDS: [min(done), max(done)]},
            )
        return len(done)

    def delete(self, records: list[Returned], remaining_ms: Callable[[], int | None]) -> list[str]:
        """Delete ``records`` (done) from their queues now, with ``DeleteMessageBatch``: the receive budget's step
        before a record runs without the time, so a timeout then returns only what was not done. The ids deleted;
        a failure is logged (``backoff failed``) and left to the event source mapping's delete. Never raises."""
        deleted: list[str] = []
        by_queue: dict[str, list[Returned]] = {}
        for record in records:
            if queue_url(record.queue_arn) is not None:
                by_queue.setdefault(record.queue_arn, []).append(record)
        for arn, members in by_queue.items():
            region, url = queue_url(arn) or ("", "")
            for start in range(0, len(members), BATCH_ENTRIES):
                chunk = members[start : start + BATCH_ENTRIES]
                if not _time_for_a_call(remaining_ms()):
                    return deleted
                entries = [{"Id": str(i), "ReceiptHandle": r.receipt_handle} for i, r in enumerate(chunk)]
                try:
                    answer = self._client(region).delete_message_batch(QueueUrl=url, Entries=entries)
                except Exception as error:  # noqa: BLE001 - the event source mapping deletes them at the batch's end
                    self._failed([r.message_id for r in chunk], f"delete: {type(error).__name__}: {error}")
                    continue
                failed = {str(entry.get("Id")) for entry in answer.get("Failed") or []}
                deleted += [r.message_id for i, r in enumerate(chunk) if str(i) not in failed]
        return deleted

    def _change(self, located: tuple[str, str], chunk: list[tuple[Returned, int]]) -> list[int]:
        """One ``ChangeMessageVisibilityBatch`` call; the delays of the entries it changed."""
        region, url = located
        entries = [
            {"Id": str(index), "ReceiptHandle": record.receipt_handle, "VisibilityTimeout": delay}
            for index, (record, delay) in enumerate(chunk)
        ]
        try:
            answer = self._client(region).change_message_visibility_batch(QueueUrl=url, Entries=entries)
        except Exception as error:  # noqa: BLE001 - the records keep the queue's visibility timeout
            self._failed([record.message_id for record, _ in chunk], f"{type(error).__name__}: {error}")
            return []
        failed = {str(entry.get("Id")): entry for entry in answer.get("Failed") or []}
        for index, entry in failed.items():
            if index.isdigit() and int(index) < len(chunk):
                reason = f"{entry.get('Code')}: {entry.get('Message')}"
                self._failed([chunk[int(index)][0].message_id], reason)
        return [delay for index, (_, delay) in enumerate(chunk) if str(index) not in failed]

    def _failed(self, message_ids: list[str], reason: str) -> None:
        self.logger.warning(
            names.MSG_BACKOFF_FAILED, extra={names.FIELD_MESSAGE_IDS: message_ids, names.FIELD_REASON: reason[:500]}
        )


def _time_for_a_call(remaining_ms: int | None) -> bool:
    """Whether a call may start with ``remaining_ms`` of the invocation left (``None``: no limit)."""
    return remaining_ms is None or remaining_ms >= MIN_REMAINING_MS


def sqs_clients() -> Callable[[str], Any]:
    """``client(region)``: one boto3 SQS client per Region, built on first use, with ``CLIENT_TIMEOUT_SECONDS`` to
    connect and to read and a single attempt (a backoff that cannot be made at once is not worth the invocation's
    time: its records keep the queue's visibility timeout)."""
    clients: dict[str, Any] = {}

    def client(region: str) -> Any:
        if region not in clients:
            import boto3
            from botocore.config import Config

            config = Config(
                connect_timeout=CLIENT_TIMEOUT_SECONDS,
                read_timeout=CLIENT_TIMEOUT_SECONDS,
                retries={"total_max_attempts": 1},
            )
            clients[region] = boto3.client("sqs", region_name=region, config=config)
        return clients[region]

    return client


def _chunks(entries: list[tuple[Returned, int]]) -> list[list[tuple[Returned, int]]]:
    """``entries`` in calls of at most ``BATCH_ENTRIES``, a FIFO group never split across two (a FIFO batch holds at
    most 10 records, so a group always fits one call)."""
    chunks: list[list[tuple[Returned, int]]] = []
    by_group: dict[str, list[tuple[Returned, int]]] = {}
    for entry in entries:
        by_group.setdefault(entry[0].group or entry[0].message_id, []).append(entry)
    for members in by_group.values():
        if chunks and len(chunks[-1]) + len(members) <= BATCH_ENTRIES:
            chunks[-1] += members
        else:
            chunks += [members[start : start + BATCH_ENTRIES] for start in range(0, len(members), BATCH_ENTRIES)]
    return chunks
