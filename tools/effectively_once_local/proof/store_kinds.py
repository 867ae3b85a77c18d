"""One class per kind of effect store (``--effect KIND:...``, ``proof/stores.py``), each holding what the tooling knows
of it: its ``KIND:...`` rules (:meth:`StoreKind.parse`), where it is found (a resource type of the stack, or outside
it), how its items are read back with their business keys (:meth:`StoreKind.items`: each an :class:`Item`, with
what it holds for an error that shows it: ``stores.wrong_key_path``), the services its effects are
written through (``services``: ``chaos/write_services.py``, where each service's write operations, write kind and
throttling error live), and which effect writes wrote to it (:meth:`StoreKind.wrote`: the torn moments' rule). The
rest of the tooling asks the kind (:func:`kind_of`) and never names one. A kind that leaves a piece out fails at
import: a class attribute missing (:meth:`StoreKind.__init_subclass__`), a service not known, or an abstract method
not written (the registry instantiates every class).

Models: Powertools' ``BasePersistenceLayer`` (one base, one class per store) and aws-cdk's
``aws-lambda-event-sources`` (one base, each source a small class).
"""

from __future__ import annotations

import json
import re
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

from ..aws.deploy import DeployError
from ..aws.provider_stand_in import read_calls
from ..aws.readback import read_dlq_messages, scan_table
from ..chaos.sql_watch import SQL_COMMIT
from ..chaos.write_services import WRITE_SERVICES, item_identity
from ..traffic.chaos_input import body_key, compile_key
from .object_names import check_template, matcher, placeholder

#: The provider stand-in's call log in the run folder (``aws/provider_stand_in.py``).
PROVIDER_LOG = "standin-calls.jsonl"
#: Marks a store that not every key must show (``--effect KIND:NAME:KEYPATH:optional``).
OPTIONAL_SUFFIX = ":optional"
_SQL_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_SQL_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What every concrete kind must set (module docstring).
_REQUIRED = ("name", "syntax", "services", "resource_type")
#: The most characters of an item an error shows (:attr:`Item.shown`).
_SHOWN = 200


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


def physical_name(session: Any, stack: str, store: EffectStore) -> str:
    """The physical name of the stack's resource ``store`` names (a queue: its URL).

    :raises DeployError: the name matches no resource of its kind's type, or several.
    """
    cfn = session.client("cloudformation")
    resources = [
        r
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for r in page["StackResourceSummaries"]
        if r.get("ResourceType") == kind_of(store).resource_type
    ]
    exact = [r for r in resources if store.name in (r["LogicalResourceId"], r.get("PhysicalResourceId"))]
    matches = exact or [r for r in resources if store.name.lower() in r["LogicalResourceId"].lower()]
    if len(matches) != 1:
        shown = ", ".join(r["LogicalResourceId"] for r in resources) or "none"
        raise DeployError(
            f"--effect {store} names {len(matches)} {store.kind}s of {stack} (its {store.kind}s: {shown})"
        )
    return str(matches[0]["PhysicalResourceId"])


class Item(NamedTuple):
    """One item of a store, as its kind reads it back (:meth:`StoreKind.items`): its ``identity`` as the write logs
    name it, the business ``key`` its key path finds (``None``: none), and what it holds, for an error that shows it
    when no item's key is one the run knows (``stores.wrong_key_path``): ``fields`` (its attributes, columns or body
    fields; ``()``: none to name, as an object's) and ``shown`` (the item in one line, at most 200 characters)."""

    identity: str
    key: str | None
    fields: tuple[str, ...] = ()
    shown: str = ""


class Store(Protocol):
    """What a kind reads a store by (``stores.Store``, resolved in the deployed stack)."""

    spec: EffectStore
    session: Any
    #: Its name in the write logs (:meth:`StoreKind.log_name`).
    name: str
    #: What identifies its items (:meth:`StoreKind.key_attributes`).
    key_attributes: list[str]
    #: The business keys the run sent (a bucket's template is matched against them).
    keys: frozenset[str]
    run_dir: Path


