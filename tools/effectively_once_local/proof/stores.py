"""Effects counted from the stores themselves: ``--effect KIND:NAME:KEYPATH``, repeatable, one per store the run
names. Log lines are a cross-check, never the only witness.

Kinds:

- ``table:NAME:ATTRIBUTE``: a DynamoDB table of the stack (its logical id, physical name, or a part of the logical
  id naming one table); one item per effect, the business key in ``ATTRIBUTE``.
- ``bucket:NAME:TEMPLATE``: an S3 bucket of the stack; one object per effect, its key matching ``TEMPLATE`` with
  ``{key}`` where the business key stands (``receipts/{key}.json``) or ``{effect_key}`` where the runtime's scoped
  effect key stands (``<key prefix>#<effect>#<key>``), and ``*`` for any characters (``receipts/{key}/*``). The
  placeholder is matched against the business keys the run sent, never against any characters
  (``proof/object_names.py``; a template that can match a name two ways for the input is refused before the run).
- ``queue:NAME:JMESPATH``: an SQS queue of the stack (or an SNS topic's subscribed queue); one message per effect,
  the business key the JMESPath over its body (strict JSON). The queue is read without consuming it.
- ``provider:PATH:JMESPATH``: the HTTP provider stand-in the run starts (``aws/provider_stand_in.py``); one executed
  call per effect, the business key the JMESPath over the call's JSON body. ``PATH`` is empty (every call) or a path
  prefix starting with ``/`` (only the calls whose path starts with it: ``provider:/v1/charges:amount.order_id``).
- ``sqlite:FILE:TABLE:COLUMN``: a table of a SQLite database file (read-only; a file or table not there yet holds
  nothing); one row per effect, the business key in ``COLUMN``.
- ``postgres:DSN:TABLE:COLUMN``: the same in PostgreSQL (``DSN``: a libpq connection string or URI; psycopg 3 is
  imported only for such a store). ``TABLE`` is ``name`` or ``schema.name``.

SQL rows are identified by their values (a row is written by a commit no write log sees, ``chaos/faults.py``, so each
row counts as an effect of its own: an app that inserts one row per key under a fresh id shows its duplicates).

Every store is required by default: a key whose effect shows in some of the run's required stores and not in the
others at the end is ``incomplete`` (:func:`incomplete_keys`), a failing state that wins over ``invalid``. A store
written at most once, or only under a condition, is marked optional with a ``:optional`` suffix
(``provider:/unkeyed/at-most-once/:order_id:optional``): counted, never required.

Only what the run added counts: each store is read before the first message is sent (:func:`snapshot`) and what
was there then is left out, so several runs can share one deploy.

An effect is an execution's writes, not an item: each item is tied to the execution that first wrote it, from the
write log (``chaos/faults.py``: every accepted write names what it wrote), so an execution that writes two items for a
key (an order row and its audit row) is one effect, and "duplicated" means more than one execution's writes for a key.
An item no write log names (a provider call, a write from outside the run's functions) counts as an effect of its
own.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from effectively_once_runtime.identity import normalizer

from ..aws.deploy import DeployError
from ..aws.provider_stand_in import read_calls
from ..aws.readback import read_dlq_messages, scan_table
from ..chaos.faults import item_identity
from ..traffic.chaos_input import body_key, compile_key
from .executions import Counted, Writer, count_effects
from .object_names import matcher, placeholder

KINDS = ("table", "bucket", "queue", "provider", "sqlite", "postgres")
#: Marks a store that not every key must show (``--effect KIND:NAME:KEYPATH:optional``).
OPTIONAL_SUFFIX = ":optional"
#: The kinds whose store is a SQL table outside the stack: ``KIND:TARGET:TABLE:COLUMN``.
SQL_KINDS = ("sqlite", "postgres")
_SQL_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_SQL_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Each kind's CloudFormation resource type, to find a store of the stack by name.
_RESOURCE_TYPES = {"table": "AWS::DynamoDB::Table", "bucket": "AWS::S3::Bucket", "queue": "AWS::SQS::Queue"}


@dataclass(frozen=True)
class EffectStore:
    """One ``--effect KIND:NAME:KEYPATH``."""

    kind: str
    name: str
    key_path: str
    #: Counted, but not required of every key (``:optional``): a store written at most once or under a condition.
    optional: bool = False

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}:{self.key_path}" + (OPTIONAL_SUFFIX if self.optional else "")


def parse_effect(text: str) -> EffectStore:
    """``KIND:NAME:KEYPATH`` (the module docstring); for the SQL kinds ``KIND:TARGET:TABLE:COLUMN``, kept as
    ``name`` ``TARGET:TABLE`` and ``key_path`` ``COLUMN``.

    :raises ValueError: another kind, a missing part, a provider name that is not a path, a template without
        exactly one ``{key}`` or ``{effect_key}``, a JMESPath the runtime does not accept, or a SQL table or column
        that is not a plain identifier.
    """
    if text.endswith(OPTIONAL_SUFFIX) and text.count(":") > 2:
        return replace(parse_effect(text.removesuffix(OPTIONAL_SUFFIX)), optional=True)
    kind, sep, rest = text.partition(":")
    if kind in SQL_KINDS:
        return _sql_store(text, kind, rest)
    name, sep2, key_path = rest.partition(":")
    if not (sep and sep2) or kind not in KINDS:
        raise ValueError(f"{text!r} is not KIND:NAME:KEYPATH with KIND one of {', '.join(KINDS)}")
    if not key_path or (kind != "provider" and not name):
        raise ValueError(f"{text!r}: NAME and KEYPATH are needed (provider::JMESPATH takes no NAME)")
    if kind == "provider" and name and not name.startswith("/"):
        raise ValueError(
            f"{text!r}: the provider stand-in has no name: provider::JMESPATH, or a path prefix starting with '/' "
            "(provider:/v1/charges:JMESPATH)"
        )
    if kind == "bucket":
        placeholder(key_path)  # TemplateError (a ValueError): not exactly one of {key} and {effect_key}
    if kind in ("queue", "provider"):
        compile_key(key_path)  # InputFileError (a ValueError) for an expression the runtime refuses
    return EffectStore(kind, name, key_path)


def _sql_store(text: str, kind: str, rest: str) -> EffectStore:
    parts = rest.rsplit(":", 2)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"{text!r} is not {kind}:{'FILE' if kind == 'sqlite' else 'DSN'}:TABLE:COLUMN")
    target, table, column = parts
    if not _SQL_TABLE.fullmatch(table) or not _SQL_COLUMN.fullmatch(column):
        raise ValueError(f"{text!r}: TABLE (name or schema.name) and COLUMN must be plain SQL identifiers")
    return EffectStore(kind, f"{target}:{table}", column)


def physical_name(session: Any, stack: str, store: EffectStore) -> str:
    """The physical name of the stack's resource ``store`` names (a queue: its URL).

    :raises DeployError: the name matches no resource of that kind, or several.
    """
    cfn = session.client("cloudformation")
    resources = [
        r
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for r in page["StackResourceSummaries"]
        if r.get("ResourceType") == _RESOURCE_TYPES[store.kind]
    ]
    exact = [r for r in resources if store.name in (r["LogicalResourceId"], r.get("PhysicalResourceId"))]
    matches = exact or [r for r in resources if store.name.lower() in r["LogicalResourceId"].lower()]
    if len(matches) != 1:
        shown = ", ".join(r["LogicalResourceId"] for r in resources) or "none"
        raise DeployError(
            f"--effect {store} names {len(matches)} {store.kind}s of {stack} (its {store.kind}s: {shown})"
        )
    return str(matches[0]["PhysicalResourceId"])


def _attr_text(value: dict[str, Any] | None) -> str | None:
    if not value:
        return None
    for kind in ("S", "N"):
        if kind in value:
            return str(value[kind])
    return json.dumps(value, sort_keys=True)


def _quoted(table: str) -> str:
    """A table name checked by :func:`parse_effect` (``name`` or ``schema.name``), each part double-quoted."""
    return ".".join(f'"{part}"' for part in table.split("."))


def _sql_rows(kind: str, target: str, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` as column -> value; none when the database file or the table is not there yet."""
    query = f"SELECT * FROM {_quoted(table)}"  # noqa: S608 - identifiers checked by parse_effect, quoted
    if kind == "sqlite":
        path = Path(target).resolve()
        if not path.is_file():
            return []
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            cursor = conn.execute(query)
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []
            raise
        try:
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
        finally:
            conn.close()
    import psycopg  # only for a postgres store: not a dependency of the tooling

    with psycopg.connect(target, autocommit=True) as pg:
        try:
            cur = pg.execute(query.encode())
        except psycopg.errors.UndefinedTable:
            return []
        columns = [d.name for d in cur.description or []]
        return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


