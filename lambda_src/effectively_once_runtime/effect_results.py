"""Effect results kept per record: a declared effect that returned is never run again for its record when an
exception escapes after it (issue 30; carried by the idempotency record itself since issue 55, item 8).

Powertools deletes a record's in-progress idempotency item on any exception of the record function
(``_get_function_response`` calls the layer's ``delete_record``), so the record's next run (a retry, a redelivery, a
redrive of a record refused for good, a producer's resend) would call every effect again. The results travel inside
the idempotency record instead, and the first delivery pays nothing for them:

- **The happy path** reads and writes nothing more: each declared effect that returns has its result kept in memory
  on the record's run (:class:`EffectResults`), as JSON text (``unkeyed.storable_result``: ``json.dumps`` as it is,
  at most ``unkeyed.MAX_STORED_RESULT_BYTES``). A first delivery costs Powertools' claim (a ``PutItem``), the
  effects, and the completion (an ``UpdateItem``).
- **The failure path.** :func:`guard_releases` wraps the layer instance's ``_delete_record`` (whatever subclass it
  is, once per store, as ``claims.guard_claims`` wraps ``_put_record``). When the run has kept results, the record
  is not deleted but written back *released with its results*: one ``PutItem`` of the record's key, ``INPROGRESS``,
  an ``in_progress_expiration`` already past (Powertools' own claim condition, ``... OR (status = INPROGRESS AND
  in_progress_expiration < now)``, lets the next claim in at once), its ``expiration`` as Powertools sets it, the
  claim's validation hash, and ``names.EFFECT_RESULTS_ATTR``: a map ``<effect>#<n>`` -> the result's JSON text,
  where ``n`` counts the calls of the effect in one run of the record function (1, 2, ...). It is conditioned on the
  record still holding this claim's ``names.ATTEMPT_TOKEN_ATTR``. Refused or failed, it is logged
  (``effect result not kept``, ``effects``, ``reason``; and ``effect repeated after failure``, those effects run
  again). Refused, the record holds another claim now and is left to it (deleting it would let a third run in beside
  that claim); failed, it is deleted as Powertools does: nothing worse than before. Without kept results the plain
  delete runs.
- **The next claim** asks for the item it replaced (``claims.py``: ``ReturnValues=ALL_OLD``, no extra request). When
  that is a released record of the same payload (``INPROGRESS``, results present, its ``expiration`` not past, the same
  validation hash: with ``validate=`` or ``operation=``, else any payload under the key), its results answer the
  matching calls of this run (effect name and call number) without calling them: ``effect answered from marker``
  (``effect``, ``effect_key``, ``effect_call``), returned after a JSON round trip (a tuple comes back a list). A claim
  that replaced nothing, or an expired record, answers nothing. The run that received results writes them onto its own
  claim at once (one ``UpdateItem`` conditioned on its token: this rare path only), so a kill of that run does not lose
  them; if it fails by exception again, its release holds the results it received and its own.
- **Room.** A record holds at most ``KEPT_RESULTS_MAX_BYTES`` of results; a result that is not such JSON, or finds
  no room, is not kept (``effect result not kept``, with the reason): that effect runs again after a failure, and
  only its own idempotency key makes that harmless.
- **A kill** (no exception handling runs) between an effect and the completion leaves no results: the record stays
  in progress until its in-progress expiry, and the next run calls the effect again. That window is the effect's
  own idempotency key's.
- **Off** when the record has no key (``raise_on_no_idempotency_key=False``), when Powertools' idempotency is off
  (``POWERTOOLS_IDEMPOTENCY_DISABLED``: a control run sees every execution), and for a persistence layer that is not
  Powertools' DynamoDB layer or a subclass of it.
- **Before this version** each result was a marker item of its own (``<key prefix>#effect-result#...``); those are
  no longer read, and expire with their TTL.

Powertools, boto3 and the standard library only.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.shared.functions import strtobool
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from botocore.exceptions import ClientError

from . import claims, names
from .effects.unkeyed import MAX_STORED_RESULT_BYTES, storable_result

#: Powertools' switch of its idempotency (``aws_lambda_powertools.shared.constants.IDEMPOTENCY_DISABLED_ENV``).
IDEMPOTENCY_DISABLED_ENV = "POWERTOOLS_IDEMPOTENCY_DISABLED"
#: The most bytes of results one record holds (names, texts and a few bytes each): well under DynamoDB's 400 KB item
#: (``names.DYNAMODB_MAX_ITEM_BYTES``), leaving room for the record's key (at most 2,048 bytes), its own attributes
#: and, once a run that received results completes, its stored result (``execution`` counts them off its room).
KEPT_RESULTS_MAX_BYTES = 256 * 1024
#: What one map entry costs beside its name and text (DynamoDB's per-element overhead, rounded up).
_ENTRY_OVERHEAD_BYTES = 4
_MARK = "_effectively_once_releases"
#: The run of a record being processed on this thread or task (what a release of its record writes).
_CURRENT: contextvars.ContextVar[EffectResults | None] = contextvars.ContextVar("effectively_once_run", default=None)


def enabled(key: Any) -> bool:
    """Whether a record keyed ``key`` keeps effect results: it has a key and Powertools' idempotency is on."""
    return key is not None and not strtobool(os.environ.get(IDEMPOTENCY_DISABLED_ENV, "false"))


