"""Powertools' in-progress claim, and what a refused claim met: this attempt's own write, a claim that nothing will
ever release, or a record the runtime cannot read.

``DynamoDBPersistenceLayer.save_inprogress`` claims a key with a conditional ``PutItem`` (the key absent, expired, or
in progress past its in-progress expiry) and, when refused, hands the stored item to Powertools, which answers from
its status. :func:`guard_claims` wraps one layer instance's ``_put_record`` (whatever subclass it is: a subclass's own
override runs inside, as ``legacy_hashes.accept_legacy_validation`` wraps ``save_inprogress``), so a refusal is read
first here, from the stored item (``ReturnValuesOnConditionCheckFailure=ALL_OLD``, Powertools' default):

- **Its own write.** When the claim's answer is lost after DynamoDB wrote the item (a read timeout, a connection
  reset), the SDK sends the same request again ("Retry behavior", AWS SDKs and Tools Reference Guide,
  https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html), and the retry meets the
  ``INPROGRESS`` record it wrote itself. Powertools answered "already in progress": the record failed on its first
  delivery, its key held until the in-progress expiry. Each claim now writes a token of its own
  (``names.ATTEMPT_TOKEN_ATTR``, added to the request by a botocore ``before-parameter-build`` hook on the layer's
  client, so the SDK's retry sends the same token); a refusal by an ``INPROGRESS`` item with this claim's token is
  the claim itself, and the record runs. The token stays on the record (``save_success`` updates only its own
  attributes).
- **What a claim replaced.** The same hook asks the claim for ``ReturnValues=ALL_OLD`` (no read capacity: DynamoDB
  returns the replaced item with the write), and a botocore ``after-call`` hook keeps it on the claim
  (:class:`Claim`, :func:`made`): a record released after a failure with its effects' results
  (``effect_results.py``) hands them to the run that claims it next, at no cost to a first delivery.
- **A claim nothing releases.** An ``INPROGRESS`` record without ``in_progress_expiration`` (written by an older
  version, by ``Consumer.process`` outside a handler, by another writer) is never taken over by Powertools' condition
  before its ``expiration``, days away: every receive failed as "already in progress" and, after
  ``maxReceiveCount``, SQS moved the message to the DLQ without a reason. Its write time is its ``expiration`` less
  ``IDEMPOTENCY_EXPIRY_SECONDS``; once that plus Lambda's longest function timeout (``LAMBDA_MAX_TIMEOUT_SECONDS``,
  900 s: the writer's own timeout is unknown) plus ``STALE_CLAIM_MARGIN_SECONDS`` has passed, no Lambda invocation
  can still hold it: it is removed with a conditional ``DeleteItem`` (the very item seen: ``INPROGRESS``, no
  in-progress expiry, the same ``expiration``) and the claim is made again, once, with one WARNING line
  ``names.MSG_STALE_CLAIM_TAKEN_OVER`` from the attempt that removed it. Two attempts that take it over at once: one
  claim wins, the other meets it. A writer outside Lambda that runs longer than that is not covered.
  The write time is read with today's ``IDEMPOTENCY_EXPIRY_SECONDS``: after a deploy that raised it, such a claim
  written before the deploy looks older than it is (docs/runbook.md). Inside a handler the runtime always writes an
  in-progress expiry, so only those other writers' claims are read this way. A claim refused for good
  (``OperationMismatch``: another operation's) is never taken over.
- **A status the runtime does not know.** Powertools writes ``INPROGRESS`` and ``COMPLETED``; anything else stored
  (``EXPIRED``, which Powertools only computes, or another writer's value) was answered as a completed record or as
  Powertools' "inconsistent results". It is :class:`~effectively_once_runtime.errors.UnknownRecordStatus`, a
  ``PermanentError`` naming the record and the status: on the DLQ on first sight, with that reason.

Each refusal read here sets the record's log key ``idempotency_status`` (the stored status), so the lines that follow
for the record (``idempotency rejected``, ``record failed``) name it. Only Powertools' DynamoDB layer and its
subclasses are guarded; a layer of another kind keeps Powertools' behaviour.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyInvalidStatusError,
    IdempotencyItemAlreadyExistsError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS, DataRecord
from botocore.exceptions import ClientError

from . import names
from .errors import PermanentError, UnknownRecordStatus

#: The statuses Powertools writes (``STATUS_CONSTANTS``; ``EXPIRED`` is computed from the expiry, never written).
INPROGRESS, COMPLETED = STATUS_CONSTANTS["INPROGRESS"], STATUS_CONSTANTS["COMPLETED"]
KNOWN_STATUSES = (INPROGRESS, COMPLETED)
#: Past the write time plus Lambda's longest function timeout, how long a claim without an in-progress expiry is
#: still left alone (seconds): the writer's clock, the completion's retries.
STALE_CLAIM_MARGIN_SECONDS = 60
#: How long after its write a claim without an in-progress expiry is held (seconds).
STALE_CLAIM_AFTER_SECONDS = names.LAMBDA_MAX_TIMEOUT_SECONDS + STALE_CLAIM_MARGIN_SECONDS

_MARK = "_effectively_once_claims"


@dataclass
class Claim:
    """An in-progress claim of one record: its layer, the record's id (``DataRecord.idempotency_key``), its token,
    its payload hash as written (``""`` without validation), and the item it replaced (DynamoDB's ``ALL_OLD``,
    ``None`` when it replaced nothing or was not read: an SDK retry that met its own first try)."""

    store: DynamoDBPersistenceLayer
    key: str
    token: str
    payload_hash: str
    replaced: dict[str, Any] | None = None


#: The claim being sent on this thread or task.
_CLAIMING: contextvars.ContextVar[Claim | None] = contextvars.ContextVar("effectively_once_claiming", default=None)
#: The last claim this thread or task made (cleared by :func:`forget` before each record).
_MADE: contextvars.ContextVar[Claim | None] = contextvars.ContextVar("effectively_once_claim_made", default=None)


def made(store: Any) -> Claim | None:
    """The claim of ``store`` this thread or task made since the last :func:`forget`, or ``None``."""
    claim = _MADE.get()
    return claim if claim is not None and claim.store is store else None


def forget() -> None:
    """Clear :func:`made` (before a record: a claim of the record before is never this one's)."""
    _MADE.set(None)


def guard_claims(
    store: Any,
    *,
    logger: Logger,
    expiry_seconds: int,
) -> bool:
    """Read the refusals of ``store``'s in-progress claims here first (see the module docstring), when it is
    Powertools' DynamoDB layer or a subclass; once per store.

    :param logger: where the take-over of a stale claim is logged, and the record's ``idempotency_status`` key set.
    :param expiry_seconds: ``IDEMPOTENCY_EXPIRY_SECONDS``: a record's write time is its ``expiration`` less this.
    :returns: whether ``store`` is guarded (``False`` for another kind of layer).
    """
    if not isinstance(store, DynamoDBPersistenceLayer):
        return False
    if getattr(store, _MARK, False):
        return True
    put_record: Callable[..., None] = store._put_record

    def put(data_record: DataRecord) -> None:
        if data_record.status != INPROGRESS:
            put_record(data_record=data_record)
            return
        claim = Claim(store, data_record.idempotency_key, uuid.uuid4().hex, data_record.payload_hash or "")
        claiming = _CLAIMING.set(claim)
        try:
            for last in (False, True):
                try:
                    put_record(data_record=data_record)
                    _MADE.set(claim)
                    return
                except _REFUSALS as refused:
                    # Powertools reads the stored item before it answers: a status it does not know is its
                    # IdempotencyInvalidStatusError, another payload its IdempotencyValidationError, read here alike.
                    item = _stored_item(refused)
                    if item is None:
                        raise
                    if _own(item, store, claim.token):
                        _MADE.set(claim)  # the SDK's retry met this claim's own first try (what it replaced is lost)
                        return
                    logger.append_keys(**{names.FIELD_IDEMPOTENCY_STATUS: _status(item, store)})
                    if _status(item, store) not in KNOWN_STATUSES:
                        raise UnknownRecordStatus(data_record.idempotency_key, _status(item, store)) from refused
                    if last or isinstance(refused, PermanentError):
                        raise  # refused for good (another operation's record): never taken over
                    if not _take_over(store, item, data_record, logger, expiry_seconds):
                        raise
                    logger.append_keys(**{names.FIELD_IDEMPOTENCY_STATUS: None})  # the claim made again decides
        finally:
            _CLAIMING.reset(claiming)

    unique = f"{_MARK}-{uuid.uuid4().hex}"  # botocore keeps one handler per unique id, whatever the event
    events = store.client.meta.events
    events.register("before-parameter-build.dynamodb.PutItem", _token_hook(store), unique_id=f"{unique}-token")
    events.register("after-call.dynamodb.PutItem", _replaced_hook(store), unique_id=f"{unique}-replaced")
    store._put_record = put  # type: ignore[method-assign]
    setattr(store, _MARK, True)
    return True


#: What a refused claim raises out of Powertools' ``_put_record``, the stored item in its cause or context.
_REFUSALS = (IdempotencyItemAlreadyExistsError, IdempotencyValidationError, IdempotencyInvalidStatusError)


def _status(item: dict[str, Any], store: DynamoDBPersistenceLayer) -> Any:
    return (item.get(store.status_attr) or {}).get("S")


def _own(item: dict[str, Any], store: DynamoDBPersistenceLayer, token: str) -> bool:
    """Whether ``item`` is the claim holding ``token``: ``INPROGRESS`` with it."""
    return _status(item, store) == INPROGRESS and (item.get(names.ATTEMPT_TOKEN_ATTR) or {}).get("S") == token


def _token_hook(store: DynamoDBPersistenceLayer) -> Callable[..., None]:
    """The botocore ``before-parameter-build`` handler that adds the token of the claim being sent on this thread or
    task to ``store``'s ``INPROGRESS`` put."""

    def add_token(params: dict[str, Any], **_: Any) -> None:
        claiming = _CLAIMING.get()
        if claiming is None or claiming.store is not store or params.get("TableName") != store.table_name:
            return
        item = params.get("Item") or {}
        if (item.get(store.status_attr) or {}).get("S") == INPROGRESS:
            item[names.ATTEMPT_TOKEN_ATTR] = {"S": claiming.token}
            params["ReturnValues"] = "ALL_OLD"

    return add_token


def _replaced_hook(store: DynamoDBPersistenceLayer) -> Callable[..., None]:
    """The botocore ``after-call`` handler that keeps the item the claim being sent on this thread or task replaced
    (``ALL_OLD``: ``Attributes``) on the claim."""

    def keep_replaced(parsed: dict[str, Any], **_: Any) -> None:
        claiming = _CLAIMING.get()
        if claiming is not None and claiming.store is store and "Error" not in parsed:
            attributes = parsed.get("Attributes")
            claiming.replaced = attributes if isinstance(attributes, dict) else None

    return keep_replaced


def _stored_item(refused: Exception) -> dict[str, Any] | None:
    """The item that refused the claim, as DynamoDB returned it (``ALL_OLD``), or ``None`` when it did not: in the
    refusal's cause, or its context (Powertools raises ``IdempotencyInvalidStatusError`` while handling it)."""
    cause = refused.__cause__ or refused.__context__
    if not isinstance(cause, ClientError):
        return None
    item = cause.response.get("Item")
    return item if isinstance(item, dict) else None


def claimed_at(item: dict[str, Any], store: DynamoDBPersistenceLayer, expiry: int) -> int | None:
    """When an ``INPROGRESS`` item without an in-progress expiry was written (epoch seconds): its ``expiration`` less
    ``expiry``; ``None`` for any other item (another status, an in-progress expiry, no readable ``expiration``)."""
    if _status(item, store) != INPROGRESS or store.in_progress_expiry_attr in item:
        return None
    try:
        return int((item.get(store.expiry_attr) or {})["N"]) - expiry
    except (KeyError, TypeError, ValueError):
        return None


def is_stale(written: float | None) -> bool:
    """Whether a claim without an in-progress expiry, written at ``written`` (epoch seconds; ``None``: unknown), is
    past ``STALE_CLAIM_AFTER_SECONDS``: no Lambda invocation can still hold it. The one rule of both key paths."""
    return written is not None and time.time() >= written + STALE_CLAIM_AFTER_SECONDS


def _take_over(
    store: DynamoDBPersistenceLayer,
    item: dict[str, Any],
    claim: DataRecord,
    logger: Logger,
    expiry: int,
) -> bool:
    """Remove ``item`` when it is a stale claim: written (:func:`claimed_at`) more than
    ``STALE_CLAIM_AFTER_SECONDS`` ago; whether the claim may be made again (removed now, or by another attempt
    meanwhile: then without a line)."""
    written = claimed_at(item, store, expiry)
    if not is_stale(written):
        return False
    try:
        store.client.delete_item(
            TableName=store.table_name,
            Key=store._get_key(claim.idempotency_key),
            ConditionExpression="#s = :inprogress AND attribute_not_exists(#ipe) AND #e = :seen",
            ExpressionAttributeNames={
                "#s": store.status_attr,
                "#ipe": store.in_progress_expiry_attr,
                "#e": store.expiry_attr,
            },
            ExpressionAttributeValues={":inprogress": {"S": INPROGRESS}, ":seen": item[store.expiry_attr]},
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        return True  # another attempt took it over (or it completed) meanwhile: the claim made again meets it
    logger.warning(
        names.MSG_STALE_CLAIM_TAKEN_OVER,
        extra={
            names.FIELD_REASON: (
                f"record {claim.idempotency_key} in progress without an in-progress expiry since {written} (epoch "
                f"seconds: its expiration less IDEMPOTENCY_EXPIRY_SECONDS), more than {STALE_CLAIM_AFTER_SECONDS} s "
                f"ago (Lambda's longest timeout and {STALE_CLAIM_MARGIN_SECONDS} s): no invocation can still hold it"
            )
        },
    )
    return True
