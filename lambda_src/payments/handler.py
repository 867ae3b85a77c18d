"""The payment Lambda: the payment domain on ``effectively_once_runtime``.

Entry point ``payments.handler.lambda_handler`` (``consumer.handler``): SQS batches (standard or FIFO) and direct
invocation, with every generic guarantee from the runtime (see ``effectively_once_runtime.consumer``). What is the
sample's own:

- the key ``payment_id`` and the stable prefix ``effectively-once/payments`` (``settings.DEFAULT_KEY_PREFIX``,
  overridden by ``IDEMPOTENCY_KEY_PREFIX``): records already written keep their stored keys;
- the payload validation ``[account_id, amount, currency]`` with records written under the legacy
  ``[amount, currency]`` hash still accepted until they expire (``persistence.py``);
- the record function ``process_payment``: a payment's field rules (``model.py``; an invalid payment is a
  ``PermanentError``) and one declared effect, ``charge``, through the gateway (``gateway.py``), which takes the
  scoped effect key ``effectively-once/payments#charge#<payment id>`` as the provider's idempotency key unless
  ``PAYMENT_PROVIDER_IDEMPOTENCY_KEYS=false``; the provider refusing a reused key (``ProviderKeyMismatch``) is
  declared permanent, so it goes to the DLQ on first sight with its reason.

A directly invoked invalid payment raises ``InvalidPayment`` (an async invocation then retries and goes to its
on-failure destination). Besides the runtime's metrics and lines, a provider replay logs "provider answered from its
idempotency key" and counts ``ProviderReplays``.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from effectively_once_runtime import Consumer

from . import gateway as _gateway
from .model import Payment, parse_payment
from .persistence import PAYLOAD_VALIDATION_JMESPATH, PaymentPersistenceLayer
from .settings import DEFAULT_KEY_PREFIX, Settings

#: Counted when the provider answered a re-executed charge from its idempotency key (no new charge).
METRIC_PROVIDER_REPLAYS = "ProviderReplays"

consumer = Consumer(
    key="payment_id",
    validate=PAYLOAD_VALIDATION_JMESPATH,
    key_prefix=DEFAULT_KEY_PREFIX,
    persistence_layer=PaymentPersistenceLayer,
    # The provider refusing its key reused with another payment can never succeed: the DLQ on first sight.
    permanent=(_gateway.ProviderKeyMismatch,),
    # A payment that cannot be parsed (InvalidPayment: a negative amount, a missing field) is refused before any
    # record of its batch runs, so nothing later in the batch can send it back for another receive.
    check=parse_payment,
    # The provider sees "effectively-once/payments#charge#<payment id>"; the ledger stores it under the bare payment
    # id, as charges made before the switch were (gateway.LedgerGateway).
    effect_key="scoped",
    # The sandbox's EventBridge rule delivers payment events to this function too: the key and the validation see an
    # EventBridge event's detail (an SQS body as it is), so a payment arriving both ways has one record.
    envelope="auto",
    # A payment takes well under a second and the batch's closing work is a metrics flush: 0.25 s is enough. The
    # default floor (the larger of 1 s and 10 % of the timeout) left half of the soak's 2 s timeout unused, so 7 of
    # 10 records a batch were deferred and 34 valid payments reached maxReceiveCount (README, the soak).
    deadline_margin=0.25,
)
logger = consumer.logger
metrics = consumer.metrics

_settings: Settings | None = None
_gateway_instance: _gateway.PaymentGateway | None = None


def get_gateway() -> _gateway.PaymentGateway:
    """The execution environment's gateway, built on first use (cold start) by the gateway factory."""
    global _settings, _gateway_instance
    if _gateway_instance is None:
        _settings = Settings.from_env()
        _gateway_instance = _gateway.create_gateway(_settings)
    return _gateway_instance


def set_gateway(gateway: _gateway.PaymentGateway) -> None:
    """Use ``gateway`` from now on (tests, benchmarks)."""
    global _settings, _gateway_instance
    _settings = _settings or Settings.from_env()
    _gateway_instance = gateway


def reset() -> None:
    """Forget the execution environment's state (tests, and tooling that swaps the gateway factory)."""
    global _settings, _gateway_instance
    _settings = _gateway_instance = None
    consumer.reset()


@consumer.effect(name=_gateway.CHARGE_EFFECT)
def charge(payment: Payment, *, idempotency_key: str) -> _gateway.Charge:
    """The side effect: one charge at the provider, keyed on the scoped key of the payment id
    (``effectively-once/payments#charge#<payment id>``), unless turned off for a control run."""
    gateway = get_gateway()
    assert _settings is not None
    return gateway.charge(payment, idempotency_key=idempotency_key if _settings.provider_idempotency_keys else None)


@consumer.record
def process_payment(body: dict[str, Any]) -> dict[str, Any]:
    """One payment: validated (``InvalidPayment`` otherwise), charged once; the charge is the stored result."""
    payment = parse_payment(body)
    result = charge(payment)
    if result.replayed:
        metrics.add_metric(name=METRIC_PROVIDER_REPLAYS, unit=MetricUnit.Count, value=1)
        logger.warning("provider answered from its idempotency key", extra={"charge_id": result.charge_id})
    else:
        logger.info("payment charged", extra={"charge_id": result.charge_id, "amount": payment.amount})
    return result.as_dict()


def warm() -> None:
    """Lambda's init phase: the runtime's state and the gateway (their SDK clients) built at import, before the first
    invocation's timeout starts (``Consumer.warm``); whatever the environment lacks is left to the first invocation."""
    consumer.warm()
    try:
        get_gateway()
    except Exception:  # noqa: BLE001 - the first invocation builds it again and raises the error there
        pass


lambda_handler = consumer.handler
warm()