class Store:
    """One named store, resolved in the deployed stack: ``snapshot()`` before the run, ``count()`` after it.
    ``keys``: the business keys the run sent, which a bucket's object-name template is matched against
    (``object_names.matcher``; none: any characters)."""

    def __init__(
        self,
        session: Any,
        stack: str,
        store: EffectStore,
        run_dir: Path,
        normalize: tuple[str, ...] = (),
        *,
        keys: Iterable[str] = (),
    ) -> None:
        self.spec = store
        self.keys = frozenset(keys)
        self.normalize = normalize
        self.session = session
        self.run_dir = run_dir
        #: The store's name in the write logs: the physical name of a store of the stack, ``""`` for the provider,
        #: ``TARGET:TABLE`` for SQL.
        if store.kind == "provider":
            self.name = ""
        elif store.kind in SQL_KINDS:
            self.name = store.name
        else:
            self.name = physical_name(session, stack, store)
        #: A table's key attributes (what identifies its items), else ``[]``.
        self.key_attributes: list[str] = []
        if store.kind == "table":
            table = session.client("dynamodb").describe_table(TableName=self.name)["Table"]
            self.key_attributes = [k["AttributeName"] for k in table["KeySchema"]]
        self._before: set[str] = set()
        #: What :meth:`count` found: the effects per key and what it learned (``proof/executions.py``).
        self.counted = Counted(Counter())
        #: Each item the run added, as the write logs name it (``(store name, identity)``), and its business key.
        self.item_keys: dict[tuple[str, str], str] = {}

    def _items(self) -> list[tuple[str, str | None]]:
        """(identity, business key) of every effect in the store now."""
        kind, path = self.spec.kind, self.spec.key_path
        if kind == "table":
            return [
                (item_identity(item, self.key_attributes), _attr_text(item.get(path)))
                for item in scan_table(self.session.client("dynamodb"), self.name)
            ]
        if kind == "bucket":
            s3, key_of = self.session.client("s3"), matcher(path, self.keys)
            names = [
                obj["Key"]
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.name)
                for obj in page.get("Contents", [])
            ]
            return [(name, key_of(name)) for name in names]
        if kind in SQL_KINDS:
            target, table = self.spec.name.rsplit(":", 1)
            rows = _sql_rows(kind, target, table)
            return [
                (json.dumps(list(row.values()), default=str), None if row.get(path) is None else str(row[path]))
                for row in rows
            ]
        expression = compile_key(path)
        if kind == "queue":
            messages = read_dlq_messages(self.session.client("sqs"), self.name)
            return [(m.message_id, body_key(expression, m.body)) for m in messages]
        log = self.run_dir / PROVIDER_LOG
        calls = [
            c
            for c in (read_calls(log) if log.is_file() else [])
            if c.get("executed") and str(c.get("path") or "").startswith(self.spec.name)
        ]
        return [(f"{i}", body_key(expression, json.dumps(c.get("request")))) for i, c in enumerate(calls)]

    def snapshot(self) -> None:
        """What the store holds before the run: left out of :meth:`count`."""
        self._before = {identity for identity, _ in self._items()}

    def count(
        self,
        writers: Mapping[tuple[str, str], Writer] | None = None,
        batches: Mapping[str, Counter[str]] | None = None,
    ) -> Counter[str]:
        """Effects per business key that the run added (an item without the key is left out), each key normalised
        as the run's input is (``--normalize``), counted by ``proof/executions.py`` from the writes that made its
        items (``writers``: :func:`~.executions.writers`; an item not in it counts alone) and the invocations'
        batches (``batches``: :func:`~.executions.batches`). What the count learned stays in :attr:`counted`."""
        same = normalizer(self.normalize)
        added = [(identity, same(key)) for identity, key in self._items() if identity not in self._before and key]
        self.item_keys = {(self.name, identity): key for identity, key in added}
        self.counted = count_effects(added, self.name, writers, batches)
        return self.counted.effects


