"""Every effect adapter in one app, proven under kills (issue 24, ``make proof``): an order's fulfilment writes to
every kind of store, each through its adapter (``effectively_once_runtime.effects``), inside one declared effect
keyed on the business id ``order_id``.

The keyed adapters, which answer a replay (a kill between the write and the record's completion) from the store:

- SQL ``insert_once``: a row in ``shipments`` of a SQLite file (``EFFECTS_SQLITE_PATH``) and, when
  ``EFFECTS_POSTGRES_DSN`` is set, of PostgreSQL (psycopg 3), committed inside the effect by the docs' patterns,
  ``with conn:`` (sqlite3) and ``with conn.transaction():`` (psycopg);
- HTTP ``post_json``: a confirmation to the provider (``EFFECTIVELY_ONCE_PROVIDER_URL``) under ``/keyed/``, with
  ``Idempotency-Key``;
- DynamoDB ``put_item``: a receipt in the ``Receipts`` table (partition key ``effect_key``);
- S3 ``put_object``: a document in the ``Documents`` bucket under ``documents/<order id>/``;
- SQS ``send_fifo``: a notice to the ``Notices`` FIFO queue (deduplication id = the effect's key).

The un-keyed calls, which no key protects (``unkeyed``, ``delivery=`` chosen per call):

- ``at_most_once``: an SMS, a ``POST`` without a key to the provider's ``/unkeyed/at-most-once/``: a replay that
  finds the call's claim skips it (``effect possibly lost``);
- ``at_least_once``: a webhook, a ``POST`` without a key to ``/unkeyed/at-least-once/``, and an announcement sent
  with ``send_message`` to the standard ``Announcements`` queue: a replay calls again (``effect repeated``).

The calls run in an order that turns with the order id, so that each comes first for some keys: a chaos run kills
after the writes the local AWS accepts and after SQL commits, each in turn with even odds, and the first write of an
invocation is the one struck most often.

Variants, one deploy (``EFFECTS_VARIANT``, read per record; a chaos run sets it with ``--function-env``):

- ``adapters`` (the default): the above. The chaos run must pass with 0 duplicated in every keyed store.
- ``naive``: the same calls made plainly, as code without the adapters does: a put without a condition under a fresh
  uuid, an object under a fresh key, a FIFO message with a fresh deduplication id, a ``POST`` with a fresh
  ``Idempotency-Key``, an ``INSERT`` under a fresh id, and the un-keyed calls without their markers. A kill after a
  write and before the record's completion repeats each of them: the chaos run must fail, naming every store.
- ``torn``: commits its rows (SQLite, PostgreSQL), then the documents service refuses the order for good (a
  ``PermanentError`` before any other write): every key's row exists without its receipt, document, notice or
  provider call. The chaos run must fail: incomplete.
"""

from __future__ import annotations

import http.client
import json
import os
import sqlite3
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any
from urllib.parse import urlsplit

import boto3

from effectively_once_runtime import Consumer, PermanentError
from effectively_once_runtime.effects.dynamodb import put_item
from effectively_once_runtime.effects.http import post_json
from effectively_once_runtime.effects.messaging import send_fifo, send_message
from effectively_once_runtime.effects.s3 import put_object
from effectively_once_runtime.effects.sql import insert_once
from effectively_once_runtime.effects.unkeyed import unkeyed

# The stack's environment (app.py) and the run's (--function-env, the chaos run's provider stand-in).
ENV_RECEIPTS_TABLE = "RECEIPTS_TABLE_NAME"
ENV_DOCUMENTS_BUCKET = "DOCUMENTS_BUCKET_NAME"
ENV_NOTICES_QUEUE = "NOTICES_QUEUE_URL"
ENV_ANNOUNCEMENTS_QUEUE = "ANNOUNCEMENTS_QUEUE_URL"
ENV_PROVIDER_URL = "EFFECTIVELY_ONCE_PROVIDER_URL"
ENV_SQLITE_PATH = "EFFECTS_SQLITE_PATH"
ENV_POSTGRES_DSN = "EFFECTS_POSTGRES_DSN"
ENV_VARIANT = "EFFECTS_VARIANT"
#: Without ``EFFECTS_SQLITE_PATH``: a file in the execution environment's ``/tmp`` (on AWS each environment has its
#: own, so only a shared database, such as PostgreSQL, proves anything there).
DEFAULT_SQLITE_PATH = "/tmp/effects-example.sqlite3"  # noqa: S108 - Lambda's writable folder

