"""Chaos: kill -9 a job whose function sink writes idempotently by batch id, restart, each id once.

The function (``tests.support.user_functions:to_sqlite``) writes a batch's rows and its
idempotency key in one SQLite transaction and skips a key it holds. The job is killed right
after the sinks wrote (``after_sink``: the state not committed, so the batch is replayed with the
same id), killed again once the state committed (``after_state``: replayed with nothing to do),
then run to the end; the store, read here with ``sqlite3``, holds each event exactly once.
"""

from __future__ import annotations

import signal
import sqlite3

import pytest

from checkpoints.state import StateTable
from tests.support.fake_job import restart_until_drained, seed_job
from tests.support.jobs import run_cli, wait_all_visible

pytestmark = pytest.mark.chaos
N = 300
DUPS = 10


def stored(db) -> list[tuple[int, str]]:
    """The store's (event id, message id) rows, read with sqlite3."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT event_id, message_id FROM events ORDER BY event_id").fetchall()


def state_keys(tmp_path) -> set[str]:
    st = StateTable(str(tmp_path / "state"), "t-job", 86400)
    st.open()
    return set(st.keys())


def test_kill9_after_the_function_wrote_and_after_the_state_commit_then_restart(tmp_path, spark):
    db = tmp_path / "store.db"
    sink = {"type": "python", "name": "store", "function": "tests.support.user_functions:to_sqlite"}
    q, ids, cfg_path = seed_job(tmp_path, N, DUPS, sinks=[sink | {"options": {"path": str(db)}}])
    for point, occurrence in (("after_sink", 2), ("after_state", 1)):
        wait_all_visible(q)
        crashed = run_cli(
            cfg_path, env={"MQ_INGEST_CRASH_AT": point, "MQ_INGEST_CRASH_AFTER": str(occurrence)}
        )
        assert crashed.returncode == -signal.SIGKILL, (
            f"{point} not reached: {crashed.stdout}\n{crashed.stderr}"
        )
        if point == "after_sink":  # the function wrote a batch the state does not hold: it is replayed
            assert {m for _, m in stored(db)} - state_keys(tmp_path), "the kill came after the state commit"
    restart_until_drained(cfg_path, q)
    got = [e for e, _ in stored(db)]
    assert got == list(range(N)), f"lost {set(range(N)) - set(got)}; doubled {len(got) - len(set(got))}"
    assert state_keys(tmp_path) == set(ids)
    assert q.count()["total"] == 0, q.count()