#: The provider stand-in's call log in the run folder (``aws/provider_stand_in.py``).
PROVIDER_LOG = "standin-calls.jsonl"


def incomplete_keys(counts: Mapping[str, Counter[str]], optional: set[str], keys: set[str]) -> list[str]:
    """The ``keys`` whose effect shows in some of the required stores and not in all of them (``counts``: effects
    per key by store, :meth:`Store.count`; ``optional``: the stores not required). Fewer than two required stores:
    none."""
    required = [c for name, c in counts.items() if name not in optional]
    if len(required) < 2:
        return []
    return sorted(k for k in keys if 0 < sum(1 for c in required if c[k] > 0) < len(required))


def combine(counts: dict[str, Counter[str]]) -> tuple[Counter[str], dict[str, Any]]:
    """Effects per key across the stores (a key's most effects in any one store: one effect that writes to two
    stores is one effect) and, per store, its effects and the keys it shows more than once (naming the store of
    each duplicate)."""
    combined: Counter[str] = Counter()
    for counter in counts.values():
        for key, n in counter.items():
            combined[key] = max(combined[key], n)
    per_store = {
        name: {"effects": sum(c.values()), "duplicated": sorted(k for k, n in c.items() if n > 1)[:100]}
        for name, c in counts.items()
    }
    return combined, per_store
