"""Chaos: kill -9 a job writing a Delta table around its commit, restart, and check each id is in once."""

from __future__ import annotations

import signal

import pytest
from deltalake import DeltaTable

from checkpoints.state import StateTable
from sinks.delta.config import DeltaSinkConfig
from sinks.delta.sink import DeltaSink
from tests.support.fake_job import restart_until_drained, seed_job
from tests.support.jobs import run_cli

pytestmark = pytest.mark.chaos
N = 400
DUPS = 10

# point → which occurrence to die at (later ones leave some batches already committed)
POINTS = {"after_sink": 2, "after_state": 2, "before_delta_commit": 2}


def lake(tmp) -> dict:
    return {"type": "delta", "name": "lake", "path": str(tmp / "lake"), "partition_by": ["user_id"]}


def table_files(tmp) -> set[str]:
    """Parquet files on disk under the table (committed or not)."""
    return {str(p) for p in (tmp / "lake").rglob("*.parquet")}


@pytest.mark.parametrize("point", list(POINTS))
def test_kill9_around_the_delta_commit_then_restart(tmp_path, spark, point):
    q, ids, cfg_path = seed_job(tmp_path, N, DUPS, sinks=[lake(tmp_path)])
    crashed = run_cli(
        cfg_path, env={"MQ_INGEST_CRASH_AT": point, "MQ_INGEST_CRASH_AFTER": str(POINTS[point])}
    )
    assert crashed.returncode == -signal.SIGKILL, f"{point} not reached: {crashed.stdout}\n{crashed.stderr}"
    committed = set(DeltaTable(str(tmp_path / "lake")).file_uris())
    orphans = table_files(tmp_path) - committed
    if point == "before_delta_commit":
        assert orphans, "the killed batch's files should be on disk, in no version"
    versions = DeltaTable(str(tmp_path / "lake")).version()
    restart_until_drained(cfg_path, q)
    dt = DeltaTable(str(tmp_path / "lake"))
    got = sorted(dt.to_pyarrow_table(columns=["event_id"])["event_id"].to_pylist())
    assert got == list(range(N)), f"lost {set(range(N)) - set(got)}; doubled {len(got) - len(set(got))}"
    message_ids = dt.to_pyarrow_table(columns=["_meta"])["_meta"].combine_chunks().field("message_id")
    assert sorted(message_ids.to_pylist()) == sorted(ids)
    assert dt.version() > versions
    st = StateTable(str(tmp_path / "state"), "t-job", 86400)
    st.open()
    assert sorted(st.keys()) == sorted(ids)
    assert q.count()["total"] == 0, q.count()
    # The files of the batch that never committed are vacuumed; the table still reads whole.
    cfg = DeltaSinkConfig.model_validate(lake(tmp_path) | {"app_id": "t-job.lake", "vacuum_retention": 0})
    DeltaSink(cfg).maintain()
    assert not orphans & table_files(tmp_path)
    after = DeltaTable(str(tmp_path / "lake")).to_pyarrow_table(columns=["event_id"])["event_id"].to_pylist()
    assert sorted(after) == list(range(N))
