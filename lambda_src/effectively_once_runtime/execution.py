"""One record's execution: the payload through the idempotency layer, the record function, its declared effects,
and the completion of the record (``RecordExecution``; ``Consumer`` holds one).

- ``process`` keys the payload (``record_keys``, ``normalize``), runs the idempotent record function (the
  ``ConsumerState``'s), and logs ``record processed`` after the record was completed. A result too large for the
  record is stored as ``names.RESULT_NOT_STORED``.
- A declared effect runs inside ``run_effect``: called with its effect key, handed the per-call context
  (``effects._context.EffectCall``: names, keys, the deadline, the marker table, logger and metrics), logged
  ``effect executed`` once it returned, and its result kept in memory for the record (``effect_results.py``): when
  an exception escapes the record function after it, the record is released with the results instead of deleted,
  and its next run is answered from them (``effect answered from marker``), never calls it again.
- A completion that Powertools could not save is retried with backoff within the invocation's usable time
  (``deadline.Deadline``), then logged ``completion failed`` and raised.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyKeyError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from . import effect_keys, events, identity, names
from .body import SHOWN_CHARS, json_safe
from .dead_letter import is_permanent
from .deadline import Deadline
from .effect_results import EffectResults, call_name
from .effects._context import EffectCall, running
from .errors import InvalidRecord, PermanentError, UnknownRecordStatus
from .legacy_hashes import legacy_key_record
from .record_keys import key_text
from .state import ConsumerState

R = TypeVar("R")


class _Undecided(Exception):
    """``screen``'s marker of a payload that is neither clean nor bad input (its check failed transiently)."""


#: A payload ``screen`` leaves to the full path.
_UNDECIDED = _Undecided()
RecordFunction = Callable[[dict[str, Any]], Any]

#: The log keys of one record, removed when it is done.
RECORD_KEYS = (
    names.FIELD_MESSAGE_ID,
    names.FIELD_RECEIVE_COUNT,
    names.FIELD_IDEMPOTENCY_KEY,
    names.FIELD_IDEMPOTENCY_STATUS,
)
#: Completion retries: the first delay, the factor and the longest delay (seconds), and the most attempts.
_COMPLETION_FIRST_DELAY, _COMPLETION_BACKOFF, _COMPLETION_MAX_DELAY, _COMPLETION_ATTEMPTS = 0.1, 2.0, 2.0, 5
#: Outside an invocation nothing limits the completion retries.
NO_DEADLINE = Deadline(None, 0.0)


@dataclass
class _Run:
    """One record's pass through the idempotency layer: its key, the effects that returned, and whether the record
    function returned (set by the runtime itself, so "after the record function" never rests on an error's text)."""

    key: Any
    #: The effect results of this run: received from a released record, and kept (``effect_results``).
    results: EffectResults = field(default_factory=lambda: EffectResults(None))
    effects: list[str] = field(default_factory=list)
    #: The effects whose results were kept (``effect_results``), or answered from a kept result.
    kept: list[str] = field(default_factory=list)
    #: Calls of each effect so far in this run (the n of its ``effect_call``).
    calls: Counter[str] = field(default_factory=Counter)
    returned: bool = False
    stored: Any = None
    result: Any = None
    oversized: bool = False


@dataclass(frozen=True)
class KeyRules:
    """How a payload is keyed: ``key`` (its text, for messages) and its compiled expression, the ``validate``
    expression or ``None``, the ``normalize`` steps, the ``effect_key`` mode and the ``permanent`` exception types."""

    key: str
    key_path: events.Expression
    validate_path: events.Expression | None
    normalize: tuple[str, ...]
    effect_key: str
    permanent: tuple[type[BaseException], ...]
    #: ``Consumer(check=...)``: the payload's own check, no I/O (``None``: none).
    check: Callable[[dict[str, Any]], Any] | None = None
    #: ``Consumer(raise_on_no_idempotency_key=...)``: a payload without a key is bad input.
    raise_on_no_key: bool = True


