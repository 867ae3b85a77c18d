"""The plain order function (``app.py``): each SQS message's body is an order, written to the table as one item.
Plain boto3, no idempotency: what a team has before it adopts effectively-once."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import boto3

TABLE = boto3.resource("dynamodb").Table(os.environ["TABLE_NAME"])


def handler(event: dict[str, Any], context: Any) -> None:
    """Write each record's order. ``PLAIN_VARIANT=new_item``: under a fresh id (every delivery adds a row); else
    under its order id (a redelivery rewrites the same item). An exception fails the whole batch."""
    new_item = os.environ.get("PLAIN_VARIANT") == "new_item"
    for record in event["Records"]:
        order = json.loads(record["body"])
        item_id = str(uuid.uuid4()) if new_item else str(order["order_id"])
        TABLE.put_item(Item={"id": item_id, "order_id": str(order["order_id"]), "total": int(order.get("total", 0))})
