"""A throwaway PostgreSQL server for tests: ``initdb`` on a temp data directory, listening on 127.0.0.1 on a free port
and on a unix socket in the same directory, stopped and removed at the end.

PostgreSQL refuses to run as root ("initdb: error: cannot be run as root"), and CI runs as root: then every server
command runs as the ``postgres`` user (``runuser -u postgres --``) on a directory owned by it. As another user it runs
as that user. The binaries come from Debian's layout, ``/usr/lib/postgresql/<version>/bin`` (the newest version
there), else from ``PATH``; ``scripts/ensure-postgresql.sh`` (run by ``make test``) installs Debian's package when
they are missing.

A test module takes it through a session-scoped fixture (one server per pytest-xdist worker)::

    @pytest.fixture(scope="session")
    def postgres() -> Iterator[PostgresServer]:
        yield from postgres_server.fixture()

``fixture`` turns "the server cannot start" into a failure when ``CI`` is set (``.ci/run`` runs with ``CI=true``: a
skipped PostgreSQL test must fail CI) and into a skip with the reason otherwise.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

#: Where Debian puts each installed major version's server binaries.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
#: The database superuser ``initdb`` creates (trust authentication: a throwaway server on loopback only).
SUPERUSER = "postgres"
#: Seconds ``pg_ctl`` waits for the server to start or stop.
WAIT_SECONDS = 30
#: Start attempts: the free port is found by binding port 0 and released before the server binds it, so another
#: process can take it in between; the next attempt picks another port.
START_ATTEMPTS = 3


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why."""


@dataclass(frozen=True)
class PostgresServer:
    """A running server.

    :ivar host: ``127.0.0.1``.
    :ivar port: its TCP port.
    :ivar socket_dir: the directory holding its unix socket (connect with ``host=<socket_dir>``).
    :ivar version: the major version of its binaries, e.g. ``"15"``.
    """

    host: str
    port: int
    socket_dir: str
    version: str

    @property
    def dsn(self) -> str:
        """A libpq connection string for the ``postgres`` database as the superuser, over TCP."""
        return f"host={self.host} port={self.port} user={SUPERUSER} dbname=postgres connect_timeout=5"


def bin_dir() -> Path:
    """The directory of ``initdb``, ``pg_ctl`` and ``postgres``: the newest Debian version, else ``PATH``'s.

    :raises PostgresUnavailable: no ``initdb`` found.
    """
    found = [Path(d) for d in glob.glob(DEBIAN_BIN_GLOB) if (Path(d) / "initdb").is_file()]
    if found:
        return max(found, key=lambda d: _version_tuple(d.parent.name))
    initdb = shutil.which("initdb")
    if initdb is None:
        raise PostgresUnavailable(
            f"no initdb in {DEBIAN_BIN_GLOB} or on PATH: run scripts/ensure-postgresql.sh (installs Debian's "
            "postgresql package, as root)"
        )
    return Path(os.path.realpath(initdb)).parent


def _version_tuple(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _as_server_user() -> list[str]:
    """The command prefix that runs a server command as a user PostgreSQL accepts (``runuser`` when root)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser") is None:
        raise PostgresUnavailable("running as root, and runuser (util-linux) is missing: PostgreSQL refuses root")
    try:
        pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root and there is no {SUPERUSER!r} user (Debian's postgresql package creates it)"
        ) from None
    return ["runuser", "-u", SUPERUSER, "--"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_SECONDS * 2, check=False)
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-1500:]
        raise PostgresUnavailable(f"{what} failed (exit {done.returncode}): {output}")


@dataclass
class _DataDir:
    root: Path
    prefix: list[str]
    bins: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    def init(self) -> None:
        _run(
            [
                *self.prefix,
                str(self.bins / "initdb"),
                "-D",
                str(self.data),
                "--auth=trust",
                f"--username={SUPERUSER}",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",  # a throwaway cluster: no fsync of the new files (about 0.2 s saved)
            ],
            "initdb",
        )

    def start(self, port: int) -> None:
        # fsync off: nothing here has to survive a machine crash, and each commit is faster.
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {self.root} -c fsync=off -c synchronous_commit=off"
        log = self.root / "server.log"
        _run(
            [*self.prefix, str(self.bins / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w"]
            + ["-t", str(WAIT_SECONDS), "-o", options, "start"],
            f"pg_ctl start on port {port} (log: {log})",
        )

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, str(self.bins / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=WAIT_SECONDS * 2,
            check=False,
        )


def running() -> Generator[PostgresServer, None, None]:
    """Start a server, yield it, then stop it and remove its directory (a generator: ``yield from running()``).

    :raises PostgresUnavailable: no binaries, no ``postgres`` user when root, or initdb or the start failed
        ``START_ATTEMPTS`` times.
    """
    bins = bin_dir()
    prefix = _as_server_user()
    # Not under pytest's tmp_path: that is mode 700 under root's, and the postgres user could not reach it.
    root = Path(tempfile.mkdtemp(prefix="eo-pg-"))
    data_dir = _DataDir(root, prefix, bins)
    started = False
    try:
        if prefix:
            entry = pwd.getpwnam(SUPERUSER)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        data_dir.init()
        for attempt in range(1, START_ATTEMPTS + 1):
            port = free_port()
            try:
                data_dir.start(port)
            except PostgresUnavailable:
                if attempt == START_ATTEMPTS:
                    raise
                continue
            started = True
            break
        yield PostgresServer("127.0.0.1", port, str(root), bins.parent.name)
    finally:
        if started:
            data_dir.stop()
        shutil.rmtree(root, ignore_errors=True)


def fixture() -> Iterator[PostgresServer]:
    """``running()`` for a pytest fixture: when the server cannot start, ``pytest.fail`` if ``CI`` is set (a skipped
    PostgreSQL test fails CI), else ``pytest.skip`` with the reason."""
    servers = running()
    try:
        server = next(servers)
    except PostgresUnavailable as error:
        unavailable(f"PostgreSQL server: {error}")
    yield server
    servers.close()


def unavailable(reason: str) -> NoReturn:
    """Fail the test when ``CI`` is set (``.ci/run`` sets ``CI=true``), skip it otherwise, with ``reason``."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: a skipped PostgreSQL test fails CI)", pytrace=False)
    pytest.skip(reason)