class RecordExecution:
    """Runs one record at a time through the idempotency layer of ``state()`` (see the module docstring).

    :param rules: how a payload is keyed.
    :param logger: the consumer's Logger. :param metrics: the consumer's Metrics.
    :param state: the execution environment's state, built on first use.
    """

    def __init__(self, rules: KeyRules, logger: Logger, metrics: Metrics, state: Callable[[], ConsumerState]) -> None:
        self.rules, self.logger, self.metrics, self._state = rules, logger, metrics, state
        self.record_function: RecordFunction | None = None
        #: The record being processed: what each effect is called with and what it records.
        self.run: _Run | None = None
        #: The current invocation's deadline (set by ``dispatch``).
        self.deadline = NO_DEADLINE

    # --- effects ----------------------------------------------------------------------------------------------------

    def effect_key_for(self, effect: str, key: Any) -> Any:
        """The key the effect named ``effect`` is called with for the idempotency key ``key`` (``None`` stays
        ``None``: a record processed unguarded has no key)."""
        if key is None or self.rules.effect_key == effect_keys.BUSINESS:
            return key
        return effect_keys.scoped(self._state().settings.key_prefix, effect, key)

    def run_effect(self, effect: str, function: Callable[..., R], args: Sequence[Any], kwargs: dict[str, Any]) -> R:
        """Call the declared effect ``function`` with its effect key, inside its ``EffectCall``; log and count it.

        :raises RuntimeError: no record is being processed.
        """
        current = self.run
        if current is None:
            raise RuntimeError(f"effect {effect!r} was called outside the Consumer's record function")
        key = current.key
        passed = self.effect_key_for(effect, key)
        current.calls[effect] += 1
        number = current.calls[effect]
        fields = {names.FIELD_IDEMPOTENCY_KEY: key, names.FIELD_EFFECT: effect, names.FIELD_EFFECT_KEY: passed}
        found, kept = current.results.answer(effect, number)
        if found:
            current.kept.append(effect)
            self.logger.info(
                names.MSG_EFFECT_ANSWERED_FROM_MARKER,
                extra={**fields, names.FIELD_EFFECT_CALL: call_name(effect, number)},
            )
            return kept  # type: ignore[no-any-return]
        markers = self._state().markers
        call = EffectCall(effect, passed, key, self.deadline.monotonic(), markers, self.logger, self.metrics)
        with running(call):
            result = function(*args, idempotency_key=passed, **kwargs)
        current.effects.append(effect)
        self.logger.info(names.EFFECT_EXECUTED, extra=fields)
        self.logger.registered_handler.flush()
        self.metrics.add_metric(name=names.METRIC_EFFECTS_EXECUTED, unit=MetricUnit.Count, value=1)
        self._keep(current, number, result, fields)
        return result

    def _keep(self, run: _Run, number: int, result: Any, fields: dict[str, Any]) -> None:
        """Keep an effect's result in memory for its record (``effect_results``), or log why not."""
        effect = str(fields[names.FIELD_EFFECT])
        if run.results.store is None:
            return
        problem = run.results.keep(effect, number, result)
        if problem is None:
            run.kept.append(effect)
            return
        self.logger.warning(
            names.MSG_EFFECT_RESULT_NOT_KEPT,
            extra={**fields, names.FIELD_EFFECT_CALL: call_name(effect, number), names.FIELD_REASON: problem},
        )
        self.logger.registered_handler.flush()

    # --- one record -------------------------------------------------------------------------------------------------

    def process_delivery(
        self, kind: str, item: Any, envelope: str | None, *, screened: events.Delivered | None = None, **log_keys: Any
    ) -> Any:
        """One delivered document of trigger ``kind``: its log keys set (``message_id``, ``receive_count``), the
        payloads unwrapped (``events.payloads``; bad input logged ``invalid record`` and raised), then ``process``.
        ``screened``: what ``screen`` found clean for this very item, used as it is (not parsed or checked again).

        An S3 event notification carried by a queue or a topic (``envelope="s3"`` or ``"auto"``) may hold several
        S3 records: each is processed on its own key, and a failure is raised once all were tried (a transient one
        first, so the delivery comes back and the records already done are answered as duplicates). Its result is
        then the list of the records' results. An ``s3:TestEvent`` is acknowledged with one INFO line: ``None``."""
        self._start_delivery(log_keys)
        try:
            delivered = screened if screened is not None else events.payloads(kind, item, envelope)
        except InvalidRecord as error:
            self.invalid(str(error))
            raise
        checked = screened is not None
        if delivered.test_event is not None:
            test = delivered.test_event
            reason = f"bucket {test.get('Bucket')!r} at {test.get('Time')!r}: no record to process"
            self.logger.info(names.MSG_S3_TEST_EVENT, extra={names.FIELD_REASON: reason})
            return None
        if len(delivered.payloads) == 1:
            return self.process(delivered.payloads[0], checked=checked)
        return self._process_each(delivered.payloads, checked)

    def _start_delivery(self, log_keys: dict[str, Any]) -> None:
        """A delivery's log keys (``message_id``, ``receive_count``), the last one's cleared."""
        self.logger.set_correlation_id(None)
        self.logger.append_keys(**{**dict.fromkeys(RECORD_KEYS), **log_keys})

    def refuse(self, error: BaseException, **log_keys: Any) -> None:
        """A delivery ``screen`` found bad, refused before anything ran: its log keys set and its ``invalid record``
        line written (the caller then dead-letters it)."""
        self._start_delivery(log_keys)
        self.invalid(str(error) if isinstance(error, PermanentError) else f"{type(error).__name__}: {error}")

    def screen(self, kind: str, item: Any, envelope: str | None) -> events.Delivered | BaseException | None:
        """A delivery looked at before anything runs, without I/O and without logging:

        - the error that makes it bad input: it cannot be unwrapped (``events.payloads``), or none of its payloads
          can run (not an object, no key with ``raise_on_no_idempotency_key``, or the consumer's ``check`` raised a
          permanent error on it);
        - its ``events.Delivered`` when every payload passed (``process_delivery(screened=...)`` then takes it as
          it is: the body is parsed once and ``check`` runs once);
        - ``None`` when it is neither (some payloads failed, or a check failed otherwise): the full path decides.
        """
        try:
            delivered = events.payloads(kind, item, envelope)
        except InvalidRecord as error:
            return error
        errors = [self._screen_payload(payload) for payload in delivered.payloads]
        if all(error is None for error in errors):
            return delivered
        bad = [error for error in errors if error is not None and error is not _UNDECIDED]
        return bad[0] if len(bad) == len(errors) else None

    def _screen_payload(self, payload: Any) -> BaseException | None:
        rules = self.rules
        if not isinstance(payload, dict):
            return InvalidRecord(f"body must be a JSON object, got {type(payload).__name__}")
        try:
            missing = self._missing_key(rules.key_path.search(payload))
            if missing is not None:
                return missing
            if rules.validate_path is not None:
                rules.validate_path.search(payload)
            if rules.check is not None:
                rules.check(payload)
        except Exception as error:  # noqa: BLE001 - only a permanent error screens a record out
            return error if self.is_permanent(error) else _UNDECIDED
        return None

    def _missing_key(self, found: Any) -> InvalidRecord | None:
        """The bad-input error of a payload whose key expression found nothing (Powertools' own test,
        ``is_missing_idempotency_key``), when a key is required; else ``None``."""
        if self.rules.raise_on_no_key and BasePersistenceLayer.is_missing_idempotency_key(found):
            return InvalidRecord(f"no idempotency key: {self.rules.key!r} found nothing in the body")
        return None

    def _process_each(self, payloads: list[dict[str, Any]], checked: bool = False) -> list[Any]:
        """Every payload processed; the first transient failure (else the first permanent one) raised at the end."""
        results: list[Any] = []
        failures: list[Exception] = []
        for payload in payloads:
            try:
                results.append(self.process(payload, checked=checked))
            except Exception as error:  # noqa: BLE001 - raised below, once every record was tried
                failures.append(error)
        transient = [error for error in failures if not self.is_permanent(error)]
        if transient or failures:
            raise (transient or failures)[0]
        return results

    def process(self, body: Any, *, checked: bool = False) -> Any:
        """One payload, through the idempotency layer (the path of every record and direct invocation).
        ``checked``: ``screen`` already ran the consumer's ``check`` on it (not run again).

        :raises PermanentError: bad input (``InvalidRecord``: not an object, no key, a key expression that failed),
            the key's stored record holds a status the runtime does not know (``UnknownRecordStatus``), or the
            record function's own.
        :raises IdempotencyAlreadyInProgressError: the key is being processed elsewhere.
        :raises IdempotencyValidationError: the key was stored with another payload (``validate``).
        :raises IdempotencyPersistenceLayerError: the record could not be completed after retries.
        """
        if self.record_function is None:
            raise RuntimeError("no record function: declare one with @consumer.record")
        state = self._state()
        try:
            return self._process(state, body, checked)
        except Exception as error:
            if isinstance(error, (IdempotencyAlreadyInProgressError, IdempotencyValidationError)):
                # The idempotency-rejections query (docs/observability.md) lists these lines.
                self.logger.warning(
                    names.MSG_IDEMPOTENCY_REJECTED, extra={names.FIELD_IDEMPOTENCY_ERROR: type(error).__name__}
                )
            elif self.is_permanent(error):
                self.invalid(str(error) if isinstance(error, PermanentError) else f"{type(error).__name__}: {error}")
            raise

    def _process(self, state: ConsumerState, body: Any, checked: bool = False) -> Any:
        key, found = self._key(body)
        if self.rules.check is not None and not checked:
            # Before any write, so bad input never takes an in-progress record; a missing key is named as such.
            missing = self._missing_key(found)
            if missing is not None:
                raise missing
            self.rules.check(body)
        self.logger.set_correlation_id(key)
        # This payload's key; a stored status is set only when its claim is refused (``claims.py``).
        self.logger.append_keys(**{names.FIELD_IDEMPOTENCY_KEY: key, names.FIELD_IDEMPOTENCY_STATUS: None})
        legacy = legacy_key_record(
            state.persistence_store, state.config, state.settings.key_prefix, (found, self.rules.normalize), body
        )
        if legacy is not None:
            self.logger.info(names.MSG_LEGACY_HASH, extra={names.FIELD_REASON: "idempotency key of before 0.4.0"})
            return self.on_duplicate(legacy.response_json_as_dict(), legacy)
        self.run = run = _Run(key, EffectResults.start(state.persistence_store, key))
        try:
            with run.results.current():
                result = state.process(record=body)
        except IdempotencyKeyError as exc:
            raise InvalidRecord(f"no idempotency key: {self.rules.key!r} found nothing in the body") from exc
        except IdempotencyPersistenceLayerError as exc:
            if isinstance(exc.__cause__, UnknownRecordStatus):
                raise exc.__cause__ from None  # Powertools wraps what its claim raised: this is the reason
            if not run.returned:
                raise
            self._complete(state, body, run, exc)
        finally:
            self.run = None
        if run.returned:
            self.logger.info(names.MSG_RECORD_PROCESSED)
            return run.result
        return result

    def _key(self, body: Any) -> tuple[str | None, Any]:
        """The payload's idempotency key as text (normalised), and what the key expression found; ``validate``
        searched too.

        :raises InvalidRecord: ``body`` is not an object.
        """
        if not isinstance(body, dict):
            raise InvalidRecord(f"body must be a JSON object, got {type(body).__name__}")
        rules = self.rules
        found = rules.key_path.search(body)
        key = key_text(identity.normalize_key(found, rules.normalize))
        if rules.validate_path is not None:
            # Searched here first: an error inside Powertools' own search would come out raw (transient).
            rules.validate_path.search(body)
        return key, found

    def run_record_function(self, record: dict[str, Any]) -> Any:
        """The record function as Powertools runs it (once per key): its result made JSON-ready and storable."""
        assert self.record_function is not None and self.run is not None
        run = self.run
        run.results.receive(self.logger)  # right after the claim: what a released record of this one held
        try:
            result = json_safe(self.record_function(record))
        except Exception as error:
            repeated = list((Counter(run.effects) - Counter(run.kept)).elements())
            if repeated:
                self.logger.warning(
                    names.MSG_EFFECT_REPEATED_AFTER_FAILURE,
                    extra={names.FIELD_EFFECTS: repeated, names.FIELD_ERROR_TYPE: type(error).__name__},
                )
            raise
        run.returned, run.result, run.stored = True, result, self._storable(result)
        return run.stored

    def _storable(self, result: Any) -> Any:
        """``result``, or the not-stored marker when the record could not hold it (DynamoDB's item size limit)."""
        size = len(json.dumps(result, sort_keys=True, default=str).encode())
        room = names.DYNAMODB_MAX_ITEM_BYTES - names.IDEMPOTENCY_RECORD_OVERHEAD_BYTES
        room -= len(self._state().settings.key_prefix.encode()) + 33  # the stored key: <prefix>#<32 hex>
        assert self.run is not None
        room -= self.run.results.carried_bytes()  # the results a run that received them carried on its record
        if size <= room:
            return result
        self.run.oversized = True
        self.logger.warning(
            names.MSG_RESULT_NOT_STORED,
            extra={names.FIELD_REASON: f"the result is {size} bytes of JSON; the idempotency record holds {room}"},
        )
        return {names.RESULT_NOT_STORED_FIELD: names.RESULT_NOT_STORED, "bytes": size}

    def _complete(self, state: ConsumerState, body: dict[str, Any], run: _Run, error: Exception) -> None:
        """Complete the record after Powertools' own save failed: retried with backoff within the invocation's
        usable time (its remaining time less the deadline margin); raises ``error`` when every attempt failed."""
        delay, attempts, last = _COMPLETION_FIRST_DELAY, 1, error.__cause__ or error
        while attempts < _COMPLETION_ATTEMPTS:
            if not self.deadline.allows_wait(delay):
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

    # --- outcomes ---------------------------------------------------------------------------------------------------

    def on_duplicate(self, response: Any, idempotent_data: DataRecord) -> Any:
        """Powertools' response hook: a duplicate answered from the record is counted and logged, and gets the result
        as stored. Powertools (3.x, ``_handle_for_status``) hands the hook ``None`` for any stored result that is
        falsy (``{}``, ``0``, ``[]``, ``False``, ``""``), so a ``None`` is read again from the record itself."""
        self.metrics.add_metric(name=names.METRIC_DUPLICATES_SUPPRESSED, unit=MetricUnit.Count, value=1)
        self.logger.info(names.MSG_DUPLICATE_SUPPRESSED, extra={names.FIELD_IDEMPOTENCY_STATUS: idempotent_data.status})
        if response is None and idempotent_data.response_data:
            return idempotent_data.response_json_as_dict()
        return response

    def invalid(self, reason: str) -> None:
        """The ``invalid record`` line and count of bad input."""
        self.metrics.add_metric(name=names.METRIC_INVALID_RECORDS, unit=MetricUnit.Count, value=1)
        self.logger.warning(names.MSG_INVALID_RECORD, extra={names.FIELD_REASON: reason[: SHOWN_CHARS * 5]})

    def is_permanent(self, error: BaseException) -> bool:
        """Whether ``error`` makes its record a permanent failure: the runtime's own (``dead_letter.is_permanent``)
        or one declared ``permanent=``, raised or found in its ``__cause__`` chain."""
        return is_permanent(error, self.rules.permanent)

    def send_refusal(
        self, send: Callable[[], str], error: BaseException, lines: tuple[str, str, str], **extra: Any
    ) -> bool:
        """Send a record refused for good to the queue that keeps it (the DLQ, the on-failure queue); whether it
        was sent. ``lines``: the log message when sent, the field of the sent message's id, the message when the
        send failed. Sent: counted ``DeadLettered`` and logged with ``error_type`` and the id; failed: logged with
        the send's error as ``reason``, never raised (the caller keeps the record: nothing is lost). ``extra``:
        more fields of both lines."""
        sent_line, id_field, failed_line = lines
        try:
            sent_id = send()
        except Exception as send_error:  # noqa: BLE001 - any failure keeps the record where it is
            reason = f"{type(send_error).__name__}: {send_error}"[: SHOWN_CHARS * 5]
            self.logger.warning(
                failed_line, extra={names.FIELD_ERROR_TYPE: type(error).__name__, names.FIELD_REASON: reason, **extra}
            )
            return False
        self.metrics.add_metric(name=names.METRIC_DEAD_LETTERED, unit=MetricUnit.Count, value=1)
        self.logger.warning(sent_line, extra={names.FIELD_ERROR_TYPE: type(error).__name__, id_field: sent_id, **extra})
        return True

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

    def clear_record_keys(self) -> None:
        """Remove the record's log keys and correlation id (after a batch or an invocation)."""
        self.logger.remove_keys(list(RECORD_KEYS))
        self.logger.set_correlation_id(None)
