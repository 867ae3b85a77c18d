"""Every SQL commit is a kill point, however the code commits (``chaos/sql_watch.py``; issue 30, item 4): sqlite3's
``commit()``, ``with conn:``, a ``COMMIT`` statement and writes in autocommit mode; psycopg 3's ``commit()``,
``with conn:``, ``with conn.transaction():`` (the outermost block only) and writes in autocommit mode. Rollbacks,
reads, released savepoints and a ``commit()`` with nothing open are none. Each case counts the commits seen and
checks the rows the database holds after it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.chaos.faults import EFFECT
from effectively_once_local.chaos.sql_watch import SQL_COMMIT, SqlCommitWatch

from .. import postgres_server
from ..postgres_server import PostgresServer


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The commits seen, with the drivers watched for this test only (every patched attribute restored after)."""
    import psycopg

    monkeypatch.setattr(sqlite3, "connect", sqlite3.connect)
    for cls, name in ((psycopg.Connection, "commit"), (psycopg.Transaction, "__exit__")):
        monkeypatch.setattr(cls, name, getattr(cls, name))
    for name in ("execute", "executemany"):
        monkeypatch.setattr(psycopg.Cursor, name, getattr(psycopg.Cursor, name))
    found: list[dict[str, Any]] = []
    assert SqlCommitWatch(found.append).install() == ["sqlite3.Connection", "psycopg.Connection"]
    return found


def _sqlite(tmp_path: Path, **kwargs: Any) -> sqlite3.Connection:
    db = sqlite3.connect(tmp_path / "effects.db", **kwargs)
    db.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)")
    db.commit()
    return db


def _rows(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "effects.db") as other:
        return [k for (k,) in other.execute("SELECT k FROM t ORDER BY k")]


def test_sqlite_commit_and_with_conn_are_commits_a_rollback_is_none(seen: list[dict[str, Any]], tmp_path: Path) -> None:
    db = _sqlite(tmp_path)
    seen.clear()  # the table's creation
    after: list[int] = []  # the commits seen after each step
    db.execute("INSERT INTO t VALUES ('a')")
    db.rollback()
    after.append(len(seen))
    db.execute("INSERT INTO t VALUES ('b')")
    db.commit()
    after.append(len(seen))
    db.commit()  # nothing open: no commit
    after.append(len(seen))
    with db:
        db.execute("INSERT INTO t VALUES ('c')")
    after.append(len(seen))
    with pytest.raises(ZeroDivisionError), db:
        db.execute("INSERT INTO t VALUES ('d')")
        _ = 1 / 0
    after.append(len(seen))

    assert after == [0, 1, 1, 2, 2]
    assert [(w["op"], w["role"]) for w in seen] == [(SQL_COMMIT, EFFECT)] * 2
    assert seen[0]["target"].endswith("WatchedConnection")
    assert _rows(tmp_path) == ["b", "c"]


def test_sqlite_statements_that_commit_are_commits(seen: list[dict[str, Any]], tmp_path: Path) -> None:
    auto = _sqlite(tmp_path, isolation_level=None)
    seen.clear()
    auto.execute("INSERT INTO t VALUES ('a')")  # autocommit: committed on its own
    auto.cursor().execute("INSERT INTO t VALUES ('b')")
    auto.executemany("INSERT INTO t VALUES (?)", [("c",), ("d",)])
    auto.execute("SELECT k FROM t").fetchall()  # a read: none
    auto.execute("UPDATE t SET k = 'x' WHERE k = 'none'")  # no row changed: none
    auto.execute("BEGIN")
    auto.execute("INSERT INTO t VALUES ('e')")
    auto.execute("ROLLBACK")
    auto.execute("BEGIN")
    auto.execute("INSERT INTO t VALUES ('f')")
    auto.execute("COMMIT")
    auto.executescript("INSERT INTO t VALUES ('g');")

    assert len(seen) == 5
    assert _rows(tmp_path) == ["a", "b", "c", "d", "f", "g"]


def test_a_commit_is_seen_after_it_happened(seen: list[dict[str, Any]], tmp_path: Path) -> None:
    """What the watch hands on is what a kill follows: the rows are committed when it runs."""
    db = _sqlite(tmp_path)
    at_commit: list[list[str]] = []
    SqlCommitWatch(lambda _: at_commit.append(_rows(tmp_path))).install()
    db.close()
    db = sqlite3.connect(tmp_path / "effects.db")
    with db:
        db.execute("INSERT INTO t VALUES ('a')")

    assert at_commit == [["a"]]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    yield from postgres_server.fixture()


def _table(server: PostgresServer) -> None:
    import psycopg

    with psycopg.connect(server.dsn, autocommit=True) as admin:
        admin.execute("DROP TABLE IF EXISTS t")
        admin.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")


def _pg_rows(server: PostgresServer) -> list[str]:
    import psycopg

    with psycopg.connect(server.dsn, autocommit=True) as other:
        return [k for (k,) in other.execute("SELECT k FROM t ORDER BY k")]


def test_psycopg_transaction_blocks_and_with_conn_are_commits(
    seen: list[dict[str, Any]], postgres: PostgresServer
) -> None:
    import psycopg

    _table(postgres)
    seen.clear()
    conn = psycopg.connect(postgres.dsn)
    after: list[int] = []  # the commits seen after each step
    with conn.transaction():  # the docs' pattern (docs/effects.md, "SQL")
        conn.execute("INSERT INTO t VALUES ('a')")
        with conn.transaction():  # a savepoint, released: no commit
            conn.execute("INSERT INTO t VALUES ('b')")
        after.append(len(seen))
    after.append(len(seen))
    with pytest.raises(ZeroDivisionError), conn.transaction():
        conn.execute("INSERT INTO t VALUES ('c')")
        _ = 1 / 0
    after.append(len(seen))
    conn.execute("INSERT INTO t VALUES ('d')")
    conn.commit()
    after.append(len(seen))
    conn.commit()  # nothing open: no commit
    after.append(len(seen))
    conn.execute("INSERT INTO t VALUES ('e')")
    conn.execute("COMMIT")
    after.append(len(seen))
    with conn:  # commits, then closes
        conn.execute("INSERT INTO t VALUES ('f')")
    after.append(len(seen))

    assert after == [0, 1, 1, 2, 2, 3, 4]
    assert [(w["op"], w["role"]) for w in seen] == [(SQL_COMMIT, EFFECT)] * 4
    assert {w["target"] for w in seen} == {"psycopg.Connection"}
    assert _pg_rows(postgres) == ["a", "b", "d", "e", "f"]


def test_psycopg_writes_in_autocommit_are_commits_reads_are_none(
    seen: list[dict[str, Any]], postgres: PostgresServer
) -> None:
    import psycopg

    _table(postgres)
    seen.clear()
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO t VALUES ('a')")
        conn.cursor().executemany("INSERT INTO t VALUES (%s)", [("b",), ("c",)])
        conn.execute("UPDATE t SET k = 'z' WHERE k = 'c'")
        conn.execute("SELECT k FROM t").fetchall()
        with conn.transaction():  # autocommit on, a block: one commit at its end
            conn.execute("DELETE FROM t WHERE k = 'z'")

    assert len(seen) == 4
    assert _pg_rows(postgres) == ["a", "b"]
