"""Chaos: kill -9 the job (Python driver and JVM) at each risky point, restart, and check the books.

Each point runs CHAOS_LOOPS times (default 1): ``CHAOS_LOOPS=20 pytest tests/chaos`` runs longer.
"""

from __future__ import annotations

import os
import random
import signal

import pytest
import yaml

from checkpoints.state import StateTable
from ingest.intake.staged_files import HELD_DIR
from tests.support.fake_job import restart_until_drained, seed_job
from tests.support.jobs import kill_while_running, read_jsonl_dir, run_cli

pytestmark = pytest.mark.chaos
LOOPS = int(os.environ.get("CHAOS_LOOPS", "1"))
N = 600
DUPS = 10

# point → which occurrence to die at (later occurrences leave some work already committed)
POINTS = {
    "after_stage": 3,
    "after_sink": 2,
    "after_state": 2,
    "before_ack": 2,
    "during_extend": 1,
}


def assert_books(tmp, q, ids):
    rows = read_jsonl_dir(tmp / "out")
    got = sorted(r["event_id"] for r in rows)
    assert got == list(range(N)), f"lost {set(range(N)) - set(got)}; doubled {len(got) - len(set(got))}"
    st = StateTable(str(tmp / "state"), "t-job", 86400)
    st.open()
    keys = st.keys()
    assert len(keys) == len(set(keys)), "a message id is in the state table twice"
    assert set(keys) == set(ids)
    assert q.count()["total"] == 0, q.count()


def crash_at(cfg_path, point: str, after: int) -> None:
    """Run the job until it kills itself at ``point``'s ``after``-th occurrence."""
    crashed = run_cli(cfg_path, env={"MQ_INGEST_CRASH_AT": point, "MQ_INGEST_CRASH_AFTER": str(after)})
    assert crashed.returncode == -signal.SIGKILL, (
        f"the job did not reach {point}: rc={crashed.returncode}\n{crashed.stdout}\n{crashed.stderr}"
    )


@pytest.mark.parametrize("point", list(POINTS))
def test_kill9_at_point_then_restart(tmp_path, spark, point):
    for loop in range(LOOPS):
        tmp = tmp_path / str(loop)
        q, ids, cfg_path = seed_job(tmp, N, DUPS)
        crash_at(cfg_path, point, POINTS[point])
        restart_until_drained(cfg_path, q)
        assert_books(tmp, q, ids)


def test_kill9_inside_the_gate_then_restart(tmp_path, spark):
    """Killed while the staging gate publishes held files (some listed for Spark, the rest still
    held): the restart drops held and unplanned files, their messages come back from the queue."""
    for loop in range(LOOPS):
        tmp = tmp_path / str(loop)
        q, ids, cfg_path = seed_job(tmp, N, DUPS)
        cfg = yaml.safe_load(cfg_path.read_text())
        cfg["staging"] |= {"batch_messages": 150, "batch_wait": "1s"}  # files of 50: publishes of 3+
        cfg_path.write_text(yaml.safe_dump(cfg))
        crash_at(cfg_path, "during_publish", 2)
        held = tmp / "staging" / HELD_DIR
        assert list(held.glob("*.jsonl")), "killed with files still held"
        restart_until_drained(cfg_path, q)
        assert_books(tmp, q, ids)
        assert not list(held.glob("*.jsonl")), "the restart left held files behind"


def test_kill9_at_random_moments(tmp_path, spark):
    """A continuous job (it never exits by itself) killed at random moments, then a drain run."""
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "7")))
    for loop in range(LOOPS):
        tmp = tmp_path / str(loop)
        q, ids, cfg_path = seed_job(tmp, N, DUPS)
        cfg = yaml.safe_load(cfg_path.read_text())
        cfg["trigger"] = {"mode": "processing_time", "interval": "500ms"}
        continuous = tmp / "continuous.yaml"
        continuous.write_text(yaml.safe_dump(cfg))
        for kill in range(2):
            kill_while_running(continuous, rng.uniform(4, 12), f"loop {loop}, kill {kill}")
        restart_until_drained(cfg_path, q)
        assert_books(tmp, q, ids)
