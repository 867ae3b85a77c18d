"""The SQL effect adapter (``effects.sql.insert_once``) against SQLite (a file database) and a real PostgreSQL server
(``tests/postgres_server.py``: started once per pytest-xdist worker; a skip outside CI, a failure in CI).

Every case runs on both drivers: the first insert, a replay, a different row under the same key, ``name=``, the
caller's rollback and commit, unsupported connections and bad identifiers."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from effectively_once_runtime.effects import sql
from effectively_once_runtime.effects._context import EffectCall, running
from effectively_once_runtime.effects.sql import SqlRow, SqlRowMismatch, SqlRowMissing, insert_once
from effectively_once_runtime.errors import InvalidEffectCall, PermanentError
from tests import postgres_server
from tests.postgres_server import PostgresServer

KEY = "shop#confirm#o-1"
ROW = {"order_id": "o-1", "amount": 4242}
TABLES = (
    "CREATE TABLE orders (order_id TEXT PRIMARY KEY, status TEXT NOT NULL)",
    "CREATE TABLE accounts (account_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)",
    "CREATE TABLE effects (effect_key TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount INTEGER NOT NULL, "
    "note TEXT, state TEXT NOT NULL DEFAULT 'new')",
)
STORED = {"effect_key": KEY, "order_id": "o-1", "amount": 4242, "note": None, "state": "new"}


@dataclass
class Db:
    """One test's database: ``conn`` in a transaction, the tables of ``TABLES`` committed and empty."""

    kind: str  # "sqlite" or "postgresql"
    conn: Any
    connect: Callable[[], Any]  # another connection to the same database
    schema: str  # the default schema's name: "main" or "public"
    opened: list[Any] = field(default_factory=list)

    def run(self, statement: str, params: tuple[Any, ...] = (), conn: Any = None) -> list[tuple[Any, ...]]:
        """``statement`` with ``?`` placeholders on ``conn`` (default: the test's connection); its rows."""
        if self.kind == "postgresql":
            statement = statement.replace("?", "%s")
        cursor = (conn or self.conn).cursor()
        try:
            cursor.execute(statement, params)
            return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        finally:
            cursor.close()

    def other(self) -> Any:
        conn = self.connect()
        self.opened.append(conn)
        return conn

    def count(self, table: str, conn: Any = None) -> int:
        return int(self.run(f"SELECT count(*) FROM {table}", conn=conn)[0][0])

    def committed(self, table: str) -> int:
        """Rows of ``table`` another connection sees: the committed ones."""
        other = self.other()
        try:
            return self.count(table, conn=other)
        finally:
            other.rollback()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    yield from postgres_server.fixture()


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:  # requirements-dev.txt pins it
        postgres_server.unavailable("psycopg is not installed: pip install -r requirements-dev.txt")
    return psycopg


def _sqlite_db(tmp_path: Path) -> Db:
    path = tmp_path / "effects.db"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(path, timeout=0.2)

    conn = connect()
    for statement in TABLES:
        conn.execute(statement)
    conn.commit()
    return Db("sqlite", conn, connect, "main", [conn])


def _postgresql_db(server: PostgresServer) -> Db:
    psycopg = _psycopg()
    with psycopg.connect(server.dsn, autocommit=True) as admin:
        admin.execute("DROP SCHEMA IF EXISTS public CASCADE")
        admin.execute("CREATE SCHEMA public")
        for statement in TABLES:
            admin.execute(statement)

    def connect() -> Any:
        return psycopg.connect(server.dsn)

    conn = connect()
    return Db("postgresql", conn, connect, "public", [conn])


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        made = _sqlite_db(tmp_path)
    else:
        made = _postgresql_db(request.getfixturevalue("postgres"))
    try:
        yield made
    finally:
        for conn in made.opened:
            conn.close()  # rolls back what a test left open: the next test's DROP SCHEMA must not wait for it


