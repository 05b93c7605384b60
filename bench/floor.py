"""Spark's own floor: the minimal streaming job over staged envelopes, with none of mq-ingest's work.

readStream (the same file source, envelope schema and ``maxFilesPerTrigger``) → foreachBatch:
``from_json(body)`` → JSON files. No dedup, no state, no acks: what Spark alone costs on the data
the pipeline stages, so the benchmark can print ``ratio pipeline/floor``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ingest.connector import Received
from ingest.intake.envelope import encode, spark_schema


def stage(directory: str, n: int, body: Callable[[int], dict], per_file: int = 5000) -> None:
    """Write ``n`` envelopes as the receivers would (``encode``), ``per_file`` lines a file."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    for start in range(0, n, per_file):
        msgs = [
            Received(
                message_id=uuid.uuid4().hex,
                receipt_handle=uuid.uuid4().hex,
                body=body(i)["body"],
                sent_ts=now,
                enqueue_ts=now,
            )
            for i in range(start, min(n, start + per_file))
        ]
        data = b"\n".join(encode("src", "in", "src#0", msgs)) + b"\n"
        tmp = Path(directory) / f"_{start}.tmp"
        tmp.write_bytes(data)
        os.rename(tmp, Path(directory) / f"{start:012d}.jsonl")


def floor_rate(
    spark, root: str, n: int, schema: str, body: Callable[[int], dict], files_per_trigger: int
) -> float:
    """Rows/s of the minimal job over ``n`` staged envelopes (staging excluded from the time)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    stage(f"{root}/staging", n, body)
    body_schema = StructType.fromDDL(schema)

    def handle(df, batch_id: int) -> None:
        out = df.select(F.from_json("body", body_schema).alias("b")).select("b.*")
        out.write.mode("overwrite").json(f"{root}/out/batch_id={batch_id}")

    t0 = time.perf_counter()
    query = (
        spark.readStream.format("json")
        .schema(spark_schema())
        .option("pathGlobFilter", "*.jsonl")
        .option("maxFilesPerTrigger", files_per_trigger)
        .load(f"{root}/staging")
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", f"{root}/ckpt")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    written = spark.read.json(f"{root}/out").count()
    assert written == n, (written, n)
    return n / elapsed
