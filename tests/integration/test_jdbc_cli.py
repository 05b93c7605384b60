"""The JDBC sink from the command line on a real PostgreSQL: a wrong column type fails the run with
exit 1 naming the column, a URL to no database fails ``check`` with exit 2 naming the key, a
refused password and a constraint violation fail the run with exit 1 naming the key and the table,
a table name with SQL in it fails ``check`` and the run with exit 2 naming the key, touching nothing;
the password (given as ``${env:…}``) is in no output, and the driver's jar is found without any
``spark.jars`` in the config. A database that does not answer is retried, each retry one warning
line, and a stop cuts the retries short."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import (
    body,
    job_config,
    read_until,
    run_cli,
    run_main_in_session,
    start_cli,
    write_config,
)
from tests.support.postgres import PASSWORD

pytestmark = pytest.mark.integration


def error_line(stderr: str) -> str:
    return next(line for line in reversed(stderr.splitlines()) if line.startswith("error:"))


def one_error_line(stderr: str) -> str:
    """The one ``error:`` line of a run's stderr (fails if there are more or none)."""
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def job_into(tmp_path, postgres, database: str, columns: str) -> tuple[FakeQueue, dict, Path]:
    """A table ``events`` of ``columns``, 5 messages on a fake queue, and a job writing them into
    the table (the password as ``${env:PG_PASSWORD}``): (the queue, the sink's config, the job's file)."""
    with postgres.connect(database) as conn:
        conn.execute(f"CREATE TABLE events ({columns})")
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(5)])
    sink = {"type": "jdbc", "name": "db", "url": postgres.jdbc_url(database), "table": "events"}
    sink |= {"user": postgres.user, "password": "${env:PG_PASSWORD}", "include_meta": False}
    return q, sink, write_config(tmp_path, job_config(tmp_path, sinks=[sink]))


def test_a_wrong_column_type_fails_the_run_and_a_bad_url_fails_check(tmp_path, postgres, pg_database):
    columns = "event_id BIGINT, user_id BIGINT, action INTEGER, amount FLOAT8, ts TEXT"
    q, sink, cfg = job_into(tmp_path, postgres, pg_database, columns)
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


@pytest.mark.parametrize(("option", "name"), [("table", "events"), ("marker_table", "mq_marks")])
def test_sql_in_a_table_name_fails_check_and_run_before_either_connects(
    tmp_path, postgres, pg_database, option, name
):
    """``table`` or ``marker_table`` with a statement after the name (once pasted into the SQL
    unquoted: ``check`` dropped the table ``victim`` through ``table``, the run through either):
    both exit 2 at the config, with one ``error:`` line naming the key; ``victim`` and the queue's
    messages are all still there."""
    columns = "event_id BIGINT, user_id BIGINT, action TEXT, amount FLOAT8, ts TIMESTAMP"
    q, sink, _ = job_into(tmp_path, postgres, pg_database, columns)
    with postgres.connect(pg_database) as conn:  # the marker table of earlier runs, and a victim
        conn.execute(
            "CREATE TABLE mq_marks (sink_id TEXT PRIMARY KEY, batch_id BIGINT, committed_at TIMESTAMP)"
        )
        conn.execute("CREATE TABLE victim (id INT)")
        conn.execute("INSERT INTO victim VALUES (1)")
    sink[option] = f"{name}; DROP TABLE victim; --"
    cfg = write_config(tmp_path, job_config(tmp_path, sinks=[sink]))
    for args in (["--config", str(cfg), "--check"], cfg):
        run = run_cli(args, env={"PG_PASSWORD": PASSWORD})
        assert postgres.query(pg_database, "SELECT id FROM victim") == [(1,)], run.stdout + run.stderr
        assert run.returncode == 2, run.stdout + run.stderr
        assert one_error_line(run.stderr) == (
            f"error: {cfg}: sinks.db.{option}: '{name}; DROP TABLE victim; --' is not a table name: "
            f"';' at character {len(name) + 1}; write [catalog.][schema.]table, each part letters, "
            'digits, _ and $ (not first), or in double quotes ("Mixed Case")'
        )
    assert q.count()["total"] == 5