@pytest.fixture
def pg_db(postgres: PostgresServer) -> Iterator[Db]:
    made = _postgresql_db(postgres)
    try:
        yield made
    finally:
        for conn in made.opened:
            conn.close()


def insert(conn: Any, **overrides: Any) -> SqlRow:
    arguments: dict[str, Any] = {
        "table": "effects",
        "key_column": "effect_key",
        "row": ROW,
        "idempotency_key": KEY,
    }
    arguments.update(overrides)
    return insert_once(conn, **arguments)


# --- first insert and replays ---------------------------------------------------------------------------------------
def test_the_first_insert_returns_the_stored_row_with_its_defaults(db: Db) -> None:
    assert insert(db.conn) == SqlRow(STORED, inserted=True)
    assert db.run("SELECT effect_key, order_id, amount, note, state FROM effects") == [tuple(STORED.values())]


def test_a_replay_returns_the_stored_row_without_writing_a_second(db: Db) -> None:
    insert(db.conn)
    db.conn.commit()
    db.run("UPDATE effects SET state = 'sent'")  # the stored row changed since: a replay reads it, never echoes
    db.conn.commit()

    replayed = insert(db.conn)

    assert replayed == SqlRow({**STORED, "state": "sent"}, inserted=False)
    assert db.count("effects") == 1


def test_fails_a_different_row_under_the_same_key_naming_the_columns_never_the_values(db: Db) -> None:
    insert(db.conn)

    with pytest.raises(SqlRowMismatch) as raised:
        insert(db.conn, row={"order_id": "o-1", "amount": 9191, "note": "secret-note"})

    error = raised.value
    assert isinstance(error, PermanentError)
    assert (error.table, error.key, error.columns) == ("effects", KEY, ["amount", "note"])
    message = str(error)
    assert KEY in message and "'amount', 'note'" in message
    assert not any(value in message for value in ("4242", "9191", "secret-note"))
    # the comparison is a plain SELECT: the caller's transaction is still usable
    assert db.count("effects") == 1


def test_volatile_and_compare_leave_columns_out_of_the_comparison(db: Db) -> None:
    insert(db.conn, row={**ROW, "note": "first"})

    assert insert(db.conn, row={**ROW, "note": "second"}, volatile=["note"]).row["note"] == "first"
    assert insert(db.conn, row={**ROW, "amount": 1}, compare=["order_id"]).row["amount"] == 4242
    with pytest.raises(SqlRowMismatch, match=r"\['amount'\]"):
        insert(db.conn, row={**ROW, "amount": 1, "note": "second"}, volatile=["note"])


def test_values_are_compared_as_their_column_stores_them(db: Db) -> None:
    insert(db.conn, row={"order_id": "o-1", "amount": "4242"})  # text converted by the column's type on insert

    assert insert(db.conn) == SqlRow(STORED, inserted=False)  # int 4242 = the stored 4242, compared in SQL


#: Columns that round what they store (issue 33, item 2), and one that does not (the control).
ROUNDING = (
    "CREATE TABLE rounded (effect_key TEXT PRIMARY KEY, r REAL, n NUMERIC(10,2), c CHAR(5), v VARCHAR(8), "
    "d DOUBLE PRECISION{timestamp})"
)
ROUNDED_ROW: dict[str, Any] = {"r": 0.1, "n": Decimal("12.345"), "c": "ab", "v": "abc", "d": 0.1}


def _rounding_table(db: Db) -> dict[str, Any]:
    """The table, in the test's transaction, and the row to write; PostgreSQL gets a ``TIMESTAMPTZ(0)`` too (SQLite
    has no timestamp type: the driver's text)."""
    postgres = db.kind == "postgresql"
    db.run(ROUNDING.format(timestamp=", t TIMESTAMPTZ(0)" if postgres else ""))
    row = dict(ROUNDED_ROW) if postgres else {**ROUNDED_ROW, "n": 12.345}
    if postgres:
        row["t"] = datetime(2026, 12, 5, 8, 0, 0, 654321, tzinfo=UTC)
    return row


