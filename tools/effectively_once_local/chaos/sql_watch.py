"""SQL commits as kill points: every commit of a ``sqlite3`` or psycopg 3 connection of the process, however the code
under test commits, is seen like an accepted write (``chaos/faults.py``): ``{"op": "sql.commit", "role": "effect"}``,
numbered, logged and a kill point. A kill right after it leaves the rows committed and the record not completed,
the moment the SQL adapter's replay is there for.

A commit, per driver (what the docs' own patterns use, docs/effects.md, "SQL"):

- **sqlite3:** ``conn.commit()``; ``with conn:`` (its ``__exit__`` commits when the block raised nothing); and a
  statement run by ``conn.execute``/``executemany``/``executescript`` or by a cursor of ``conn.cursor()`` after which
  no transaction is open while one was open before or the statement changed rows: a ``COMMIT`` statement, or any
  write in autocommit mode (``isolation_level=None``, or ``autocommit=True`` on Python 3.12+). A ``ROLLBACK`` is
  none. ``sqlite3.connect`` is wrapped to build a watched subclass (the ``Connection`` type is immutable); a cursor
  from a ``cursor(factory=...)`` of the caller's own is not watched.
- **psycopg 3:** ``conn.commit()`` with a transaction open; ``with conn:`` (its ``__exit__`` calls ``commit()``);
  ``with conn.transaction():`` when the block is the outermost one (``Transaction.status`` ``COMMITTED`` and the
  connection idle after it: leaving a nested block only releases a savepoint); and a cursor's ``execute`` or
  ``executemany`` whose status is ``COMMIT``, or, on an autocommit connection outside a transaction block,
  ``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE`` or ``COPY`` (the server's command tag: PostgreSQL protocol,
  "CommandComplete"). ``Connection``, ``Transaction`` and ``Cursor`` are patched in place.

psycopg's asynchronous classes are not watched: the runtime's SQL adapter refuses them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .faults import EFFECT
from .write_services import SqlCommits

#: The operation name of a commit in the chaos log and the reports.
SQL_COMMIT = f"{SqlCommits.name}.commit"
_SQL = SqlCommits()
#: The drivers watched: (module, connection class).
SQL_CONNECTIONS = (("sqlite3", "Connection"), ("psycopg", "Connection"))
#: PostgreSQL command tags of a statement that changed rows, committed on its own in autocommit mode.
AUTOCOMMIT_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE", "COPY"})


class SqlCommitWatch:
    """Hands each commit (module docstring) to ``on_write`` as ``{"op": "sql.commit", "target": <connection
    class>, "role": "effect", "record_id": None, "items": []}``, like ``faults.WriteWatch`` does an accepted write;
    :meth:`install` wraps the drivers that import."""

    def __init__(self, on_write: Callable[[dict[str, Any]], None]) -> None:
        self._on_write = on_write

    def committed(self, connection: Any) -> None:
        """One commit of ``connection``: the write handed on."""
        self._on_write(
            {
                "op": SQL_COMMIT,
                "target": _SQL.target({"connection": connection}),
                "role": EFFECT,
                "record_id": None,
                "items": [],
            }
        )

    def install(self) -> list[str]:
        """Wrap the drivers found; returns the ``module.Class`` names watched."""
        watched = []
        for module_name, class_name in SQL_CONNECTIONS:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            if module_name == "sqlite3":
                _wrap_sqlite(module, self)
            else:
                _wrap_psycopg(module, self)
            watched.append(f"{module_name}.{class_name}")
        return watched


def _sqlite_cursor_class(sqlite3: Any, watch: SqlCommitWatch) -> type:
    """A ``sqlite3.Cursor`` whose statements report the commits they make (module docstring)."""

    class WatchedCursor(sqlite3.Cursor):  # type: ignore[misc]
        def _run(self, method: Callable[..., Any], sql: str, *args: Any) -> Any:
            connection = self.connection
            was_open, changes = connection.in_transaction, connection.total_changes
            result = method(self, sql, *args)
            rollback = sql.lstrip().upper().startswith("ROLLBACK")
            if not connection.in_transaction and not rollback and (was_open or connection.total_changes > changes):
                watch.committed(connection)
            return result

        def execute(self, sql: str, *args: Any) -> Any:
            return self._run(sqlite3.Cursor.execute, sql, *args)

        def executemany(self, sql: str, *args: Any) -> Any:
            return self._run(sqlite3.Cursor.executemany, sql, *args)

        def executescript(self, sql: str) -> Any:
            return self._run(sqlite3.Cursor.executescript, sql)

    return WatchedCursor


def _wrap_sqlite(sqlite3: Any, watch: SqlCommitWatch) -> None:
    """``sqlite3.connect`` builds a watched ``Connection`` subclass unless the caller names a ``factory``."""
    cursor_class = _sqlite_cursor_class(sqlite3, watch)

    class WatchedConnection(sqlite3.Connection):  # type: ignore[misc]
        def commit(self) -> None:
            was_open = self.in_transaction
            super().commit()
            if was_open:
                watch.committed(self)

        def __exit__(self, exc_type: Any, *rest: Any) -> Any:
            was_open = self.in_transaction
            result = super().__exit__(exc_type, *rest)
            if exc_type is None and was_open and not self.in_transaction:
                watch.committed(self)
            return result

        def cursor(self, factory: Any = None) -> Any:
            return super().cursor(cursor_class if factory is None else factory)

        # As CPython's own: a new cursor runs the statement, and is returned.
        def execute(self, sql: str, *args: Any) -> Any:
            return self.cursor().execute(sql, *args)

        def executemany(self, sql: str, *args: Any) -> Any:
            return self.cursor().executemany(sql, *args)

        def executescript(self, sql: str) -> Any:
            return self.cursor().executescript(sql)

    connect = sqlite3.connect

    def watched_connect(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("factory", WatchedConnection)
        return connect(*args, **kwargs)

    sqlite3.connect = watched_connect


def _wrap_psycopg(psycopg: Any, watch: SqlCommitWatch) -> None:
    """``Connection.commit``, ``Transaction.__exit__`` and ``Cursor.execute``/``executemany``, patched in place."""
    idle, committed = psycopg.pq.TransactionStatus.IDLE, psycopg.Transaction.Status.COMMITTED
    commit, leave = psycopg.Connection.commit, psycopg.Transaction.__exit__

    def watched_commit(connection: Any) -> None:
        was_open = connection.info.transaction_status != idle
        commit(connection)
        if was_open:
            watch.committed(connection)

    def watched_exit(transaction: Any, *exc: Any) -> Any:
        result = leave(transaction, *exc)
        if transaction.status == committed and transaction.connection.info.transaction_status == idle:
            watch.committed(transaction.connection)
        return result

    def watched(run: Callable[..., Any]) -> Callable[..., Any]:
        def statement(cursor: Any, *args: Any, **kwargs: Any) -> Any:
            result = run(cursor, *args, **kwargs)
            tag, connection = (cursor.statusmessage or "").split(" ", 1)[0].upper(), cursor.connection
            on_its_own = connection.autocommit and connection.info.transaction_status == idle
            if tag == "COMMIT" or (on_its_own and tag in AUTOCOMMIT_WRITES):
                watch.committed(connection)
            return result

        statement.__name__ = f"watched_{run.__name__}"
        return statement

    psycopg.Connection.commit = watched_commit
    psycopg.Transaction.__exit__ = watched_exit
    psycopg.Cursor.execute = watched(psycopg.Cursor.execute)
    psycopg.Cursor.executemany = watched(psycopg.Cursor.executemany)
