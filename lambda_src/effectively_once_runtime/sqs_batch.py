"""One SQS batch through a ``Consumer``: Powertools' batch processor, the deadline check before each record, and one
log line for every record that does not succeed.

- **Processor.** A standard queue uses ``BatchProcessor``; a FIFO queue (event source ARN ending in ``.fifo``) uses
  ``SqsFifoPartialProcessor(skip_group_on_error=True)``, so a failure holds back only its own message group. A batch
  whose records all failed is answered the same way, never raised (``raise_on_entire_batch_failure=False``).
- **Deadline.** Before each record but the first, the remaining time of the invocation must fit the slowest of the
  last ``RECENT_RECORDS`` records of this execution environment plus the batch's closing work
  (``CLOSING_WORK_MS``: the response and the metrics flush), and never less than the floor (``deadline_margin``,
  default the larger of 1 s and 10 % of the invocation's remaining time at its start, which stands for the function
  timeout). The window, not the slowest record ever seen, so that one outlier (a pause on a loaded host) does not
  make every later batch stop after its first record. A record that does not fit is
  not started: it and every record after it (on FIFO too, whatever its group) are returned as batch item failures,
  so SQS delivers them again after the visibility timeout. That costs a receive each (``ApproximateReceiveCount``
  goes up, towards ``maxReceiveCount``), but a record cut by the timeout costs the same receive *and* loses the
  deletes of every record already done in the batch. Deferred records are counted in ``RecordsDeferred`` with one
  INFO line per batch (``records deferred``), never in ``FailedRecords`` (its alarm would fire on them).
- **Order.** Records nearer the dead-letter queue go first: a standard batch is ordered by ``ApproximateReceiveCount``,
  highest first; a FIFO batch keeps each message group's order and puts the groups with the highest receive count
  first (SQS orders messages within a group only). The first record always starts, so a record that was deferred or
  returned by a killed batch is not deferred again behind fresher ones until ``maxReceiveCount`` moves it.
- **Failures.** Every other record in ``batchItemFailures`` gets one WARNING line ``record failed`` (``message_id``,
  ``idempotency_key``, ``error_type``, ``reason``); a FIFO record that Powertools skipped behind a failure of its
  group names that group and the message that failed (``message_group_id``, ``blocked_by_message_id``).
  ``FailedRecords`` counts them (zero included).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from . import names

if TYPE_CHECKING:
    from .consumer import Consumer

#: The floor's least value and its share of the timeout (``Consumer(deadline_margin=None)``).
MIN_DEADLINE_MARGIN_SECONDS = 1.0
DEADLINE_MARGIN_SHARE = 0.10
#: How many of this execution environment's latest records the slowest is taken from.
RECENT_RECORDS = 20
#: What the batch needs after its last record (building the response, flushing the EMF metrics), in milliseconds.
CLOSING_WORK_MS = 100.0
_RECORD_KEYS = (names.FIELD_MESSAGE_ID, names.FIELD_RECEIVE_COUNT, names.FIELD_IDEMPOTENCY_KEY)


class RecordDeferred(Exception):
    """A record not started because the invocation's remaining time could not fit it (returned to the queue)."""


def _receive_count(record: dict[str, Any]) -> int:
    raw = (record.get("attributes") or {}).get("ApproximateReceiveCount")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 1


def prioritised(records: list[dict[str, Any]], *, fifo: bool) -> list[dict[str, Any]]:
    """``records`` with the ones nearer the DLQ first (see the module docstring), a stable sort: records of equal rank
    keep their order, and on FIFO every record of a message group has its group's rank (the group's highest receive
    count), so each group keeps its order."""
    if not fifo:
        return sorted(records, key=lambda record: -_receive_count(record))
    rank: dict[Any, int] = {}
    for record in records:
        group = (record.get("attributes") or {}).get("MessageGroupId")
        rank[group] = max(rank.get(group, 0), _receive_count(record))
    return sorted(records, key=lambda record: -rank[(record.get("attributes") or {}).get("MessageGroupId")])


def remaining_ms(context: Any) -> int | None:
    """The invocation's remaining time in milliseconds; ``None`` without a Lambda context."""
    get = getattr(context, "get_remaining_time_in_millis", None)
    return int(get()) if callable(get) else None


@dataclass
class _Batch:
    """What one batch has seen: records started, deferred and failed (logged), and each FIFO group's first failure."""

    context: Any
    margin_ms: float
    started: int = 0
    deferring: bool = False
    remaining_at_stop: int | None = None
    needed_at_stop: float | None = None
    deferred: set[str] = field(default_factory=set)
    logged: set[str] = field(default_factory=set)
    blockers: dict[str, str] = field(default_factory=dict)


