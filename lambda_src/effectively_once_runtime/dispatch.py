"""The handler's dispatch: one invocation classified by its event's shape (``events.classify``) and sent down its
path: an SQS batch to ``sqs_batch.SqsBatch``; SNS and S3 notification records, EventBridge events and direct
invocations each through the record execution, a failure logged and raised (Lambda retries an asynchronous
invocation, then uses its on-failure destination).

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
from .sqs_batch import SqsBatch


class Dispatch:
    """``handle(event, context)``: one invocation down its path (see the module docstring).

    :param execution: the consumer's record execution.
    :param batch: the consumer's SQS path.
    :param config: the state's idempotency config (built on first use).
    :param envelope: what the key and the record function see of a direct document (``events.payload``).
    :param deadline_margin: the margin, in seconds, of every invocation's deadline. :default: ``None``: the larger
        of 1 s and 10 % of the invocation's remaining time at its start.
    """

    def __init__(
        self,
        execution: RecordExecution,
        batch: SqsBatch,
        config: Callable[[], IdempotencyConfig],
        *,
        envelope: str | None = None,
        deadline_margin: float | None = None,
    ) -> None:
        self.execution, self.batch, self._config = execution, batch, config
        self.envelope, self.deadline_margin = envelope, deadline_margin

    def handle(self, event: Any, context: Any) -> Any:
        """One invocation: an SQS batch response, the records' results (SNS, S3), or the record's result.

        :raises UnsupportedEvent: an event of no shape this handler takes (logged ``record failed``).
        :raises Exception: a direct document's failure, permanent or not (logged ``record failed``).
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
                return self._handle_records(kind, events.items(kind, event))
            return self._process_direct(kind, event, events.delivery_id(kind, event))
        finally:
            execution.deadline = NO_DEADLINE
            execution.clear_record_keys()

    def _process_direct(self, kind: str, item: Any, message_id: Any) -> Any:
        """One direct document (an SNS or S3 record, an EventBridge event, a direct invocation): processed, and a
        failure logged and raised."""
        try:
            return self.execution.process_delivery(kind, item, self.envelope, **{names.FIELD_MESSAGE_ID: message_id})
        except Exception as error:
            self.execution.log_failure(error, **{names.FIELD_TRIGGER: kind})
            raise

    def _handle_records(self, kind: str, records: list[Any]) -> list[Any]:
        """SNS or S3 records (a trigger of ``events.RECORD_TRIGGERS`` other than SQS): each on its own, with its
        ``events.delivery_id`` as ``message_id`` (a failure does not stop the others); the first failure is raised
        after all were tried, so Lambda retries the event and the records already done are answered as
        duplicates."""
        results: list[Any] = []
        first: Exception | None = None
        for record in records:
            try:
                results.append(self._process_direct(kind, record, events.delivery_id(kind, record)))
            except Exception as error:  # noqa: BLE001 - raised below, once every record was tried
                first = first or error
        if first is not None:
            raise first
        return results
