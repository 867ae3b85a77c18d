"""Per-record backoff on SQS: a record returned to its queue (deferred for time, or failed transiently) comes back
after a delay of its own, set with ``ChangeMessageVisibilityBatch``, instead of the queue's whole visibility
timeout. Standard library and the SQS client only.

- **Which records.** Every record of the batch's ``batchItemFailures`` whose queue is in ``SOURCE_QUEUES``
  (``settings.QueueFacts``, set by ``IdempotentQueueConsumer`` for the queue it wires). A record from a queue the
  constructs did not name (another mapping, a hand-built event) is left as it is: it comes back after the queue's
  visibility timeout, as without this module.
- **The delay** (whole seconds, ``delay_seconds``) is exponential in the record's ``ApproximateReceiveCount`` ``n``,
  with "equal jitter": a ceiling of ``BASE_SECONDS * 2 ** (n - 1)``, capped, then a uniform draw between half the
  ceiling and the ceiling, rounded up. So 1, 2, 4, 8, 16 ... seconds at most for receives 1, 2, 3, 4, 5 ...
  (Amazon Builders' Library, "Timeouts, retries, and backoff with jitter"; AWS Architecture Blog, "Exponential
  Backoff And Jitter"). The receive count counts receives, not attempts (a throttled receive raises it too): the cap
  bounds what that costs.
- **The cap** is the queue's visibility timeout when known (a backoff never makes a record wait longer than doing
  nothing would), and never more than ``MAX_BACKOFF_SECONDS`` (15 minutes). SQS refuses a message a total visibility
  of more than 12 hours counted from its receive: 15 minutes, after an invocation of at most 15 minutes and a
  batching window of at most 5, stays far below it.
- **An in-progress duplicate** (Powertools' ``IdempotencyAlreadyInProgressError``: another invocation holds the key)
  waits at least the function timeout (``floor_seconds``), within the cap: the holder has then finished, or its
  in-progress record has expired with its invocation.
- **FIFO.** SQS delivers none of a message group's later messages while one is in flight or waiting, so every
  returned record of a group gets the group's one delay (from its highest receive count), in one batch call: the
  followers come back no later than the record they wait behind, and the group resumes in order.
- **Failures never lose a record.** The records stay in ``batchItemFailures`` whatever happens here: a call that
  fails, or a ``Failed`` entry, leaves those records on the queue's visibility timeout, with one WARNING line
  (``backoff failed``). Nothing is raised. With less than ``MIN_REMAINING_MS`` of the invocation left, no call is
  made.

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


def delay_seconds(receive_count: int, *, cap: int, floor: int = 0, draw: Callable[[], float] = random.random) -> int:
    """The delay, in whole seconds, of a record received ``receive_count`` times (see the module docstring).

    :param cap: the longest delay (seconds, 0 or more).
    :param floor: the shortest (seconds), itself within ``cap``.
    :param draw: a uniform draw in [0, 1). :default: ``random.random``.
    """
    exponent = min(max(receive_count, 1) - 1, 30)
    ceiling = min(cap, BASE_SECONDS << exponent)
    delay = math.ceil(ceiling / 2 + draw() * ceiling / 2)
    return min(cap, max(floor, delay))


def cap_seconds(facts: QueueFacts) -> int:
    """The longest delay for a record of the queue ``facts`` describes: its visibility timeout when known, never more
    than ``MAX_BACKOFF_SECONDS``."""
    timeout = facts.visibility_timeout_seconds
    return MAX_BACKOFF_SECONDS if timeout is None else min(timeout, MAX_BACKOFF_SECONDS)


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
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, IdempotencyAlreadyInProgressError):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


@dataclass(frozen=True)
class Returned:
    """One record going back to its queue.

    :ivar message_id: the record's ``messageId``.
    :ivar receipt_handle: its ``receiptHandle`` (this receive's).
    :ivar queue_arn: its ``eventSourceARN``.
    :ivar receive_count: its ``ApproximateReceiveCount``.
    :ivar group: its FIFO ``MessageGroupId``, or ``None``.
    :ivar in_progress: it failed because another invocation holds its key.
    """

    message_id: str
    receipt_handle: str
    queue_arn: str
    receive_count: int
    group: str | None = None
    in_progress: bool = False


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

    def plan(self, returned: list[Returned], floor_seconds: int) -> dict[str, list[tuple[Returned, int]]]:
        """``{queue ARN: [(record, delay seconds), ...]}`` for the records of known queues, in their order; on FIFO
        every record of a group has the group's one delay.

        :param floor_seconds: the least delay of an in-progress duplicate (the function timeout, in seconds).
        """
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
            cap = cap_seconds(facts)
            if record.group is None:
                members = [record]
            else:
                members = groups[(record.queue_arn, record.group)]
            key = (record.queue_arn, record.group or record.message_id)
            if key not in group_delay:
                count = max(member.receive_count for member in members)
                floor = min(cap, floor_seconds) if any(member.in_progress for member in members) else 0
                group_delay[key] = delay_seconds(count, cap=cap, floor=floor, draw=self._draw)
            plan.setdefault(record.queue_arn, []).append((record, group_delay[key]))
        return plan

    def apply(self, returned: list[Returned], floor_seconds: int, remaining_ms: int | None) -> int:
        """Change the visibility of ``returned`` (see :meth:`plan`); how many records got their delay. Never raises.

        :param remaining_ms: the invocation's time left (``None``: no limit); under ``MIN_REMAINING_MS`` nothing is
            called.
        """
        if not returned or (remaining_ms is not None and remaining_ms < MIN_REMAINING_MS):
            return 0
        done: list[int] = []
        for arn, entries in self.plan(returned, floor_seconds).items():
            located = queue_url(arn)
            assert located is not None  # plan() keeps only the ARNs it can locate
            for chunk in _chunks(entries):
                done += self._change(located, chunk)
        if done and self.metrics is not None:
            self.metrics.add_metric(name=names.METRIC_RECORDS_BACKED_OFF, unit=MetricUnit.Count, value=len(done))
            self.logger.info(
                names.MSG_RECORDS_BACKED_OFF,
                extra={names.FIELD_BACKED_OFF: len(done), names.FIELD_DELAY_SECONDS: [min(done), max(done)]},
            )
        elif done:
            self.logger.info(
                names.MSG_RECORDS_BACKED_OFF,
                extra={names.FIELD_BACKED_OFF: len(done), names.FIELD_DELAY_SECONDS: [min(done), max(done)]},
            )
        return len(done)

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
            names.MSG_BACKOFF_FAILED, extra={names.FIELD_MESSAGE_ID: message_ids, names.FIELD_REASON: reason[:500]}
        )


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
