"""The records written before numbers were canonical, answered while they live (the migration of 0.4.0).

Before 0.4.0 a key or a ``validate`` result holding a float of integral value (``{"order_id": 1234.0}``,
``{"total": 100.0}``) was hashed as written, so ``1234.0`` and ``1234`` were two records and two effects. Now both
are ``1234`` (``identity.canonical_numbers``). Only those values hash otherwise than before: a string, an integer or a
float such as ``12.5`` gives the same idempotency key and validation hash as ever. For the ones that changed, a
redelivery after the deploy of a message processed before it would run again under its new key (a second charge),
or be refused as another payload under its new validation hash. This module accepts the old hash instead:

- **the key** (:func:`legacy_key_record`): when the key found holds an integral float, the record under its old
  idempotency key is read (one ``GetItem``, for those keys only). A completed, unexpired one answers the delivery as
  a duplicate (its payload validated against either hash); one in progress holds it back
  (``IdempotencyAlreadyInProgressError``, retried); none, or an expired one, and the delivery runs under the new key;
- **the validation** (:func:`accept_legacy_validation`): a stored validation hash that is the old hash of the
  delivery's ``validate`` result is accepted, on the read path and on the conditional put's (as the sample's
  ``PaymentPersistenceLayer`` accepts its legacy hash).

Each acceptance logs one INFO line ``legacy hash accepted`` (``reason``: the key or the validation). The path ends by
itself: every record written now carries the new hashes, and an old one is consulted only while it is unexpired, at
most ``IDEMPOTENCY_EXPIRY_SECONDS`` after the deploy; once the line is quiet for that long, nothing old is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency.config import IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyInvalidStatusError,
    IdempotencyItemNotFoundError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from . import claims, events, identity, names
from .errors import UnknownRecordStatus

_MARK = "_effectively_once_legacy_validation"


def legacy_key_record(
    store: BasePersistenceLayer,
    config: IdempotencyConfig,
    key_prefix: str,
    key: tuple[Any, tuple[str, ...]],
    body: dict[str, Any],
) -> DataRecord | None:
    """The completed record of ``body`` under the idempotency key of before 0.4.0, when its key held an integral
    float and that record is there and unexpired; ``None`` otherwise.

    :param key: what the key expression found in ``body`` and the ``normalize`` steps, as the consumer keys it.
    :raises IdempotencyAlreadyInProgressError: that record is still in progress (a claim without an in-progress
        expiry only until ``claims.STALE_CLAIM_AFTER_SECONDS`` after its write).
    :raises UnknownRecordStatus: that record holds a status the runtime does not know.
    :raises IdempotencyValidationError: that record was stored with another payload (neither hash matches).
    """
    found, steps = key
    old = identity.normalize_key(found, steps, canonical=False)
    if not identity.has_integral_float(old) or BasePersistenceLayer.is_missing_idempotency_key(old):
        return None
    store.configure(config, key_prefix=key_prefix)  # what the idempotent function does before its first call
    legacy_id = f"{key_prefix}#{store._generate_hash(old)}"
    try:
        record = store._get_record(legacy_id)
    except IdempotencyItemNotFoundError:
        return None
    now_ms = int(time.time() * 1000)
    if record.is_expired:
        return None
    try:
        status = record.status
    except IdempotencyInvalidStatusError as error:
        raise UnknownRecordStatus(legacy_id, getattr(record, "_status", str(error))) from error
    if status == claims.INPROGRESS:
        expiry = record.in_progress_expiry_timestamp
        if expiry is not None and expiry < now_ms:
            return None
        written = record.expiry_timestamp - store.expires_after_seconds if record.expiry_timestamp else None
        if expiry is None and claims.is_stale(written):
            return None  # a stale claim without an in-progress expiry holds nothing (claims.py)
        raise IdempotencyAlreadyInProgressError(
            f"the record of this key written before numbers were canonical ({legacy_id}) is in progress"
        )
    if status != claims.COMPLETED:
        return None
    store._validate_payload(data_payload=body, stored_data_record=record)
    return record


def accept_legacy_validation(store: BasePersistenceLayer, validate: events.Expression | None, logger: Logger) -> None:
    """Make ``store`` accept a stored validation hash that is the hash of ``validate``'s result before 0.4.0 (its
    integral floats as written). Wraps the instance's ``_validate_payload`` and ``save_inprogress`` (whatever class
    it is: a subclass's own overrides run inside); once per store."""
    if validate is None or getattr(store, _MARK, False):
        return
    validate_payload: Callable[..., None] = store._validate_payload
    save_inprogress: Callable[..., None] = store.save_inprogress
    # The payload being claimed: the conditional put validates a DataRecord that carries only the new hash.
    claiming: dict[str, Any] = {}

    def save(data: dict[str, Any], remaining_time_in_millis: int | None = None) -> None:
        claiming["data"] = data
        try:
            save_inprogress(data=data, remaining_time_in_millis=remaining_time_in_millis)
        finally:
            claiming.pop("data", None)

    def check(data_payload: dict[str, Any] | DataRecord, stored_data_record: DataRecord) -> None:
        try:
            validate_payload(data_payload=data_payload, stored_data_record=stored_data_record)
        except IdempotencyValidationError:
            data = claiming.get("data") if isinstance(data_payload, DataRecord) else data_payload
            old = validate.search(data) if isinstance(data, dict) else None
            if not identity.has_integral_float(old) or store._generate_hash(old) != stored_data_record.payload_hash:
                raise
            logger.info(names.MSG_LEGACY_HASH, extra={names.FIELD_REASON: "validation hash of before 0.4.0"})

    store.save_inprogress = save  # type: ignore[method-assign]
    store._validate_payload = check  # type: ignore[method-assign]
    setattr(store, _MARK, True)
