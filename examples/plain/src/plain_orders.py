"""The plain order function (``app.py``): each SQS message's body is an order, written to the table as one item.
Plain boto3, no idempotency: what a team has before it adopts effectively-once."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import boto3

TABLE = boto3.resource("dynamodb").Table(os.environ["TABLE_NAME"])
CLIENT = boto3.client("dynamodb")
SQS = boto3.client("sqs")
#: ``send_retry`` sends the failed entries again up to this many times, then fails the batch. 40: under
#: ``--batch-entry-failures 0.6`` an entry failing them all is 0.6 ** 40 = 1.3e-9 (tests/e2e/test_proof_plain.py).
SEND_ATTEMPTS = 40


def handler(event: dict[str, Any], context: Any) -> None:
    """Write each record's order, per ``PLAIN_VARIANT``:

    - ``upsert`` (the default): one ``put_item`` per record under its order id (a redelivery rewrites the same item);
    - ``new_item``: under a fresh id (every delivery adds a row);
    - ``batch_writer``: the batch's orders under their ids through boto3's ``Table.batch_writer``, which writes
      ``UnprocessedItems`` again;
    - ``batch_drop``: one ``batch_write_item`` for the batch that swallows every exception and ignores
      ``UnprocessedItems``, as some samples do: a partial or throttled write is acknowledged and lost;
    - ``send_drop`` and ``send_retry``: no table write; each order's shipment, a message to the ``Shipments`` queue,
      in one ``send_message_batch`` for the batch (:func:`_ship`).

    An exception fails the whole batch."""
    variant = os.environ.get("PLAIN_VARIANT", "upsert")
    orders = [json.loads(record["body"]) for record in event["Records"]]
    if variant in ("send_drop", "send_retry"):
        _ship(orders, retry=variant == "send_retry")
        return
    if variant == "batch_writer":
        with TABLE.batch_writer(overwrite_by_pkeys=["id"]) as batch:
            for order in orders:
                batch.put_item(Item=_item(str(order["order_id"]), order))
        return
    if variant == "batch_drop":
        # one request per id (BatchWriteItem refuses two of one key), the last copy winning
        items = {str(o["order_id"]): _item(str(o["order_id"]), o) for o in orders}
        requests = [{"PutRequest": {"Item": _wire(item)}} for item in items.values()]
        try:
            CLIENT.batch_write_item(RequestItems={TABLE.name: requests})  # UnprocessedItems ignored
        except Exception:  # noqa: BLE001, S110  (the broken pattern this variant shows)
            pass
        return
    for order in orders:
        item_id = str(uuid.uuid4()) if variant == "new_item" else str(order["order_id"])
        TABLE.put_item(Item=_item(item_id, order))


def _ship(orders: list[dict[str, Any]], retry: bool) -> None:
    """One ``send_message_batch`` of the orders' shipments (SQS answers a batch per entry: HTTP 200, the entries it
    failed under ``Failed``, which the SDK does not retry). ``retry``: the failed entries are sent again until none
    fails (after :data:`SEND_ATTEMPTS` the batch fails, and SQS redelivers it); else ``Failed`` is ignored, as in the
    public reports of apps that lost messages so: those orders are acknowledged and never shipped."""
    pending = [
        {"Id": str(i), "MessageBody": json.dumps({"order_id": str(o["order_id"]), "total": int(o.get("total", 0))})}
        for i, o in enumerate(orders)
    ]
    for _ in range(SEND_ATTEMPTS):
        answer = SQS.send_message_batch(QueueUrl=os.environ["SHIPMENTS_QUEUE_URL"], Entries=pending)
        if not retry:
            return  # Failed ignored (the broken pattern this variant shows)
        failed = {entry["Id"] for entry in answer.get("Failed") or []}
        pending = [entry for entry in pending if entry["Id"] in failed]
        if not pending:
            return
    raise RuntimeError(f"{len(pending)} shipments still failed after {SEND_ATTEMPTS} attempts")


def _item(item_id: str, order: dict[str, Any]) -> dict[str, Any]:
    return {"id": item_id, "order_id": str(order["order_id"]), "total": int(order.get("total", 0))}


def _wire(item: dict[str, Any]) -> dict[str, Any]:
    """An item in DynamoDB's wire form (the low-level client's)."""
    return {k: {"N": str(v)} if isinstance(v, int) else {"S": str(v)} for k, v in item.items()}
