"""The payment provider seam.

``PaymentGateway`` is what the handler calls for the side effect. The default, ``LedgerGateway``, simulates an
external provider: every call it executes is a new charge, one item in the ledger table, so a double charge shows
as two items for one ``payment_id``. Like real providers (an ``Idempotency-Key`` header) it takes an optional
idempotency key: with one, the item is keyed on it and written with a conditional put that hands back the existing
charge for a repeated key (``ReturnValuesOnConditionCheckFailure=ALL_OLD``: a replay costs no extra read) and refuses
a repeated key with another account, amount or currency (``ProviderKeyMismatch``); without
one, each call is keyed on a fresh charge id.

Keys written before the sample switched to scoped effect keys (``Consumer(effect_key="scoped")``) are the bare
payment id; a scoped key is ``<key prefix>#charge#<payment id>``. The ledger answers both forms as one: the scoped
charge key of a payment (built with the runtime's own ``effect_keys.scoped``, ``key_prefix``) is stored under the
bare payment id, so a charge made before the switch and re-executed after it (a crash between the charge and the
record's completion) meets its old item in the same conditional put, no extra request. Every other key is stored
as given; the key the provider was handed is kept in the item's ``idempotency_key``.

Tests and tooling replace or wrap the gateway through ``set_gateway_factory`` (count, slow down, crash) without
any chaos code in this package.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import boto3
from botocore.exceptions import ClientError

from effectively_once_runtime.effect_keys import scoped

from .model import Payment
from .settings import Settings

#: The name of the sample's declared effect (``handler.charge``): part of its scoped key.
CHARGE_EFFECT = "charge"


class ProviderKeyMismatch(RuntimeError):
    """The provider saw its idempotency key again with a different account, amount or currency (it refuses, like
    Stripe: a key reused with other parameters is an error, never a second charge nor the first charge's answer)."""


@dataclass(frozen=True)
class Charge:
    charge_id: str
    payment_id: str
    account_id: str
    amount: int
    currency: str
    charged_at: str
    replayed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "charge_id": self.charge_id,
            "payment_id": self.payment_id,
            "account_id": self.account_id,
            "amount": self.amount,
            "currency": self.currency,
            "charged_at": self.charged_at,
        }


class PaymentGateway(Protocol):
    def charge(self, payment: Payment, *, idempotency_key: str | None = None) -> Charge: ...


class LedgerGateway:
    """Simulated provider writing one ledger item per executed charge (partition key ``charge_id``).

    ``key_prefix``: the idempotency key prefix whose scoped charge keys are stored under the bare payment id
    (``None``: every key as given).

    ``calls`` counts every call received, ``replays`` those answered from an idempotency key (an SDK retry of the
    call's own put, its answer lost, meets the item with this call's ``charged_at``: no replay).
    """

    def __init__(self, table_name: str, client: Any | None = None, *, key_prefix: str | None = None) -> None:
        self.table_name = table_name
        self.key_prefix = key_prefix
        self._client = client if client is not None else boto3.client("dynamodb")
        self.calls = 0
        self.replays = 0

    def charge(self, payment: Payment, *, idempotency_key: str | None = None) -> Charge:
        self.calls += 1
        charge_id = self.storage_key(payment, idempotency_key) if idempotency_key else f"ch_{uuid.uuid4().hex}"
        charged_at = datetime.now(UTC).isoformat()
        item = {
            "charge_id": {"S": charge_id},
            "payment_id": {"S": payment.payment_id},
            "account_id": {"S": payment.account_id},
            "amount": {"N": str(payment.amount)},
            "currency": {"S": payment.currency},
            "charged_at": {"S": charged_at},
            "keyed": {"BOOL": bool(idempotency_key)},
        }
        if idempotency_key:
            item["idempotency_key"] = {"S": idempotency_key}
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(charge_id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            old = exc.response.get("Item") or {}
            if old.get("charged_at", {}).get("S") != charged_at:
                return self._replay(payment, charge_id, old, charged_at)
            # This call's own item (its charged_at, to the microsecond): the SDK sent the put again after its answer
            # was lost, and the retry met the first try's write. A new charge, not a replay.
        return Charge(
            charge_id=charge_id,
            payment_id=payment.payment_id,
            account_id=payment.account_id,
            amount=payment.amount,
            currency=payment.currency,
            charged_at=charged_at,
        )

    def storage_key(self, payment: Payment, idempotency_key: str) -> str:
        """The ledger item's key for ``idempotency_key``: the bare payment id for the payment's scoped charge key
        (one item for both forms, see the module docstring), else the key itself."""
        if self.key_prefix is not None and idempotency_key == scoped(
            self.key_prefix, CHARGE_EFFECT, payment.payment_id
        ):
            return payment.payment_id
        return idempotency_key

    def _replay(self, payment: Payment, charge_id: str, old: dict[str, Any], charged_at: str) -> Charge:
        """The answer to a repeated key: the stored charge, or ``ProviderKeyMismatch`` for another payment."""
        self.replays += 1
        existing = Charge(
            charge_id=charge_id,
            payment_id=old.get("payment_id", {}).get("S", payment.payment_id),
            account_id=old.get("account_id", {}).get("S", payment.account_id),
            amount=int(old.get("amount", {}).get("N", payment.amount)),
            currency=old.get("currency", {}).get("S", payment.currency),
            charged_at=old.get("charged_at", {}).get("S", charged_at),
            replayed=True,
        )
        if (existing.account_id, existing.amount, existing.currency) != (
            payment.account_id,
            payment.amount,
            payment.currency,
        ):
            raise ProviderKeyMismatch(
                f"idempotency key {charge_id!r} was used for {existing.amount} {existing.currency} on account "
                f"{existing.account_id!r}, not {payment.amount} {payment.currency} on {payment.account_id!r}"
            )
        return existing


GatewayFactory = Callable[[Settings], PaymentGateway]


def default_gateway_factory(settings: Settings) -> PaymentGateway:
    return LedgerGateway(settings.ledger_table_name, key_prefix=settings.key_prefix)


_factory: GatewayFactory = default_gateway_factory


def set_gateway_factory(factory: GatewayFactory | None) -> None:
    """Replace the factory the handler uses on its next (cold) start; ``None`` restores the default."""
    global _factory
    _factory = factory if factory is not None else default_gateway_factory


def create_gateway(settings: Settings) -> PaymentGateway:
    return _factory(settings)
