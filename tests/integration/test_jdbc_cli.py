"""The JDBC sink from the command line on a real PostgreSQL: a wrong column type fails the run with
exit 1 naming the column, a URL to no database fails ``check`` with exit 2 naming the key; the
password (given as ``${env:…}``) is in neither output, and the driver's jar is found without
any ``spark.jars`` in the config."""

from __future__ import annotations

import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, run_cli, write_config
from tests.support.postgres import PASSWORD

pytestmark = pytest.mark.integration


def error_line(stderr: str) -> str:
    return next(line for line in reversed(stderr.splitlines()) if line.startswith("error:"))


def test_a_wrong_column_type_fails_the_run_and_a_bad_url_fails_check(tmp_path, postgres, pg_database):
    with postgres.connect(pg_database) as conn:
        conn.execute(
            "CREATE TABLE events (event_id BIGINT, user_id BIGINT, action INTEGER, amount FLOAT8, ts TEXT)"
        )
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(5)])
    sink = {"type": "jdbc", "name": "db", "url": postgres.jdbc_url(pg_database), "table": "events"}
    sink |= {"user": postgres.user, "password": "${env:PG_PASSWORD}", "include_meta": False}
    cfg = write_config(tmp_path, job_config(tmp_path, sinks=[sink]))
    env = {"PG_PASSWORD": PASSWORD}

    run = run_cli(cfg, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert error_line(run.stderr) == (
        "error: sinks.db.url: table events column action is int4, but the sink writes string values into it"
    )
    assert PASSWORD not in run.stdout + run.stderr
    assert q.count()["total"] == 5  # nothing acked: the messages wait for a fixed table

    sink["url"] = postgres.jdbc_url("no_such_db")
    cfg = write_config(tmp_path, job_config(tmp_path, sinks=[sink]))
    check = run_cli(["--config", str(cfg), "--check"], env=env)
    assert check.returncode == 2, check.stdout + check.stderr
    line = error_line(check.stderr)
    assert line.startswith("error: sinks.db.url: cannot read table events: ")
    assert 'database "no_such_db" does not exist' in line
    assert PASSWORD not in check.stdout + check.stderr
