"""The Delta sink against a concurrent writer: real delta-rs conflicts, retried, then fatal.

A second writer (its own ``DeltaTable`` handle, ``write_deltalake``) commits to the table right
before the sink's commit call: the sink's snapshot is then one version behind, as when another
job commits between the sink's read of the table and its commit. The test wraps the delta-rs
call the sink commits with (``DeltaTable.create_write_transaction``; ``TableMerger.execute`` for
``mode: merge``) only to run the other writer first and to record how each call ended; the
conflict itself (``CommitFailedError``) is raised by delta-rs.

What conflicts in delta-rs 1.6: an append racing another writer's blind append does not (delta-rs
re-reads the log and commits at the next version); an append racing a metadata change (a new
column, table properties) does ("Metadata changed since last commit"), and so does a merge racing
an append ("a concurrent transactions added new data").
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableMerger

from ingest.errors import FatalError
from tests.support.delta_helpers import other_rows, race, rows, sink, table

pytestmark = pytest.mark.spark


def test_an_append_racing_another_writers_append_commits_at_once_and_keeps_both(spark, tmp_path, monkeypatch):
    """Blind appends do not conflict: delta-rs moves the sink's commit past the other one, no retry."""
    path = tmp_path / "t"
    out = sink(path)
    out.write(rows(spark, 0, 10), 0)
    rival = race(
        monkeypatch,
        DeltaTable,
        "create_write_transaction",
        lambda n: write_deltalake(str(path), other_rows([1000 + n]), mode="append"),
        times=1,
    )
    assert out.write(rows(spark, 10, 30), 1).written == 20
    assert rival == ["committed"]
    dt = DeltaTable(str(path))
    assert dt.version() == 3 and dt.transaction_version("job.out") == 1  # create, batch 0, other, batch 1
    assert [r["id"] for r in table(path)] == [*range(30), 1000]


def test_a_commit_that_loses_to_a_concurrent_schema_change_is_retried_and_lands_once(
    spark, tmp_path, monkeypatch
):
    path = tmp_path / "t"
    out = sink(path)
    out.write(rows(spark, 0, 10), 0)
    rival = race(
        monkeypatch,
        DeltaTable,
        "create_write_transaction",
        lambda n: write_deltalake(str(path), other_rows([1000], w=["x"]), mode="append", schema_mode="merge"),
        times=1,
    )
    assert out.write(rows(spark, 10, 30), 1).written == 20
    assert rival == ["CommitFailedError", "committed"]  # lost to the other writer, then retried
    dt = DeltaTable(str(path))
    assert dt.version() == 3 and dt.transaction_version("job.out") == 1
    got = table(path)
    assert [r["id"] for r in got] == [*range(30), 1000]
    assert got[-1]["w"] == "x" and {r["w"] for r in got[:-1]} == {None}
    assert out.write(rows(spark, 10, 30), 1).written == 0  # a replay: nothing
    assert DeltaTable(str(path)).version() == 3


def test_a_merge_that_loses_to_a_concurrent_append_is_retried_and_keeps_the_appended_rows(
    spark, tmp_path, monkeypatch
):
    path = tmp_path / "t"
    out = sink(path, mode="merge", merge_keys=["id"])
    out.write(rows(spark, 0, 6), 0)
    rival = race(
        monkeypatch,
        TableMerger,
        "execute",
        lambda n: write_deltalake(str(path), other_rows([1000]), mode="append"),
        times=1,
    )
    out.write(rows(spark, 3, 9, tag="new"), 1)
    assert rival == ["CommitFailedError", "committed"]
    got = {r["id"]: r["v"] for r in table(path)}
    assert got == {0: "v0", 1: "v1", 2: "v2"} | {i: f"new{i}" for i in range(3, 9)} | {1000: "other1000"}
    assert len(table(path)) == 10 and DeltaTable(str(path)).transaction_version("job.out") == 1


@pytest.mark.parametrize("retries", [0, 2])
def test_a_persistent_conflict_fails_the_batch_naming_the_sink_and_the_retries(
    spark, tmp_path, monkeypatch, retries
):
    path = tmp_path / "t"
    out = sink(path, commit_retries=retries)
    out.write(rows(spark, 0, 10), 0)
    rival = race(
        monkeypatch,
        DeltaTable,
        "create_write_transaction",
        lambda n: write_deltalake(
            str(path), other_rows([1000 + n], **{f"w{n}": ["x"]}), mode="append", schema_mode="merge"
        ),
        times=100,
    )
    with pytest.raises(FatalError) as caught:
        out.write(rows(spark, 10, 30), 1)
    text = str(caught.value)
    assert text.startswith("sinks.out: commit batch 1: ") and "Metadata changed" in text, text
    assert f"a concurrent writer; {retries} retries spent" in text
    assert rival == ["CommitFailedError"] * (retries + 1)
    dt = DeltaTable(str(path))
    assert dt.transaction_version("job.out") == 0
    assert [r["id"] for r in table(path)] == [*range(10), *range(1000, 1001 + retries)]
    assert not list(path.rglob("part-00000001-*.parquet"))  # the failed batch's files are deleted

    monkeypatch.undo()  # the other writer stops; the next run redoes the batch
    assert sink(path, commit_retries=retries).write(rows(spark, 10, 30), 1).written == 20
    assert [r["id"] for r in table(path)] == [*range(30), *range(1000, 1001 + retries)]
    assert DeltaTable(str(path)).transaction_version("job.out") == 1
