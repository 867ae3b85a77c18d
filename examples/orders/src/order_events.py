"""Order confirmations arriving asynchronously too: the orders function behind an EventBridge rule on a custom bus
and behind its queue (the ``OrdersEvents`` stack), for the chaos proof of the asynchronous path (issue 23).

``envelope="auto"``: the key and the record function see an EventBridge event's ``detail`` and an SQS body as is,
so an order that arrives both ways has one idempotency record. The variant, chosen per run by the function
environment's ``ORDER_EVENTS_VARIANT`` (the chaos command's ``--function-env``):

- ``correct`` (default): keyed on ``order_id``. Must pass.
- ``event_id``: keyed on the event's own ``id``, the negative control: each ``PutEvents`` gives its event a new
  ``id``, a producer's retry included, so a resent order is confirmed twice. Must fail: duplicated.
"""

from __future__ import annotations

import os
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


@consumer.record
def handle(order: dict[str, Any]) -> dict[str, Any]:
    return confirm_order(orders.check(order))


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
