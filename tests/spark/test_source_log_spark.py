"""batch_files() names exactly the files Spark reads in each micro-batch, across log compaction."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from checkpoints.source_log import batch_files
from ingest.envelope import FILE_COLUMN, spark_schema

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
