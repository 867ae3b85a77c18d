"""The payment message: parsing and validation.

Wire format (the SQS message body, or the direct-invocation event), a JSON object::

    {"payment_id": "pay-0001", "account_id": "acct-07", "amount": 1250, "currency": "EUR"}

- ``payment_id``: the business key and the idempotency key; 1-128 characters of ``[A-Za-z0-9._:-]``.
- ``account_id``: 1-128 characters of the same set (the FIFO message group id).
- ``amount``: a positive **integer in minor units** (cents for EUR/USD), at most ``MAX_AMOUNT_MINOR``.
  Integers avoid every float rounding question; a JSON float or a string is rejected.
- ``currency``: an ISO 4217 alphabetic code, three upper-case letters.
Unknown extra fields are ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

MAX_AMOUNT_MINOR = 10**12
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")


class InvalidPayment(ValueError):
    """The message is not a valid payment; it fails alone and, after maxReceiveCount, ends in the DLQ."""


@dataclass(frozen=True)
class Payment:
    payment_id: str
    account_id: str
    amount: int
    currency: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_payment(raw: str | bytes | dict[str, Any]) -> Payment:
    """Parse and validate a payment from a JSON body (``str``/``bytes``) or an already decoded ``dict``.

    :raises InvalidPayment: malformed JSON, not an object, a missing field, or a field out of its rules;
        the message names the field and the value.
    """
    if isinstance(raw, (str, bytes)):
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidPayment(f"body is not valid JSON: {exc}") from exc
    else:
        data = raw
    if not isinstance(data, dict):
        raise InvalidPayment(f"body must be a JSON object, got {type(data).__name__}")

    def text(name: str) -> str:
        value = data.get(name)
        if not isinstance(value, str) or not _ID.match(value):
            raise InvalidPayment(f"{name} must be 1-128 characters of [A-Za-z0-9._:-], got {value!r}")
        return value

    payment_id = text("payment_id")
    account_id = text("account_id")
    amount = data.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= MAX_AMOUNT_MINOR:
        raise InvalidPayment(f"amount must be a positive integer of minor units up to {MAX_AMOUNT_MINOR}, got {amount!r}")
    currency = data.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.match(currency):
        raise InvalidPayment(f"currency must be an ISO 4217 code of three upper-case letters, got {currency!r}")
    return Payment(payment_id=payment_id, account_id=account_id, amount=amount, currency=currency)
