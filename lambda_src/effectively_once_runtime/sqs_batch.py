"""The SQS record path: one batch through Powertools' batch processor, the deadline check before each record, each
record through the consumer's ``RecordExecution`` (a permanent failure to the dead-letter queue on first sight), and
one log line for every record that does not succeed.

- **Processor.** A standard queue uses ``BatchProcessor``; a FIFO queue uses
  ``SqsFifoPartialProcessor(skip_group_on_error=True)``, so a failure holds back only its own message group. A batch
  whose records all failed is answered the same way, never raised (``raise_on_entire_batch_failure=False``). Each
  record's own queue says which (``is_fifo_record``): its event source ARN ending in ``.fifo``, or, for a record
  without ``eventSourceARN`` (a hand-built or replayed event), a ``SequenceNumber`` attribute, which only FIFO
  messages carry (a ``MessageGroupId`` alone is not proof: standard queues take one for fair queueing). One FIFO
  record makes the batch FIFO; a record with neither counts as standard.
- **Deadline.** Before each record but the first, the remaining time of the invocation must fit the slowest of the
  last ``RECENT_RECORDS`` records of this execution environment plus the batch's closing work
  (``CLOSING_WORK_MS``: the response and the metrics flush), and never less than the floor (``deadline_margin``,
  default the larger of 1 s and 10 % of the invocation's remaining time at its start, which stands for the function
  timeout): ``deadline.py`` holds the rule. The window, not the slowest record ever seen, so that one outlier (a pause
  on a loaded host) does not make every later batch stop after its first record. A record that does not fit is not
  started: it and every record after it (on FIFO too, whatever its group) are returned as batch item failures,
  except the records on their last receive (the receive budget, below), so SQS delivers them again after their
  backoff (below; the queue's visibility timeout for a queue not in ``SOURCE_QUEUES``). That costs a receive each
  (``ApproximateReceiveCount`` goes up, towards ``maxReceiveCount``), but a record cut by the timeout costs the same
  receive *and* loses the deletes of every record already done in the batch. Deferred records are counted in
  ``RecordsDeferred`` with one INFO line per batch (``records deferred``), never in ``FailedRecords`` (its alarm
  would fire on them).
- **Order.** Records nearer the dead-letter queue go first: a standard batch is ordered by ``ApproximateReceiveCount``,
  highest first; a FIFO batch keeps each message group's order and puts the groups with the highest receive count
  first (SQS orders messages within a group only). The first record always starts, so a record that was deferred or
  returned by a killed batch is not deferred again behind fresher ones until ``maxReceiveCount`` moves it.
- **The receive budget.** A record on its queue's last receive (``is_last_receive``: its receive count has reached
  the ``maxReceiveCount`` that ``SOURCE_QUEUES`` gives for its ``eventSourceARN``) is never deferred for time: it
  goes first, and runs even when the deadline check says no, since a deferral would move it to the DLQ. On FIFO it
  never runs ahead of its own group: its group goes first, and the records of the group before it run too
  (``protected``). With the count unknown (the queue not in ``SOURCE_QUEUES``, or no ``maxReceiveCount`` known) a
  record is ordered and deferred as any other.
- **Backoff.** Every returned record of a queue in ``SOURCE_QUEUES`` gets its own delay (``backoff.py``).
- **Bad input first.** Before the first record runs, every record is screened without I/O
  (``RecordExecution.screen``: strict JSON object, a key, the consumer's ``check``); bad input goes through the
  permanent path below at once, so a short batch, a failure or a kill later in the batch never costs it another
  receive. A FIFO record screened out and dead-lettered is done even when Powertools skips its group behind a
  failure: it left its group on first sight.
- **Permanent failures** (``dead_letter.is_permanent``) are sent to the dead-letter queue with their reason and
  reported done, so a FIFO group goes on behind them; the original is deleted right after its copy is sent (a kill
  later in the batch cannot hand it out again). When the queue is not set or the send fails, the record is a batch
  item failure (``dead letter failed``): nothing is lost.
- **Failures.** Every other record in ``batchItemFailures`` gets one WARNING line ``record failed`` (``message_id``,
  ``idempotency_key``, ``error_type``, ``reason``); a FIFO record that Powertools skipped behind a failure of its
  group names that group and the message that failed (``message_group_id``, ``blocked_by_message_id``).
  ``FailedRecords`` counts them (zero included).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from . import events, names
from .backoff import Backoff, Returned, Timing, is_in_progress, queue_url
from .dead_letter import DeadLetterQueue
from .deadline import (
    CLOSING_WORK_MS,
    DEADLINE_MARGIN_SHARE,
    MIN_DEADLINE_MARGIN_SECONDS,
    RECENT_RECORDS,
    Deadline,
    RecentRecords,
    remaining_ms,
)
from .execution import RecordExecution
from .settings import QueueFacts

# Re-exported from ``deadline.py``, their one home, for the code that imported them from here.
__all__ = [
    "CLOSING_WORK_MS",
    "DEADLINE_MARGIN_SHARE",
    "MIN_DEADLINE_MARGIN_SECONDS",
    "RECENT_RECORDS",
    "RecordDeferred",
    "SqsBatch",
    "prioritised",
    "remaining_ms",
]


class RecordDeferred(Exception):
    """A record not started because the invocation's remaining time could not fit it (returned to the queue)."""