def call_name(effect: str, call: int) -> str:
    """``<effect>#<call>``: the name of call number ``call`` (1-based) of ``effect`` in one run."""
    return f"{effect}#{call}"


def _entry_bytes(name: str, text: str) -> int:
    return len(name.encode()) + len(text.encode()) + _ENTRY_OVERHEAD_BYTES


@dataclass
class EffectResults:
    """The effect results of one run of a record: those it received from a released record, and those its own
    effects returned. ``store`` is ``None`` when results are off (see the module docstring)."""

    store: DynamoDBPersistenceLayer | None
    received: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    #: This run's claim (``claims.made``), once the record function started.
    claim: claims.Claim | None = None
    #: Bytes of results held (received and kept).
    size: int = 0
    #: Bytes of results this run's claim holds: those it received, once carried onto it.
    carried: int = 0

    @classmethod
    def start(cls, store: Any, key: Any) -> EffectResults:
        """The results of a new run of the record keyed ``key`` on ``store``: off without a key, under
        ``POWERTOOLS_IDEMPOTENCY_DISABLED``, or for a layer other than Powertools' DynamoDB layer."""
        on = enabled(key) and bool(getattr(store, _MARK, False))  # the layers guard_releases guards
        return cls(store if on else None)

    @contextmanager
    def current(self) -> Iterator[None]:
        """This run as the one a release on this thread or task writes; no claim made before it counts."""
        claims.forget()
        token = _CURRENT.set(self)
        try:
            yield
        finally:
            _CURRENT.reset(token)
            claims.forget()  # the claim (and the item it replaced) is this record's only

    def receive(self, logger: Logger) -> None:
        """Take the results of the released record this run's claim replaced (none when it replaced nothing, an
        expired record, another payload's), and carry them onto the claim (one ``UpdateItem``) when there are any."""
        if self.store is None:
            return
        self.claim = claims.made(self.store)
        if self.claim is None:
            return
        self.received = released_results(self.claim)
        self.size = sum(_entry_bytes(name, text) for name, text in self.received.items())
        if self.received:
            problem = _carry(self.claim, self.received)
            self.carried = self.size if problem is None else 0
            if problem is not None:
                logger.warning(
                    names.MSG_EFFECT_RESULT_NOT_KEPT,
                    extra={
                        names.FIELD_EFFECTS: sorted(self.received),
                        names.FIELD_REASON: f"the results received were not written to this run's claim ({problem}): "
                        "they answer this run, and a kill of it loses them",
                    },
                )

    def answer(self, effect: str, call: int) -> tuple[bool, Any]:
        """``(True, the result)`` when call ``call`` of ``effect`` was received, else ``(False, None)``."""
        text = self.received.get(call_name(effect, call))
        return (False, None) if text is None else (True, json.loads(text))

    def keep(self, effect: str, call: int, result: Any) -> str | None:
        """Keep ``result`` of call ``call`` of ``effect``; ``None`` when kept, else why not (never raises). Only for a
        run whose results are on (``store`` set)."""
        text = storable_result(result)
        if text is None:
            return (
                f"the result ({type(result).__name__}) is not JSON of at most {MAX_STORED_RESULT_BYTES} bytes: a "
                "later run of the record calls the effect again"
            )
        name = call_name(effect, call)
        size = _entry_bytes(name, text)
        if self.size + size > KEPT_RESULTS_MAX_BYTES:
            return (
                f"no room left on the record: its results hold at most {KEPT_RESULTS_MAX_BYTES} bytes, {self.size} "
                f"are taken and this one needs {size}: a later run of the record calls the effect again"
            )
        self.kept[name] = text
        self.size += size
        return None

    def results(self) -> dict[str, str]:
        """What a release of the record holds: the results received and this run's own."""
        return {**self.received, **self.kept}

    def carried_bytes(self) -> int:
        """Bytes of results this run's claim holds (those it received and carried)."""
        return self.carried


def released_results(claim: claims.Claim) -> dict[str, str]:
    """The results of the released record ``claim`` replaced: ``INPROGRESS`` with results, its ``expiration`` not
    past, the claim's validation hash; else ``{}``."""
    store, item = claim.store, claim.replaced
    if not item or (item.get(store.status_attr) or {}).get("S") != claims.INPROGRESS:
        return {}
    results = (item.get(names.EFFECT_RESULTS_ATTR) or {}).get("M")
    try:
        expiration = int((item.get(store.expiry_attr) or {})["N"])
    except (KeyError, TypeError, ValueError):
        return {}
    if not isinstance(results, dict) or expiration < int(time.time()):
        return {}
    if (item.get(store.validation_key_attr) or {}).get("S", "") != _validation(store, claim):
        return {}  # another payload's record under the same key: its results are not this one's
    return {name: value["S"] for name, value in results.items() if isinstance((value or {}).get("S"), str)}