class SqsBatch:
    """Runs SQS batches through ``consumer``: ``handle(event, context)`` is the consumer's SQS path.

    :param consumer: the ``Consumer`` whose record path (``consumer.process_sqs_record``) each record takes.
    :param deadline_margin: the floor, in seconds, of the time a record needs to be started.
        :default: ``None``: the larger of 1 s and 10 % of the invocation's time at its start.
    """

    def __init__(self, consumer: Consumer, *, deadline_margin: float | None = None) -> None:
        self.consumer = consumer
        self.deadline_margin = deadline_margin
        #: How long this execution environment's latest records took, in milliseconds (the newest last).
        self.recent_ms: deque[float] = deque(maxlen=RECENT_RECORDS)
        self._batch: _Batch | None = None

    @property
    def slowest_ms(self) -> float:
        """The slowest of the latest ``RECENT_RECORDS`` records, in milliseconds (0 before the first)."""
        return max(self.recent_ms, default=0.0)

    def margin_ms(self, context: Any) -> float:
        """The floor in milliseconds for an invocation with ``context``."""
        if self.deadline_margin is not None:
            return self.deadline_margin * 1000
        at_start = remaining_ms(context) or 0
        return max(MIN_DEADLINE_MARGIN_SECONDS * 1000, DEADLINE_MARGIN_SHARE * at_start)

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """One batch: ``{"batchItemFailures": [{"itemIdentifier": <messageId>}, ...]}``."""
        fifo = str(event["Records"][0].get("eventSourceARN", "")).endswith(".fifo")
        records = prioritised(event["Records"], fifo=fifo)
        processor: BatchProcessor
        if fifo:
            processor = SqsFifoPartialProcessor(skip_group_on_error=True)
            # Its constructor (Powertools 3.37) takes no such argument, but BasePartialBatchProcessor._clean reads
            # the attribute when the batch ends, so setting it here is honoured.
            processor.raise_on_entire_batch_failure = False
        else:
            processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self._batch = batch = _Batch(context=context, margin_ms=self.margin_ms(context))
        logger = self.consumer.logger
        try:
            response = dict(
                process_partial_response(
                    event={**event, "Records": records},
                    record_handler=self._record,
                    processor=processor,
                    context=context,
                )
            )
            failed = [f["itemIdentifier"] for f in response.get("batchItemFailures") or []]  # type: ignore[attr-defined]
            deferred = self._account(batch, records, failed)
            metrics = self.consumer.metrics
            metrics.add_metric(name=names.METRIC_FAILED_RECORDS, unit=MetricUnit.Count, value=len(failed) - deferred)
            if deferred:
                metrics.add_metric(name=names.METRIC_RECORDS_DEFERRED, unit=MetricUnit.Count, value=deferred)
                logger.info(
                    names.MSG_RECORDS_DEFERRED,
                    extra={
                        names.FIELD_DEFERRED: deferred,
                        names.FIELD_REMAINING_MS: batch.remaining_at_stop,
                        names.FIELD_NEEDED_MS: None if batch.needed_at_stop is None else round(batch.needed_at_stop),
                    },
                )
            return response
        finally:
            self._batch = None
            logger.remove_keys(list(_RECORD_KEYS))
            logger.set_correlation_id(None)

    def _should_defer(self, batch: _Batch) -> bool:
        if batch.deferring:
            return True
        if batch.started == 0:
            return False  # the first record always starts: a batch always makes progress
        left = remaining_ms(batch.context)
        if left is None:
            return False
        needed = max(batch.margin_ms, self.slowest_ms + CLOSING_WORK_MS)
        if left >= needed:
            return False
        batch.deferring, batch.remaining_at_stop, batch.needed_at_stop = True, left, needed
        return True

    def _record(self, record: SQSRecord, lambda_context: Any = None) -> Any:
        # Powertools passes lambda_context because this signature names it (BasePartialProcessor.__call__).
        batch = self._batch
        assert batch is not None
        group = record.attributes.message_group_id
        if self._should_defer(batch):
            batch.deferred.add(record.message_id)
            if group:
                batch.blockers.setdefault(group, record.message_id)
            raise RecordDeferred(f"deferred: {batch.remaining_at_stop} ms left, {batch.needed_at_stop} ms needed")
        batch.started += 1
        started = time.monotonic()
        try:
            return self.consumer.process_sqs_record(record, lambda_context)
        except Exception as error:
            batch.logged.add(record.message_id)
            if group:
                batch.blockers.setdefault(group, record.message_id)
            self.consumer.log_failure(error)
            raise
        finally:
            self.recent_ms.append((time.monotonic() - started) * 1000)

    def _account(self, batch: _Batch, records: list[dict[str, Any]], failed: list[str]) -> int:
        """Log the failures no record call logged (FIFO records skipped behind a failure); the deferred count."""
        deferred = 0
        groups: dict[str, str] = {}
        for raw in records:
            group = (raw.get("attributes") or {}).get("MessageGroupId")
            if group:
                groups[str(raw.get("messageId"))] = group
        for message_id in failed:
            if message_id in batch.deferred:
                deferred += 1
                continue
            if message_id in batch.logged:
                continue
            group = groups.get(message_id)
            blocker = batch.blockers.get(group) if group else None
            if blocker is not None and blocker in batch.deferred:
                deferred += 1  # behind a deferred record of its group: deferred as well
                continue
            self._log_skipped(message_id, group, blocker)
        return deferred

    def _log_skipped(self, message_id: str, group: str | None, blocker: str | None) -> None:
        log: Callable[..., None] = self.consumer.logger.warning
        log(
            names.MSG_RECORD_FAILED,
            extra={
                names.FIELD_MESSAGE_ID: message_id,
                names.FIELD_IDEMPOTENCY_KEY: None,
                names.FIELD_ERROR_TYPE: "SQSFifoMessageGroupCircuitBreakerError",
                names.FIELD_REASON: f"skipped: message {blocker} of message group {group} failed before it",
                names.FIELD_MESSAGE_GROUP_ID: group,
                names.FIELD_BLOCKED_BY: blocker,
            },
        )
