"""Unit tests of the state table: commits, replay and stale refusal, window expiry, reopen."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

from checkpoints.state import SCHEMA, StateTable
from ingest.errors import FatalError

ROOT = Path(__file__).resolve().parents[2]
DAY_S = 86400.0
T0 = 1_700_000_000_000


def opened(path: Path, window: float = DAY_S, app_id: str = "job") -> StateTable:
    st = StateTable(str(path), app_id, window)
    st.open()
    return st


def rows(keys: list[str], batch_id: int) -> pa.Table:
    n = len(keys)
    return pa.table({"key": keys, "batch_id": [batch_id] * n, "seen_ms": [T0] * n}, schema=SCHEMA)


def txn(version: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction("job", version)])


def orphans(path: Path) -> set[str]:
    """Data files on disk that the table does not reference."""
    active = {uri.rsplit("/", 1)[-1] for uri in DeltaTable(str(path)).file_uris()}
    return {p.name for p in path.glob("*.parquet")} - active


# --- what deltalake 1.6.6 does, which StateTable relies on ---------------------------------


def test_delta_empty_append_records_the_transaction(tmp_path):
    DeltaTable.create(str(tmp_path), SCHEMA)
    write_deltalake(str(tmp_path), SCHEMA.empty_table(), mode="append", commit_properties=txn(0))
    dt = DeltaTable(str(tmp_path))
    assert dt.version() == 1
    assert dt.transaction_version("job") == 0
    assert dt.file_uris() == []


def test_delta_accepts_a_stale_version_and_moves_backwards(tmp_path):
    DeltaTable.create(str(tmp_path), SCHEMA)
    write_deltalake(str(tmp_path), rows(["a"], 5), mode="append", commit_properties=txn(5))
    write_deltalake(str(tmp_path), rows(["b"], 3), mode="append", commit_properties=txn(3))
    dt = DeltaTable(str(tmp_path))
    assert dt.transaction_version("job") == 3
    assert dt.to_pyarrow_dataset().count_rows() == 2


def test_delta_handle_write_conflicts_with_a_newer_commit_of_the_same_app(tmp_path):
    DeltaTable.create(str(tmp_path), SCHEMA)
    first, second = DeltaTable(str(tmp_path)), DeltaTable(str(tmp_path))
    write_deltalake(first, rows(["a"], 0), mode="append", commit_properties=txn(0))
    with pytest.raises(CommitFailedError):
        write_deltalake(second, rows(["b"], 1), mode="append", commit_properties=txn(1))
    assert DeltaTable(str(tmp_path)).transaction_version("job") == 0


# --- StateTable ---------------------------------------------------------------------------


def test_new_table_is_empty_and_nothing_is_committed(tmp_path):
    st = opened(tmp_path / "state")
    assert st.committed_batch() == -1
    assert not st.is_committed(0)
    assert st.count() == 0
    assert st.unseen(["a"]).to_pylist() == [True]
    assert DeltaTable(str(tmp_path / "state")).schema().to_arrow().field("key").nullable is False


def test_commit_then_unseen(tmp_path):
    st = opened(tmp_path / "state")
    assert st.commit(0, pa.array(["a", "b"]))
    assert st.committed_batch() == 0
    assert st.is_committed(0) and not st.is_committed(1)
    assert st.unseen(["a", "c", "b"]).to_pylist() == [False, True, False]
    result = st.unseen(pa.chunked_array([pa.array(["c"]), pa.array(["b"])]))
    assert isinstance(result, pa.BooleanArray)
    assert result.to_pylist() == [True, False]
    assert st.unseen(pa.array(["b", "d"], pa.large_string())).to_pylist() == [False, True]
    assert sorted(st.keys()) == ["a", "b"]


def test_commit_writes_each_key_once(tmp_path):
    st = opened(tmp_path / "state")
    st.commit(0, ["a", "a", "b"])
    st.commit(1, ["b", "c", "c"])
    assert sorted(st.keys()) == ["a", "b", "c"]


def test_same_batch_twice_writes_once(tmp_path):
    st = opened(tmp_path / "state")
    assert st.commit(0, ["a", "b"]) is True
    version = DeltaTable(str(tmp_path / "state")).version()
    assert st.commit(0, ["c"]) is False
    assert st.count() == 2
    assert st.unseen(["c"]).to_pylist() == [True]
    assert DeltaTable(str(tmp_path / "state")).version() == version


def test_stale_batch_is_refused_and_the_version_never_goes_back(tmp_path):
    st = opened(tmp_path / "state")
    st.commit(5, ["a"])
    assert st.commit(3, ["x"]) is False
    assert st.committed_batch() == 5
    assert st.keys() == ["a"]
    assert opened(tmp_path / "state").committed_batch() == 5


def test_stale_batch_is_refused_when_another_instance_committed(tmp_path):
    first, second = opened(tmp_path / "state"), opened(tmp_path / "state")
    assert first.commit(0, ["a"])
    assert second.commit(0, ["b"]) is False
    assert second.committed_batch() == 0
    assert second.commit(1, ["b"]) is True
    assert sorted(second.keys()) == ["a", "b"]


def test_empty_commit_advances_the_committed_batch(tmp_path):
    st = opened(tmp_path / "state")
    assert st.commit(0, []) is True
    assert st.commit(1, pa.array([], pa.string())) is True
    assert st.committed_batch() == 1 and st.is_committed(1)
    assert st.count() == 0
    assert st.commit(1, []) is False
    assert opened(tmp_path / "state").committed_batch() == 1


def test_reopen_rebuilds_the_index_and_the_committed_batch(tmp_path):
    st = opened(tmp_path / "state")
    st.commit(0, ["a", "b"])
    st.commit(1, ["c"])
    st.close()
    with pytest.raises(RuntimeError, match="open"):
        st.unseen(["a"])
    again = opened(tmp_path / "state")
    assert again.committed_batch() == 1
    assert again.unseen(["a", "b", "c", "d"]).to_pylist() == [False, False, False, True]
    st.open()
    assert st.unseen(["c", "d"]).to_pylist() == [False, True]


def test_open_indexes_only_keys_within_the_window(tmp_path):
    now = int(time.time() * 1000)
    st = opened(tmp_path / "state", window=60)
    st.commit(0, ["old"], now_ms=now - 3_600_000)
    st.commit(1, ["new"], now_ms=now)
    assert st.unseen(["old", "new"]).to_pylist() == [False, False]  # expiry waits for open/maintain
    again = opened(tmp_path / "state", window=60)
    assert again.unseen(["old", "new"]).to_pylist() == [True, False]
    # "old" comes back: a second row until maintain drops the expired one, and it stays seen
    assert again.commit(2, ["old"], now_ms=now)
    assert sorted(again.keys()) == ["new", "old", "old"]
    assert again.maintain(now_ms=now)["expired"] == 1
    assert sorted(again.keys()) == ["new", "old"]
    assert again.unseen(["old", "new"]).to_pylist() == [False, False]


def test_maintain_expires_keys_past_the_window_and_keeps_the_batch(tmp_path):
    path = tmp_path / "state"
    st = opened(path, window=60)
    old = [f"old-{i}" for i in range(50)]
    recent = [f"new-{i}" for i in range(50)]
    st.commit(0, old[:25], now_ms=T0)
    st.commit(1, old[25:], now_ms=T0 + 5_000)
    st.commit(2, recent[:25], now_ms=T0 + 50_000)
    st.commit(3, [*recent[25:], "mixed"], now_ms=T0 + 55_000)
    st.commit(4, [], now_ms=T0 + 56_000)
    counts = st.maintain(now_ms=T0 + 100_000)
    assert counts["expired"] == 50
    assert counts["keys_indexed"] == 51
    assert counts["files_compacted"] == 2 and counts["files_written"] == 1
    assert counts["files_vacuumed"] == 4  # two expired files, two compacted ones
    assert st.unseen(old).to_pylist() == [True] * 50
    assert st.unseen(recent).to_pylist() == [False] * 50
    assert st.committed_batch() == 4
    assert sorted(st.keys()) == sorted([*recent, "mixed"])
    assert orphans(path) == set()
    assert (path / "_delta_log" / "_last_checkpoint").exists()
    reopened = StateTable(str(path), "job", 60)
    reopened.open()
    assert reopened.committed_batch() == 4
    assert st.commit(5, old[:1], now_ms=T0 + 100_000)  # an expired key may come back
    assert st.count() == 52


def test_committed_batch_survives_log_cleanup(tmp_path):
    path = tmp_path / "state"
    log_dir = path / "_delta_log"
    st = opened(path)
    for b in range(5):
        st.commit(b, [f"k{b}"])
    checkpointed = st.maintain()["version"]
    # delta-rs drops JSON commits older than the retention that precede an expired checkpoint
    two_days_ago = time.time() - 2 * DAY_S
    for log_file in log_dir.iterdir():
        os.utime(log_file, (two_days_ago, two_days_ago))
    st.commit(5, ["k5"])
    st.maintain()
    versions = sorted(int(p.name.split(".")[0]) for p in log_dir.glob("*.json"))
    assert versions[0] == checkpointed, versions
    again = opened(path)
    assert again.committed_batch() == 5
    assert sorted(again.keys()) == [f"k{b}" for b in range(6)]
    assert again.commit(6, ["k6"]) and opened(path).committed_batch() == 6


def test_maintain_removes_the_data_file_of_a_commit_a_crash_cut_short(tmp_path):
    import pyarrow.parquet as pq

    st = opened(tmp_path / "state")
    st.commit(0, ["a", "b"])
    orphan = tmp_path / "state" / "part-00000-crashed-writer-c000.snappy.parquet"
    pq.write_table(rows(["x"], 1), orphan)  # written, never committed: the writer was killed
    assert orphans(tmp_path / "state") == {orphan.name}
    st.maintain()
    assert orphans(tmp_path / "state") == set()
    assert sorted(st.keys()) == ["a", "b"]


def test_maintain_with_nothing_to_do_keeps_everything(tmp_path):
    st = opened(tmp_path / "state")
    st.commit(0, ["a"])
    counts = st.maintain()
    assert counts["expired"] == 0 and counts["files_vacuumed"] == 0
    assert st.keys() == ["a"] and st.committed_batch() == 0


def test_null_key_is_refused(tmp_path):
    st = opened(tmp_path / "state")
    with pytest.raises(ValueError, match="null"):
        st.commit(0, pa.array(["a", None]))
    assert st.committed_batch() == -1 and st.count() == 0


def test_pickles_as_an_unopened_copy(tmp_path):
    st = opened(tmp_path / "state")
    st.commit(0, ["a"])
    copy = pickle.loads(pickle.dumps(st))
    assert (copy.path, copy.app_id, copy.window_ms) == (st.path, st.app_id, st.window_ms)
    with pytest.raises(RuntimeError):
        copy.unseen(["a"])
    copy.open()
    assert copy.unseen(["a"]).to_pylist() == [False]
    assert pickle.loads(pickle.dumps(StateTable("x", "y", 1.5))).window_ms == 1500


def test_another_delta_table_at_the_path_is_refused(tmp_path):
    write_deltalake(str(tmp_path / "other"), pa.table({"id": [1]}))
    with pytest.raises(FatalError, match=r"state\.path"):
        opened(tmp_path / "other")


def test_a_retried_commit_that_had_landed_indexes_its_keys(tmp_path):
    """A commit whose call failed after it landed (an S3 reply lost) is retried: the retry writes
    nothing (the table has the batch) but its keys must be indexed, or their redeliveries pass."""
    st = opened(tmp_path / "state")
    assert st.commit(0, pa.array(["a"]))
    # The landed commit, made as if by the failed call (the index of ``st`` never saw it).
    write_deltalake(str(tmp_path / "state"), rows(["b", "c"], 1), mode="append", commit_properties=txn(1))
    assert st.commit(1, pa.array(["b", "c"])) is False
    assert st.committed_batch() == 1
    assert st.unseen(["a", "b", "c", "d"]).to_pylist() == [False, False, False, True]
