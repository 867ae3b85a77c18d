"""``Consumer``: one record function plus its declared side effects, turned into an effectively-once Lambda handler.

What every handler built on it does (the guarantees no record function has to remember):

- **Triggers** (``events.classify``): SQS batches (standard and FIFO: ``sqs_batch.py``, partial batch responses),
  SNS and S3 notifications invoked directly (each record idempotent on its own), EventBridge events and direct
  invocations. Any other shape (Kinesis, DynamoDB streams, Kafka, ``"Records": []``, a record without its id) raises
  ``UnsupportedEvent``, one line naming what was expected. On a direct trigger (everything but SQS) a failure,
  permanent or not, is raised: Lambda retries an asynchronous invocation, then uses its on-failure destination.
- **What the key runs over** (``events.unwrap``): with ``envelope=None`` the SQS body, the SNS or S3 record, or the
  whole event; with ``"sns"`` the SNS ``Message`` parsed as strict JSON; with ``"eventbridge"`` the event's
  ``detail``; ``"auto"`` unwraps whichever envelope it finds. The record function gets that payload.
- ``config.register_lambda_context(context)`` on every invocation: an in-progress record expires with it.
- **Keys.** The idempotency key is the ``key`` JMESPath (Powertools' functions such as ``powertools_json``
  included) over the payload; the stored key is ``<key prefix>#<md5 of the key>`` with the prefix from
  ``IDEMPOTENCY_KEY_PREFIX`` or ``key_prefix``, never the function name. ``validate`` (a JMESPath) makes the same
  key with another payload an ``IdempotencyValidationError``. With ``normalize`` (``identity.py``) the key is
  normalised (case, spaces, NFKC) before any of that: Powertools hashes the normalised key, the effects and the log
  lines get it, ``validate`` and the record function still see the payload as it came. A declared effect is called
  with its effect key (``effect_key``: ``"scoped"`` ``<key prefix>#<effect name>#<key>``, or ``"business"`` the key
  itself).
- **After the side effect nothing runs twice.** ``record processed`` is logged after the record is completed. A result
  too large for the record (DynamoDB's 400 KB item) completes it with ``names.RESULT_NOT_STORED`` instead, which
  duplicates are answered with. Any other completion failure is retried with backoff within the remaining time,
  then the record fails (``completion failed``, ``CompletionFailures``) and stays in progress until it expires;
  only the effect's own key stops a second effect then. A record function that fails after an effect returned is
  logged ``effect repeated after failure``: Powertools deletes its record, so the next delivery repeats the effect.
- **Failures.** Bad input (not JSON, not an object, no key, failed validation, a ``PermanentError`` or an exception
  declared ``permanent=``, also when found in the ``__cause__`` chain) is logged as ``invalid record``. On SQS it is
  sent to the dead-letter queue on first sight (``dead_letter.py``) with a reason attribute and reported done; if
  that is impossible it is a batch item failure. Everything else is transient: a batch item failure. Every failed
  record is logged ``record failed``. A batch is never lost.
- Every log line of a record carries ``correlation_id`` = ``idempotency_key`` = the key, ``message_id`` and
  ``receive_count``; the metric names and log messages are those of ``names.py``, which the constructs' alarms,
  dashboard and queries read.
"""

from __future__ import annotations

import functools
import json
import os
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import jmespath
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyKeyError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from aws_lambda_powertools.utilities.jmespath_utils import PowertoolsFunctions
from botocore.config import Config
from jmespath import functions as jmespath_functions

from . import effect_keys, events, identity, names
from .body import SHOWN_CHARS, json_safe
from .dead_letter import DeadLetterQueue, is_permanent
from .effects import _context as effect_context
from .errors import InvalidRecord, PermanentError
from .settings import RuntimeSettings, parse_key_prefix
from .sqs_batch import SqsBatch, remaining_ms

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
RecordFunction = Callable[[dict[str, Any]], Any]
#: Builds the persistence layer from the settings: ``(table_name=..., boto_config=...)`` like
#: ``DynamoDBPersistenceLayer`` (the default) or a subclass of it.
PersistenceLayerFactory = Callable[..., BasePersistenceLayer]

