"""The proof gallery (issue 22, ``make proof``): the orders function in variants, right and wrong, so that the chaos
command is shown to fail each wrong one with the right finding and to pass the right ones
(``tests/e2e/test_proof_gallery.py``). One deploy (the ``OrdersGallery`` stack) serves every variant: the variant
is the execution environment's ``GALLERY_VARIANT`` (a chaos run sets it with ``--function-env``), read per record.

Variants:

- ``correct``: the orders handler itself (``orders.py``): a keyed, declared effect. Must pass.
- ``transient``: the same, but the first two attempts of a seeded half of the keys fail with a transient error
  (counted in the outbox under ``attempt#<order id>``); with maxReceiveCount 2 SQS moves them to the DLQ without a
  reason, and the run's redrive brings them back. In a run without faults nothing but the app explains that: must
  fail, dead-lettered without a reason (nothing lost, nothing duplicated).
- ``undeclared``: the confirmation is an outbox item under a fresh uuid, written straight from the record function,
  not through a declared effect: a kill after the write and before the record's completion writes it again.
  Must fail: duplicated.
- ``message_id``: keyed on the SQS ``messageId`` (a resend after the deduplication interval is a new message).
  Must fail: duplicated.
- ``slow``: the confirmation takes most of the function's timeout: real deadline kills, and the redrive cannot
  help. Must fail: stranded.
- ``transient_after_unkeyed``: an unkeyed confirmation, then a transient failure on the first attempt: Powertools
  deletes the record, the retry repeats the effect. Must fail: duplicated.
- ``writes_twice``: the declared, keyed confirmation, and in the same effect a second outbox item (an audit row)
  under a fresh id: one execution writes two items for its key, which is one effect; a kill after either write
  makes the replay write a fresh audit row again, a second execution's writes. Must fail: duplicated (and the keys
  no kill struck must count once).
- ``fresh_item``: a declared effect that takes no key: each execution writes a fresh outbox item (issue 57, item 1).
  A kill between the effect and the record's completion makes the replay write another. Must fail a run at the chaos
  command's default fractions: the draw alone mostly strikes nothing in 20 orders, the forced strikes do
  (``chaos/forced_strikes.py``).
- ``drop_invalid``: a wrapper reports bodies that are not JSON as done and sends them nowhere. Must fail: vanished.
- ``reordered``: the orders handler, handed each batch's records last first: within a FIFO message group a later
  order is confirmed before an earlier one. Must fail: reordered.
- ``normalized``: the orders handler with ``Consumer(normalize=("strip", "casefold"))``: ``" ABC-1 "`` and
  ``"abc-1"`` are one order. Must pass a run whose input repeats ids in another case or with spaces, under
  ``--normalize strip --normalize casefold``; the ``correct`` variant, keyed on the raw id, must fail it: duplicated.
"""

from __future__ import annotations

import json
import os
import time
import uuid
import zlib
from datetime import UTC, datetime
from typing import Any

import orders

from effectively_once_runtime import Consumer

ENV_VARIANT = "GALLERY_VARIANT"


def _variant() -> str:
    return os.environ.get(ENV_VARIANT, "correct")


def _unkeyed_confirmation(order: dict[str, Any]) -> None:
    """An outbox item under a fresh id: nothing answers a second execution."""
    orders._table().put_item(
        TableName=os.environ[orders.ENV_OUTBOX_TABLE],
        Item={
            orders.OUTBOX_KEY: {"S": f"unkeyed#{uuid.uuid4()}"},
            "order_id": {"S": str(order["order_id"])},
            "confirmed_at": {"S": datetime.now(UTC).isoformat()},
        },
    )


class TransientError(RuntimeError):
    """A failure worth a retry: a batch item failure, never the DLQ on first sight."""


consumer = Consumer(key="order_id", validate="[customer, total]", key_prefix="examples/gallery", effect_key="scoped")
confirm_order = consumer.effect(orders.confirm, name="confirm_order")


@consumer.effect(name="confirm_with_audit")
def confirm_with_audit(order: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
    """The keyed confirmation, then an audit row under a fresh id: the second write is not idempotent."""
    result = orders.confirm(order, idempotency_key=idempotency_key)
    _unkeyed_confirmation(order)
    return result


@consumer.effect(name="confirm_fresh")
def confirm_fresh(order: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
    """A declared effect that ignores its key: an outbox item under a fresh id per execution."""
    _unkeyed_confirmation(order)
    return {"order_id": order["order_id"]}


@consumer.record
def handle(order: dict[str, Any]) -> dict[str, Any]:
    variant, order = _variant(), orders.check(order)
    if (
        variant == "transient"
        and zlib.crc32(str(order["order_id"]).encode()) % 2
        and orders.attempt(order["order_id"]) <= 2
    ):
        raise TransientError(f"attempt failed on purpose for {order['order_id']}")
    if variant == "undeclared":
        _unkeyed_confirmation(order)
        return {"order_id": order["order_id"]}
    if variant == "transient_after_unkeyed":
        _unkeyed_confirmation(order)
        if orders.attempt(order["order_id"]) == 1:
            raise TransientError(f"failure after the effect, on purpose, for {order['order_id']}")
        return {"order_id": order["order_id"]}
    if variant == "writes_twice":
        return confirm_with_audit(order)
    if variant == "fresh_item":
        return confirm_fresh(order)
    if variant == "slow":
        time.sleep(float(os.environ.get("GALLERY_SLOW_SECONDS", "1.5")))
    return confirm_order(order)


normalized = Consumer(
    key="order_id",
    validate="[customer, total]",
    key_prefix="examples/gallery-normalized",
    effect_key="scoped",
    normalize=("strip", "casefold"),
)
confirm_normalized = normalized.effect(orders.confirm, name="confirm_order")


@normalized.record
def handle_normalized(order: dict[str, Any]) -> dict[str, Any]:
    return confirm_normalized(orders.check(order))


def lambda_handler(event: dict[str, Any], context: Any) -> Any:
    variant = _variant()
    if variant == "normalized":
        return normalized.handler(event, context)
    if variant == "message_id":
        return orders.by_message_id_handler(event, context)
    if variant == "reordered":
        event = {**event, "Records": list(reversed(event.get("Records", [])))}
    if variant == "drop_invalid":
        kept = []
        for record in event.get("Records", []):
            try:
                json.loads(record["body"])
            except ValueError:
                continue  # reported done by omission: never processed, never dead-lettered
            kept.append(record)
        event = {**event, "Records": kept}
        if not kept:
            return {"batchItemFailures": []}
    return consumer.handler(event, context)
