"""The Delta sink on real tables: read back with deltalake, pyarrow.dataset and Spark's file reader."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from ingest.errors import FatalError
from sinks.delta.config import DeltaSinkConfig
from sinks.delta.sink import DeltaSink
from tests.support.jobs import body, job_config, run_cli, run_in_session, summary, write_config

pytestmark = pytest.mark.spark

ROWS = (
    "SELECT id, id % 3 AS part, concat('v', id) AS v, "
    "named_struct('message_id', concat('m', id), 'receipt_handle', 'h', 'body', '{{}}', "
    "'received_at', 1000 + id, 'arrival', id) AS _meta FROM range({lo}, {hi})"
)


def sink(path, **over) -> DeltaSink:
    return DeltaSink(DeltaSinkConfig(type="delta", name="out", path=str(path), app_id="job.out", **over))


def rows(spark, lo: int, hi: int, extra: str = ""):
    return spark.sql(ROWS.format(lo=lo, hi=hi).replace(" AS v,", f" AS v,{extra}"))


def read_back(path) -> list[dict]:
    """The table's rows, read with deltalake (not the sink's code), sorted by id."""
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def test_append_commits_each_batch_once_and_a_replay_adds_no_commit(spark, tmp_path):
    out = sink(tmp_path / "t", partition_by=["part"])
    assert out.write(rows(spark, 0, 30), 0).written == 30
    assert out.write(rows(spark, 30, 50), 1).written == 20
    version = DeltaTable(str(tmp_path / "t")).version()
    assert out.write(rows(spark, 30, 50), 1).written == 0  # the replay of batch 1
    assert sink(tmp_path / "t", partition_by=["part"]).write(rows(spark, 30, 50), 0).written == 0
    dt = DeltaTable(str(tmp_path / "t"))
    assert dt.version() == version and dt.transaction_version("job.out") == 1
    got = read_back(tmp_path / "t")
    assert [r["id"] for r in got] == list(range(50))
    assert got[7]["_meta"] == {"message_id": "m7", "received_at": 1007}  # no staging fields (arrival…)
    assert (got[7]["part"], got[7]["v"]) == (1, "v7")
    files = dt.file_uris()
    assert {f.split("/")[-2] for f in files} == {"part=0", "part=1", "part=2"}
    for action in pa.table(dt.get_add_actions(flatten=True)).to_pylist():
        assert action["num_records"] > 0 and action["min.id"] <= action["max.id"]


def test_the_table_reads_with_pyarrow_dataset_and_sparks_file_reader(spark, tmp_path):
    out = sink(tmp_path / "t", partition_by=["part"], include_meta=False)
    out.write(rows(spark, 0, 40), 0)
    dt = DeltaTable(str(tmp_path / "t"))
    assert sorted(dt.to_pyarrow_dataset().to_table(columns=["id"])["id"].to_pylist()) == list(range(40))
    assert {f.name for f in dt.schema().fields} == {"id", "part", "v"}
    files = ds.dataset(dt.file_uris(), format="parquet").to_table()
    assert files.num_rows == 40 and "_meta" not in files.column_names
    read = spark.read.option("basePath", str(tmp_path / "t")).parquet(*dt.file_uris())
    got = {(r["id"], r["part"], r["v"]) for r in read.collect()}
    assert got == {(i, i % 3, f"v{i}") for i in range(40)}


def test_schema_mode_merge_adds_a_column_and_without_it_the_batch_fails(spark, tmp_path):
    sink(tmp_path / "t").write(rows(spark, 0, 5), 0)
    with pytest.raises(FatalError, match=r"sinks\.out\.schema_mode.*\['w'\]"):
        sink(tmp_path / "t").write(rows(spark, 5, 10, " id * 10 AS w,"), 1)
    assert (
        sink(tmp_path / "t", schema_mode="merge").write(rows(spark, 5, 10, " id * 10 AS w,"), 1).written == 5
    )
    got = read_back(tmp_path / "t")
    assert [r["w"] for r in got] == [None] * 5 + [50, 60, 70, 80, 90]


def test_merge_upserts_the_latest_row_per_key_within_the_batch_too(spark, tmp_path):
    out = sink(tmp_path / "t", mode="merge", merge_keys=["part"], include_meta=False)
    assert out.write(rows(spark, 0, 3), 0).written == 3
    out.write(rows(spark, 3, 11), 1)  # ids 3..10: per part the latest received is 9, 10, 8
    got = {r["part"]: r["id"] for r in read_back(tmp_path / "t")}
    assert got == {0: 9, 1: 10, 2: 8}
    assert len(read_back(tmp_path / "t")) == 3
    version = DeltaTable(str(tmp_path / "t")).version()
    out.write(rows(spark, 100, 103), 1)  # a replay: nothing
    assert DeltaTable(str(tmp_path / "t")).version() == version


def test_maintenance_compacts_and_vacuums_the_files_of_a_batch_that_never_committed(spark, tmp_path):
    out = sink(tmp_path / "t", vacuum_retention=0)
    for batch in range(4):
        out.write(rows(spark, batch * 10, batch * 10 + 10), batch)
    stray = tmp_path / "t" / "part-00000004-deadbeef.parquet"  # what a killed batch leaves
    stray.write_bytes(Path(DeltaTable(str(tmp_path / "t")).file_uris()[0]).read_bytes())
    done = out.maintain()
    assert done["files_compacted"] >= 4 and done["files_vacuumed"] >= 1
    assert not stray.exists()
    assert [r["id"] for r in read_back(tmp_path / "t")] == list(range(40))
    assert DeltaTable(str(tmp_path / "t")).transaction_version("job.out") == 3


def test_bad_config_exits_2_naming_the_key(spark, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "data.csv").write_text("a,b\n")
    cases = {
        "path": {"path": str(plain)},
        "partition_by": {"path": str(tmp_path / "t"), "partition_by": ["no_such_column"]},
    }
    for key, options in cases.items():
        tmp = tmp_path / key
        tmp.mkdir()
        cfg = job_config(tmp, sinks=[{"type": "delta", "name": "lake"} | options])
        done = run_cli(write_config(tmp, cfg), timeout=180)
        assert done.returncode == 2, done.stdout + done.stderr
        assert (
            f"sinks.lake.{key}" in done.stderr and "no_such_column" * (key == "partition_by") in done.stderr
        )


def test_a_job_writes_each_message_once_into_the_table(spark, tmp_path):
    from sources.fake.store import FakeQueue

    q = FakeQueue(str(tmp_path / "queues"), "in")
    ids = q.send_batch([{"body": body(i)} for i in range(300)])
    for i in range(5):
        q.send(body(i), message_id=ids[i])  # redelivered duplicates
    table = tmp_path / "lake"
    cfg = job_config(
        tmp_path, sinks=[{"type": "delta", "name": "lake", "path": str(table), "partition_by": ["user_id"]}]
    )
    code, text = run_in_session(write_config(tmp_path, cfg))
    assert code == 0, text
    assert summary(text)["writtenBySink"]["lake"] == 300
    dt = DeltaTable(str(table))
    got = sorted(dt.to_pyarrow_table(columns=["event_id"])["event_id"].to_pylist())
    assert got == list(range(300))
    assert json.loads(json.dumps(dt.metadata().partition_columns)) == ["user_id"]
    assert dt.transaction_version("t-job.lake") is not None