@pytest.mark.spark
def test_a_refused_password_and_a_constraint_violation_fail_the_run(tmp_path, spark, postgres, pg_database):
    """The CLI's ``main`` in this process (the suite's Spark session, no new JVM): a wrong password,
    then rows that leave a ``NOT NULL`` column empty; each run exits 1 with one ``error:`` line
    naming ``sinks.db.url`` and the table (the column, as PostgreSQL names it), never a password,
    and acks nothing."""
    columns = "event_id BIGINT, user_id BIGINT, action TEXT, amount FLOAT8, ts TIMESTAMP, note TEXT NOT NULL"
    q, _, cfg = job_into(tmp_path, postgres, pg_database, columns)

    code, out, err = run_main_in_session(cfg, env={"PG_PASSWORD": "wrong-0d9e"})
    assert code == 1, out + err
    assert one_error_line(err) == (
        'error: sinks.db.url: cannot read table events: FATAL: password authentication failed for user "mq" '
        "(SQLState 28P01)"
    )
    assert "wrong-0d9e" not in out + err

    code, out, err = run_main_in_session(cfg, env={"PG_PASSWORD": PASSWORD})
    assert code == 1, out + err
    line = one_error_line(err)
    assert re.match(r"error: sinks\.db\.url: cannot commit batch \d+ into table events: ", line), line
    assert 'null value in column "note" of relation "events" violates not-null constraint' in line
    assert line.endswith("(SQLState 23502)"), line
    assert PASSWORD not in out + err
    assert q.count()["total"] == 5  # nothing acked
    assert postgres.query(pg_database, "SELECT count(*) FROM events") == [(0,)]
    staged = "SELECT tablename FROM pg_tables WHERE tablename LIKE 'mq_stage%'"
    assert postgres.query(pg_database, staged) == []  # the failed batch's staging table dropped


def test_a_stop_cuts_the_retries_of_a_database_that_is_down_short_and_acks_nothing(tmp_path, free_port):
    """A PostgreSQL URL on a port nothing listens on, ``max_retries: 100`` (minutes of backing
    off): each retry logs one warning line; a SIGTERM after the first stops the job at once, as a
    stop ends a job (exit 0, no ``error:`` line), its batch cancelled uncommitted, every message
    still on the queue."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    ids = q.send_batch([{"body": body(i)} for i in range(5)])
    sink = {
        "type": "jdbc",
        "name": "db",
        "url": f"jdbc:postgresql://127.0.0.1:{free_port}/x",
        "table": "events",
    }
    sink |= {"user": "mq", "password": "${env:PG_PASSWORD}", "max_retries": 100}
    proc = start_cli(
        write_config(tmp_path, job_config(tmp_path, sinks=[sink])), env={"PG_PASSWORD": PASSWORD}
    )
    try:
        out = read_until(proc, lambda out: "retrying sink db: " in out)
        proc.send_signal(signal.SIGTERM)
        try:
            out += proc.communicate(timeout=90)[0]
        except subprocess.TimeoutExpired:
            pytest.fail("the job still retried 90 s after SIGTERM")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out[-3000:]
    retry = re.search(
        r"WARNING ingest\.errors: retrying sink db: read table events \(attempt 2 of 101\) after (.*)", out
    )
    assert retry, out[-3000:]
    assert retry.group(1).startswith("TransientError: sinks.db.url: cannot read table events: Connection to ")
    assert re.search(
        r"^stopped: batch 0 cancelled while retrying sink db: read table events after \d+ (try|tries): "
        r"TransientError: .*; nothing of it is acked",
        out,
        re.MULTILINE,
    ), out[-3000:]
    assert not [line for line in out.splitlines() if line.startswith("error:")], out[-3000:]
    assert PASSWORD not in out
    assert sorted(m.message_id for m in q.peek(100)) == sorted(ids), "nothing acked, all visible again"