class StoreKind(ABC):
    """One kind of effect store (module docstring).

    :cvar name: the ``KIND`` of ``--effect KIND:...``.
    :cvar syntax: the whole ``--effect`` form, for help and errors (``table:NAME:ATTRIBUTE``).
    :cvar stand_in: whether the run starts the HTTP provider stand-in for such a store (its calls are the store).
    :cvar note: what ``--effect``'s help says of it after its ``syntax`` (``""``: nothing).
    :cvar services: the write services its effects go through (keys of ``chaos/write_services.WRITE_SERVICES``);
        ``()``: none the environment watches (its moments are never torn, no kill follows its writes).
    :cvar resource_type: the CloudFormation type of a store of the stack, ``None`` for a store outside it.
    :cvar words: what an error calls its items, its key path and its items' fields (``stores.wrong_key_path``;
        ``""``: fields not named). :default: ``("item", "attribute", "attributes")``.
    """

    name: ClassVar[str]
    syntax: ClassVar[str]
    services: ClassVar[tuple[str, ...]]
    resource_type: ClassVar[str | None]
    note: ClassVar[str] = ""
    stand_in: ClassVar[bool] = False
    words: ClassVar[tuple[str, str, str]] = ("item", "attribute", "attributes")

    def __init_subclass__(cls, *, base: bool = False, **kwargs: Any) -> None:
        """Check a kind's class attributes at import; ``base=True``: a base of kinds (such as :class:`SqlKind`)."""
        super().__init_subclass__(**kwargs)
        missing = [attr for attr in _REQUIRED if not hasattr(cls, attr)]
        if missing and not base:
            raise TypeError(f"store kind {cls.__name__} sets no {', '.join(missing)} (proof/store_kinds.py)")
        unknown = [s for s in getattr(cls, "services", ()) if s not in WRITE_SERVICES]
        if unknown:
            raise TypeError(f"store kind {cls.__name__}: no write service {unknown} in chaos/write_services.py")

    @property
    def watched(self) -> bool:
        """Whether the execution environment watches its writes (a kill may follow one; a moment may be torn)."""
        return bool(self.services)

    def parse(self, text: str, rest: str) -> EffectStore:
        """``rest`` (after ``KIND:``) as ``NAME:KEYPATH``. :raises ValueError: a part missing."""
        name, sep, key_path = rest.partition(":")
        if not sep or not name or not key_path:
            raise ValueError(f"{text!r} is not {self.syntax}: NAME and KEYPATH are needed")
        return EffectStore(self.name, name, key_path)

    def log_name(self, session: Any, stack: str, spec: EffectStore) -> str:
        """The store's name in the write logs. :default: the physical name of the stack's resource."""
        return physical_name(session, stack, spec)

    def key_attributes(self, session: Any, name: str) -> list[str]:
        """What identifies an item of the store named ``name`` in the write logs. :default: nothing."""
        return []

    def check(self, spec: EffectStore, keys: Iterable[str]) -> None:
        """Refuse, before the run, a store that cannot be read for the input's ``keys``. :default: nothing.

        :raises ValueError: the store cannot tell the keys apart (a bucket's template: ``TemplateError``).
        """
        return

    @abstractmethod
    def items(self, store: Store) -> list[Item]:
        """Every item in the store now (:class:`Item`: its identity as the write logs name it, its business key)."""

    def wrote(self, write: Mapping[str, Any], name: str) -> bool:
        """Whether an effect write of the chaos log (``op``, ``target``, ``items``) wrote to the store named
        ``name`` (its ``Store.name``). :default: a write of one of its services naming it among its items."""
        if str(write.get("op") or "").split(".", 1)[0] not in self.services:
            return False
        return name in {str(item[0]) for item in write.get("items") or [] if item} | self._targets(write)

    def _targets(self, write: Mapping[str, Any]) -> set[str]:
        """The stores a write's ``target`` names. :default: none."""
        return set()


class TableKind(StoreKind):
    """A DynamoDB table of the stack; one item per effect, the business key in ``ATTRIBUTE``."""

    name = "table"
    syntax = "table:NAME:ATTRIBUTE"
    services = ("dynamodb",)
    resource_type = "AWS::DynamoDB::Table"

    def key_attributes(self, session: Any, name: str) -> list[str]:
        table = session.client("dynamodb").describe_table(TableName=name)["Table"]
        return [k["AttributeName"] for k in table["KeySchema"]]

    def items(self, store: Store) -> list[Item]:
        path = store.spec.key_path
        return [
            Item(
                item_identity(item, store.key_attributes),
                _attr_text(item.get(path)),
                tuple(sorted(item)),
                _shown({name: _attr_text(value) for name, value in item.items()}),
            )
            for item in scan_table(store.session.client("dynamodb"), store.name)
        ]

    def _targets(self, write: Mapping[str, Any]) -> set[str]:
        return set(str(write.get("target") or "").split(","))