RECEIPT_KEY = "effect_key"
SQL_TABLE = "shipments"
SQL_KEY = "effect_key"
DOCUMENTS_PREFIX = "documents/"
KEYED_PATH = "/keyed/confirmations"
AT_MOST_ONCE_PATH = "/unkeyed/at-most-once/sms"
AT_LEAST_ONCE_PATH = "/unkeyed/at-least-once/webhook"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {SQL_TABLE} "
    f"({SQL_KEY} TEXT PRIMARY KEY, order_id TEXT NOT NULL, customer TEXT NOT NULL, total INTEGER NOT NULL)"
)

_clients: dict[str, Any] = {}


def _client(service: str) -> Any:
    if service not in _clients:
        _clients[service] = boto3.client(service)
    return _clients[service]


def _variant() -> str:
    return os.environ.get(ENV_VARIANT, "adapters")


def check(order: dict[str, Any]) -> dict[str, Any]:
    """An order needs an ``order_id``, a ``customer`` and a non-negative integer ``total`` (cents)."""
    total = order.get("total")
    if not order.get("order_id") or not order.get("customer") or not isinstance(total, int) or total < 0:
        raise PermanentError("an order needs order_id, customer and a non-negative integer total")
    return order


def _fields(order: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": str(order["order_id"]), "customer": str(order["customer"]), "total": int(order["total"])}


def _turned(calls: list[Callable[[], Any]], order_id: str) -> None:
    """Make ``calls`` in an order turned by the order id (each comes first for some keys)."""
    start = zlib.crc32(order_id.encode()) % len(calls)
    for call in calls[start:] + calls[:start]:
        call()


# --- plain calls: the stores' own clients ----------------------------------------------------------------------------
def _post(path: str, payload: dict[str, Any], key: str | None = None) -> int:
    """A plain JSON ``POST`` to the provider (``http.client``: no proxy, no redirect), with ``Idempotency-Key`` when
    ``key`` is given.

    :raises RuntimeError: any answer but 2xx (transient: the record is retried).
    """
    url = urlsplit(os.environ[ENV_PROVIDER_URL])
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = f'"{key}"'
    try:
        conn.request("POST", path, body=json.dumps(payload, sort_keys=True).encode(), headers=headers)
        status = conn.getresponse().status
    finally:
        conn.close()
    if not 200 <= status < 300:
        raise RuntimeError(f"POST {path} answered {status}")
    return status


_schema_made: set[str] = set()


@contextmanager
def _sqlite() -> Iterator[sqlite3.Connection]:
    """The SQLite database (``EFFECTS_SQLITE_PATH``), its table made once per execution environment (DDL outside a
    transaction: nothing to commit)."""
    path = os.environ.get(ENV_SQLITE_PATH, DEFAULT_SQLITE_PATH)
    with closing(sqlite3.connect(path, timeout=30)) as conn:
        if path not in _schema_made:
            conn.execute(_SCHEMA)
            _schema_made.add(path)
        yield conn


@contextmanager
def _postgres() -> Iterator[Any]:
    """PostgreSQL (``EFFECTS_POSTGRES_DSN``; psycopg 3 imported only then), its table made once per execution
    environment (in autocommit: nothing to commit)."""
    import psycopg

    dsn = os.environ[ENV_POSTGRES_DSN]
    with closing(psycopg.connect(dsn, autocommit=True)) as conn:
        if dsn not in _schema_made:
            conn.execute(_SCHEMA)
            _schema_made.add(dsn)
        conn.autocommit = False
        yield conn


def _databases() -> list[Callable[[], Any]]:
    """The SQL databases of the run: SQLite, and PostgreSQL when ``EFFECTS_POSTGRES_DSN`` is set."""
    return [_sqlite, _postgres] if os.environ.get(ENV_POSTGRES_DSN) else [_sqlite]


# --- the effect ------------------------------------------------------------------------------------------------------
# check=: a malformed order is refused before any record of its batch runs (dead-lettered on first sight).
consumer = Consumer(
    key="order_id", validate="[customer, total]", key_prefix="examples/effects", effect_key="scoped", check=check
)


@consumer.effect(name="fulfil")
def fulfil(order: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
    """Every store once per order: the adapters, or the plain calls of the ``naive`` variant."""
    if _variant() == "naive":
        _fulfil_naively(order)
        return {"order_id": order["order_id"], "variant": "naive"}
    if _variant() == "torn":
        for database in _databases():
            _insert(database, _fields(order), idempotency_key)()
        raise PermanentError(f"the documents service refused order {order['order_id']} for good")
    _fulfil(order, idempotency_key)
    return {"order_id": order["order_id"], "variant": "adapters"}


def _insert(database: Callable[[], Any], row: dict[str, Any], key: str) -> Callable[[], None]:
    """The order's row in ``database``, once per key (``insert_once``)."""

    def call() -> None:
        # The docs' patterns (docs/effects.md, "SQL"): sqlite3's `with conn:` and psycopg's
        # `with conn.transaction():` commit at the end of the block, a kill point of the chaos run.
        with database() as conn, conn if database is _sqlite else conn.transaction():
            name = None if database is _sqlite else "postgres"  # one effect, two databases: a name for the second
            insert_once(conn, table=SQL_TABLE, key_column=SQL_KEY, row=row, idempotency_key=key, name=name)

    return call


def _fulfil(order: dict[str, Any], key: str) -> None:
    row, order_id = _fields(order), str(order["order_id"])
    body = json.dumps(row, sort_keys=True)

    _turned(
        [
            *(_insert(database, row, key) for database in _databases()),
            lambda: post_json(os.environ[ENV_PROVIDER_URL] + KEYED_PATH, row, idempotency_key=key),
            lambda: put_item(
                client=_client("dynamodb"),
                table_name=os.environ[ENV_RECEIPTS_TABLE],
                key_attribute=RECEIPT_KEY,
                item=row,
                idempotency_key=key,
            ),
            lambda: put_object(
                client=_client("s3"),
                bucket=os.environ[ENV_DOCUMENTS_BUCKET],
                body=body.encode(),
                idempotency_key=key,
                prefix=f"{DOCUMENTS_PREFIX}{order_id}/",
                content_type="application/json",
            ),
            lambda: send_fifo(
                client=_client("sqs"),
                queue_url=os.environ[ENV_NOTICES_QUEUE],
                body=body,
                message_group_id=row["customer"],
                idempotency_key=key,
            ),
            lambda: unkeyed(
                lambda: _post(AT_MOST_ONCE_PATH, row), delivery="at_most_once", idempotency_key=key, name="sms"
            ),
            lambda: unkeyed(
                lambda: _post(AT_LEAST_ONCE_PATH, row), delivery="at_least_once", idempotency_key=key, name="webhook"
            ),
            lambda: send_message(
                client=_client("sqs"),
                queue_url=os.environ[ENV_ANNOUNCEMENTS_QUEUE],
                body=body,
                delivery="at_least_once",
                idempotency_key=key,
            ),
        ],
        order_id,
    )


def _fulfil_naively(order: dict[str, Any]) -> None:
    """The same writes without the adapters: each execution writes anew under a fresh id."""
    row, order_id = _fields(order), str(order["order_id"])
    body = json.dumps(row, sort_keys=True)

    def insert(database: Callable[[], Any]) -> Callable[[], None]:
        def call() -> None:
            with database() as conn, conn if database is _sqlite else conn.transaction():  # as in _fulfil
                values = ", ".join(["?" if database is _sqlite else "%s"] * 4)
                conn.execute(
                    f"INSERT INTO {SQL_TABLE} ({SQL_KEY}, order_id, customer, total) VALUES ({values})",  # noqa: S608
                    (f"naive#{uuid.uuid4()}", row["order_id"], row["customer"], row["total"]),
                )

        return call

    _turned(
        [
            *(insert(database) for database in _databases()),
            lambda: _post(KEYED_PATH, row, key=str(uuid.uuid4())),
            lambda: _client("dynamodb").put_item(
                TableName=os.environ[ENV_RECEIPTS_TABLE],
                Item={
                    RECEIPT_KEY: {"S": f"naive#{uuid.uuid4()}"},
                    "order_id": {"S": row["order_id"]},
                    "customer": {"S": row["customer"]},
                    "total": {"N": str(row["total"])},
                },
            ),
            lambda: _client("s3").put_object(
                Bucket=os.environ[ENV_DOCUMENTS_BUCKET],
                Key=f"{DOCUMENTS_PREFIX}{order_id}/{uuid.uuid4()}",
                Body=body.encode(),
                ContentType="application/json",
            ),
            lambda: _client("sqs").send_message(
                QueueUrl=os.environ[ENV_NOTICES_QUEUE],
                MessageBody=body,
                MessageGroupId=row["customer"],
                MessageDeduplicationId=str(uuid.uuid4()),
            ),
            lambda: _post(AT_MOST_ONCE_PATH, row),
            lambda: _post(AT_LEAST_ONCE_PATH, row),
            lambda: _client("sqs").send_message(QueueUrl=os.environ[ENV_ANNOUNCEMENTS_QUEUE], MessageBody=body),
        ],
        order_id,
    )


@consumer.record
def handle(order: dict[str, Any]) -> dict[str, Any]:
    return fulfil(check(order))


lambda_handler = consumer.handler
# The SDK clients, built in Lambda's init phase rather than in the first invocation's timeout.
consumer.warm()
