"""Function sinks and Python transforms in a running job: retries on ``TransientError``, the columns
``check`` reports, and a function or transform that raises (exit 1, one error line, nothing acked).

The functions are ``tests.support.user_functions``, named in the job's YAML as a user names theirs;
the store is a SQLite file read back here with ``sqlite3``, not through the function.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ingest.batch.check import check_job
from ingest.config import load_config
from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, run_cli, run_in_session, wait_all_visible, write_config

pytestmark = pytest.mark.spark
N = 12
FUNCTIONS = "tests.support.user_functions"


def store(path: Path) -> list[tuple[int, str, list[str]]]:
    """The SQLite store's rows: (event id, message id, the columns the function saw)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT event_id, message_id, columns FROM events ORDER BY event_id").fetchall()
    return [(e, m, json.loads(c)) for e, m, c in rows]


def seeded(tmp_path: Path) -> tuple[FakeQueue, list[str]]:
    q = FakeQueue(str(tmp_path / "queues"), "in")
    return q, q.send_batch([{"body": body(i)} for i in range(N)])


def sqlite_sink(tmp_path: Path, **options) -> dict:
    db = str(tmp_path / "store.db")
    return {
        "type": "python",
        "name": "store",
        "function": f"{FUNCTIONS}:to_sqlite",
        "options": {"path": db} | options,
    }


def test_a_transient_error_is_retried_and_the_python_transform_shapes_what_the_sink_gets(tmp_path, spark):
    """TransientError twice, then the write: each event once; the sink saw the transform's columns,
    as ``check`` reports them."""
    q, ids = seeded(tmp_path)
    sink = sqlite_sink(tmp_path, fail_times=2) | {"backoff.initial_interval": "10ms"}
    cfg = job_config(tmp_path, transform_function=f"{FUNCTIONS}:add_and_drop", sinks=[sink])
    path = write_config(tmp_path, cfg)
    columns = check_job(load_config(path), spark)["store"]
    assert "doubled" in columns and "kind" in columns and "action" not in columns and "ts" not in columns
    code, out = run_in_session(path)
    assert code == 0, out
    rows = store(tmp_path / "store.db")
    assert [r[0] for r in rows] == list(range(N)) and sorted(r[1] for r in rows) == sorted(ids)
    assert all(r[2] == [c for c in columns if c != "_meta"] for r in rows)
    assert int((tmp_path / "store.db.calls").read_text()) >= 3, "two transient failures, then the write"
    assert q.count()["total"] == 0


def test_a_function_that_raises_exits_1_with_one_line_naming_the_sink_and_the_function(tmp_path):
    """Spark's ``AnalysisException`` from the function (not retried: it is no ``TransientError``):
    the ``error:`` line has the first line of its message, and nothing comes above it on stderr,
    neither PySpark's page of JSON with the Java trace in it nor the trace itself."""
    q, ids = seeded(tmp_path)
    function = f"{FUNCTIONS}:selects_a_missing_column"
    sink = {"type": "python", "name": "store", "function": function, "max_retries": 5}
    r = run_cli(write_config(tmp_path, job_config(tmp_path, sinks=[sink])))
    lines = r.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert r.returncode == 1 and len(errors) == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert errors[0].startswith(
        f"error: sink store: function {function} failed on batch 0: AnalysisException"
    )
    assert "`no_such_column` cannot be resolved" in errors[0]
    assert "at org.apache" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert max(len(line) for line in lines) < 1000, "one line of PySpark's holds the whole Java trace"
    assert "retrying" not in r.stderr, "an AnalysisException is tried once"
    wait_all_visible(q)
    assert sorted(m.message_id for m in q.peek(100)) == sorted(ids), "nothing acked"


def test_a_python_transform_that_raises_exits_1_and_acks_nothing(tmp_path):
    q, ids = seeded(tmp_path)
    cfg = job_config(tmp_path, transform_function=f"{FUNCTIONS}:fails_on_rows", sinks=[sqlite_sink(tmp_path)])
    r = run_cli(write_config(tmp_path, cfg))
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert r.returncode == 1 and len(errors) == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert (
        errors[0]
        == f"error: transform_function {FUNCTIONS}:fails_on_rows: ValueError: cannot enrich these rows"
    )
    assert not (tmp_path / "store.db").exists(), "no sink saw the batch"
    wait_all_visible(q)
    assert sorted(m.message_id for m in q.peek(100)) == sorted(ids), "nothing acked"