def test_a_replay_is_compared_as_the_columns_stored_the_first_insert(db: Db) -> None:
    """Before the change, on PostgreSQL, ``real`` with 0.1, ``numeric(10,2)`` with 12.345 and ``timestamptz(0)`` with
    microseconds made a genuine replay a ``SqlRowMismatch`` (permanent: the DLQ on first sight, and again on every
    redrive): the value was compared as given, not as its column stored it."""
    row = _rounding_table(db)
    first = insert_once(db.conn, table="rounded", key_column="effect_key", row=row, idempotency_key=KEY)

    again = insert_once(db.conn, table="rounded", key_column="effect_key", row=row, idempotency_key=KEY)

    assert (first.inserted, again.inserted) == (True, False)
    assert again.row == first.row
    assert db.count("rounded") == 1


@pytest.mark.parametrize(
    ("column", "other"),
    [("r", 0.2), ("n", Decimal("12.36")), ("c", "abd"), ("v", "abcd"), ("d", 0.1000001)],
)
def test_a_different_value_is_still_a_mismatch_after_the_cast(db: Db, column: str, other: Any) -> None:
    row = _rounding_table(db)
    insert_once(db.conn, table="rounded", key_column="effect_key", row=row, idempotency_key=KEY)

    with pytest.raises(SqlRowMismatch) as raised:
        changed = {**row, column: float(other) if db.kind == "sqlite" and isinstance(other, Decimal) else other}
        insert_once(db.conn, table="rounded", key_column="effect_key", row=changed, idempotency_key=KEY)

    assert raised.value.columns == [column]


def test_returning_names_the_columns_given_back(db: Db) -> None:
    assert insert(db.conn, returning=["state", "amount"]).row == {"state": "new", "amount": 4242}
    assert insert(db.conn, returning=["state", "amount"]) == SqlRow({"state": "new", "amount": 4242}, False)


def test_rows_come_back_as_dicts_whatever_the_connections_row_factory(db: Db) -> None:
    if db.kind == "sqlite":
        db.conn.row_factory = sqlite3.Row
    else:
        db.conn.row_factory = _psycopg().rows.namedtuple_row

    assert insert(db.conn) == SqlRow(STORED, inserted=True)
    assert insert(db.conn) == SqlRow(STORED, inserted=False)


