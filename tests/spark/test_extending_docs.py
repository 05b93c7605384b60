"""docs/extending/index.md's examples run as written: its function sink, its Python transform and its
JDBC sink, in its job, from a fake queue into SQLite and a real PostgreSQL, read back here."""

from __future__ import annotations

import re
import sqlite3
import sys

import pytest

from ingest.batch.check import check_job
from ingest.config import load_config
from ingest.run import guarantees
from sources.fake.store import FakeQueue
from tests.support.jobs import ROOT, body, run_in_session

pytestmark = pytest.mark.spark
PAGE = ROOT / "docs" / "extending" / "index.md"
N = 8


def examples() -> dict[str, str]:
    """The page's code blocks that carry a ``title`` (a file name): title → text."""
    found = re.findall(r'```\w+ title="([^"]+)"\n(.*?)```', PAGE.read_text(), re.DOTALL)
    return dict(found)


def test_the_function_sink_the_transform_and_the_jdbc_sink_run_as_written(
    tmp_path, spark, postgres, pg_database, monkeypatch
):
    code = examples()
    for module in ("my_sinks", "my_transforms"):
        (tmp_path / f"{module}.py").write_text(code[f"{module}.py"])
    assert len(code["my_sinks.py"].splitlines()) <= 15, "the function sink fits in 15 lines"
    monkeypatch.syspath_prepend(str(tmp_path))
    env = {
        "PG_URL": postgres.jdbc_url(pg_database),
        "PG_USER": postgres.user,
        "PG_PASSWORD": postgres.password,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = tmp_path / "job.yaml"
    config.write_text(code["job.yaml"].replace("data/", f"{tmp_path}/"))
    FakeQueue(str(tmp_path / "queues"), "in").send_batch([{"body": body(i)} for i in range(N)])
    try:
        columns = check_job(load_config(config), spark)
        shown = "; ".join(f"sink {name} receives columns {cols}" for name, cols in columns.items())
        assert f"ok: job extended is valid; {shown}" in PAGE.read_text(), "the page shows check's output"
        for line in guarantees(load_config(config)):  # the function sink's declared, the writer's
            assert f"\n{line}\n" in PAGE.read_text(), line
        code_, out = run_in_session(config, env)
    finally:
        for module in ("my_sinks", "my_transforms"):
            sys.modules.pop(module, None)
    assert code_ == 0, out
    assert postgres.password not in out
    with sqlite3.connect(tmp_path / "events.db") as db:
        stored = db.execute("SELECT event_id, action FROM events ORDER BY event_id").fetchall()
    assert stored == [(i, "click") for i in range(N)]
    with postgres.connect(pg_database) as conn:
        rows = conn.execute("SELECT event_id, cents FROM events ORDER BY event_id").fetchall()
    assert rows == [(i, i * 50) for i in range(N)]  # amount i / 2, in cents
