"""A real PostgreSQL server for the tests: Debian's binaries, a temp data dir, 127.0.0.1, stopped by PID.

``initdb`` refuses to run as root, so under root the server runs as the ``postgres`` OS user
(``Popen(user=…)``); elsewhere as the current user. Authentication is ``scram-sha-256`` for TCP (so a
wrong password is refused, as on a real server) and ``trust`` on the private Unix socket.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import signal
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tests.support import db_process
from tests.support.db_process import DbServer, as_owner, free_port, started, wait_ready

JDBC_JARS = ("/usr/share/java/postgresql.jar",)
"""Where Debian's ``libpostgresql-jdbc-java`` puts the JDBC driver."""

INITDB = ("--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync")
SUPERUSER = "mq"
PASSWORD = "pg-secret-7f3a"
"""The test superuser's password: tests check it appears in no log, error or file."""


def bin_dir() -> Path | None:
    """The newest PostgreSQL server's ``bin`` directory on this machine, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def jdbc_jar() -> str | None:
    """The PostgreSQL JDBC driver's jar, or None."""
    return next((j for j in JDBC_JARS if os.path.exists(j)), None)


@dataclass
class PostgresServer(DbServer):
    """A running server: where it listens and how to reach a database on it."""

    user: str = SUPERUSER
    password: str = PASSWORD
    shutdown: ClassVar[int] = signal.SIGINT
    """PostgreSQL's fast shutdown."""

    def jdbc_url(self, database: str = "postgres") -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        """A libpq connection string (psycopg, psql) with the password."""
        where = f"host={self.host} port={self.port} dbname={database}"
        return f"{where} user={self.user} password={self.password}"

    def connect(self, database: str = "postgres"):
        """A psycopg connection in autocommit mode: the tests' independent way to read a table."""
        import psycopg

        return psycopg.connect(self.dsn(database), autocommit=True)

    def query(self, database: str, sql: str) -> list[tuple]:
        """The rows of ``sql`` on ``database``, read with psycopg."""
        with self.connect(database) as conn:
            return conn.execute(sql).fetchall()

    def create_database(self) -> str:
        """A fresh, empty database (one per test keeps tests apart); returns its name."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        with self.connect() as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def pause(self) -> None:
        """Stop the server but keep its data (an outage); :meth:`resume` starts it again."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)

    def resume(self) -> None:
        self.proc = _postgres(self.root, self.port)
        _wait_ready(self)


def _postgres(root: Path, port: int) -> subprocess.Popen:
    binary = bin_dir()
    assert binary is not None
    cmd = [str(binary / "postgres"), "-D", str(root / "data"), "-p", str(port)]
    cmd += ["-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={root / 'sock'}"]
    cmd += ["-c", "fsync=off", "-c", "max_connections=200", "-c", "shared_buffers=64MB"]
    log = open(root / "postgres.log", "ab")  # noqa: SIM115 - the server's stderr for its life
    owner = as_owner("postgres")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **owner)


def _wait_ready(server: PostgresServer) -> None:
    wait_ready(server.proc, server.port, lambda: server.connect().close(), server.root / "postgres.log")


def start() -> PostgresServer:
    """initdb a temp cluster with the test superuser, start the server on a free port, wait until ready."""
    binary = bin_dir()
    if binary is None:
        raise RuntimeError("no PostgreSQL server here: `make test` installs Debian's postgresql")
    root = Path(tempfile.mkdtemp(prefix="mq-pg-"))
    (root / "sock").mkdir()
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        pg = pwd.getpwnam("postgres")
        for p in (root, root / "sock", pwfile):
            os.chown(p, pg.pw_uid, pg.pw_gid)
    subprocess.run(
        [str(binary / "initdb"), "-D", str(root / "data"), "-U", SUPERUSER, f"--pwfile={pwfile}", *INITDB],
        check=True,
        capture_output=True,
        cwd=root,
        **as_owner("postgres"),
    )
    pwfile.unlink()
    port = free_port()
    return started(PostgresServer(root, port, _postgres(root, port)), _wait_ready)


def running() -> contextlib.AbstractContextManager[PostgresServer]:
    """A started server for a ``with`` block, stopped after it."""
    return db_process.running(start)
