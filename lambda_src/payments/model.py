"""The payment message: parsing and validation.

Wire format (the SQS message body, or the direct-invocation event), a JSON object::

    {"payment_id": "pay-0001", "account_id": "acct-07", "amount": 1250, "currency": "EUR"}

- ``payment_id``: the business key and the idempotency key; 1-128 characters of ``[A-Za-z0-9._:-]``.
- ``account_id``: 1-128 characters of the same set (the FIFO message group id).
- ``amount``: a positive **integer in minor units** (cents for EUR/USD), at most ``MAX_AMOUNT_MINOR``.
  Integers avoid every float rounding question; a JSON float (``10.5``, ``1e3``), a string or a boolean is rejected.
- ``currency``: an ISO 4217 alphabetic code, three upper-case letters.
Unknown extra fields are ignored, but the whole body must be strict JSON.

Strict JSON, checked on a raw body (an SQS message; the runtime's ``effectively_once_runtime.body.loads_strict``,
which the handler's ``Consumer`` applies to every body), because Python's ``json`` module accepts more than it should:

- a repeated key in any object (``{"amount": 1, "amount": 100000000}``) is rejected; ``json.loads`` would keep the
  last value silently (RFC 8259, section 4: names "SHOULD be unique", behaviour otherwise unpredictable);
- ``NaN``, ``Infinity`` and ``-Infinity`` are rejected (not JSON; ``json.loads`` accepts them);
- a number ``json.loads`` cannot convert (more than ``sys.get_int_max_str_digits()`` digits, 4300 by default, raises
  ``ValueError``) and nesting deeper than the interpreter's recursion limit (``RecursionError``) are rejected.

Every field is matched whole (``re.fullmatch``): ``re.match`` with a trailing ``$`` also matches before a final
newline, so ``"pay-1\\n"`` would be a second payment beside ``"pay-1"``.

A directly invoked event arrives already decoded by the Lambda runtime: a repeated key there is lost before the
handler sees it, so only the field rules apply to it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from effectively_once_runtime.body import loads_strict
from effectively_once_runtime.body import show as _show
from effectively_once_runtime.errors import InvalidRecord, PermanentError

MAX_AMOUNT_MINOR = 10**12
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_CURRENCY = re.compile(r"[A-Z]{3}")


class InvalidPayment(PermanentError, ValueError):
    """The message is not a valid payment: a ``PermanentError``, so it fails alone, is never charged and goes to the
    DLQ on first sight (or, without ``DEAD_LETTER_QUEUE_URL``, after maxReceiveCount receives)."""


@dataclass(frozen=True)
class Payment:
    payment_id: str
    account_id: str
    amount: int
    currency: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _loads(raw: str | bytes) -> Any:
    try:
        return loads_strict(raw)
    except InvalidRecord as exc:
        raise InvalidPayment(str(exc)) from exc


def parse_payment(raw: str | bytes | dict[str, Any]) -> Payment:
    """Parse and validate a payment from a JSON body (``str``/``bytes``) or an already decoded ``dict``.

    :raises InvalidPayment: malformed or non-strict JSON (see the module docstring), not an object, a missing field,
        or a field out of its rules; the message names the field and the value (cut to 60 characters).
    """
    data = _loads(raw) if isinstance(raw, (str, bytes)) else raw
    if not isinstance(data, dict):
        raise InvalidPayment(f"body must be a JSON object, got {type(data).__name__}")

    def text(name: str) -> str:
        value = data.get(name)
        if not isinstance(value, str) or not _ID.fullmatch(value):
            raise InvalidPayment(f"{name} must be 1-128 characters of [A-Za-z0-9._:-], got {_show(value)}")
        return value

    payment_id = text("payment_id")
    account_id = text("account_id")
    amount = data.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= MAX_AMOUNT_MINOR:
        raise InvalidPayment(
            f"amount must be a positive integer of minor units up to {MAX_AMOUNT_MINOR}, got {_show(amount)}"
        )
    currency = data.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise InvalidPayment(f"currency must be an ISO 4217 code of three upper-case letters, got {_show(currency)}")
    return Payment(payment_id=payment_id, account_id=account_id, amount=amount, currency=currency)