def _receive_count(record: dict[str, Any]) -> int:
    raw = (record.get("attributes") or {}).get("ApproximateReceiveCount")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 1


def is_fifo_record(record: dict[str, Any]) -> bool:
    """Whether ``record`` came from a FIFO queue: its ``eventSourceARN`` ends in ``.fifo``; without an
    ``eventSourceARN``, it carries ``attributes.SequenceNumber`` (FIFO messages only)."""
    arn = record.get("eventSourceARN")
    if isinstance(arn, str) and arn:
        return names.is_fifo_address(arn)
    return bool((record.get("attributes") or {}).get("SequenceNumber"))


def is_last_receive(record: dict[str, Any], queues: Mapping[str, QueueFacts]) -> bool:
    """Whether ``record`` is on its queue's last receive: its ``ApproximateReceiveCount`` has reached the
    ``maxReceiveCount`` that ``SOURCE_QUEUES`` gives for its ``eventSourceARN`` (the next receive moves it to the DLQ).
    ``False`` when that count is unknown (no ``SOURCE_QUEUES`` entry, or none for the queue, or no redrive policy):
    such a record is ordered and deferred as any other."""
    facts = queues.get(str(record.get("eventSourceARN") or ""))
    limit = None if facts is None else facts.max_receive_count
    return limit is not None and _receive_count(record) >= limit


def prioritised(
    records: list[dict[str, Any]], *, fifo: bool, queues: Mapping[str, QueueFacts] | None = None
) -> list[dict[str, Any]]:
    """``records`` with the ones nearer the DLQ first (see the module docstring), a stable sort: records on their last
    receive (:func:`is_last_receive`, with ``queues``) first, then by receive count, highest first; records of equal
    rank keep their order, and on FIFO every record of a message group has its group's rank (its best record's), so
    each group keeps its order."""
    known = queues or {}

    def rank(record: dict[str, Any]) -> tuple[bool, int]:
        return is_last_receive(record, known), _receive_count(record)

    if not fifo:
        return sorted(records, key=rank, reverse=True)
    ranks: dict[Any, tuple[bool, int]] = {}
    for record in records:
        group = (record.get("attributes") or {}).get("MessageGroupId")
        ranks[group] = max(ranks.get(group, (False, 0)), rank(record))
    return sorted(
        records, key=lambda record: ranks[(record.get("attributes") or {}).get("MessageGroupId")], reverse=True
    )


def protected(records: list[dict[str, Any]], queues: Mapping[str, QueueFacts]) -> set[str]:
    """The message ids never deferred for time: each record on its last receive and, on FIFO, every record of its
    group before it in ``records`` (it cannot run ahead of them)."""
    ids: set[str] = set()
    for index, record in enumerate(records):
        if not is_last_receive(record, queues):
            continue
        ids.add(str(record.get("messageId")))
        group = (record.get("attributes") or {}).get("MessageGroupId") if is_fifo_record(record) else None
        if group is not None:
            ids.update(
                str(earlier.get("messageId"))
                for earlier in records[:index]
                if (earlier.get("attributes") or {}).get("MessageGroupId") == group
            )
    return ids


@dataclass
class _Batch:
    """What one batch has seen: records started, deferred and failed (logged), and each FIFO group's first failure."""

    deadline: Deadline
    started: int = 0
    deferring: bool = False
    remaining_at_stop: int | None = None
    needed_at_stop: float | None = None
    deferred: set[str] = field(default_factory=set)
    logged: set[str] = field(default_factory=set)
    in_progress: set[str] = field(default_factory=set)
    protected: set[str] = field(default_factory=set)
    #: Bad input found before the first record ran: ``None`` when dead-lettered (done), else the error it failed on.
    screened: dict[str, BaseException | None] = field(default_factory=dict)
    #: What the screen found clean, by message id: the record's turn takes it as it is (parsed and checked once).
    clean: dict[str, events.Delivered] = field(default_factory=dict)
    #: The records done so far (their raw records), and those of them already deleted by the runtime.
    done: list[dict[str, Any]] = field(default_factory=list)
    settled: set[str] = field(default_factory=set)
    blockers: dict[str, str] = field(default_factory=dict)


