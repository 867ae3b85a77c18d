"""SQL: one row per effect key, written with ``INSERT … ON CONFLICT (key) DO NOTHING … RETURNING``; a replay reads the
stored row back. Standard library only: it takes the caller's connection (``sqlite3`` or psycopg 3) and never imports
a driver.

The row is written inside the caller's transaction and the adapter never commits or rolls back: the effect's row and
the business rows it records commit together or not at all. A replay (a kill after the commit and before the
idempotency record completed) finds the row and returns it instead of writing a second one, for as long as the row
is kept: the table's retention is the window.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidEffectCall, PermanentError
from ._context import adapter_key

ADAPTER = "sql.insert_once"
#: Oldest SQLite with ``RETURNING``: added in 3.35.0 (SQLite release log, "Release 3.35.0 On 2021-03-12",
#: https://www.sqlite.org/releaselog/3_35_0.html; SQLite documentation, "The RETURNING Clause").
MIN_SQLITE_VERSION = (3, 35, 0)
#: Longest identifier part: PostgreSQL keeps at most NAMEDATALEN-1 = 63 bytes of an identifier and truncates the
#: rest (PostgreSQL documentation, SQL Syntax, 4.1.1 "Identifiers and Key Words",
#: https://www.postgresql.org/docs/15/sql-syntax-lexical.html#SQL-SYNTAX-IDENTIFIERS); SQLite has no lower limit.
MAX_IDENTIFIER_CHARS = 63
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class SqlRowMismatch(PermanentError):
    """The row stored under the key differs from the row given in the compared columns: the same effect key was
    used with another row (a bug, or a changed record). Names the table, the key and the columns, never values.

    :ivar table: the table as given.
    :ivar key: the effect key the row is stored under.
    :ivar columns: the differing columns, sorted.
    """

    def __init__(self, table: str, key: str, columns: Sequence[str]) -> None:
        self.table = table
        self.key = key
        self.columns = sorted(columns)
        super().__init__(
            f"{ADAPTER}: the row stored in {table} under key {key!r} differs from the given row in columns "
            f"{self.columns}: the same effect key was used with another row"
        )


class SqlRowMissing(Exception):
    """Transient: the insert conflicted on the key, yet no row with that key could be read back (it was deleted
    between the two statements, or a trigger dropped the insert). The record is retried."""


@dataclass(frozen=True)
class SqlRow:
    """What ``insert_once`` gives back.

    :ivar row: column name -> value of the row as stored (the driver's Python types).
    :ivar inserted: ``True`` when this call wrote the row, ``False`` on a replay (the row was already stored): gate
        the writes that must not repeat on it (``UPDATE accounts SET balance = balance - ...``).
    """

    row: dict[str, Any]
    inserted: bool


@dataclass(frozen=True)
class _Dialect:
    name: str
    placeholder: str
    same: str  # a null-safe equality of a column and a parameter: {column} and {value}
    typed: bool  # the parameter is cast to the column's declared type before the comparison


# SQLite: ``IS`` compares a column with a parameter after applying the column's affinity to the parameter, the same
# conversion the insert applied (SQLite documentation, "Datatypes In SQLite", 4.2 "Type Conversions Prior To
# Comparison"): nothing to cast.
_SQLITE = _Dialect("sqlite3", "?", "({column} IS {value})", typed=False)
# PostgreSQL: a parameter keeps its own type (float8 for a Python float, numeric for a Decimal, timestamptz with
# microseconds), so a column that rounds (real, numeric(p,s), timestamptz(p), char(n)) would differ from the very
# value it stored; the parameter is cast to the column's declared type, as the insert's assignment cast did.
_POSTGRESQL = _Dialect("psycopg", "%s", "({column} IS NOT DISTINCT FROM {value})", typed=True)
#: The declared type of each column of a table, typmod included (``numeric(10,2)``, ``timestamp(0) with time zone``).
_PG_COLUMN_TYPES = (
    "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a "
    "WHERE a.attrelid = CAST(%s AS regclass) AND a.attnum > 0 AND NOT a.attisdropped"
)


def _tuple_rows(_cursor: Any) -> type[tuple[Any, ...]]:
    """psycopg's row factory for plain tuples (``psycopg.rows.tuple_row``), without importing psycopg."""
    return tuple


def _dialect_of(conn: object) -> _Dialect:
    """The SQL dialect of ``conn``: ``sqlite3.Connection`` or psycopg 3's (synchronous) ``Connection``, subclasses
    included. psycopg is recognised by its class, never imported.

    :raises TypeError: any other object (psycopg2, an async connection, a cursor, a pool): paramstyles differ.
    :raises RuntimeError: SQLite older than 3.35.0 (no ``RETURNING``).
    """
    if isinstance(conn, sqlite3.Connection):
        if sqlite3.sqlite_version_info < MIN_SQLITE_VERSION:
            raise RuntimeError(
                f"{ADAPTER} needs SQLite 3.35.0 or later (INSERT … RETURNING), but this Python links "
                f"SQLite {sqlite3.sqlite_version}"
            )
        return _SQLITE
    for cls in type(conn).__mro__:
        if cls.__name__ == "Connection" and (cls.__module__ == "psycopg" or cls.__module__.startswith("psycopg.")):
            return _POSTGRESQL
    kind = type(conn)
    raise TypeError(
        f"{ADAPTER} takes a sqlite3.Connection or a psycopg 3 Connection, but {kind.__module__}.{kind.__qualname__} "
        "was given (other drivers use other paramstyles)"
    )


def _quote_identifier(name: str, *, what: str, qualified: bool = False) -> str:
    """``name`` double-quoted for SQL, after checking it is a plain identifier: 1 to 63 ASCII letters, digits or
    ``_``, not starting with a digit (with ``qualified=True``, optionally ``schema.name``). Quoted names match
    exactly: PostgreSQL folds unquoted names to lower case, so pass ``orders``, not ``Orders``, for a table created
    as ``CREATE TABLE Orders``.

    :raises InvalidEffectCall: anything else (no name ever reaches SQL unchecked: values go as parameters).
    """
    parts = name.split(".") if isinstance(name, str) and qualified else [name]
    if len(parts) > 2 or not all(isinstance(p, str) and _IDENTIFIER.fullmatch(p) for p in parts):
        shape = "name or schema.name" if qualified else "name"
        raise InvalidEffectCall(
            f"{ADAPTER}: {what} {name!r} is not a plain identifier ({shape}, each 1 to {MAX_IDENTIFIER_CHARS} "
            "ASCII letters, digits or _, not starting with a digit)"
        )
    return ".".join(f'"{p}"' for p in parts)


@dataclass(frozen=True)
class _Statement:
    table: str
    key: str
    insert: str
    insert_params: tuple[Any, ...]
    read_back: str
    read_back_params: tuple[Any, ...]
    compared: tuple[str, ...]
    quoted_table: str


def _statements(
    dialect: _Dialect,
    *,
    table: str,
    key_column: str,
    row: Mapping[str, Any],
    key: str,
    compared: Sequence[str],
    returning: Sequence[str] | None,
) -> _Statement:
    quoted_table = _quote_identifier(table, what="table", qualified=True)
    quoted_key = _quote_identifier(key_column, what="key_column")
    columns = [_quote_identifier(c, what="column") for c in row]
    if returning is not None and (isinstance(returning, str) or not returning):
        raise InvalidEffectCall(f"{ADAPTER}: returning must be a non-empty sequence of column names, or None for all")
    shown = "*" if returning is None else ", ".join(_quote_identifier(c, what="returning column") for c in returning)
    ph = dialect.placeholder
    insert = (
        f"INSERT INTO {quoted_table} ({', '.join([quoted_key, *columns])}) "
        f"VALUES ({', '.join([ph] * (len(columns) + 1))}) "
        f"ON CONFLICT ({quoted_key}) DO NOTHING RETURNING {shown}"
    )
    return _Statement(
        table=table,
        key=key,
        insert=insert,
        insert_params=(key, *row.values()),
        read_back=f"SELECT {shown}, {{checks}} FROM {quoted_table} WHERE {quoted_key} = {ph}",
        read_back_params=(*(row[c] for c in compared), key),
        compared=tuple(compared),
        quoted_table=quoted_table,
    )


def _read_back_sql(conn: Any, dialect: _Dialect, statement: _Statement) -> str:
    """The replay's ``SELECT``: the stored row and, per compared column, whether it equals the given value as the
    column stores it (on PostgreSQL the value cast to the column's declared type, read from the catalog)."""
    types = _pg_column_types(conn, statement.quoted_table) if dialect.typed and statement.compared else {}
    ph = dialect.placeholder
    checks = [
        dialect.same.format(
            column=_quote_identifier(c, what="column"), value=f"CAST({ph} AS {types[c]})" if c in types else ph
        )
        for c in statement.compared
    ]
    return statement.read_back.replace("{checks}", ", ".join(checks) or "TRUE")


def _pg_column_types(conn: Any, quoted_table: str) -> dict[str, str]:
    """Column name -> declared type (``format_type``: the catalog's own spelling, safe to put in SQL)."""
    _names, rows = _fetch(conn, _POSTGRESQL, _PG_COLUMN_TYPES, (quoted_table,))
    return {str(name): str(declared) for name, declared in rows}


def _compared_columns(
    row: Mapping[str, Any], key_column: str, compare: Collection[str] | None, volatile: Collection[str]
) -> list[str]:
    for option, names in (("compare", compare or ()), ("volatile", volatile)):
        if isinstance(names, str):
            raise InvalidEffectCall(f"{ADAPTER}: {option} must be a collection of column names, not one string")
        unknown = sorted(set(names) - set(row))
        if unknown:
            raise InvalidEffectCall(f"{ADAPTER}: {option} names columns that are not in row: {unknown}")
    if key_column in row:
        raise InvalidEffectCall(
            f"{ADAPTER}: row must not contain the key column {key_column!r}: the adapter writes the effect key there"
        )
    chosen = list(row) if compare is None else [c for c in row if c in set(compare)]
    return [c for c in chosen if c not in set(volatile)]


def _fetch(conn: Any, dialect: _Dialect, sql: str, params: tuple[Any, ...]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one statement on a new cursor of ``conn`` and return its column names and rows as tuples (whatever row
    factory the connection has)."""
    cursor = conn.cursor()
    try:
        cursor.row_factory = None if dialect is _SQLITE else _tuple_rows
        cursor.execute(sql, params)
        rows = [tuple(r) for r in cursor.fetchall()]
        names = [d[0] for d in cursor.description or ()]
    finally:
        cursor.close()
    return names, rows


def insert_once(
    conn: Any,
    *,
    table: str,
    key_column: str,
    row: Mapping[str, Any],
    idempotency_key: str,
    name: str | None = None,
    compare: Collection[str] | None = None,
    volatile: Collection[str] = (),
    returning: Sequence[str] | None = None,
) -> SqlRow:
    """Insert ``row`` under the effect key, once: ``INSERT INTO table (key_column, *row) VALUES (...) ON CONFLICT
    (key_column) DO NOTHING RETURNING ...``. On a replay (the key is already stored) nothing is written; the stored
    row is read back (``SELECT ... WHERE key_column = key``), its compared columns are checked against ``row``, and
    it is returned. Runs inside the caller's transaction and never commits or rolls back.

    :param conn: a ``sqlite3.Connection`` (SQLite 3.35.0 or later) or a psycopg 3 ``Connection``, in the
        transaction that writes the business rows. In autocommit mode outside a transaction the row commits alone.
    :param table: the table, ``name`` or ``schema.name``; it has ``key_column`` as its primary key or under a
        ``UNIQUE`` constraint (``ON CONFLICT`` needs one), a text column holding at least 128 characters.
    :param key_column: the column the effect key is written to (never a column of ``row``).
    :param row: column name -> value, the other columns to write (may be empty). Values are sent as parameters, in
        the Python types the driver maps to the columns' types.
    :param idempotency_key: the key the declared effect was handed.
    :param name: the call's name when one effect calls this adapter more than once: the row is stored under
        ``<idempotency_key>#<name>``. :default: ``None``: under ``idempotency_key`` itself.
    :param compare: the columns of ``row`` checked against the stored row on a replay. :default: ``None``: every
        column of ``row`` except ``volatile``.
    :param volatile: columns of ``row`` never compared (a timestamp taken at call time). :default: none.
    :param returning: the columns returned. :default: ``None``: every column of the table (``RETURNING *``),
        database defaults and generated values included.
    :returns: ``SqlRow(row, inserted)``: the row as stored (what the insert returned, or on a replay what was read
        back: the same row, changed only where something updated it since) and whether this call inserted it.
    :raises SqlRowMismatch: (permanent) on a replay, the stored row differs from ``row`` in a compared column. The
        comparison runs in SQL, each value converted as the insert converted it: SQLite's ``IS`` applies the
        column's affinity; PostgreSQL's ``IS NOT DISTINCT FROM`` gets the value cast to the column's declared type
        (``real``, ``numeric(p,s)``, ``timestamptz(p)`` round). A type without equality (``json``) goes in ``volatile``.
    :raises SqlRowMissing: (transient) the insert conflicted, yet no row with the key could be read back.
    :raises TypeError: ``conn`` is neither driver's connection.
    :raises InvalidEffectCall: a table or column name that is not a plain identifier; ``row`` holds ``key_column``;
        ``compare`` or ``volatile`` names a column not in ``row``; ``returning`` is empty; the key is empty, or
        this effect already called this adapter with the same ``name`` (``adapter_key``).
    :raises RuntimeError: SQLite older than 3.35.0.
    :raises Exception: the driver's own errors pass through unchanged: no unique constraint on ``key_column``, a
        conflict on another unique constraint, a lock timeout, and in PostgreSQL at ``REPEATABLE READ`` or
        ``SERIALIZABLE`` a concurrent insert of the same key (``SerializationFailure``, SQLSTATE 40001: retry the
        transaction) and a deadlock with the caller's own statements (``DeadlockDetected``, 40P01). Both stay
        transient: keep their classes (``psycopg.OperationalError``) out of ``Consumer(permanent=...)``.
    """
    dialect = _dialect_of(conn)
    key = adapter_key(ADAPTER, idempotency_key, name)
    compared = _compared_columns(row, key_column, compare, volatile)
    statement = _statements(
        dialect, table=table, key_column=key_column, row=row, key=key, compared=compared, returning=returning
    )
    names, rows = _fetch(conn, dialect, statement.insert, statement.insert_params)
    if rows:
        return SqlRow(dict(zip(names, rows[0], strict=True)), inserted=True)
    return SqlRow(_read_back(conn, dialect, statement), inserted=False)


def _read_back(conn: Any, dialect: _Dialect, statement: _Statement) -> dict[str, Any]:
    names, rows = _fetch(conn, dialect, _read_back_sql(conn, dialect, statement), statement.read_back_params)
    if not rows:
        raise SqlRowMissing(
            f"{ADAPTER}: the insert into {statement.table} conflicted on key {statement.key!r}, but no row with that "
            "key could be read back (deleted in between, or a trigger dropped the insert)"
        )
    stored = rows[0]
    width = len(stored) - max(1, len(statement.compared))
    differing = [c for c, same in zip(statement.compared, stored[width:], strict=False) if not same]
    if differing:
        raise SqlRowMismatch(statement.table, statement.key, differing)
    return dict(zip(names[:width], stored[:width], strict=True))
