"""``Consumer``: one record function plus its declared side effects, turned into an effectively-once Lambda handler.

What every handler built on it does (the guarantees no record function has to remember):

- **Triggers** (``events.classify``): SQS batches (standard and FIFO: ``sqs_batch.py``, partial batch responses),
  SNS and S3 notifications invoked directly (each record idempotent on its own), EventBridge events and direct
  invocations. Any other shape (Kinesis, DynamoDB streams, Kafka, ``"Records": []``, a record without its id) raises
  ``UnsupportedEvent``, one line naming what was expected. On a direct trigger (everything but SQS) a failure is
  raised: Lambda retries an asynchronous invocation, then uses its on-failure destination. A permanent one on an
  EventBridge, SNS or S3 trigger (a direct invocation with ``ON_FAILURE_DIRECT``) is recorded by the runtime on the
  on-failure queue (``ON_FAILURE_QUEUE_URL``, ``on_failure.py``) and the invocation succeeds: never retried.
- **What the key runs over** (``events.unwrap``): with ``envelope=None`` the SQS body, the SNS or S3 record, or the
  whole event; with ``"sns"`` the SNS ``Message`` parsed as strict JSON; with ``"eventbridge"`` the event's
  ``detail``; with ``"s3"`` each S3 record of an S3 event notification carried by a queue or a topic; ``"auto"``
  unwraps whichever envelope it finds. The record function gets that payload.
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
  only the effect's own key stops a second effect then. A record function that fails after an effect returned makes
  Powertools delete its record; the runtime releases it with the effect's result instead (``effect_results.py``), so
  the next delivery is answered from it (``effect answered from marker``) and never calls the effect again. A result
  that could not be kept is logged ``effect result not kept``, and such an effect ``effect repeated after failure``.
  A kill between an effect and the completion keeps no result: the effect's own key stops a second effect then.
- **Failures.** Bad input (not JSON, not an object, no key, failed validation, a ``PermanentError`` or an exception
  declared ``permanent=``, also when found in the ``__cause__`` chain) is logged as ``invalid record``. On SQS it is
  sent to the dead-letter queue on first sight (``dead_letter.py``) with a reason attribute and reported done; if
  that is impossible it is a batch item failure. Everything else is transient: a batch item failure. Every failed
  record is logged ``record failed``. A batch is never lost.
- Every log line of a record carries ``correlation_id`` = ``idempotency_key`` = the key, ``message_id`` and
  ``receive_count``; the metric names and log messages are those of ``names.py``, which the constructs' alarms,
  dashboard and queries read.

The rooms: this module declares (``Consumer``: the record function, the effects, the state's life);
``execution.py`` runs one record and its effects (``EffectCall``, the per-call context adapters get, is in
``effects/_context.py``); ``sqs_batch.py`` is the SQS record path; ``dispatch.py`` sends an invocation down its path;
``deadline.py`` holds the deadline; ``state.py`` builds the execution environment's state; ``record_keys.py`` the
key's text, normalisation and delivery-id check.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

from . import effect_keys, events, identity, names
from .dead_letter import check_permanent
from .deadline import check_margin
from .dispatch import Dispatch
from .errors import ConcurrencyModeRefused
from .execution import KeyRules, RecordExecution, RecordFunction
from .operations import OPERATION_ONLY, check_operation
from .record_keys import (
    DELIVERY_ID_KEYS,
    MSG_KEY_IS_DELIVERY_ID,
    NORMALIZE_FUNCTION,
    NormalizingFunctions,
    canonical_expression,
    delivery_id_reason,
    is_delivery_id,
    key_text,
    normalizing_expression,
)
from .settings import parse_key_prefix
from .sqs_batch import SqsBatch
from .state import ConsumerState, PersistenceLayerFactory, StateSpec, build_state, release

# Re-exported: their homes are ``record_keys``, ``state`` and ``execution``; ``consumer`` was where they were found.
__all__ = [
    "DELIVERY_ID_KEYS",
    "MSG_KEY_IS_DELIVERY_ID",
    "NORMALIZE_FUNCTION",
    "Consumer",
    "ConsumerState",
    "PersistenceLayerFactory",
    "RecordFunction",
    "is_delivery_id",
    "key_text",
]

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


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
        or SQS target), ``"s3"`` (each S3 record of an S3 event notification sent to a queue, or to a topic: keyed
        as a direct S3 trigger's record; ``s3:TestEvent`` acknowledged), ``"auto"`` (whichever it finds, else the
        payload as is; a payment arriving by SQS and by EventBridge then has one record). A payload without the
        envelope named is bad input. :default: ``None``.
    :param permanent: exception types that can never succeed on a retry (e.g. a provider's "key reused" refusal):
        one raised by the record function or an effect, or found in its ``__cause__`` chain, is handled as a
        ``PermanentError`` (the DLQ on first sight, with its reason). :default: ``()``.
    :param effect_key: the key each declared effect is called with: ``"scoped"``
        (``<key prefix>#<effect name>#<key>``, printable ASCII of at most 128 characters, see ``effect_keys``) or
        ``"business"`` (the idempotency key itself). Switching an existing consumer to ``"scoped"`` changes the
        keys its provider sees: the provider must answer both forms for keys written before the switch.
        :default: ``None``: ``"business"`` with a ``DeprecationWarning`` (the default becomes ``"scoped"`` in
        0.4.0; docs/deprecations.md).
    :param check: called with each payload (the ``dict`` the record function gets) before anything else runs, with no
        I/O: raise ``PermanentError`` (or an exception declared ``permanent=``) for input that can never succeed, e.g.
        the domain's own parser (``check=parse_payment``). On SQS every record of a batch is checked before the
        first record runs, so bad input is dead-lettered on first sight whatever happens to the rest of the batch
        (``sqs_batch.py``); every other path checks it before the idempotency record is written. Any other exception
        it raises is transient. :default: ``None``: only the runtime's own checks (strict JSON object, a key).
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
    :param operation: what this consumer does to a key (``"charge"``, ``"refund"``): 1 to 64 letters, digits or
        ``-_.:/``, stored with each record in its validation hash (``operations.py``). A record another operation
        wrote under the same key prefix is then ``OperationMismatch`` (permanent: the DLQ on first sight, naming both),
        never a duplicate; a record written without one is answered as before. Give it wherever a table and a prefix
        are shared. :default: ``None``: records carry no operation.
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
        ``deadline_margin`` is negative; ``normalize`` names a step that is not one of ``identity.NORMALIZATIONS``;
        ``operation`` breaks its rule.
    :raises TypeError: ``permanent`` holds something that is not an exception type; ``normalize`` is not a string
        or a sequence of strings; ``check`` is not callable.
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
        check: Callable[[dict[str, Any]], Any] | None = None,
        deadline_margin: float | None = None,
        raise_on_no_idempotency_key: bool = True,
        normalize: str | Sequence[str] = (),
        operation: str | None = None,
        persistence_layer: PersistenceLayerFactory = DynamoDBPersistenceLayer,
        service: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.key = key
        self.key_prefix = parse_key_prefix("key_prefix", key_prefix)
        self.validate = validate
        self.envelope = events.check_envelope(envelope)
        self.permanent = check_permanent(permanent)
        if effect_key is None:
            _warn_effect_key_default()
        self.effect_key = effect_keys.check_mode(effect_key or effect_keys.BUSINESS)
        self.deadline_margin = check_margin(deadline_margin)
        self.raise_on_no_idempotency_key = raise_on_no_idempotency_key
        self.operation = check_operation(operation)
        self.persistence_layer = persistence_layer
        key_path = events.compile_expression("key", key)
        validate_path = None if validate is None else events.compile_expression("validate", validate)
        self.normalize = identity.check_steps(normalize)
        # What Powertools searches and hashes: the key wrapped in the normalising function (numbers canonical, then
        # this consumer's steps), and the validation wrapped in the canonical one. A key or validation without a
        # float of integral value hashes as before (legacy_hashes answers the records of those that had one).
        self._powertools_key = normalizing_expression(key_path)
        self._powertools_validate = None if validate_path is None else canonical_expression(validate_path)
        if self._powertools_validate is None and self.operation is not None:
            self._powertools_validate = OPERATION_ONLY  # the stored hash then holds the operation alone
        self._functions = NormalizingFunctions(self.normalize)
        self._state: ConsumerState | None = None
        self._effect_names: set[str] = set()
        if check is not None and not callable(check):
            raise TypeError(f"check must be a function of the payload, but {check!r} was given")
        self.check = check
        rules = KeyRules(
            key,
            key_path,
            validate_path,
            self.normalize,
            self.effect_key,
            self.permanent,
            check,
            raise_on_no_idempotency_key,
        )
        self._build_rooms(service, namespace, rules)

    def _build_rooms(self, service: str | None, namespace: str | None, rules: KeyRules) -> None:
        """The Logger and Metrics, the record execution, the SQS path, the dispatch and the handler."""
        service = service or os.environ.get(names.ENV_SERVICE_NAME) or names.DEFAULT_SERVICE_NAME
        self.logger = Logger(service=service)
        self.metrics = Metrics(
            namespace=namespace or os.environ.get(names.ENV_METRICS_NAMESPACE) or names.DEFAULT_METRICS_NAMESPACE,
            service=service,
        )
        self._execution = RecordExecution(rules, self.logger, self.metrics, lambda: self.state)
        self._batch = SqsBatch(
            self._execution,
            envelope=self.envelope,
            dead_letter=lambda: self.state.dead_letter,
            backoff=lambda: self.state.backoff,
            queues=lambda: self.state.settings.source_queues,
        )
        dispatch = Dispatch(
            self._execution,
            self._batch,
            lambda: self.state.config,
            envelope=self.envelope,
            deadline_margin=self.deadline_margin,
            on_failure=lambda: self.state.on_failure,
        )
        self.handler: Callable[[Any, Any], Any] = self.metrics.log_metrics(
            self.logger.inject_lambda_context(dispatch.handle, log_event=False)
        )

    # --- declaring ----------------------------------------------------------------------------------------------

    def record(self, function: F) -> F:
        """Declare the record function: called with the payload (a ``dict``) once per key, its JSON-ready result
        stored and returned to duplicates. Raise ``PermanentError`` for input that can never succeed.

        :raises ValueError: a record function was already declared.
        """
        if self._execution.record_function is not None:
            raise ValueError("a Consumer takes one record function; one was already declared")
        self._execution.record_function = function
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
        accepts idempotency keys, so a re-execution after a crash is answered, not repeated), runs it with its
        per-call context (``effects.EffectCall``, what adapters read) and, after it returns, writes one log line
        ``effect executed`` with ``idempotency_key`` (the record's key), ``effect`` (the name) and ``effect_key``,
        flushed, and counts ``EffectsExecuted``.

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
        execution = self._execution

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> R:
            return execution.run_effect(effect, function, args, kwargs)

        return run

    def effect_key_for(self, effect: str, key: Any) -> Any:
        """The key the effect named ``effect`` is called with for the idempotency key ``key`` (``None`` stays
        ``None``: a record processed unguarded has no key)."""
        return self._execution.effect_key_for(effect, key)

    # --- state ----------------------------------------------------------------------------------------------------

    def setup(
        self, *, persistence_store: BasePersistenceLayer | None = None, env: Mapping[str, str] | None = None
    ) -> ConsumerState:
        """Build the execution environment's state from the environment (what the first invocation does).
        Tests and benchmarks pass their own ``persistence_store``.

        :raises ValueError: the environment is incomplete or malformed (``RuntimeSettings.from_env``),
            ``DEAD_LETTER_QUEUE_URL`` is not a queue URL, or the persistence layer already serves another
            ``Consumer`` (the message names both key prefixes).
        :raises ConcurrencyModeRefused: ``AWS_LAMBDA_CONCURRENCY_MODE`` runs requests side by side in one process.
        """
        spec = StateSpec(
            self.key_prefix,
            self._powertools_key,
            self._powertools_validate,
            self.raise_on_no_idempotency_key,
            self._functions,
            self.persistence_layer,
            legacy_validate=self._execution.rules.validate_path,
            operation=self.operation,
        )
        execution = self._execution
        self._state = build_state(
            spec,
            self,
            execution.run_record_function,
            execution.on_duplicate,
            persistence_store=persistence_store,
            env=env,
        )
        if is_delivery_id(execution.rules.key_path):
            self.logger.warning(MSG_KEY_IS_DELIVERY_ID, extra={names.FIELD_REASON: delivery_id_reason(self.key)})
        return self._state

    def warm(self) -> ConsumerState | None:
        """Build the state now when the environment allows it: call it at module level, in Lambda's init phase,
        so the first invocation does not spend its function timeout creating SDK clients (the init phase has a
        limit of its own; "initialize SDK clients and database connections outside of the function handler").
        Anything that fails here (an incomplete environment, no Region) is left for the first invocation, which
        raises it as without this call; a concurrency mode the runtime refuses fails the init phase itself. Sources:
        https://docs.aws.amazon.com/lambda/latest/dg/best-practices.html,
        https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html (Init phase).

        :returns: the state, or ``None`` when it could not be built yet.
        :raises ConcurrencyModeRefused: ``AWS_LAMBDA_CONCURRENCY_MODE`` runs requests side by side in one process.
        """
        try:
            return self.state
        except ConcurrencyModeRefused:
            raise  # no invocation of this environment can run: say so before the first one
        except Exception:  # noqa: BLE001 - the first invocation builds it again and raises the error there
            return None

    @property
    def state(self) -> ConsumerState:
        """The current state, built on first use."""
        return self._state if self._state is not None else self.setup()

    def reset(self) -> None:
        """Forget the state: the next invocation reads the environment again (tests, tooling)."""
        if self._state is not None:
            release(self._state.persistence_store, self)
        self._state = None

    # --- one record (``execution.py``) ------------------------------------------------------------------------------

    def process(self, body: Any) -> Any:
        """One payload, through the idempotency layer (``RecordExecution.process``: its errors)."""
        return self._execution.process(body)

    def is_permanent(self, error: BaseException) -> bool:
        """Whether ``error`` makes its record a permanent failure: the runtime's own (``dead_letter.is_permanent``)
        or one declared ``permanent=``, raised or found in its ``__cause__`` chain."""
        return self._execution.is_permanent(error)

    def log_failure(self, error: BaseException, **extra: Any) -> None:
        """The ``record failed`` line of a record (or a direct invocation) that did not succeed."""
        self._execution.log_failure(error, **extra)


def _warn_effect_key_default() -> None:
    """The ``DeprecationWarning`` of ``Consumer(effect_key=None)`` (``"business"``), at the caller's caller."""
    warnings.warn(
        "Consumer(effect_key=None) hands effects the idempotency key itself ('business'); pass "
        "effect_key='scoped' (the default in 0.4.0) or 'business' explicitly",
        DeprecationWarning,
        stacklevel=3,
    )