_RECORD_KEYS = (names.FIELD_MESSAGE_ID, names.FIELD_RECEIVE_COUNT, names.FIELD_IDEMPOTENCY_KEY)
#: Completion retries: the first delay, the factor and the longest delay (seconds), and the most attempts.
_COMPLETION_FIRST_DELAY, _COMPLETION_BACKOFF, _COMPLETION_MAX_DELAY, _COMPLETION_ATTEMPTS = 0.1, 2.0, 2.0, 5
#: Which Consumer a persistence layer serves: Powertools configures a layer once (its key JMESPath is fixed by the
#: first ``configure``), so a layer shared by two consumers would key the second on the first's key, silently.
_LAYER_OWNERS: weakref.WeakKeyDictionary[BasePersistenceLayer, Consumer] = weakref.WeakKeyDictionary()
#: The JMESPath function Powertools' key expression is wrapped in when ``normalize`` is on:
#: ``effectively_once_normalize(<key>)``. Not among ``events.FUNCTIONS``, so a ``key`` cannot call it.
NORMALIZE_FUNCTION = "effectively_once_normalize"
#: Keys that name a delivery's own id in AWS's event shapes, not the business object's: an EventBridge event's
#: ``id`` and an SQS record's ``messageId``. A producer's retry, a second ``PutEvents`` or a resend gets a new one.
DELIVERY_ID_KEYS = ("id", "messageId")
#: The one WARNING an execution environment logs at state set-up when ``key`` is one of them (field ``reason``).
MSG_KEY_IS_DELIVERY_ID = "idempotency key is a delivery id"


