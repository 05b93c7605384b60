"""Chaos: kill -9 a job writing a PostgreSQL table around its commit, restart, and check each id is in once.

The table is read back with psycopg, not the sink's code. Each run also checks that the database
password (given as ``${env:…}``) is in no output, log, job event or file the job wrote.
"""

from __future__ import annotations

import signal

import pytest

from tests.support.fake_job import restart_until_drained, seed_job
from tests.support.jobs import run_cli
from tests.support.postgres import PASSWORD

pytestmark = [pytest.mark.chaos, pytest.mark.integration]
N = 200
DUPS = 10
POINTS = ("after_sink", "before_jdbc_commit", "after_state")
"""Each killed at its second occurrence, so a batch is committed before the kill."""


def rows(postgres, database: str, sql: str) -> list[tuple]:
    with postgres.connect(database) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.parametrize("point", POINTS)
def test_kill9_around_the_jdbc_commit_then_restart(
    tmp_path, spark, postgres, pg_database, point, monkeypatch
):
    sink = {"type": "jdbc", "name": "db", "url": postgres.jdbc_url(pg_database), "table": "events"}
    sink |= {"user": postgres.user, "password": "${env:PG_PASSWORD}", "create_table": True}
    events = tmp_path / "events.jsonl"
    q, ids, cfg_path = seed_job(
        tmp_path, N, DUPS, sinks=[sink], delivery={"targets": [{"type": "file", "path": str(events)}]}
    )
    monkeypatch.setenv("PG_PASSWORD", PASSWORD)
    crashed = run_cli(cfg_path, env={"MQ_INGEST_CRASH_AT": point, "MQ_INGEST_CRASH_AFTER": "2"})
    assert crashed.returncode == -signal.SIGKILL, f"{point} not reached: {crashed.stdout}\n{crashed.stderr}"
    held = rows(postgres, pg_database, "SELECT count(*) FROM events")[0][0]
    staged = rows(postgres, pg_database, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'mq_stage%'")
    if point == "before_jdbc_commit":
        assert len(staged) == 1, "the killed batch's staging table should be there, not moved in"
    else:
        assert held > 0 and not staged, "the killed batch should be in the table"
    output = restart_until_drained(cfg_path, q)
    got = sorted(r[0] for r in rows(postgres, pg_database, "SELECT event_id FROM events"))
    assert got == list(range(N)), f"lost {set(range(N)) - set(got)}; doubled {len(got) - len(set(got))}"
    message_ids = rows(postgres, pg_database, "SELECT _meta::jsonb->>'message_id' FROM events")
    assert sorted(m[0] for m in message_ids) == sorted(ids)
    assert not rows(postgres, pg_database, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'mq_stage%'")
    assert q.count()["total"] == 0, q.count()
    # The password: in no output, log, event, checkpoint, state or staging file.
    assert events.exists()
    assert PASSWORD not in crashed.stdout + crashed.stderr + output
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path