class SqsBatch:
    """Runs SQS batches through ``execution``: ``handle(event, context)`` is the consumer's SQS path.

    :param execution: the consumer's record execution (its ``deadline`` is the current invocation's).
    :param envelope: what the key and the record function see of a record's body (``events.payload``).
    :param dead_letter: the dead-letter queue of the execution environment's state, or ``None`` without one.
    :param backoff: the per-record backoff of the execution environment's state (``backoff.py``), or ``None``
        without one (the returned records keep their queue's visibility timeout).
    :param queues: the known source queues (``SOURCE_QUEUES``): their ``maxReceiveCount`` is the receive budget.
        :default: none known.
    """

    def __init__(
        self,
        execution: RecordExecution,
        *,
        envelope: str | None = None,
        dead_letter: Callable[[], DeadLetterQueue | None] = lambda: None,
        backoff: Callable[[], Backoff | None] = lambda: None,
        queues: Callable[[], Mapping[str, QueueFacts]] = dict,
    ) -> None:
        self.execution = execution
        self.envelope = envelope
        self._dead_letter_queue = dead_letter
        self._backoff = backoff
        self._queues = queues
        self.recent = RecentRecords()
        self._batch: _Batch | None = None

    @property
    def recent_ms(self) -> Any:
        """How long this execution environment's latest records took, in milliseconds (the newest last)."""
        return self.recent.durations

    @property
    def slowest_ms(self) -> float:
        """The slowest of the latest ``RECENT_RECORDS`` records, in milliseconds (0 before the first)."""
        return self.recent.slowest_ms

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """One batch: ``{"batchItemFailures": [{"itemIdentifier": <messageId>}, ...]}``."""
        fifo = any(is_fifo_record(record) for record in event["Records"])
        queues = self._queues()
        records = prioritised(event["Records"], fifo=fifo, queues=queues)
        self._batch = batch = _Batch(deadline=self.execution.deadline, protected=protected(records, queues))
        try:
            self._screen(batch, records, context)
            response = dict(
                process_partial_response(
                    event={**event, "Records": records},
                    record_handler=self._record,
                    processor=_processor(fifo),
                    context=context,
                )
            )
            # A FIFO record skipped behind its group's failure may be bad input already dead-lettered: it is done.
            items = [
                item
                for item in response.get("batchItemFailures") or []  # type: ignore[attr-defined]
                if not (item["itemIdentifier"] in batch.screened and batch.screened[item["itemIdentifier"]] is None)
            ]
            response["batchItemFailures"] = items
            failed = [item["itemIdentifier"] for item in items]
            self._report(batch, len(failed), self._account(batch, records, failed))
            self._back_off(batch, records, set(failed))
            return response
        finally:
            self._batch = None
            self.execution.clear_record_keys()

    def _report(self, batch: _Batch, failed: int, deferred: int) -> None:
        """``FailedRecords`` (the deferred left out), and ``RecordsDeferred`` with its line when some were."""
        metrics = self.execution.metrics
        metrics.add_metric(name=names.METRIC_FAILED_RECORDS, unit=MetricUnit.Count, value=failed - deferred)
        if deferred:
            metrics.add_metric(name=names.METRIC_RECORDS_DEFERRED, unit=MetricUnit.Count, value=deferred)
            self.execution.logger.info(
                names.MSG_RECORDS_DEFERRED,
                extra={
                    names.FIELD_DEFERRED: deferred,
                    names.FIELD_REMAINING_MS: batch.remaining_at_stop,
                    names.FIELD_NEEDED_MS: None if batch.needed_at_stop is None else round(batch.needed_at_stop),
                },
            )

    def _back_off(self, batch: _Batch, records: list[dict[str, Any]], failed: set[str]) -> None:
        """Give each returned record its own delay (``backoff.py``), when the state has a backoff; never raises (the
        records stay in ``batchItemFailures`` whatever happens)."""
        backoff = self._backoff() if failed else None
        if backoff is None:
            return
        returned = [
            _returned(
                raw,
                in_progress=raw.get("messageId") in batch.in_progress,
                attempted=raw.get("messageId") in batch.logged,
            )
            for raw in records
            if raw.get("messageId") in failed
        ]
        try:
            backoff.apply(returned, _timing(batch.deadline), batch.deadline.remaining_ms)
        except Exception as error:  # noqa: BLE001 - a backoff is never worth a batch
            self.execution.logger.warning(
                names.MSG_BACKOFF_FAILED,
                extra={names.FIELD_MESSAGE_IDS: sorted(failed), names.FIELD_REASON: f"{type(error).__name__}: {error}"},
            )

    def _settle(self, batch: _Batch) -> None:
        """Before a record on its last receive runs without the time: delete the records done so far, so that a
        timeout returns only what was not done (``Backoff.delete``)."""
        backoff = self._backoff()
        pending = [raw for raw in batch.done if raw.get("messageId") not in batch.settled]
        if backoff is None or not pending:
            return
        try:
            batch.settled.update(backoff.delete([_returned(raw) for raw in pending], batch.deadline.remaining_ms))
        except Exception as error:  # noqa: BLE001 - the event source mapping deletes them at the batch's end
            self.execution.logger.warning(
                names.MSG_BACKOFF_FAILED, extra={names.FIELD_REASON: f"delete: {type(error).__name__}: {error}"}
            )

    def _screen(self, batch: _Batch, records: list[dict[str, Any]], context: Any) -> None:
        """Bad input first (``RecordExecution.screen``: no I/O), before any record runs: each is dead-lettered at
        once (never through the record function), so no deferral, failure or kill later in the batch can return it
        for another receive. The first always goes; each further one only when the deadline check of a record says
        there is time (the rest are found on their turn)."""
        for raw in records:
            try:
                error = self.execution.screen(events.SQS, raw, self.envelope)
            except Exception:  # noqa: BLE001 - not screened: the record's own turn decides
                error = None
            if isinstance(error, events.Delivered):
                batch.clean[str(raw.get("messageId"))] = error
                continue
            if error is None:
                continue
            if batch.screened and batch.deadline.shortfall(self.recent) is not None:
                return  # the first always goes, as the first record always starts
            record = SQSRecord(raw)
            self.execution.refuse(error, **_log_keys(record))
            if self._dead_letter(record, error, context):
                batch.screened[record.message_id] = None
                continue
            batch.screened[record.message_id] = error
            batch.logged.add(record.message_id)
            self.execution.log_failure(error)

    def _should_defer(self, batch: _Batch, message_id: str) -> bool:
        if message_id in batch.protected:
            # On its last receive (or before one in its FIFO group): deferring it would dead-letter it. Without the
            # time, the records done so far are deleted first, so a timeout costs only this record and the rest.
            if batch.started and batch.deadline.shortfall(self.recent) is not None:
                self._settle(batch)
            return False
        if batch.deferring:
            return True
        if batch.started == 0:
            return False  # the first record always starts: a batch always makes progress
        short = batch.deadline.shortfall(self.recent)
        if short is None:
            return False
        batch.deferring = True
        batch.remaining_at_stop, batch.needed_at_stop = short
        return True

    def _record(self, record: SQSRecord, lambda_context: Any = None) -> Any:
        # Powertools passes lambda_context because this signature names it (BasePartialProcessor.__call__).
        batch = self._batch
        assert batch is not None
        group = record.attributes.message_group_id
        if record.message_id in batch.screened:
            error = batch.screened[record.message_id]
            if error is None:
                return None  # bad input, dead-lettered before the first record ran
            if group:
                batch.blockers.setdefault(group, record.message_id)
            raise error
        if self._should_defer(batch, record.message_id):
            batch.deferred.add(record.message_id)
            if group:
                batch.blockers.setdefault(group, record.message_id)
            raise RecordDeferred(f"deferred: {batch.remaining_at_stop} ms left, {batch.needed_at_stop} ms needed")
        batch.started += 1
        started = time.monotonic()
        try:
            result = self.process_record(record, lambda_context)
            batch.done.append(record.raw_event)
            return result
        except Exception as error:
            batch.logged.add(record.message_id)
            if is_in_progress(error):
                batch.in_progress.add(record.message_id)
            if group:
                batch.blockers.setdefault(group, record.message_id)
            self.execution.log_failure(error)
            raise
        finally:
            self.recent.add(started)

    # --- one record -------------------------------------------------------------------------------------------------

    def process_record(self, record: SQSRecord, lambda_context: Any = None) -> Any:
        """One SQS record: parsed, unwrapped, processed; a permanent failure is sent to the dead-letter queue and
        reported done (``None``) when it can be.

        :raises Exception: a transient failure, or a permanent one that could not be dead-lettered.
        """
        try:
            batch = self._batch
            screened = batch.clean.get(record.message_id) if batch is not None else None
            return self.execution.process_delivery(
                events.SQS, record.raw_event, self.envelope, screened=screened, **_log_keys(record)
            )
        except Exception as error:
            if not self.execution.is_permanent(error) or not self._dead_letter(record, error, lambda_context):
                raise
            # Done: the batch processor counts it a success, so a FIFO group goes on behind it.
            return None

    def _dead_letter(self, record: SQSRecord, error: BaseException, lambda_context: Any) -> bool:
        """Send ``record`` to the dead-letter queue; whether it was sent (a failure is logged, never raised)."""
        dead_letter = self._dead_letter_queue()
        if dead_letter is None:
            return False
        function_name = getattr(lambda_context, "function_name", None) or os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
        sent = self.execution.send_refusal(
            lambda: dead_letter.send(record, error, function_name),
            error,
            (names.MSG_RECORD_DEAD_LETTERED, names.FIELD_DEAD_LETTER_MESSAGE_ID, names.MSG_DEAD_LETTER_FAILED),
        )
        if sent:
            self._delete_original(record, dead_letter)
        return sent

    def _delete_original(self, record: SQSRecord, dead_letter: DeadLetterQueue) -> None:
        """Delete the original of a record whose copy is in the DLQ, at once: a kill or a timeout later in the batch
        then cannot hand it out again (another receive, and on a standard queue a second copy). With the DLQ's
        client: SQS keeps a queue and its DLQ in one account and Region. The event source mapping's own delete at
        the batch's end finds it gone, which is harmless. A failure is logged (``original not deleted``, WARNING)
        and left to that delete: a kill before it hands the original out again, and it is dead-lettered again."""
        located = queue_url(str(record.raw_event.get("eventSourceARN") or ""))
        if located is None:
            return
        try:
            dead_letter.client.delete_message(QueueUrl=located[1], ReceiptHandle=record.receipt_handle)
        except Exception as error:  # noqa: BLE001 - the event source mapping deletes it at the batch's end
            self.execution.logger.warning(
                names.MSG_ORIGINAL_NOT_DELETED,
                extra={
                    names.FIELD_MESSAGE_ID: record.message_id,
                    names.FIELD_REASON: f"{type(error).__name__}: {error}"[:300],
                },
            )

    # --- the batch's end --------------------------------------------------------------------------------------------

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
        log: Callable[..., None] = self.execution.logger.warning
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