class _NormalizingFunctions(PowertoolsFunctions):
    """Powertools' JMESPath functions plus ``effectively_once_normalize``: ``identity.normalize_key`` with one
    consumer's steps, so the key Powertools hashes is the normalised one."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        super().__init__()
        self.steps = steps

    @jmespath_functions.signature({"types": []})  # type: ignore[untyped-decorator]  # jmespath ships no types
    def _func_effectively_once_normalize(self, value: Any) -> Any:
        return identity.normalize_key(value, self.steps)


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


@dataclass
class _Run:
    """One record's pass through the idempotency layer: its key, the effects that returned, and whether the record
    function returned (set by the runtime itself, so "after the record function" never rests on an error's text)."""

    key: Any
    effects: list[str] = field(default_factory=list)
    returned: bool = False
    stored: Any = None
    result: Any = None
    oversized: bool = False


class Consumer:
    """Turns a record function and its declared side effects into a Lambda handler (``handler``).

    :param key: JMESPath over the payload giving the idempotency key (required), e.g. ``"order_id"``; Powertools'
        functions (``powertools_json``, ``powertools_base64``, ``powertools_base64_gzip``) work as in its
        ``event_key_jmespath``. Key on a business id, never on the message id (a producer resend gets a new one).
    :param key_prefix: prefix of every stored key when ``IDEMPOTENCY_KEY_PREFIX`` is unset or empty (required):
        choose a stable one (``"<team>/<consumer>"``). Powertools' default is built from the function name, so a
        renamed or replaced function would orphan every record; this runtime never uses it.
    :param validate: JMESPath over the payload of the fields a duplicate must agree with (e.g.
        ``"[total, currency]"``). :default: ``None``: no payload validation.
    :param envelope: what the key, the validation and the record function see: ``None`` (the SQS body, the SNS or
        S3 record, the whole event), ``"sns"`` (the SNS notification's ``Message``, strict JSON: behind SNS -> SQS
        with raw delivery off, or a direct SNS trigger), ``"eventbridge"`` (the event's ``detail``: a rule's Lambda
        or SQS target), ``"auto"`` (whichever of the two it finds, else the payload as is; a payment arriving by SQS
        and by EventBridge then has one record). A payload without the envelope named is bad input.
        :default: ``None``.
    :param permanent: exception types that can never succeed on a retry (e.g. a provider's "key reused" refusal):
        one raised by the record function or an effect, or found in its ``__cause__`` chain, is handled as a
        ``PermanentError`` (the DLQ on first sight, with its reason). :default: ``()``.
    :param effect_key: the key each declared effect is called with: ``"scoped"``
        (``<key prefix>#<effect name>#<key>``, printable ASCII of at most 128 characters, see ``effect_keys``) or
        ``"business"`` (the idempotency key itself). Switching an existing consumer to ``"scoped"`` changes the
        keys its provider sees: the provider must answer both forms for keys written before the switch.
        :default: ``None``: ``"business"`` with a ``DeprecationWarning`` (the default becomes ``"scoped"`` in the
        next minor version).
    :param deadline_margin: the least time, in seconds, an SQS batch must have left to start its next record; it
        needs more when its recent records were slower (``sqs_batch.py``). :default: ``None``: the larger of 1 s and
        10 % of the timeout.
    :param raise_on_no_idempotency_key: a payload where ``key`` finds nothing is bad input (permanent: the DLQ, or
        a batch item failure). ``False`` processes it unguarded (Powertools warns). :default: ``True``.
    :param normalize: (a sequence of ``str``, or one ``str`` for one step) the steps the idempotency key goes
        through before anything uses it (``identity.py``), in the order given: ``"strip"`` (``str.strip()``),
        ``"casefold"`` (``str.casefold()``), ``"nfkc"`` (``unicodedata.normalize("NFKC", ...)``), e.g.
        ``("nfkc", "strip", "casefold")``: ``"ABC-1"``, ``" abc-1 "`` and ``"ＡＢＣ-１"`` are then one record. A
        string key gets the steps; a list or object key (a multi-select) gets them on every string inside it.
        Powertools hashes the normalised key; effect keys, the log lines' ``idempotency_key`` and ``correlation_id``
        are the normalised key; ``validate`` and the record function see the payload unchanged. Turning it on, or
        changing the steps, for a consumer with stored records is a key change: they are keyed on the old form, so a
        redelivery of an old message whose raw key was not already normal runs again (turn it on with a new
        ``key_prefix`` or before the first deploy). :default: ``()``: off, keys exactly as found.
    :param persistence_layer: builds the persistence layer, called as ``persistence_layer(table_name=...,
        boto_config=...)`` at cold start (e.g. a ``DynamoDBPersistenceLayer`` subclass that accepts records written
        under an older ``validate``). One layer serves one ``Consumer``. :default: ``DynamoDBPersistenceLayer``.
    :param service: Logger/Metrics service. :default: ``POWERTOOLS_SERVICE_NAME``, else
        ``names.DEFAULT_SERVICE_NAME``.
    :param namespace: Metrics namespace. :default: ``POWERTOOLS_METRICS_NAMESPACE``, else
        ``names.DEFAULT_METRICS_NAMESPACE``.
    :raises ValueError: ``key_prefix`` is empty, holds whitespace or is longer than 2015 UTF-8 bytes (the stored key
        ``<key_prefix>#<md5 hex>`` must fit DynamoDB's 2,048-byte partition key); ``key`` or ``validate`` is not a
        JMESPath or names an unknown function; ``envelope`` or ``effect_key`` is not one of its values;
        ``deadline_margin`` is negative; ``normalize`` names a step that is not one of ``identity.NORMALIZATIONS``.
    :raises TypeError: ``permanent`` holds something that is not an exception type; ``normalize`` is not a string
        or a sequence of strings.
    """

    def __init__(
        self,
        *,
        key: str,
        key_prefix: str,
        validate: str | None = None,
        envelope: str | None = None,
        permanent: tuple[type[BaseException], ...] = (),
        effect_key: str | None = None,
        deadline_margin: float | None = None,
        raise_on_no_idempotency_key: bool = True,
        normalize: str | Sequence[str] = (),
        persistence_layer: PersistenceLayerFactory = DynamoDBPersistenceLayer,
        service: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.key = key
        self.key_prefix = parse_key_prefix("key_prefix", key_prefix)
        self.validate = validate
        self.envelope = events.check_envelope(envelope)
        self.permanent = _check_permanent(permanent)
        if effect_key is None:
            warnings.warn(
                "Consumer(effect_key=None) hands effects the idempotency key itself ('business'); pass "
                "effect_key='scoped' (the next minor version's default) or 'business' explicitly",
                DeprecationWarning,
                stacklevel=2,
            )
        self.effect_key = effect_keys.check_mode(effect_key or effect_keys.BUSINESS)
        if deadline_margin is not None and not deadline_margin >= 0:
            raise ValueError(f"deadline_margin must be 0 seconds or more, but {deadline_margin!r} was given")
        self.raise_on_no_idempotency_key = raise_on_no_idempotency_key
        self.persistence_layer = persistence_layer
        self._key_path = events.compile_expression("key", key)
        self._validate_path = None if validate is None else events.compile_expression("validate", validate)
        self.normalize = identity.check_steps(normalize)
        # What Powertools searches and hashes: the key as given (off: stored keys exactly as before), or the key
        # wrapped in the normalising function with this consumer's steps.
        self._powertools_key, self._functions = key, events.FUNCTIONS
        if self.normalize:
            self._powertools_key = _normalizing_expression(self._key_path)
            self._functions = _NormalizingFunctions(self.normalize)
        service = service or os.environ.get(names.ENV_SERVICE_NAME) or names.DEFAULT_SERVICE_NAME
        self.logger = Logger(service=service)
        self.metrics = Metrics(
            namespace=namespace or os.environ.get(names.ENV_METRICS_NAMESPACE) or names.DEFAULT_METRICS_NAMESPACE,
            service=service,
        )
        self._record_function: RecordFunction | None = None
        self._effect_names: set[str] = set()
        self._state: ConsumerState | None = None
        # The record being processed: what each effect is called with and what it records.
        self._run: _Run | None = None
        self._context: Any = None
        self._batch = SqsBatch(self, deadline_margin=deadline_margin)
        self.handler: Callable[[Any, Any], Any] = self.metrics.log_metrics(
            self.logger.inject_lambda_context(self._handle, log_event=False)
        )

    # --- declaring ----------------------------------------------------------------------------------------------

    def record(self, function: F) -> F:
        """Declare the record function: called with the payload (a ``dict``) once per key, its JSON-ready result
        stored and returned to duplicates. Raise ``PermanentError`` for input that can never succeed.

        :raises ValueError: a record function was already declared.
        """
        if self._record_function is not None:
            raise ValueError("a Consumer takes one record function; one was already declared")
        self._record_function = function
        return function

    @overload
    def effect(self, function: Callable[..., R], *, name: str | None = None) -> Callable[..., R]: ...

    @overload
    def effect(
        self, function: None = None, *, name: str | None = None
    ) -> Callable[[Callable[..., R]], Callable[..., R]]: ...

    def effect(self, function: Callable[..., R] | None = None, *, name: str | None = None) -> Any:
        """Declare a side effect, as ``@consumer.effect`` or ``@consumer.effect(name="charge")``. The returned
        function takes the same arguments but ``idempotency_key`` (typed ``Callable[..., R]``: a type cannot drop a
        keyword-only parameter); the runtime adds ``idempotency_key=<the effect key>`` (pass it to a provider that
        accepts idempotency keys, so a re-execution after a crash is answered, not repeated) and, after it
        returns, writes one log line ``effect executed`` with ``idempotency_key`` (the record's key), ``effect``
        (the name) and ``effect_key``, flushed, and counts ``EffectsExecuted``.

        :param name: the effect's name, part of its scoped key (``effect_key="scoped"``). :default: ``None``: the
            function's ``__name__``.
        :raises ValueError: another effect of this consumer has the same name (their scoped keys would collide).
        :raises RuntimeError: (when called) outside a record function.
        """
        if function is None:
            return functools.partial(self.effect, name=name)
        effect = name or function.__name__
        if effect in self._effect_names:
            raise ValueError(f"effect name {effect!r} is declared twice on this Consumer: give one a name=")
        self._effect_names.add(effect)

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> R:
            current = self._run
            if current is None:
                raise RuntimeError(f"effect {effect!r} was called outside the Consumer's record function")
            key = current.key
            passed = self.effect_key_for(effect, key)
            with effect_context.running(effect_context.EffectCall(self, key, effect, passed)):
                result = function(*args, idempotency_key=passed, **kwargs)
            current.effects.append(effect)
            self.logger.info(
                names.EFFECT_EXECUTED,
                extra={names.FIELD_IDEMPOTENCY_KEY: key, names.FIELD_EFFECT: effect, names.FIELD_EFFECT_KEY: passed},
            )
            self.logger.registered_handler.flush()
            self.metrics.add_metric(name=names.METRIC_EFFECTS_EXECUTED, unit=MetricUnit.Count, value=1)
            return result

        return run

    def effect_key_for(self, effect: str, key: Any) -> Any:
        """The key the effect named ``effect`` is called with for the idempotency key ``key`` (``None`` stays
        ``None``: a record processed unguarded has no key)."""
        if key is None or self.effect_key == effect_keys.BUSINESS:
            return key
        return effect_keys.scoped(self.state.settings.key_prefix, effect, key)

    # --- state ----------------------------------------------------------------------------------------------------

    def setup(
        self, *, persistence_store: BasePersistenceLayer | None = None, env: Mapping[str, str] | None = None
    ) -> ConsumerState:
        """Build the execution environment's state from the environment (what the first invocation does).
        Tests and benchmarks pass their own ``persistence_store``.

        :raises ValueError: the environment is incomplete or malformed (``RuntimeSettings.from_env``),
            ``DEAD_LETTER_QUEUE_URL`` is not a queue URL, or the persistence layer already serves another
            ``Consumer`` (the message names both key prefixes).
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
        self._own(persistence_store, settings.key_prefix)
        config = IdempotencyConfig(
            event_key_jmespath=self._powertools_key,
            payload_validation_jmespath=self.validate or "",
            raise_on_no_idempotency_key=self.raise_on_no_idempotency_key,
            expires_after_seconds=settings.expiry_seconds,
            # The functions the key was checked against at construction (and Powertools' own default), plus the
            # normalising one when ``normalize`` is on.
            jmespath_options={"custom_functions": self._functions},
            response_hook=self._on_duplicate,
        )
        process = idempotent_function(
            data_keyword_argument="record",
            persistence_store=persistence_store,
            config=config,
            key_prefix=settings.key_prefix,
        )(self._run_record_function)
        self._state = ConsumerState(settings, persistence_store, config, process, dead_letter)
        if is_delivery_id(self._key_path):
            self.logger.warning(
                MSG_KEY_IS_DELIVERY_ID,
                extra={
                    names.FIELD_REASON: f"key {self.key!r} names the delivery's own id (an EventBridge event's id, an "
                    "SQS record's messageId): a producer retry or a second EventBridge put of the same payment gets a "
                    "new one, so it runs twice; key on a business id (e.g. payment_id)"
                },
            )
        return self._state

    def _own(self, store: BasePersistenceLayer, prefix: str) -> None:
        owner = _LAYER_OWNERS.get(store)
        if owner is not None and owner is not self:
            theirs = owner._state.settings.key_prefix if owner._state is not None else owner.key_prefix
            raise ValueError(
                f"persistence layer {type(store).__name__} already serves the Consumer with key prefix {theirs!r}; "
                f"the Consumer with key prefix {prefix!r} needs its own (Powertools configures a layer once: a "
                "shared one keys every consumer on the first one's key)"
            )
        _LAYER_OWNERS[store] = self

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
        if self._state is not None and _LAYER_OWNERS.get(self._state.persistence_store) is self:
            del _LAYER_OWNERS[self._state.persistence_store]
        self._state = None

    # --- one record -----------------------------------------------------------------------------------------------

    def _run_record_function(self, record: dict[str, Any]) -> Any:
        assert self._record_function is not None and self._run is not None
        run = self._run
        try:
            result = json_safe(self._record_function(record))
        except Exception as error:
            if run.effects:
                self.logger.warning(
                    names.MSG_EFFECT_REPEATED_AFTER_FAILURE,
                    extra={names.FIELD_EFFECTS: list(run.effects), names.FIELD_ERROR_TYPE: type(error).__name__},
                )
            raise
        run.returned, run.result, run.stored = True, result, self._storable(result)
        return run.stored

    def _storable(self, result: Any) -> Any:
        """``result``, or the not-stored marker when the record could not hold it (DynamoDB's item size limit)."""
        size = len(json.dumps(result, sort_keys=True, default=str).encode())
        room = names.DYNAMODB_MAX_ITEM_BYTES - names.IDEMPOTENCY_RECORD_OVERHEAD_BYTES
        room -= len(self.state.settings.key_prefix.encode()) + 33  # the stored key: <prefix>#<32 hex>
        if size <= room:
            return result
        assert self._run is not None
        self._run.oversized = True
        self.logger.warning(
            names.MSG_RESULT_NOT_STORED,
            extra={names.FIELD_REASON: f"the result is {size} bytes of JSON; the idempotency record holds {room}"},
        )
        return {names.RESULT_NOT_STORED_FIELD: names.RESULT_NOT_STORED, "bytes": size}

    def _on_duplicate(self, response: Any, idempotent_data: DataRecord) -> Any:
        self.metrics.add_metric(name=names.METRIC_DUPLICATES_SUPPRESSED, unit=MetricUnit.Count, value=1)
        self.logger.info(names.MSG_DUPLICATE_SUPPRESSED, extra={names.FIELD_IDEMPOTENCY_STATUS: idempotent_data.status})
        return response

    def _invalid(self, reason: str) -> None:
        self.metrics.add_metric(name=names.METRIC_INVALID_RECORDS, unit=MetricUnit.Count, value=1)
        self.logger.warning(names.MSG_INVALID_RECORD, extra={names.FIELD_REASON: reason[: SHOWN_CHARS * 5]})

    def is_permanent(self, error: BaseException) -> bool:
        """Whether ``error`` makes its record a permanent failure: the runtime's own (``dead_letter.is_permanent``)
        or one declared ``permanent=``, raised or found in its ``__cause__`` chain."""
        return is_permanent(error, self.permanent)

    def process(self, body: Any) -> Any:
        """One payload, through the idempotency layer (the path of every record and direct invocation).

        :raises PermanentError: bad input (``InvalidRecord``: not an object, no key, a key expression that failed)
            or the record function's own.
        :raises IdempotencyAlreadyInProgressError: the key is being processed elsewhere.
        :raises IdempotencyValidationError: the key was stored with another payload (``validate``).
        :raises IdempotencyPersistenceLayerError: the record could not be completed after retries.
        """
        if self._record_function is None:
            raise RuntimeError("no record function: declare one with @consumer.record")
        state = self.state
        try:
            if not isinstance(body, dict):
                raise InvalidRecord(f"body must be a JSON object, got {type(body).__name__}")
            key = key_text(identity.normalize_key(self._key_path.search(body), self.normalize))
            if self._validate_path is not None:
                # Searched here first: an error inside Powertools' own search would come out raw (transient).
                self._validate_path.search(body)
            self.logger.set_correlation_id(key)
            self.logger.append_keys(**{names.FIELD_IDEMPOTENCY_KEY: key})
            self._run = run = _Run(key)
            try:
                result = state.process(record=body)
            except IdempotencyKeyError as exc:
                raise InvalidRecord(f"no idempotency key: {self.key!r} found nothing in the body") from exc
            except IdempotencyPersistenceLayerError as exc:
                if not run.returned:
                    raise
                self._complete(state, body, run, exc)
            finally:
                self._run = None
            if run.returned:
                self.logger.info(names.MSG_RECORD_PROCESSED)
                return run.result
            return result
        except Exception as error:
            if isinstance(error, (IdempotencyAlreadyInProgressError, IdempotencyValidationError)):
                # The idempotency-rejections query (docs/observability.md) lists these lines.
                self.logger.warning(
                    names.MSG_IDEMPOTENCY_REJECTED, extra={names.FIELD_IDEMPOTENCY_ERROR: type(error).__name__}
                )
            elif self.is_permanent(error):
                self._invalid(str(error) if isinstance(error, PermanentError) else f"{type(error).__name__}: {error}")
            raise

    def _complete(self, state: ConsumerState, body: dict[str, Any], run: _Run, error: Exception) -> None:
        """Complete the record after Powertools' own save failed: retried with backoff within the invocation's
        remaining time (less the deadline margin); raises ``error`` when every attempt failed."""
        delay, attempts, last = _COMPLETION_FIRST_DELAY, 1, error.__cause__ or error
        while attempts < _COMPLETION_ATTEMPTS:
            left = remaining_ms(self._context)
            if left is not None and left - self._batch.margin_ms(self._context) < delay * 1000:
                break
            time.sleep(delay)
            attempts += 1
            try:
                state.persistence_store.save_success(data=body, result=run.stored)
                return
            except Exception as again:  # noqa: BLE001 - every failure is retried, then reported below
                last = again
            delay = min(delay * _COMPLETION_BACKOFF, _COMPLETION_MAX_DELAY)
        self.metrics.add_metric(name=names.METRIC_COMPLETION_FAILURES, unit=MetricUnit.Count, value=1)
        self.logger.warning(
            names.MSG_COMPLETION_FAILED,
            extra={
                names.FIELD_ERROR_TYPE: type(last).__name__,
                names.FIELD_REASON: f"{last}"[: SHOWN_CHARS * 5],
                names.FIELD_ATTEMPTS: attempts,
                names.FIELD_EFFECTS: list(run.effects),
            },
        )
        raise error

    def log_failure(self, error: BaseException, **extra: Any) -> None:
        """The ``record failed`` line of a record (or a direct invocation) that did not succeed."""
        self.logger.warning(
            names.MSG_RECORD_FAILED,
            extra={
                names.FIELD_ERROR_TYPE: type(error).__name__,
                names.FIELD_REASON: f"{error}"[: SHOWN_CHARS * 5],
                **extra,
            },
        )

    # --- SQS --------------------------------------------------------------------------------------------------------

    def process_sqs_record(self, record: SQSRecord, lambda_context: Any = None) -> Any:
        """One SQS record (``sqs_batch.SqsBatch`` calls it): parsed, unwrapped, processed; a permanent failure is
        sent to the dead-letter queue and reported done (``None``) when it can be.

        :raises Exception: a transient failure, or a permanent one that could not be dead-lettered.
        """
        try:
            return self._process_sqs_body(record)
        except Exception as error:
            if not self.is_permanent(error) or not self._dead_letter(record, error, lambda_context):
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
            payload = events.payload(events.SQS, record.raw_event, self.envelope)
        except InvalidRecord as error:
            self._invalid(str(error))
            raise
        return self.process(payload)

    # --- direct triggers --------------------------------------------------------------------------------------------

    def _process_direct(self, kind: str, item: Any, message_id: Any) -> Any:
        """One direct document (an SNS or S3 record, an EventBridge event, a direct invocation): processed, and a
        failure logged and raised."""
        self.logger.set_correlation_id(None)
        self.logger.append_keys(
            **{names.FIELD_MESSAGE_ID: message_id, names.FIELD_RECEIVE_COUNT: None, names.FIELD_IDEMPOTENCY_KEY: None}
        )
        try:
            try:
                payload = events.payload(kind, item, self.envelope)
            except InvalidRecord as error:
                self._invalid(str(error))
                raise
            return self.process(payload)
        except Exception as error:
            self.log_failure(error, **{names.FIELD_TRIGGER: kind})
            raise

    def _handle_records(self, kind: str, records: list[dict[str, Any]]) -> list[Any]:
        """SNS or S3 records: each on its own (a failure does not stop the others); the first failure is raised
        after all were tried, so Lambda retries the event and the records already done are answered as
        duplicates."""
        results: list[Any] = []
        first: Exception | None = None
        for record in records:
            message_id = (record.get("Sns") or {}).get("MessageId") if kind == events.SNS else None
            try:
                results.append(self._process_direct(kind, record, message_id))
            except Exception as error:  # noqa: BLE001 - raised below, once every record was tried
                first = first or error
        if first is not None:
            raise first
        return results

    def _handle(self, event: Any, context: Any) -> Any:
        # Every invocation: an in-progress record then expires with this invocation's deadline.
        self.state.config.register_lambda_context(context)
        self._context = context
        try:
            try:
                kind = events.classify(event)
            except ValueError as error:
                self.log_failure(error, **{names.FIELD_MESSAGE_ID: None, names.FIELD_IDEMPOTENCY_KEY: None})
                raise
            if kind == events.SQS:
                return self._batch.handle(event, context)
            if kind in (events.SNS, events.S3):
                return self._handle_records(kind, event["Records"])
            message_id = event.get("id") if kind == events.EVENTBRIDGE else None
            return self._process_direct(kind, event, message_id)
        finally:
            self._context = None
            self.logger.remove_keys(list(_RECORD_KEYS))
            self.logger.set_correlation_id(None)


def is_delivery_id(key: events.Expression) -> bool:
    """Whether the key expression is exactly a field named in ``DELIVERY_ID_KEYS`` (``id``, ``"id"``,
    ``messageId``), not a path to one inside the payload (``detail.id``) nor another field."""
    tree = key.parsed.parsed
    return bool(tree.get("type") == "field" and tree.get("value") in DELIVERY_ID_KEYS)


def _normalizing_expression(key: events.Expression) -> str:
    """``effectively_once_normalize(<key>)``: Powertools searches it over the payload it is given (the one
    ``validate`` and the record function get too), so the key it hashes is the normalised one. Checked to parse as
    that call around the key's own tree, the key's result its only argument."""
    wrapped = f"{NORMALIZE_FUNCTION}({key.expression})"
    tree = jmespath.compile(wrapped).parsed
    if tree != {"type": "function_expression", "children": [key.parsed.parsed], "value": NORMALIZE_FUNCTION}:
        raise ValueError(f"key {key.expression!r} cannot be normalised: {wrapped!r} does not parse as a call on it")
    return wrapped


def _check_permanent(permanent: Any) -> tuple[type[BaseException], ...]:
    types = tuple(permanent) if isinstance(permanent, (tuple, list)) else (permanent,)
    for item in types:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"permanent must be a tuple of exception types, but {item!r} was given")
    return types