def test_inserted_gates_the_writes_a_replay_must_not_repeat(db: Db) -> None:
    db.run("INSERT INTO accounts (account_id, balance) VALUES ('a-1', 10000)")
    db.conn.commit()

    def pay(order: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:  # the docs' example, both drivers
        entry = insert_once(
            db.conn,
            table="effects",
            key_column="effect_key",
            row={"order_id": order["id"], "amount": order["total"]},
            idempotency_key=idempotency_key,
        )
        if entry.inserted:
            db.run("UPDATE accounts SET balance = balance - ? WHERE account_id = 'a-1'", (order["total"],))
        db.conn.commit()
        return entry.row

    first = pay({"id": "o-1", "total": 4242}, idempotency_key=KEY)
    replayed = pay({"id": "o-1", "total": 4242}, idempotency_key=KEY)  # a kill before the record completed

    assert first == replayed == STORED
    assert db.run("SELECT balance FROM accounts") == [(10000 - 4242,)]


# --- name= -----------------------------------------------------------------------------------------------------------
def test_name_gives_each_call_its_own_row(db: Db) -> None:
    deposit = insert(db.conn, name="deposit")
    fee = insert(db.conn, name="fee", row={"order_id": "o-1", "amount": 50})
    insert(db.conn, name="deposit")  # a replay of the first

    assert (deposit.row["effect_key"], fee.row["effect_key"]) == (f"{KEY}#deposit", f"{KEY}#fee")
    assert sorted(db.run("SELECT effect_key, amount FROM effects")) == [(f"{KEY}#deposit", 4242), (f"{KEY}#fee", 50)]


def test_fails_the_same_name_twice_in_one_effect(db: Db) -> None:
    with running(EffectCall(record_key="o-1", effect="confirm", effect_key=KEY)):
        insert(db.conn)
        with pytest.raises(InvalidEffectCall, match="called twice in effect 'confirm'"):
            insert(db.conn)
        insert(db.conn, name="second")

    assert db.count("effects") == 2


# --- the caller's transaction ---------------------------------------------------------------------------------------
def test_a_rollback_by_the_caller_removes_the_effect_row_with_the_business_row(db: Db) -> None:
    db.run("INSERT INTO orders (order_id, status) VALUES (?, ?)", ("o-1", "confirmed"))
    insert(db.conn)
    db.conn.rollback()

    assert (db.count("orders"), db.count("effects")) == (0, 0)
    db.run("UPDATE effects SET state = 'sent'")  # would mark a stored row; there is none, so the next is an insert
    assert insert(db.conn) == SqlRow(STORED, inserted=True)


def test_a_commit_by_the_caller_keeps_both_and_the_adapter_never_commits(db: Db) -> None:
    db.run("INSERT INTO orders (order_id, status) VALUES (?, ?)", ("o-1", "confirmed"))
    insert(db.conn)

    assert (db.committed("orders"), db.committed("effects")) == (0, 0)
    db.conn.commit()
    assert (db.committed("orders"), db.committed("effects")) == (1, 1)


# --- names and arguments --------------------------------------------------------------------------------------------
def test_schema_qualified_and_reserved_word_names_are_quoted(db: Db) -> None:
    db.run('CREATE TABLE "select" ("from" TEXT PRIMARY KEY, "where" INTEGER)')

    assert insert(db.conn, table=f"{db.schema}.effects").row == STORED
    stored = insert(db.conn, table="select", key_column="from", row={"where": 1})
    assert stored == SqlRow({"from": KEY, "where": 1}, inserted=True)
    assert insert(db.conn, table="select", key_column="from", row={"where": 1}).row == stored.row


BAD_NAMES = [
    pytest.param({"table": "effects; DROP TABLE orders"}, "table", id="statement-in-table"),
    pytest.param({"table": 'effects"'}, "table", id="quote-in-table"),
    pytest.param({"table": "1effects"}, "table", id="leading-digit"),
    pytest.param({"table": "a.b.effects"}, "table", id="three-parts"),
    pytest.param({"table": "e" * 64}, "table", id="64-characters"),
    pytest.param({"table": "effects\n"}, "table", id="trailing-newline"),
    pytest.param({"key_column": "effect_key) VALUES ('x'); --"}, "key_column", id="statement-in-key-column"),
    pytest.param({"key_column": "public.effect_key"}, "key_column", id="qualified-column"),
    pytest.param({"row": {"amount) VALUES (1); --": 1}}, "column", id="statement-in-row-column"),
    pytest.param({"returning": ["*"]}, "returning column", id="star-in-returning"),
]


@pytest.mark.parametrize(("bad", "what"), BAD_NAMES)
def test_fails_a_name_that_is_not_a_plain_identifier(db: Db, bad: dict[str, Any], what: str) -> None:
    with pytest.raises(InvalidEffectCall, match=f"{what} .* is not a plain identifier"):
        insert(db.conn, **bad)

    assert (db.count("orders"), db.count("effects")) == (0, 0)


BAD_ARGUMENTS = [
    pytest.param({"row": {**ROW, "effect_key": "x"}}, "must not contain the key column", id="key-column-in-row"),
    pytest.param({"compare": ["missing"]}, r"compare names columns that are not in row: \['missing'\]", id="compare"),
    pytest.param({"volatile": "amount"}, "volatile must be a collection", id="volatile-string"),
    pytest.param(
        {"volatile": ["missing"]}, r"volatile names columns that are not in row: \['missing'\]", id="volatile"
    ),
    pytest.param({"returning": []}, "returning must be a non-empty sequence", id="returning-empty"),
    pytest.param({"idempotency_key": ""}, "idempotency_key must be the non-empty key", id="empty-key"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_ARGUMENTS)
def test_fails_bad_arguments(db: Db, bad: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidEffectCall, match=message):
        insert(db.conn, **bad)

    assert db.count("effects") == 0


def test_fails_an_unsupported_connection_naming_its_type(db: Db) -> None:
    cursor = db.conn.cursor()
    try:
        with pytest.raises(TypeError, match=r"takes a sqlite3.Connection or a psycopg 3 Connection, but .*Cursor"):
            insert(cursor)
    finally:
        cursor.close()
    assert db.count("effects") == 0


@pytest.mark.parametrize(
    ("module", "name"),
    [("psycopg2.extensions", "connection"), ("psycopg", "AsyncConnection"), ("builtins", "object")],
)
def test_fails_a_connection_of_another_driver(module: str, name: str) -> None:
    lookalike = type(name, (), {"__module__": module})()

    with pytest.raises(TypeError, match=f"but {module}.{name} was given"):
        insert(lookalike)


def test_subclassed_connections_are_recognised(db: Db) -> None:
    if db.kind == "sqlite":

        class Mine(sqlite3.Connection):
            pass

        conn = sqlite3.connect(":memory:", factory=Mine)
        conn.execute(TABLES[-1])  # effects
    else:
        psycopg = _psycopg()

        class MinePg(psycopg.Connection):  # type: ignore[name-defined,misc]
            pass

        conn = MinePg.connect(db.conn.info.dsn)
        db.opened.append(conn)
    assert insert(conn) == SqlRow(STORED, inserted=True)


def test_fails_on_sqlite_without_returning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 34, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.34.1")

    with pytest.raises(RuntimeError, match=r"needs SQLite 3.35.0 or later .* links SQLite 3.34.1"):
        insert(sqlite3.connect(":memory:"))


# --- failure modes --------------------------------------------------------------------------------------------------
DROP_EVERY_INSERT = {
    "sqlite": ["CREATE TRIGGER drop_all BEFORE INSERT ON effects BEGIN SELECT RAISE(IGNORE); END"],
    "postgresql": [
        "CREATE FUNCTION drop_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END; $$;",
        "CREATE TRIGGER drop_all BEFORE INSERT ON effects FOR EACH ROW EXECUTE FUNCTION drop_row()",
    ],
}


def test_fails_transiently_when_nothing_can_be_read_back(db: Db) -> None:
    for statement in DROP_EVERY_INSERT[db.kind]:
        db.run(statement)

    with pytest.raises(SqlRowMissing, match="conflicted on key 'shop#confirm#o-1', but no row") as raised:
        insert(db.conn)
    assert not isinstance(raised.value, PermanentError)


def test_fails_without_a_unique_constraint_on_the_key_column(db: Db) -> None:
    db.run("CREATE TABLE loose (effect_key TEXT, amount INTEGER)")

    with pytest.raises(Exception, match="(?i)constraint") as raised:
        insert(db.conn, table="loose", row={"amount": 1})
    assert not isinstance(raised.value, (ValueError, PermanentError))  # the driver's own error, unchanged


def test_fails_with_the_drivers_own_error_on_a_conflict_on_another_unique_constraint(db: Db) -> None:
    """Issue 55, item 6b: ``ON CONFLICT (key_column)`` answers the key alone; another unique column's conflict is the
    driver's error, unchanged, and writes nothing."""
    db.run("CREATE TABLE seats (effect_key TEXT PRIMARY KEY, seat TEXT UNIQUE)")
    insert(db.conn, table="seats", row={"seat": "12A"}, name="first")

    with pytest.raises(Exception, match="(?i)unique|duplicate") as raised:
        insert(db.conn, table="seats", row={"seat": "12A"}, name="second")

    assert not isinstance(raised.value, (ValueError, PermanentError, SqlRowMissing))
    if db.kind == "postgresql":
        assert type(raised.value).__name__ == "UniqueViolation"
        with pytest.raises(_psycopg().errors.InFailedSqlTransaction):  # it aborted the caller's transaction
            db.count("seats")
    else:
        assert isinstance(raised.value, sqlite3.IntegrityError)
        assert db.run("SELECT effect_key FROM seats") == [(f"{KEY}#first",)]


def test_postgresql_a_deadlock_the_driver_reports_passes_through_unchanged(pg_db: Db) -> None:
    """Issue 55, item 6b: the adapter catches none of the driver's errors, so ``DeadlockDetected`` (SQLSTATE 40P01)
    stays the transient error it is. The deadlock itself is the driver's (raised by its cursor here, with no second
    session and no waiting): what is checked is that ``insert_once`` neither wraps nor swallows it."""
    psycopg = _psycopg()

    class DeadlockingCursor(psycopg.Cursor):  # type: ignore[name-defined,misc]
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            raise psycopg.errors.DeadlockDetected("deadlock detected")

    conn = psycopg.connect(pg_db.conn.info.dsn, cursor_factory=DeadlockingCursor)
    pg_db.opened.append(conn)

    with pytest.raises(psycopg.errors.DeadlockDetected) as raised:
        insert(conn)

    assert raised.value.sqlstate == "40P01" and not isinstance(raised.value, PermanentError)
    assert pg_db.committed("effects") == 0


def _lock_waiters(db: Db) -> int:
    admin = db.other()
    admin.autocommit = True
    try:
        return db.count("pg_stat_activity WHERE wait_event_type = 'Lock'", conn=admin)
    finally:
        admin.close()


def test_postgresql_a_concurrent_insert_waits_for_the_first_and_returns_its_row(pg_db: Db) -> None:
    second = pg_db.other()
    insert(pg_db.conn)  # not committed yet: the second insert of the key waits on its row lock

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(insert, second)
        deadline = time.monotonic() + 5
        while _lock_waiters(pg_db) == 0 and not waiting.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not waiting.done(), "the second insert should wait for the first transaction"
        pg_db.conn.commit()
        replayed = waiting.result(timeout=5)

    assert replayed == SqlRow(STORED, inserted=False)
    second.commit()
    assert pg_db.committed("effects") == 1


def test_sqlite_a_concurrent_insert_fails_transiently_when_the_lock_wait_ends(tmp_path: Path) -> None:
    db = _sqlite_db(tmp_path)
    second = db.other()  # timeout=0.2 s
    try:
        insert(db.conn)  # not committed: the database's write lock stays held

        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            insert(second)
        db.conn.commit()
        assert insert(second) == SqlRow(STORED, inserted=False)
    finally:
        for conn in db.opened:
            conn.close()


def test_postgresql_repeatable_read_raises_a_serialization_failure_on_a_concurrent_insert(pg_db: Db) -> None:
    psycopg = _psycopg()
    second = pg_db.other()
    second.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    second.execute("SELECT 1")  # its snapshot is taken before the first insert commits
    insert(pg_db.conn)
    pg_db.conn.commit()

    with pytest.raises(psycopg.errors.SerializationFailure):
        insert(second)


def test_the_module_imports_no_driver() -> None:
    source = Path(sql.__file__).read_text(encoding="utf-8")

    assert "import psycopg" not in source and "from psycopg" not in source


# --- the server fixture ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), (None, pytest.skip.Exception)])
def test_a_server_that_cannot_start_fails_in_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, ci: str | None, outcome: type[BaseException]
) -> None:
    def no_binaries() -> Path:
        raise postgres_server.PostgresUnavailable("no initdb here")

    monkeypatch.setattr(postgres_server, "bin_dir", no_binaries)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)

    with pytest.raises(outcome, match="PostgreSQL server: no initdb here"):
        next(postgres_server.fixture())
