"""The handler's dispatch: one invocation classified by its event's shape (``events.classify``) and sent down its
path: an SQS batch to ``sqs_batch.SqsBatch``; SNS and S3 notification records, EventBridge events and direct
invocations each through the record execution, a failure logged and raised (Lambda retries an asynchronous
invocation, then uses its on-failure destination), except an event refused for good: with ``ON_FAILURE_QUEUE_URL``
an EventBridge event's, SNS or S3 record's permanent failure (and a direct invocation's, with
``ON_FAILURE_DIRECT``) is recorded on the on-failure queue (``on_failure.py``) and reported done, so Lambda never
retries it.

Every invocation registers its Lambda context with Powertools' idempotency config (an in-progress record then expires
with it) and starts its deadline (``deadline.Deadline``), which the batch, the completion retries and the effects
read; both end with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

from . import events, names
from .deadline import Deadline
from .execution import NO_DEADLINE, RecordExecution
from .on_failure import OnFailureQueue
from .sqs_batch import SqsBatch

#: The triggers whose refused events go to the on-failure queue without ``ON_FAILURE_DIRECT``: those Lambda only
#: ever invokes asynchronously (``events.ASYNC_TRIGGERS``, where a new one is added).
ALWAYS_ASYNC = events.ASYNC_TRIGGERS


class Dispatch:
    """``handle(event, context)``: one invocation down its path (see the module docstring).

    :param execution: the consumer's record execution.
    :param batch: the consumer's SQS path.
    :param config: the state's idempotency config (built on first use).
    :param envelope: what the key and the record function see of a direct document (``events.payload``).
    :param deadline_margin: the margin, in seconds, of every invocation's deadline. :default: ``None``: the larger
        of 1 s and 10 % of the invocation's remaining time at its start.
    :param on_failure: the state's on-failure queue, or ``None`` without one. :default: none.
    """

    def __init__(
        self,
        execution: RecordExecution,
        batch: SqsBatch,
        config: Callable[[], IdempotencyConfig],
        *,
        envelope: str | None = None,
        deadline_margin: float | None = None,
        on_failure: Callable[[], OnFailureQueue | None] = lambda: None,
    ) -> None:
        self.execution, self.batch, self._config = execution, batch, config
        self.envelope, self.deadline_margin = envelope, deadline_margin
        self._on_failure = on_failure

    def handle(self, event: Any, context: Any) -> Any:
        """One invocation: an SQS batch response, the records' results (SNS, S3; ``None`` for a record refused
        onto the on-failure queue), or the record's result (``None`` when refused onto it).

        :raises UnsupportedEvent: an event of no shape this handler takes (logged ``record failed``).
        :raises Exception: a direct document's failure, permanent or not, unless it was refused onto the on-failure
            queue (logged ``record failed``).
        """
        # Every invocation: an in-progress record then expires with this invocation's deadline.
        self._config().register_lambda_context(context)
        execution = self.execution
        execution.deadline = Deadline.start(context, self.deadline_margin)
        try:
            try:
                kind = events.classify(event)
            except ValueError as error:
                execution.log_failure(error, **{names.FIELD_MESSAGE_ID: None, names.FIELD_IDEMPOTENCY_KEY: None})
                raise
            if kind == events.SQS:
                return self.batch.handle(event, context)
            if kind in events.RECORD_TRIGGERS:
                return self._handle_records(kind, events.items(kind, event), context)
            return self._process_direct(kind, event, events.delivery_id(kind, event), event, context)
        finally:
            execution.deadline = NO_DEADLINE
            execution.clear_record_keys()

    def _process_direct(self, kind: str, item: Any, message_id: Any, request: Any, context: Any) -> Any:
        """One direct document (an SNS or S3 record, an EventBridge event, a direct invocation): processed; a
        failure refused onto the on-failure queue (``request``: the event its record holds), else logged and
        raised."""
        try:
            return self.execution.process_delivery(kind, item, self.envelope, **{names.FIELD_MESSAGE_ID: message_id})
        except Exception as error:
            if self._refuse(kind, request, error, context):
                return None
            self.execution.log_failure(error, **{names.FIELD_TRIGGER: kind})
            raise

    def _refuse(self, kind: str, request: Any, error: Exception, context: Any) -> bool:
        """Record a permanent failure on the on-failure queue (``on_failure.py``); whether it was (a send failure
        is logged, never raised: the caller raises the original failure, and Lambda retries it)."""
        queue = self._on_failure()
        execution = self.execution
        if queue is None or not execution.is_permanent(error):
            return False
        if kind not in ALWAYS_ASYNC and not (kind == events.DIRECT and queue.direct):
            return False
        return execution.send_refusal(
            lambda: queue.send(request, error, context),
            error,
            (names.MSG_RECORD_SENT_ON_FAILURE, names.FIELD_ON_FAILURE_MESSAGE_ID, names.MSG_ON_FAILURE_SEND_FAILED),
            **{names.FIELD_TRIGGER: kind},
        )

    def _handle_records(self, kind: str, records: list[Any], context: Any) -> list[Any]:
        """SNS or S3 records (a trigger of ``events.RECORD_TRIGGERS`` other than SQS): each on its own, with its
        ``events.delivery_id`` as ``message_id`` (a failure does not stop the others); the first failure is raised
        after all were tried, so Lambda retries the event and the records already done are answered as
        duplicates. A record refused onto the on-failure queue is recorded alone (``{"Records": [record]}``)."""
        results: list[Any] = []
        first: Exception | None = None
        for record in records:
            try:
                request = {"Records": [record]}
                results.append(self._process_direct(kind, record, events.delivery_id(kind, record), request, context))
            except Exception as error:  # noqa: BLE001 - raised below, once every record was tried
                first = first or error
        if first is not None:
            raise first
        return results
