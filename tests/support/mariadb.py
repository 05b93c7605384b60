"""A real MariaDB server for the tests: Debian's ``mariadbd``, a temp data dir, 127.0.0.1, stopped by PID.

``mariadb-install-db`` makes the system tables; the server runs as the ``mysql`` OS user under root
(``Popen(user=…)``), else as the current user. The test user ``mq`` logs in over TCP with a password
(so a wrong one is refused, as on a real server); ``root`` without one over the private Unix socket.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.support import db_process
from tests.support.db_process import DbServer, as_owner, free_port, started, wait_ready

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
JDBC_JARS = ("/usr/share/java/mariadb-java-client.jar",)
"""Where Debian's ``libmariadb-java`` puts MariaDB Connector/J."""
USER = "mq"
PASSWORD = "maria-secret-4c1d"
"""The test user's password: tests check it appears in no error."""
SERVER = ("--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=32M")
SERVER += ("--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--max-connections=200")


def installed() -> bool:
    """Whether the MariaDB server and Connector/J are here."""
    return all(os.path.exists(p) for p in (MARIADBD, INSTALL_DB)) and jdbc_jar() is not None


def jdbc_jar() -> str | None:
    """MariaDB Connector/J's jar, or None."""
    return next((j for j in JDBC_JARS if os.path.exists(j)), None)


def _owner() -> dict:
    return as_owner("mysql")


@dataclass
class MariaDBServer(DbServer):
    """A running server: where it listens and how to reach a database on it (stopped by SIGTERM,
    its clean shutdown)."""

    user: str = USER
    password: str = PASSWORD

    def jdbc_url(self, database: str) -> str:
        return f"jdbc:mariadb://{self.host}:{self.port}/{database}"

    def connect(self, database: str | None = None, root: bool = False):
        """A PyMySQL connection in autocommit mode: the tests' independent way to read a table
        (``root``: the superuser, over the Unix socket)."""
        import pymysql

        where = {"unix_socket": str(self.root / "sock")} if root else {"host": self.host, "port": self.port}
        login = {"user": "root"} if root else {"user": self.user, "password": self.password}
        return pymysql.connect(database=database, autocommit=True, **where, **login)

    def query(self, database: str, sql: str) -> list[tuple]:
        """The rows of ``sql`` on ``database``, read with PyMySQL."""
        with self.connect(database) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())

    def create_database(self) -> str:
        """A fresh, empty database (one per test keeps tests apart); returns its name."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name}")
        return name


def _mariadbd(root: Path, port: int) -> subprocess.Popen:
    cmd = [MARIADBD, "--no-defaults", f"--datadir={root / 'data'}", f"--port={port}"]
    cmd += ["--bind-address=127.0.0.1", f"--socket={root / 'sock'}", f"--pid-file={root / 'pid'}"]
    log = open(root / "mariadb.log", "ab")  # noqa: SIM115 - the server's stderr for its life
    return subprocess.Popen(
        [*cmd, *SERVER], stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **_owner()
    )


def start() -> MariaDBServer:
    """Install the system tables in a temp data dir, start the server on a free port, wait until it
    answers, and create the test user (every privilege, a password, from any host)."""
    if not installed():
        raise RuntimeError("no MariaDB server or Connector/J here: `make mariadb` installs them")
    root = Path(tempfile.mkdtemp(prefix="mq-maria-"))
    if os.geteuid() == 0:
        shutil.chown(root, "mysql", "mysql")
    install = [INSTALL_DB, "--no-defaults", f"--datadir={root / 'data'}", "--skip-test-db"]
    subprocess.run(
        [*install, "--auth-root-authentication-method=normal", "--skip-name-resolve"],
        check=True,
        capture_output=True,
        cwd=root,
        **_owner(),
    )
    port = free_port()
    return started(MariaDBServer(root, port, _mariadbd(root, port)), _ready_with_user)


def _ready_with_user(server: MariaDBServer) -> None:
    """Wait until the server answers ``root`` on its socket, then create the test user."""
    log = server.root / "mariadb.log"
    wait_ready(server.proc, server.port, lambda: server.connect(root=True).close(), log)
    with server.connect(root=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'")
        cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%' WITH GRANT OPTION")


def running() -> contextlib.AbstractContextManager[MariaDBServer]:
    """A started server for a ``with`` block, stopped after it."""
    return db_process.running(start)