def _validation(store: DynamoDBPersistenceLayer, claim: claims.Claim) -> str:
    """The validation hash a record of ``claim`` stores (``""``: none), as Powertools' ``_put_record`` writes it."""
    return claim.payload_hash if store.payload_validation_enabled else ""


def _token_condition(claim: claims.Claim) -> dict[str, Any]:
    return {
        "ConditionExpression": "#token = :token",
        "ExpressionAttributeNames": {"#token": names.ATTEMPT_TOKEN_ATTR},
        "ExpressionAttributeValues": {":token": {"S": claim.token}},
    }


def _results_value(results: dict[str, str]) -> dict[str, Any]:
    return {"M": {name: {"S": text} for name, text in sorted(results.items())}}


def _carry(claim: claims.Claim, results: dict[str, str]) -> str | None:
    """Write ``results`` onto ``claim``'s record while it holds the claim's token; ``None`` when written, else why
    not (never raises)."""
    store, condition = claim.store, _token_condition(claim)
    condition["ExpressionAttributeNames"]["#results"] = names.EFFECT_RESULTS_ATTR
    condition["ExpressionAttributeValues"][":results"] = _results_value(results)
    try:
        store.client.update_item(
            TableName=store.table_name,
            Key=store._get_key(claim.key),
            UpdateExpression="SET #results = :results",
            **condition,
        )
    except Exception as error:  # noqa: BLE001 - the results still answer this run
        return f"{type(error).__name__}: {error}"[:500]
    return None


class ReleaseRefused(Exception):
    """A release's condition refused it: the record holds another claim's token (another run claimed it since)."""


def release(claim: claims.Claim, results: dict[str, str]) -> str | None:
    """Write ``claim``'s record back released with ``results`` (see the module docstring) while it holds the claim's
    token; ``None`` when written, else why not.

    :raises ReleaseRefused: the record holds another claim's token.
    """
    store = claim.store
    item = {
        **store._get_key(claim.key),
        store.expiry_attr: {"N": str(store._get_expiry_timestamp())},
        # Already past: Powertools' claim condition lets the next claim in at once.
        store.in_progress_expiry_attr: {"N": str(int(time.time() * 1000) - 1)},
        store.status_attr: {"S": claims.INPROGRESS},
        # The claim's own token: the SDK's retry of this write, after a lost answer, meets it and writes it again.
        names.ATTEMPT_TOKEN_ATTR: {"S": claim.token},
        names.EFFECT_RESULTS_ATTR: _results_value(results),
    }
    if _validation(store, claim):
        item[store.validation_key_attr] = {"S": _validation(store, claim)}
    try:
        store.client.put_item(TableName=store.table_name, Item=item, **_token_condition(claim))
    except ClientError as error:
        problem = f"{type(error).__name__}: {error}"[:500]
        if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            raise ReleaseRefused(problem) from error
        return problem
    except Exception as error:  # noqa: BLE001 - the record is deleted instead, as Powertools does
        return f"{type(error).__name__}: {error}"[:500]
    return None


def guard_releases(store: Any, logger: Logger) -> bool:
    """Release ``store``'s records with their runs' results instead of deleting them (see the module docstring),
    when it is Powertools' DynamoDB layer or a subclass; once per store.

    :param logger: where a release that failed is logged.
    :returns: whether ``store`` is guarded (``False`` for another kind of layer).
    """
    if not isinstance(store, DynamoDBPersistenceLayer):
        return False
    if getattr(store, _MARK, False):
        return True
    delete_record: Callable[..., None] = store._delete_record

    def delete(data_record: DataRecord) -> None:
        run = _CURRENT.get()
        claim = None if run is None else run.claim
        mine = claim is not None and claim.store is store and claim.key == data_record.idempotency_key
        if run is not None and claim is not None and mine and (results := run.results()):
            try:
                problem, refused = release(claim, results), False
            except ReleaseRefused as error:
                problem, refused = str(error), True
            if problem is None:
                return
            fate = (
                "it holds another claim now and is left to it"
                if refused
                else "it is deleted, and a later run of it calls these effects again"
            )
            extra = {names.FIELD_EFFECTS: sorted(results)}
            logger.warning(
                names.MSG_EFFECT_RESULT_NOT_KEPT,
                extra={
                    **extra,
                    names.FIELD_REASON: f"the record could not be released with its results ({problem}): {fate}",
                },
            )
            # These effects run again: said as the record function's failure says it, for the lines' readers.
            logger.warning(
                names.MSG_EFFECT_REPEATED_AFTER_FAILURE,
                extra={**extra, names.FIELD_EFFECTS: sorted({name.rsplit("#", 1)[0] for name in results})},
            )
            if refused:
                return  # deleting it would free another run's live claim
        delete_record(data_record=data_record)

    store._delete_record = delete  # type: ignore[method-assign]
    setattr(store, _MARK, True)
    return True