class BucketKind(StoreKind):
    """An S3 bucket of the stack; one object per effect, its name matching ``TEMPLATE`` (``proof/object_names.py``)."""

    name = "bucket"
    syntax = "bucket:NAME:TEMPLATE"
    note = "with {key} or {effect_key} (matched against the input's keys; * for any characters)"
    services = ("s3",)
    resource_type = "AWS::S3::Bucket"
    words = ("object", "name template", "")

    def parse(self, text: str, rest: str) -> EffectStore:
        spec = super().parse(text, rest)
        placeholder(spec.key_path)  # TemplateError (a ValueError): not exactly one of {key} and {effect_key}
        return spec

    def check(self, spec: EffectStore, keys: Iterable[str]) -> None:
        check_template(spec.key_path, keys)

    def items(self, store: Store) -> list[Item]:
        s3, key_of = store.session.client("s3"), matcher(store.spec.key_path, store.keys)
        names = [
            obj["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=store.name)
            for obj in page.get("Contents", [])
        ]
        return [Item(name, key_of(name), (), name[:_SHOWN]) for name in names]

    def _targets(self, write: Mapping[str, Any]) -> set[str]:
        return {str(write.get("target") or "").split("/", 1)[0]}


class QueueKind(StoreKind):
    """An SQS queue of the stack (or an SNS topic's subscribed queue), read without consuming it; one message per
    effect, the business key the JMESPath over its body."""

    name = "queue"
    syntax = "queue:NAME:JMESPATH"
    services = ("sqs", "sns")
    resource_type = "AWS::SQS::Queue"
    words = ("message", "JMESPath", "body fields")

    def parse(self, text: str, rest: str) -> EffectStore:
        spec = super().parse(text, rest)
        compile_key(spec.key_path)  # InputFileError (a ValueError) for an expression the runtime refuses
        return spec

    def items(self, store: Store) -> list[Item]:
        expression = compile_key(store.spec.key_path)
        messages = read_dlq_messages(store.session.client("sqs"), store.name)
        return [Item(m.message_id, body_key(expression, m.body), *_body_fields(m.body)) for m in messages]

    def _targets(self, write: Mapping[str, Any]) -> set[str]:
        # a send names its queue URL; a publish names a topic, whose subscribed queue it reaches unseen
        return {str(write.get("target") or "")} if str(write.get("op")).startswith("sqs.") else set()


class ProviderKind(StoreKind):
    """The HTTP provider stand-in the run starts; one executed call per effect (``PATH``: empty, or a path prefix)."""

    name = "provider"
    syntax = "provider:[PATH]:JMESPATH"
    stand_in = True
    note = "(the stand-in's calls, under PATH if given)"
    services = ()
    resource_type = None
    words = ("call", "JMESPath", "request fields")

    def parse(self, text: str, rest: str) -> EffectStore:
        path, sep, key_path = rest.partition(":")
        if not sep or not key_path:
            raise ValueError(f"{text!r}: NAME and KEYPATH are needed (provider::JMESPATH takes no NAME)")
        if path and not path.startswith("/"):
            raise ValueError(
                f"{text!r}: the provider stand-in has no name: provider::JMESPATH, or a path prefix starting with "
                "'/' (provider:/v1/charges:JMESPATH)"
            )
        compile_key(key_path)
        return EffectStore(self.name, path, key_path)

    def log_name(self, session: Any, stack: str, spec: EffectStore) -> str:
        return ""

    def items(self, store: Store) -> list[Item]:
        expression = compile_key(store.spec.key_path)
        log = store.run_dir / PROVIDER_LOG
        calls = [
            c
            for c in (read_calls(log) if log.is_file() else [])
            if c.get("executed") and str(c.get("path") or "").startswith(store.spec.name)
        ]
        bodies = [json.dumps(c.get("request")) for c in calls]
        return [Item(f"{i}", body_key(expression, body), *_body_fields(body)) for i, body in enumerate(bodies)]


class SqlKind(StoreKind, base=True):
    """A table of a SQL database outside the stack, ``KIND:TARGET:TABLE:COLUMN`` (kept as ``name`` ``TARGET:TABLE``,
    ``key_path`` ``COLUMN``); one row per effect, identified by its values. Its writes are its driver's commits."""

    services = ("sql",)
    resource_type = None
    words = ("row", "column", "columns")
    #: The driver's module, as a commit's ``target`` names its connection class (``sqlite3.Connection``).
    driver: ClassVar[str]
    #: What the target part is called in errors.
    target_word: ClassVar[str]

    def parse(self, text: str, rest: str) -> EffectStore:
        parts = rest.rsplit(":", 2)
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"{text!r} is not {self.syntax}")
        target, table, column = parts
        if not _SQL_TABLE.fullmatch(table) or not _SQL_COLUMN.fullmatch(column):
            raise ValueError(f"{text!r}: TABLE (name or schema.name) and COLUMN must be plain SQL identifiers")
        return EffectStore(self.name, f"{target}:{table}", column)

    def log_name(self, session: Any, stack: str, spec: EffectStore) -> str:
        return spec.name

    def items(self, store: Store) -> list[Item]:
        target, table = store.spec.name.rsplit(":", 1)
        query = f"SELECT * FROM {_quoted(table)}"  # noqa: S608 - identifiers checked by parse, quoted
        path = store.spec.key_path
        return [
            Item(
                json.dumps(list(row.values()), default=str),
                None if row.get(path) is None else str(row[path]),
                tuple(row),
                _shown(row),
            )
            for row in self._rows(target, query)
        ]

    @abstractmethod
    def _rows(self, target: str, query: str) -> list[dict[str, Any]]:
        """Every row ``query`` selects, as column -> value; none when the database or the table is not there yet."""

    def wrote(self, write: Mapping[str, Any], name: str) -> bool:
        """A commit of its driver's connection writes every store of that driver (rows name no store)."""
        return write.get("op") == SQL_COMMIT and str(write.get("target") or "").startswith(f"{self.driver}.")


