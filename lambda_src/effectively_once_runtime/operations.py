"""Two operations under one key prefix must not answer each other: ``Consumer(operation=...)``.

Two consumers on one table with one key prefix and one key (``payments``, ``order_id``), one charging and one
refunding, store their records under the same ids: the refund of o-1 met the charge's ``COMPLETED`` record and was
acknowledged as ``duplicate suppressed``; it never ran. A consumer given ``operation=`` stores it with each record,
folded into the payload validation hash (the one attribute every Powertools persistence layer stores and compares):
``<hash>@<operation>``. Without ``validate=``, the validation compares the operation alone (the validated value is
JMESPath's literal ``null``).

:func:`mark_operation` wraps one layer instance's ``_get_hashed_payload`` and ``_validate_payload`` (whatever class it
is; ``legacy_hashes.accept_legacy_validation`` wraps the result). A stored hash:

- of this operation: compared as Powertools compares it (another payload: ``IdempotencyValidationError``);
- of another operation: :class:`OperationMismatch`, an ``IdempotencyValidationError`` and a ``PermanentError`` naming
  both operations and the record: on the DLQ on first sight, with its reason;
- without an operation (written before ``operation=`` was given, or by a consumer without it): answered as before,
  its plain hash compared with this payload's (a missing hash, validation off then, is accepted).

A consumer without ``operation=`` changes nothing (it does not read the suffix: with ``validate=`` a suffixed record is
another payload to it, so a rollback that removes ``operation=`` refuses the records written meanwhile until they
expire). Give every consumer of a shared table and prefix its ``operation=``, or each its own prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from .errors import PermanentError

#: Between the payload hash and the operation in a stored validation hash (a hash is hexadecimal: never holds it).
SEPARATOR = "@"
#: An operation: 1 to 64 letters, digits and ``-_.:/``.
OPERATION = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
#: What Powertools validates when the consumer gives ``operation=`` without ``validate=``: JMESPath's literal null.
OPERATION_ONLY = "`null`"
_MARK = "_effectively_once_operation"


class OperationMismatch(IdempotencyValidationError, PermanentError):
    """The key's stored record was written by another operation on the same key prefix (``Consumer(operation=...)``):
    a refund that met a charge's record. Permanent: on the DLQ on first sight, with this message."""

    def __init__(self, record_id: str, stored: str, operation: str) -> None:
        self.record_id, self.stored, self.operation = record_id, stored, operation
        super().__init__(
            f"idempotency record {record_id} was written by operation {stored!r}, not {operation!r}: two operations "
            "share this key prefix on one table; give each consumer its own key_prefix (docs/runtime.md, 'Two "
            "operations, one table')"
        )


def check_operation(operation: str | None) -> str | None:
    """``operation`` when ``None`` or valid (:data:`OPERATION`).

    :raises ValueError: anything else; the message names the value and the rule.
    """
    if operation is None or (isinstance(operation, str) and OPERATION.fullmatch(operation)):
        return operation
    raise ValueError(
        f"operation must be 1 to 64 letters, digits or '-_.:/' (it is stored with each record, after "
        f"{SEPARATOR!r}), but {operation!r} was given"
    )


def mark_operation(store: BasePersistenceLayer, operation: str | None) -> None:
    """Store ``operation`` with each record of ``store`` and refuse a record of another one (module docstring); once
    per store. ``None``: nothing changes."""
    if operation is None or getattr(store, _MARK, None) == operation:
        return
    hashed: Callable[..., str] = store._get_hashed_payload
    validate: Callable[..., None] = store._validate_payload
    suffix = SEPARATOR + operation

    def hashed_with_operation(data: dict[str, Any]) -> str:
        return hashed(data=data) + suffix

    def check(data_payload: dict[str, Any] | DataRecord, stored_data_record: DataRecord) -> None:
        try:
            validate(data_payload=data_payload, stored_data_record=stored_data_record)
        except IdempotencyValidationError as error:
            stored = stored_data_record.payload_hash or ""
            if SEPARATOR in stored:
                _, other = stored.rsplit(SEPARATOR, 1)
                if other != operation:
                    raise OperationMismatch(stored_data_record.idempotency_key, other, operation) from error
                raise
            mine = (
                data_payload.payload_hash
                if isinstance(data_payload, DataRecord)
                else hashed_with_operation(data_payload)
            )
            if stored and stored != (mine or "").removesuffix(suffix):
                raise  # a record without an operation, of another payload: as before

    store._get_hashed_payload = hashed_with_operation  # type: ignore[method-assign]
    store._validate_payload = check  # type: ignore[method-assign]
    setattr(store, _MARK, operation)
