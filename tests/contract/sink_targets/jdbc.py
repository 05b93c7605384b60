"""The JDBC sink's target: a PostgreSQL table, read with psycopg (not the sink's code)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target


def jdbc(request: Any, tmp_path: Path) -> Iterator[Target]:
    server, database = (request.getfixturevalue(f) for f in ("postgres", "pg_database"))
    cfg = {"type": "jdbc", "url": server.jdbc_url(database), "table": "out", "create_table": True}
    cfg |= {"user": server.user, "password": server.password}

    def read() -> list[str]:
        with server.connect(database) as conn:
            return [json.dumps({"id": r[0]}) for r in conn.execute("SELECT id FROM out").fetchall()]

    yield Target(cfg, read)


TARGETS = {"jdbc": jdbc}
