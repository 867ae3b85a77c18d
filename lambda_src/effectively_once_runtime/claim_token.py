"""Powertools' in-progress claim carries this attempt's token, so an SDK retry of a claim that landed is no other
attempt.

``DynamoDBPersistenceLayer.save_inprogress`` claims a key with a conditional ``PutItem`` (the key absent, expired, or
in progress past its in-progress expiry). When its answer is lost after DynamoDB wrote the item (a read timeout, a
connection reset), the SDK sends the same request again ("Retry behavior", AWS SDKs and Tools Reference Guide,
https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html); the retry meets the ``INPROGRESS`` record
it wrote itself, unexpired, and Powertools answers ``IdempotencyAlreadyInProgressError``. The record fails on its
first delivery, its key held until the in-progress expiry (the function's remaining time at the claim), and the
message comes back a visibility timeout later, one receive nearer the DLQ.

:func:`carry_claim_token` wraps one layer instance's ``_put_record`` (whatever subclass it is: a subclass's own
override runs inside, as ``legacy_hashes.accept_legacy_validation`` wraps ``save_inprogress``): each in-progress
claim writes a token of its own (``names.ATTEMPT_TOKEN_ATTR``), added to the request by a botocore
``before-parameter-build`` hook on the layer's client, so the SDK's retry sends the same token. A refused claim
whose stored item (``ReturnValuesOnConditionCheckFailure=ALL_OLD``, Powertools' default) is ``INPROGRESS`` with this
attempt's token is this attempt's own write: the claim stands and the record runs. A refusal by any other item is
Powertools' answer, unchanged. The token stays on the record (``save_success`` updates only its own attributes).

Only Powertools' DynamoDB layer and its subclasses carry the token; another store (a Redis layer, a custom one)
keeps Powertools' behaviour. The other conditional writes of the runtime were already safe against a retry of
their own write, or carry their own token: see docs/runtime.md ("A retried write meets itself").
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyItemAlreadyExistsError
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from botocore.exceptions import ClientError

from . import names

_INPROGRESS = "INPROGRESS"
_MARK = "_effectively_once_claim_token"
#: The claim being sent on this thread or task: ``(the layer, its token)``.
_CLAIMING: contextvars.ContextVar[tuple[DynamoDBPersistenceLayer, str] | None] = contextvars.ContextVar(
    "effectively_once_claiming", default=None
)


def carry_claim_token(store: Any) -> bool:
    """Make ``store``'s in-progress claims carry a per-attempt token, when it is Powertools' DynamoDB layer (or a
    subclass); once per store.

    :returns: whether ``store`` carries the token (``False`` for another kind of layer).
    """
    if not isinstance(store, DynamoDBPersistenceLayer):
        return False
    if getattr(store, _MARK, False):
        return True
    put_record: Callable[..., None] = store._put_record

    def put(data_record: DataRecord) -> None:
        if data_record.status != _INPROGRESS:
            put_record(data_record=data_record)
            return
        token = uuid.uuid4().hex
        claiming = _CLAIMING.set((store, token))
        try:
            put_record(data_record=data_record)
        except IdempotencyItemAlreadyExistsError as refused:
            if not _holds(refused, store, token):
                raise
        finally:
            _CLAIMING.reset(claiming)

    def add_token(params: dict[str, Any], **_: Any) -> None:
        claiming = _CLAIMING.get()
        if claiming is None or claiming[0] is not store or params.get("TableName") != store.table_name:
            return
        item = params.get("Item") or {}
        if (item.get(store.status_attr) or {}).get("S") == _INPROGRESS:
            item[names.ATTEMPT_TOKEN_ATTR] = {"S": claiming[1]}

    store.client.meta.events.register(
        "before-parameter-build.dynamodb.PutItem", add_token, unique_id=f"{_MARK}-{id(store)}"
    )
    store._put_record = put  # type: ignore[method-assign]
    setattr(store, _MARK, True)
    return True


def _holds(refused: IdempotencyItemAlreadyExistsError, store: DynamoDBPersistenceLayer, token: str) -> bool:
    """Whether the item that refused the claim is the claim itself: ``INPROGRESS`` with ``token``."""
    cause = refused.__cause__
    if not isinstance(cause, ClientError):
        return False
    item = cause.response.get("Item") or {}
    return bool(
        (item.get(names.ATTEMPT_TOKEN_ATTR) or {}).get("S") == token
        and (item.get(store.status_attr) or {}).get("S") == _INPROGRESS
    )