def _processor(fifo: bool) -> BatchProcessor:
    """``SqsFifoPartialProcessor(skip_group_on_error=True)`` for a FIFO queue, else ``BatchProcessor``; neither
    raises when every record failed."""
    if not fifo:
        return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    # Its constructor (Powertools 3.37) takes no such argument, but BasePartialBatchProcessor._clean reads
    # the attribute when the batch ends, so setting it here is honoured.
    processor.raise_on_entire_batch_failure = False
    return processor


def _log_keys(record: SQSRecord) -> dict[str, Any]:
    """The log keys of a record's lines: its message id and receive count."""
    return {
        names.FIELD_MESSAGE_ID: record.message_id,
        names.FIELD_RECEIVE_COUNT: int(record.attributes.approximate_receive_count),
    }


def _returned(raw: dict[str, Any], *, in_progress: bool = False, attempted: bool = False) -> Returned:
    """``raw`` (a record of the event) as ``backoff.Returned``."""
    return Returned(
        message_id=str(raw.get("messageId")),
        receipt_handle=str(raw.get("receiptHandle")),
        queue_arn=str(raw.get("eventSourceARN") or ""),
        receive_count=_receive_count(raw),
        group=(raw.get("attributes") or {}).get("MessageGroupId") if is_fifo_record(raw) else None,
        in_progress=in_progress,
        attempted=attempted,
    )


def _timing(deadline: Deadline) -> Timing:
    """The backoff's view of the invocation: time since its start, and the function timeout in whole seconds."""
    start, left = deadline.start_ms, deadline.remaining_ms()
    if start is None or left is None:
        return Timing()
    return Timing(elapsed_seconds=max(0, start - left) / 1000, function_timeout_seconds=math.ceil(start / 1000))
