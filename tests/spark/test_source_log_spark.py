"""batch_files() names exactly the files Spark reads in each micro-batch, across log compaction;
prune() keeps a restarted job exact."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

from checkpoints.journal import committed_batches
from checkpoints.source_log import _parse, batch_files
from ingest.config import parse_config
from ingest.connector.envelope import FILE_COLUMN
from ingest.intake.envelope import spark_schema
from ingest.pipeline import Job
from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir

pytestmark = pytest.mark.spark


def test_batch_files_match_what_spark_read(tmp_path, spark):
    from pyspark.sql import functions as F

    staging = tmp_path / "staging"
    staging.mkdir()
    ckpt = str(tmp_path / "ckpt")
    for i in range(24):  # two files per batch over 12 batches: crosses 9.compact
        (staging / f"{i:04d}.jsonl").write_text(f'{{"message_id": "m{i}"}}\n')
    seen: dict[int, tuple[set[str], list[str] | None]] = {}

    def handle(df, batch_id):
        read = {r[0] for r in df.select(FILE_COLUMN).distinct().collect()}
        seen[batch_id] = ({urlparse(p).path for p in read}, batch_files(ckpt, batch_id))

    query = (
        spark.readStream.format("json")
        .schema(spark_schema())
        .option("maxFilesPerTrigger", 2)
        .load(str(staging))
        .select("*", F.col("_metadata.file_path").alias(FILE_COLUMN))
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sorted(seen) == list(range(12))
    for batch_id, (read, named) in seen.items():
        assert named is not None and len(named) == 2, batch_id
        assert set(named) == read, batch_id
    assert (tmp_path / "ckpt" / "sources" / "0" / "9.compact").exists()
    # After compaction the single log files may be gone; the compact file still answers.
    for batch_id in range(10):
        single = tmp_path / "ckpt" / "sources" / "0" / str(batch_id)
        single.unlink(missing_ok=True)
    assert set(batch_files(ckpt, 3)) == seen[3][0]


def test_a_restart_prunes_the_log_and_delivers_exactly_once(tmp_path, spark):
    """Each start drops the committed, deleted staged files from Spark's file-source log; Spark
    restarts on the pruned log, and nothing is read twice or missed."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    cfg = job_config(
        tmp_path,
        source={"batch_size": 10},
        staging={"roll_messages": 10, "roll_interval": "100ms", "max_files_per_trigger": 1},
    )
    log_dir = Path(cfg["checkpoint"]) / "sources" / "0"

    def entries(name: str) -> list[str]:
        return [urlparse(e["path"]).path for e in _parse((log_dir / name).read_bytes())]

    def drain(start: int) -> None:
        q.send_batch([{"body": body(i)} for i in range(start, start + 150)])
        job = Job(parse_config(cfg), echo=lambda s: None)
        assert job.run() == 0
        assert job.metrics.summary()["written"] == 150

    drain(0)
    first = entries("9.compact")
    assert len(first) == 10  # Spark keeps every file it read, deleted or not
    # A restart lists the last committed batch's files again (cleanSource deletes them then), so
    # their entries stay. Run 1 stages 10 to 14 files, as its receives and rolls fall: with ten,
    # that batch is in 9.compact.
    relisted = set(batch_files(cfg["checkpoint"], max(committed_batches(cfg["checkpoint"]))) or ())
    assert relisted and len(relisted & set(first)) < len(first)
    # cleanSource deletes in the background, and a stop can outrun it: one such file left over.
    Path(first[0]).write_text("")
    drain(150)
    # Run 2's start deleted what was left of committed batches, then pruned their entries.
    assert not any(Path(p).exists() for p in first)
    compacts = sorted(int(p.name.split(".")[0]) for p in log_dir.glob("*.compact"))
    assert compacts[-1] >= 19
    newest = entries(f"{compacts[-1]}.compact")
    # Run 1's first files were pruned at run 2's start, all but those Spark lists again.
    assert newest and set(first) & set(newest) <= relisted
    rows = read_jsonl_dir(tmp_path / "out")
    assert sorted(r["event_id"] for r in rows) == list(range(300))
    assert q.count()["total"] == 0


def test_a_long_run_restarts_its_query_to_prune_the_log_and_delivers_exactly_once(tmp_path, spark):
    """``staging.max_log_files``: each time the query has read that many staged files, it finishes
    what is staged, stops, the log is pruned of deleted files and the query starts again on the
    same checkpoint: nothing is read twice or missed, and the log stays short."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(400)])
    cfg = job_config(
        tmp_path,
        source={"batch_size": 10},
        staging={"roll_messages": 10, "roll_interval": "100ms", "max_files_per_trigger": 1}
        | {"max_log_files": 12, "max_in_flight": 60},  # staged over the whole run, not at its start
    )
    job = Job(parse_config(cfg), echo=lambda s: None)
    assert job.run() == 0
    assert job.metrics.total("logRenewals") >= 2
    assert job.metrics.total("prunedLogEntries") > 0
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(400))
    assert q.count()["total"] == 0
    assert job.metrics.summary()["deletedMessages"] == 400
    log_dir = Path(cfg["checkpoint"]) / "sources" / "0"
    logs = [p.read_bytes() for p in log_dir.iterdir() if not p.name.startswith(".")]
    listed = {e["path"] for data in logs for e in _parse(data)}
    assert len(listed) < job.stager.files_written  # without renewals the log lists every file
