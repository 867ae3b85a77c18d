"""The idempotency persistence layer of the payment Lambda: Powertools' DynamoDB layer, plus a bounded migration of
the payload validation hash.

The payload validation covers ``[account_id, amount, currency]`` (``PAYLOAD_VALIDATION_JMESPATH``): a payment id
reused for another account, amount or currency is an ``IdempotencyValidationError`` (permanent: sent to the DLQ, never a
charge). Before it covered only ``[amount, currency]`` (``LEGACY_PAYLOAD_VALIDATION_JMESPATH``), and the stored
``validation`` attribute is a hash of those values (Powertools: md5 of ``json.dumps(values, sort_keys=True)``). A record
written before the change would therefore reject its own legitimate duplicates, and a rejected duplicate is retried
and dead-lettered instead of being answered.

``PaymentPersistenceLayer`` accepts both: when the stored hash is not the current one, it is compared with the legacy
hash of the incoming payment; if that matches, the record is a legacy record and the payment is the same amount and
currency. The account, which the legacy hash does not cover, is then compared with the ``account_id`` of the stored
response (the charge the record completed with); a different account is a validation error. A legacy record that is
still in progress has no response yet: it holds the duplicate back (``IdempotencyAlreadyInProgressError``) and the
retry is checked again once it completed.

The legacy path dies by itself. The idempotency **key** (prefix + hash of ``payment_id``) is unchanged, so records
stay addressable; Powertools' conditional put overwrites an expired record without validating it
(``DynamoDBPersistenceLayer._put_record``: ``#expiry < :now``), and every record written now carries the new hash. So
a legacy hash is consulted only while a record written before the change is unexpired: at most
``IDEMPOTENCY_EXPIRY_SECONDS`` (the consumer sets the queue's retention period) after the deploy that changed the hash.
After that, ``LEGACY_PAYLOAD_VALIDATION_JMESPATH`` and this subclass can be removed. Each use logs
"legacy validation hash accepted", so the logs show when the path went quiet.

Like Powertools' own layer, an instance serves one invocation at a time (one per execution environment).
"""

from __future__ import annotations

import os
from typing import Any

import jmespath
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from effectively_once_runtime import names

#: What a stored record must agree with for a payment id to be answered as a duplicate.
PAYLOAD_VALIDATION_JMESPATH = "[account_id, amount, currency]"
#: The payload validation of records written before ``account_id`` was added; accepted until they expire.
LEGACY_PAYLOAD_VALIDATION_JMESPATH = "[amount, currency]"
#: Fields the current validation covers and the legacy one did not, checked against the stored response instead.
_ADDED_FIELDS = ("account_id",)

logger = Logger(service=os.environ.get(names.ENV_SERVICE_NAME) or names.DEFAULT_SERVICE_NAME, child=True)


class PaymentPersistenceLayer(DynamoDBPersistenceLayer):
    """``DynamoDBPersistenceLayer`` (same arguments) that also accepts records written with the legacy payload
    validation hash ``[amount, currency]`` while they last; see the module docstring.

    Configure the idempotency with ``payload_validation_jmespath=PAYLOAD_VALIDATION_JMESPATH``.

    :raises IdempotencyValidationError: (from the idempotent function) the stored record matches neither the current
        nor the legacy hash, or it matches the legacy hash but its stored response names another account.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._legacy_validation = jmespath.compile(LEGACY_PAYLOAD_VALIDATION_JMESPATH)
        # The payment being claimed by save_inprogress: its conditional put validates a DataRecord carrying only the
        # current hash, and the legacy hash needs the payment itself.
        self._claiming: dict[str, Any] | None = None

    def save_inprogress(self, data: dict[str, Any], remaining_time_in_millis: int | None = None) -> None:
        self._claiming = data
        try:
            super().save_inprogress(data=data, remaining_time_in_millis=remaining_time_in_millis)
        finally:
            self._claiming = None

    def _validate_payload(self, data_payload: dict[str, Any] | DataRecord, stored_data_record: DataRecord) -> None:
        try:
            super()._validate_payload(data_payload=data_payload, stored_data_record=stored_data_record)
        except IdempotencyValidationError:
            data = self._claiming if isinstance(data_payload, DataRecord) else data_payload
            if not isinstance(data, dict) or not self._is_legacy_duplicate(data, stored_data_record):
                raise

    def _is_legacy_duplicate(self, data: dict[str, Any], stored: DataRecord) -> bool:
        legacy_hash = self._generate_hash(
            self._legacy_validation.search(data, options=jmespath.Options(**(self.jmespath_options or {})))
        )
        if stored.payload_hash != legacy_hash:
            return False
        response = stored.response_json_as_dict()
        response = response if isinstance(response, dict) else {}
        changed = [f for f in _ADDED_FIELDS if f in response and response[f] != data.get(f)]
        if changed:
            raise IdempotencyValidationError(
                f"Payload does not match stored record for this event key: {', '.join(changed)} differs "
                "from the stored response of a record with the legacy validation hash"
            )
        logger.info("legacy validation hash accepted", extra={"idempotency_status": stored.status})
        return True
