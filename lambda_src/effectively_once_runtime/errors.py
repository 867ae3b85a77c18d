"""Exceptions a record function raises to say what kind of failure it is. Standard library only."""

from __future__ import annotations


def caused_by(error: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    """Whether ``error``, or an exception in its ``__cause__`` chain, is one of ``kinds`` (a cycle ends the walk)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kinds):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


class PermanentError(Exception):
    """The record can never succeed (bad input, a business rule): retrying it changes nothing.

    It is logged as ``invalid record`` and counted in ``InvalidRecords``. An SQS record that raises it is sent to the
    dead-letter queue on first sight (``DEAD_LETTER_QUEUE_URL``, set by the consumer) and reported done; without
    that variable, or when the send fails, it is a batch item failure (SQS moves it after ``maxReceiveCount``
    receives). A directly invoked event that raises it raises it to the caller.
    """


class InvalidRecord(PermanentError, ValueError):
    """The runtime's own bad input: a body that is not strict JSON or not a JSON object."""


class InvalidEffectCall(PermanentError, ValueError):
    """An effect adapter was called with arguments no retry can fix: a malformed URL or header, a key or name over
    a service's limit, a template without its placeholder, a limit out of range. Raised before any request, so
    nothing was written. Both a ``ValueError`` (what it is to a caller) and a ``PermanentError`` (what it is to the
    runtime): an SQS record that raises it goes to the dead-letter queue on first sight with this message, instead
    of being redelivered until ``maxReceiveCount`` as a plain ``ValueError`` (transient) would be."""


class UnsupportedEvent(ValueError):
    """The invocation's event is not one this runtime handles (``events.classify``): Kinesis or DynamoDB stream
    records, Kafka, Amazon MQ, records of mixed sources, or a malformed ``Records`` list. It is about the whole
    invocation, not one record: the handler raises it, so no record of that event is processed. The message is
    one line naming what arrived and what is taken."""


class ConcurrencyModeRefused(RuntimeError):
    """The function runs in a concurrency mode where requests share one process (``AWS_LAMBDA_CONCURRENCY_MODE``
    ``thread`` or ``hybrid``, Lambda Managed Instances' experimental Python modes): the runtime holds one Lambda
    context, deadline and batch per process, so it refuses to start (``settings.refuse_shared_process``)."""


class UnknownRecordStatus(PermanentError):
    """The idempotency record of a key holds a status the runtime does not know (Powertools writes ``INPROGRESS`` and
    ``COMPLETED``; ``EXPIRED`` is only computed): no retry reads it otherwise, so the record goes to the DLQ on first
    sight with this reason (``claims.py``). docs/runbook.md says what to do."""

    def __init__(self, record_id: str, status: object) -> None:
        self.record_id, self.status = record_id, status
        super().__init__(
            f"idempotency record {record_id} holds status {status!r}, which the runtime does not know (Powertools "
            "writes INPROGRESS and COMPLETED): check what wrote it, then delete the record and redrive the message "
            "(docs/runbook.md, 'A record with an unknown status')"
        )
