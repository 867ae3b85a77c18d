"""``Consumer``: one record function plus its declared side effects, turned into an effectively-once Lambda handler.

What every handler built on it does (the guarantees no record function has to remember):

- SQS events (``{"Records": [...]}``): each record is processed on its own and only the failed ones are returned
  (``{"batchItemFailures": [...]}``, ReportBatchItemFailures). A standard queue uses Powertools' ``BatchProcessor``;
  a FIFO queue (event source ARN ending in ``.fifo``) uses ``SqsFifoPartialProcessor(skip_group_on_error=True)``,
  so a failure holds back only its own message group. A batch whose records all failed is answered the same way,
  never raised (``raise_on_entire_batch_failure=False``). ``FailedRecords`` counts the failed records.
- Direct invocation (any event without ``Records``): the event is the parsed body; the result is returned and any
  failure is raised (an asynchronous invocation then retries and goes to its on-failure destination).
- ``config.register_lambda_context(context)`` on every invocation: an in-progress record expires with it.
- The body is strict JSON holding an object (``body.py``); the idempotency key is the ``key`` JMESPath over it, the
  stored key is ``<key prefix>#<md5 of the key>`` with the prefix from ``IDEMPOTENCY_KEY_PREFIX`` or the
  ``key_prefix`` given here, never the function name. ``validate`` (a JMESPath) makes the same key with another
  payload an ``IdempotencyValidationError``.
- Every log line of a record carries ``correlation_id`` = ``idempotency_key`` = the key, ``message_id`` and
  ``receive_count``; the metric names and log messages are those of ``names.py``, which the constructs' alarms,
  dashboard and queries read.
- Bad input (not JSON, not an object, no key, failed validation, a ``PermanentError`` from the record function)
  is logged as one clear line. It is permanent (``dead_letter.is_permanent``): with ``DEAD_LETTER_QUEUE_URL`` set,
  an SQS record is sent to that dead-letter queue on first sight with a reason attribute, logged as ``record
  dead-lettered``, counted in ``DeadLettered`` and reported done, so on FIFO the rest of its message group goes on.
  When the send is impossible (more than 10 message attributes with the reason) or fails, or without the variable,
  it is a batch item failure of that record alone and SQS moves it after ``maxReceiveCount`` receives. Everything
  else (throttling, timeouts, an in-progress duplicate, any unexpected exception) is transient: a batch item
  failure. A batch is never lost. A direct invocation has no queue: it raises as before.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import jmespath
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyKeyError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from botocore.config import Config

from . import names
from .body import SHOWN_CHARS, json_safe, parse_object
from .dead_letter import DeadLetterQueue, is_permanent
from .errors import InvalidRecord, PermanentError
from .settings import RuntimeSettings, check_key_prefix

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
RecordFunction = Callable[[dict[str, Any]], Any]
#: Builds the persistence layer from the settings: ``(table_name=..., boto_config=...)`` like
#: ``DynamoDBPersistenceLayer`` (the default) or a subclass of it.
PersistenceLayerFactory = Callable[..., BasePersistenceLayer]

_RECORD_KEYS = (names.FIELD_MESSAGE_ID, names.FIELD_RECEIVE_COUNT, names.FIELD_IDEMPOTENCY_KEY)


def key_text(value: Any) -> str | None:
    """The idempotency key as text: a string as is, any other JSON value as compact sorted JSON; ``None`` when
    the key JMESPath found nothing (Powertools' rule: ``None``, ``""``, or only ``None`` in a multi-select)."""
    if BasePersistenceLayer.is_missing_idempotency_key(value):
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass
class ConsumerState:
    """One execution environment's state, built on first use (cold start): settings, persistence layer,
    idempotency config, the idempotent record function and the dead-letter queue (``None`` without
    ``DEAD_LETTER_QUEUE_URL``; its SQS client is built on its first send)."""

    settings: RuntimeSettings
    persistence_store: BasePersistenceLayer
    config: IdempotencyConfig
    process: Callable[..., Any]
    dead_letter: DeadLetterQueue | None = None


class Consumer:
    """Turns a record function and its declared side effects into a Lambda handler (``handler``).

    :param key: JMESPath over the parsed body giving the idempotency key (required), e.g. ``"order_id"``. Key on a
        business id, never on the message id (a producer resend gets a new one).
    :param key_prefix: prefix of every stored key when ``IDEMPOTENCY_KEY_PREFIX`` is unset or empty (required):
        choose a stable one (``"<team>/<consumer>"``). Powertools' default is built from the function name, so a
        renamed or replaced function would orphan every record; this runtime never uses it.
    :param validate: JMESPath over the body of the fields a duplicate must agree with (e.g. ``"[total, currency]"``).
        :default: ``None``: no payload validation.
    :param raise_on_no_idempotency_key: a body where ``key`` finds nothing is bad input (permanent: the DLQ, or a
        batch item failure). ``False`` processes it unguarded (Powertools warns). :default: ``True``.
    :param persistence_layer: builds the persistence layer, called as ``persistence_layer(table_name=...,
        boto_config=...)`` at cold start (e.g. a ``DynamoDBPersistenceLayer`` subclass that accepts records written
        under an older ``validate``). :default: ``DynamoDBPersistenceLayer``.
    :param service: Logger/Metrics service. :default: ``POWERTOOLS_SERVICE_NAME``, else
        ``names.DEFAULT_SERVICE_NAME``.
    :param namespace: Metrics namespace. :default: ``POWERTOOLS_METRICS_NAMESPACE``, else
        ``names.DEFAULT_METRICS_NAMESPACE``.
    :raises ValueError: ``key_prefix`` is empty, holds whitespace or is longer than 2015 UTF-8 bytes (the stored key
        ``<key_prefix>#<md5 hex>`` must fit DynamoDB's 2,048-byte partition key); ``key`` or ``validate`` is not a
        JMESPath.
    """

    def __init__(
        self,
        *,
        key: str,
        key_prefix: str,
        validate: str | None = None,
        raise_on_no_idempotency_key: bool = True,
        persistence_layer: PersistenceLayerFactory = DynamoDBPersistenceLayer,
        service: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.key = key
        self.key_prefix = check_key_prefix("key_prefix", key_prefix)
        self.validate = validate
        self.raise_on_no_idempotency_key = raise_on_no_idempotency_key
        self.persistence_layer = persistence_layer
        for prop, path in (("key", key), ("validate", validate)):
            if path is None:
                continue
            try:
                jmespath.compile(path)
            except jmespath.exceptions.JMESPathError as exc:
                raise ValueError(f"{prop} must be a JMESPath expression, but {path!r} was given: {exc}") from exc
        self._key_path = jmespath.compile(key)
        service = service or os.environ.get(names.ENV_SERVICE_NAME) or names.DEFAULT_SERVICE_NAME
        self.logger = Logger(service=service)
        self.metrics = Metrics(
            namespace=namespace or os.environ.get(names.ENV_METRICS_NAMESPACE) or names.DEFAULT_METRICS_NAMESPACE,
            service=service,
        )
        self._record_function: RecordFunction | None = None
        self._state: ConsumerState | None = None
        # The key of the record being processed: what each effect is called with.
        self._current_key: Any = _OUTSIDE
        self.handler: Callable[[Any, Any], Any] = self.metrics.log_metrics(
            self.logger.inject_lambda_context(self._handle, log_event=False)
        )

    # --- declaring ----------------------------------------------------------------------------------------------

    def record(self, function: F) -> F:
        """Declare the record function: called with the parsed body (a ``dict``) once per key, its JSON-ready
        result stored and returned to duplicates. Raise ``PermanentError`` for input that can never succeed.

        :raises ValueError: a record function was already declared.
        """
        if self._record_function is not None:
            raise ValueError("a Consumer takes one record function; one was already declared")
        self._record_function = function
        return function

    def effect(self, function: Callable[..., R]) -> Callable[..., R]:
        """Declare a side effect. The returned function takes the same arguments but ``idempotency_key`` (typed
        ``Callable[..., R]``: a type cannot drop a keyword-only parameter); the runtime adds
        ``idempotency_key=<the record's key>`` (pass it to a provider that accepts idempotency keys, so a
        re-execution after a crash is answered, not repeated) and, after it returns, writes one log line
        ``effect executed`` with ``idempotency_key`` and ``effect`` (the function's name), flushed, and counts
        ``EffectsExecuted``.

        :raises RuntimeError: (when called) outside a record function.
        """
        name = function.__name__

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> R:
            if self._current_key is _OUTSIDE:
                raise RuntimeError(f"effect {name!r} was called outside the Consumer's record function")
            key = self._current_key
            result = function(*args, idempotency_key=key, **kwargs)
            self.logger.info(names.EFFECT_EXECUTED, extra={names.FIELD_IDEMPOTENCY_KEY: key, names.FIELD_EFFECT: name})
            self.logger.registered_handler.flush()
            self.metrics.add_metric(name=names.METRIC_EFFECTS_EXECUTED, unit=MetricUnit.Count, value=1)
            return result

        return run

    # --- state ----------------------------------------------------------------------------------------------------

    def setup(
        self, *, persistence_store: BasePersistenceLayer | None = None, env: Mapping[str, str] | None = None
    ) -> ConsumerState:
        """Build the execution environment's state from the environment (what the first invocation does).
        Tests and benchmarks pass their own ``persistence_store``.

        :raises ValueError: the environment is incomplete or malformed (``RuntimeSettings.from_env``), or
            ``DEAD_LETTER_QUEUE_URL`` is not a queue URL.
        """
        settings = RuntimeSettings.from_env(default_key_prefix=self.key_prefix, env=env)
        url = settings.dead_letter_queue_url
        dead_letter = DeadLetterQueue(url) if url else None
        if persistence_store is None:
            # The table may live in another Region than the function (the constructs pass its ARN, which DynamoDB
            # takes as TableName): a request goes to the client's own Region, so build the client in the table's.
            region = settings.table_region
            persistence_store = self.persistence_layer(
                table_name=settings.table_name, boto_config=Config(region_name=region) if region else None
            )
        config = IdempotencyConfig(
            event_key_jmespath=self.key,
            payload_validation_jmespath=self.validate or "",
            raise_on_no_idempotency_key=self.raise_on_no_idempotency_key,
            expires_after_seconds=settings.expiry_seconds,
            response_hook=self._on_duplicate,
        )
        process = idempotent_function(
            data_keyword_argument="record",
            persistence_store=persistence_store,
            config=config,
            key_prefix=settings.key_prefix,
        )(self._run_record_function)
        self._state = ConsumerState(settings, persistence_store, config, process, dead_letter)
        return self._state

    def warm(self) -> ConsumerState | None:
        """Build the state now when the environment allows it: call it at module level, in Lambda's init phase,
        so the first invocation does not spend its function timeout creating SDK clients (the init phase has a
        limit of its own; "initialize SDK clients and database connections outside of the function handler").
        Anything that fails here (an incomplete environment, no Region) is left for the first invocation, which
        raises it as without this call. Sources: https://docs.aws.amazon.com/lambda/latest/dg/best-practices.html,
        https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html (Init phase).

        :returns: the state, or ``None`` when it could not be built yet.
        """
        try:
            return self.state
        except Exception:  # noqa: BLE001 - the first invocation builds it again and raises the error there
            return None

    @property
    def state(self) -> ConsumerState:
        """The current state, built on first use."""
        return self._state if self._state is not None else self.setup()

    def reset(self) -> None:
        """Forget the state: the next invocation reads the environment again (tests, tooling)."""
        self._state = None

    # --- processing ------------------------------------------------------------------------------------------------

    def _run_record_function(self, record: dict[str, Any]) -> Any:
        assert self._record_function is not None
        result = json_safe(self._record_function(record))
        self.logger.info(names.MSG_RECORD_PROCESSED)
        return result

    def _on_duplicate(self, response: Any, idempotent_data: DataRecord) -> Any:
        self.metrics.add_metric(name=names.METRIC_DUPLICATES_SUPPRESSED, unit=MetricUnit.Count, value=1)
        self.logger.info(names.MSG_DUPLICATE_SUPPRESSED, extra={names.FIELD_IDEMPOTENCY_STATUS: idempotent_data.status})
        return response

    def _invalid(self, reason: str) -> None:
        self.metrics.add_metric(name=names.METRIC_INVALID_RECORDS, unit=MetricUnit.Count, value=1)
        self.logger.warning(names.MSG_INVALID_RECORD, extra={names.FIELD_REASON: reason[: SHOWN_CHARS * 5]})

    def process(self, body: Any) -> Any:
        """One parsed body, through the idempotency layer (the path of every record and direct invocation).

        :raises PermanentError: bad input (``InvalidRecord``: not an object, no key) or the record function's own.
        :raises IdempotencyAlreadyInProgressError: the key is being processed elsewhere.
        :raises IdempotencyValidationError: the key was stored with another payload (``validate``).
        """
        if self._record_function is None:
            raise RuntimeError("no record function: declare one with @consumer.record")
        state = self.state
        try:
            if not isinstance(body, dict):
                raise InvalidRecord(f"body must be a JSON object, got {type(body).__name__}")
            key = key_text(self._key_path.search(body))
            self.logger.set_correlation_id(key)
            self.logger.append_keys(**{names.FIELD_IDEMPOTENCY_KEY: key})
            self._current_key = key
            try:
                return state.process(record=body)
            except IdempotencyKeyError as exc:
                raise InvalidRecord(f"no idempotency key: {self.key!r} found nothing in the body") from exc
            finally:
                self._current_key = _OUTSIDE
        except PermanentError as error:
            self._invalid(str(error))
            raise
        except (IdempotencyAlreadyInProgressError, IdempotencyValidationError) as error:
            # The idempotency-rejections query (docs/observability.md) lists these lines.
            self.logger.warning(
                names.MSG_IDEMPOTENCY_REJECTED, extra={names.FIELD_IDEMPOTENCY_ERROR: type(error).__name__}
            )
            raise

    def _process_sqs_record(self, record: SQSRecord, lambda_context: Any = None) -> Any:
        # Powertools passes lambda_context because this signature names it (BasePartialProcessor.__call__).
        try:
            return self._process_sqs_body(record)
        except Exception as error:
            if not is_permanent(error) or not self._dead_letter(record, error, lambda_context):
                raise
            # Done: the batch processor counts it a success, so a FIFO group goes on behind it.
            return None

    def _dead_letter(self, record: SQSRecord, error: Exception, lambda_context: Any) -> bool:
        """Send ``record`` to the dead-letter queue; whether it was sent (a failure is logged, never raised)."""
        dead_letter = self.state.dead_letter
        if dead_letter is None:
            return False
        function_name = getattr(lambda_context, "function_name", None) or os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
        try:
            copy_id = dead_letter.send(record, error, function_name)
        except Exception as send_error:  # noqa: BLE001 - any failure keeps the record in the queue: nothing is lost
            self.logger.warning(
                names.MSG_DEAD_LETTER_FAILED,
                extra={
                    names.FIELD_ERROR_TYPE: type(error).__name__,
                    names.FIELD_REASON: f"{type(send_error).__name__}: {send_error}"[: SHOWN_CHARS * 5],
                },
            )
            return False
        self.metrics.add_metric(name=names.METRIC_DEAD_LETTERED, unit=MetricUnit.Count, value=1)
        self.logger.warning(
            names.MSG_RECORD_DEAD_LETTERED,
            extra={names.FIELD_ERROR_TYPE: type(error).__name__, names.FIELD_DEAD_LETTER_MESSAGE_ID: copy_id},
        )
        return True

    def _process_sqs_body(self, record: SQSRecord) -> Any:
        self.logger.set_correlation_id(None)
        self.logger.append_keys(
            **{
                names.FIELD_MESSAGE_ID: record.message_id,
                names.FIELD_RECEIVE_COUNT: int(record.attributes.approximate_receive_count),
                names.FIELD_IDEMPOTENCY_KEY: None,
            }
        )
        try:
            body = parse_object(record.body)
        except InvalidRecord as error:
            self._invalid(str(error))
            raise
        return self.process(body)

    def _handle_sqs(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = event.get("Records") or []
        processor: BatchProcessor
        if records and str(records[0].get("eventSourceARN", "")).endswith(".fifo"):
            processor = SqsFifoPartialProcessor(skip_group_on_error=True)
            # Its constructor (Powertools 3.37) takes no such argument, but BasePartialBatchProcessor._clean reads
            # the attribute when the batch ends, so setting it here is honoured.
            processor.raise_on_entire_batch_failure = False
        else:
            processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        try:
            response = dict(
                process_partial_response(
                    event=event, record_handler=self._process_sqs_record, processor=processor, context=context
                )
            )
            failed: list[Any] = list(response.get("batchItemFailures") or [])  # type: ignore[call-overload]
            self.metrics.add_metric(name=names.METRIC_FAILED_RECORDS, unit=MetricUnit.Count, value=len(failed))
            return response
        finally:
            self.logger.remove_keys(list(_RECORD_KEYS))
            self.logger.set_correlation_id(None)

    def _handle_direct(self, event: Any) -> Any:
        self.logger.append_keys(**{names.FIELD_MESSAGE_ID: None, names.FIELD_RECEIVE_COUNT: None})
        try:
            return self.process(event)
        finally:
            self.logger.remove_keys(list(_RECORD_KEYS))
            self.logger.set_correlation_id(None)

    def _handle(self, event: Any, context: Any) -> Any:
        # Every invocation: an in-progress record then expires with this invocation's deadline.
        self.state.config.register_lambda_context(context)
        if isinstance(event, dict) and "Records" in event:
            return self._handle_sqs(event, context)
        return self._handle_direct(event)


#: ``_current_key`` outside a record function (``None`` is a legitimate key value when the key is optional).
_OUTSIDE: Any = object()