class SqliteKind(SqlKind):
    """``sqlite:FILE:TABLE:COLUMN``: read-only; a file or table not there yet holds nothing."""

    name = "sqlite"
    syntax = "sqlite:FILE:TABLE:COLUMN"
    driver = "sqlite3"

    def _rows(self, target: str, query: str) -> list[dict[str, Any]]:
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


class PostgresKind(SqlKind):
    """``postgres:DSN:TABLE:COLUMN`` (``DSN``: a libpq connection string or URI; psycopg 3 is imported only for such a
    store). ``TABLE`` is ``name`` or ``schema.name``."""

    name = "postgres"
    syntax = "postgres:DSN:TABLE:COLUMN"
    driver = "psycopg"

    def _rows(self, target: str, query: str) -> list[dict[str, Any]]:
        import psycopg  # only for a postgres store: not a dependency of the tooling

        with psycopg.connect(target, autocommit=True) as pg:
            try:
                cur = pg.execute(query.encode())
            except psycopg.errors.UndefinedTable:
                return []
            columns = [d.name for d in cur.description or []]
            return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def _attr_text(value: dict[str, Any] | None) -> str | None:
    """A DynamoDB attribute value (low-level format) as text: a string or number as it is, any other type as JSON
    (binary values as Python shows bytes)."""
    if not value:
        return None
    for kind in ("S", "N"):
        if kind in value:
            return str(value[kind])
    return json.dumps(value, sort_keys=True, default=str)


def _shown(value: Any) -> str:
    """``value`` as JSON in one line, cut to :data:`_SHOWN` characters (``...`` where it was cut)."""
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _body_fields(body: str) -> tuple[tuple[str, ...], str]:
    """A JSON body's top-level fields (none for a body that is not a JSON object) and the body in one line."""
    try:
        doc = json.loads(body)
    except ValueError:
        return (), body[:_SHOWN]
    return (tuple(sorted(doc)) if isinstance(doc, dict) else ()), _shown(doc)


def _quoted(table: str) -> str:
    """A table name checked by :meth:`SqlKind.parse` (``name`` or ``schema.name``), each part double-quoted."""
    return ".".join(f'"{part}"' for part in table.split("."))


#: Every store kind by its ``KIND``, in the order the help lists them.
STORE_KINDS: dict[str, StoreKind] = {
    kind.name: kind for kind in (TableKind(), BucketKind(), QueueKind(), ProviderKind(), SqliteKind(), PostgresKind())
}


def kinds_help() -> str:
    """Every kind's ``syntax`` and ``note``, for ``--effect``'s help."""
    return ", ".join(" ".join(filter(None, (kind.syntax, kind.note))) for kind in STORE_KINDS.values())


def kind_of(spec: EffectStore) -> StoreKind:
    """The kind of ``spec`` (a :class:`EffectStore` made by :func:`~.stores.parse_effect`, so of a known kind)."""
    return STORE_KINDS[spec.kind]
