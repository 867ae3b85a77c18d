"""Order confirmations arriving asynchronously too: the orders function behind an EventBridge rule on a custom bus
and behind its queue (the ``OrdersEvents`` stack), for the chaos proof of the asynchronous path (issue 23).

``envelope="auto"``: the key and the record function see an EventBridge event's ``detail`` and an SQS body as is,
so an order that arrives both ways has one idempotency record. The variant, chosen per run by the function
environment's ``ORDER_EVENTS_VARIANT`` (the chaos command's ``--function-env``):

- ``correct`` (default): keyed on ``order_id``. Must pass.
- ``event_id``: keyed on the event's own ``id``, the negative control: each ``PutEvents`` gives its event a new
  ``id``, a producer's retry included, so a resent order is confirmed twice. Must fail: duplicated.
- ``exhaust``: the correct handler, but the first three attempts of a seeded half of the keys fail with a transient
  error (counted in the outbox under ``attempt#<order id>``): with 2 retries, Lambda's asynchronous queue gives up
  and sends each such event's record to the on-failure queue; the run's redrive of those records brings them back.
  Must pass, with those keys redriven then effected.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

import orders

from effectively_once_runtime import Consumer

ENV_VARIANT = "ORDER_EVENTS_VARIANT"

consumer = Consumer(
    key="order_id",
    validate="[customer, total]",
    key_prefix="examples/order-events",
    envelope="auto",
    effect_key="scoped",
)
confirm_order = consumer.effect(orders.confirm, name="confirm_order")


class TransientError(RuntimeError):
    """A failure worth a retry (Lambda's asynchronous retries, then the on-failure queue)."""


@consumer.record
def handle(order: dict[str, Any]) -> dict[str, Any]:
    order = orders.check(order)
    key = str(order["order_id"])
    if os.environ.get(ENV_VARIANT) == "exhaust" and zlib.crc32(key.encode()) % 2 and orders.attempt(key) <= 3:
        raise TransientError(f"attempt failed on purpose for {key}")
    return confirm_order(order)


# The control: the key is the whole event's ``id`` (no envelope); the record function takes the order from ``detail``.
by_event_id = Consumer(key="id", key_prefix="examples/order-events-by-event-id", effect_key="scoped")
confirm_by_event_id = by_event_id.effect(orders.confirm, name="confirm_order")


@by_event_id.record
def handle_by_event_id(event: dict[str, Any]) -> dict[str, Any]:
    return confirm_by_event_id(orders.check(event.get("detail") or {}))


def lambda_handler(event: dict[str, Any], context: Any) -> Any:
    if os.environ.get(ENV_VARIANT) == "event_id":
        return by_event_id.handler(event, context)
    return consumer.handler(event, context)
