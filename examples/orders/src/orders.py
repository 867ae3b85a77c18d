"""Order confirmations on ``effectively_once_runtime``: the chaos proof's example outside payments.

The side effect is the confirmation: one item in the outbox table, written with a conditional put keyed on the
effect's scoped key (``attribute_not_exists``). A re-execution of the effect after a crash between the put and the
completion of the idempotency record is answered from the item already there, not written again: the effect takes
the key. (A plain notification queue takes no key: a kill after the send would duplicate for real.)

Entry points: ``orders.lambda_handler`` keys on the business key ``order_id`` (right);
``orders.by_message_id_handler`` keys on the SQS ``messageId`` (the classic mistake: a producer's resend is a new
message with a new id), the negative control of the chaos proof.
"""

from __future__ import annotations

import functools
import json
import os
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import ClientError

from effectively_once_runtime import Consumer, PermanentError
from effectively_once_runtime.consumer import key_text

#: Environment variable naming the outbox table (set by the example's stack).
ENV_OUTBOX_TABLE = "OUTBOX_TABLE_NAME"
#: The outbox's partition key: the idempotency key the effect was called with.
OUTBOX_KEY = "idempotency_key"

_outbox: Any = None


def _table() -> Any:
    global _outbox
    if _outbox is None:
        _outbox = boto3.client("dynamodb")
    return _outbox


def confirm(order: dict[str, Any], *, idempotency_key: str, legacy_field: str = "order_id") -> dict[str, Any]:
    """Put the confirmation in the outbox once per idempotency key; a repeated key is answered from the item.

    The key is scoped (``examples/orders#confirm_order#<order id>``); before the switch to scoped effect keys it was
    the consumer's idempotency key itself (the body's ``legacy_field``), so a confirmation written then is looked up
    under it first (one consistent ``GetItem``; drop the lookup once every record written before the switch has
    expired)."""
    legacy = key_text(order.get(legacy_field))
    if legacy is not None and legacy != idempotency_key:
        found = (
            _table()
            .get_item(TableName=os.environ[ENV_OUTBOX_TABLE], Key={OUTBOX_KEY: {"S": legacy}}, ConsistentRead=True)
            .get("Item")
        )
        if found:
            return {"order_id": str(order["order_id"]), "replayed": True}
    item = {
        OUTBOX_KEY: {"S": idempotency_key},
        "order_id": {"S": str(order["order_id"])},
        "customer": {"S": str(order["customer"])},
        "total": {"N": str(order["total"])},
        "confirmed_at": {"S": datetime.now(UTC).isoformat()},
    }
    try:
        _table().put_item(
            TableName=os.environ[ENV_OUTBOX_TABLE],
            Item=item,
            ConditionExpression=f"attribute_not_exists({OUTBOX_KEY})",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        # The item with this call's own confirmed_at is the first try's write, met by the SDK's retry of the put
        # after its answer was lost: not a replay.
        stored = exc.response.get("Item", {}).get("confirmed_at", {}).get("S")
        if stored != item["confirmed_at"]["S"]:
            return {"order_id": str(order["order_id"]), "replayed": True}
    return {"order_id": str(order["order_id"]), "replayed": False}


def attempt(order_id: str) -> int:
    """This key's attempt number, counted in the outbox under ``attempt#<order id>`` (one ``ADD`` per attempt, across
    environments): for the proof's variants that fail their first attempts on purpose (``gallery.py``,
    ``order_events.py``)."""
    answer = _table().update_item(
        TableName=os.environ[ENV_OUTBOX_TABLE],
        Key={OUTBOX_KEY: {"S": f"attempt#{order_id}"}},
        UpdateExpression="ADD attempts :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )
    return int(answer["Attributes"]["attempts"]["N"])


def check(order: dict[str, Any]) -> dict[str, Any]:
    """An order needs an ``order_id``, a ``customer`` and a non-negative integer ``total`` (cents)."""
    total = order.get("total")
    if not order.get("order_id") or not order.get("customer") or not isinstance(total, int) or total < 0:
        raise PermanentError("an order needs order_id, customer and a non-negative integer total")
    return order


# check=: a malformed order is refused before any record of its batch runs (dead-lettered on first sight).
consumer = Consumer(
    key="order_id", validate="[customer, total]", key_prefix="examples/orders", effect_key="scoped", check=check
)
confirm_order = consumer.effect(confirm, name="confirm_order")


@consumer.record
def handle(order: dict[str, Any]) -> dict[str, Any]:
    return confirm_order(check(order))


lambda_handler = consumer.handler
# The SDK clients, built in Lambda's init phase rather than in the first invocation's timeout.
consumer.warm()


# --- the negative control: keyed on the SQS messageId ----------------------------------------------------------------
MESSAGE_ID_FIELD = "sqs_message_id"
by_message_id = Consumer(key=MESSAGE_ID_FIELD, key_prefix="examples/orders-by-message-id", effect_key="scoped")
confirm_by_message_id = by_message_id.effect(
    functools.partial(confirm, legacy_field=MESSAGE_ID_FIELD), name="confirm_order"
)


@by_message_id.record
def handle_by_message_id(order: dict[str, Any]) -> dict[str, Any]:
    return confirm_by_message_id(check(order))


def by_message_id_handler(event: dict[str, Any], context: Any) -> Any:
    """The mistake on purpose: each record's key is its ``messageId``, copied into the body."""
    for record in event.get("Records", []):
        try:
            body = json.loads(record["body"])
        except json.JSONDecodeError:
            continue  # bad input stays bad input
        if isinstance(body, dict):
            record["body"] = json.dumps({**body, MESSAGE_ID_FIELD: record["messageId"]})
    return by_message_id.handler(event, context)
