"""Benchmark: the staged file's format, JSON lines against Parquet, stage by stage, in one process.

The same SQS-like messages (the bench bodies, a handle, an id, an MD5, SQS's system attributes)
go through each stage a staged message passes, once per format, back to back:

- **encode**: the receiver thread turns a roll of ``Received`` into file bytes (JSON lines:
  ``envelope.encode``; Parquet: the columns gathered, a pyarrow table, ``pq.write_table``), in
  the process's CPU (pyarrow's threads included);
- **meta**: the stager thread reads the batch handler's columns back from those bytes
  (``StagedMeta``: pyarrow's JSON parser, or a Parquet column read);
- **spark**: Spark's floor over the staged files (``bench/floor.py``'s job, the envelope schema,
  ``from_json(body)`` → JSON files), in the driver JVM's CPU, the formats alternated in one
  session so both see the same JIT.

Per message, in µs of CPU; the ratio is Parquet's cost against JSON lines'. Run:
``python bench/staged_format.py [--messages N] [--rounds K] [--compression none|snappy|zstd]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import shutil
import sys
import tempfile
import time
import uuid
from operator import attrgetter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyarrow as pa
import pyarrow.parquet as pq

from bench.e2e_fake import SCHEMA, body
from ingest.connector import FIELDS, Received
from ingest.intake.envelope import encode, parse_columns, spark_schema

ROLL = 5000
"""Messages a staged file (the benchmarks' ``roll_messages``)."""
META_COLUMNS = ["source", "message_id", "receipt_handle", "receive_count", "received_at", "arrival"]
"""The columns the batch handler reads before its Spark job (about what ``StagedMeta`` keeps)."""
_ARROW = {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "boolean": pa.bool_()}
_MAP = pa.map_(pa.string(), pa.string())
ARROW_SCHEMA = pa.schema([(name, _ARROW.get(kind, _MAP)) for name, kind in FIELDS])
OWN = [f.name for f in dataclasses.fields(Received)]
_get = attrgetter(*OWN)


def messages(start: int, n: int) -> list[Received]:
    """A roll of SQS-like messages, as the awscrt source fills them."""
    now = int(time.time() * 1000)
    attrs = {
        "SentTimestamp": str(now),
        "ApproximateFirstReceiveTimestamp": str(now),
        "ApproximateReceiveCount": "1",
        "SenderId": "AIDAEXAMPLE",
    }
    return [
        Received(
            message_id=str(uuid.uuid4()),
            receipt_handle=uuid.uuid4().hex * 4,
            body=body(i)["body"],
            md5=uuid.uuid4().hex,
            sent_ts=now,
            first_receive_ts=now,
            receive_count=1,
            enqueue_ts=now,
            sender_id="AIDAEXAMPLE",
            attributes=attrs,
        )
        for i in range(start, start + n)
    ]


def as_jsonl(roll: list[Received]) -> bytes:
    return b"\n".join(encode("src", "in", "src#0", roll)) + b"\n"


def as_parquet(roll: list[Received], compression: str) -> bytes:
    """A roll as one Parquet file: its columns gathered in one pass, built and written by pyarrow."""
    n = len(roll)
    columns = dict(zip(OWN, zip(*map(_get, roll), strict=True), strict=True))
    now = int(time.time() * 1000)
    columns |= {
        "source": ["src"] * n,
        "queue": ["in"] * n,
        "receiver": ["src#0"] * n,
        "received_at": [now] * n,
        "arrival": range(n),
    }
    arrays = [pa.array(columns[f.name], type=f.type) for f in ARROW_SCHEMA]
    table = pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)
    out = io.BytesIO()
    pq.write_table(table, out, compression=compression, use_dictionary=False, write_statistics=False)
    return out.getvalue()


def per_message(fn, rolls, n: int) -> tuple[float, list]:
    """µs of the process's CPU a message for ``fn`` over ``rolls`` (pyarrow's own threads included;
    nothing else runs meanwhile), and what it returned."""
    t0 = time.process_time()
    out = [fn(r) for r in rolls]
    return (time.process_time() - t0) / n * 1e6, out


def spark_cpu(spark, root: str, name: str, files: list[bytes], fmt: str, n: int) -> float:
    """µs of the driver JVM's CPU a message for the floor job over ``files`` in format ``fmt``."""
    import psutil
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from ingest.runtime.spark import driver_jvm_pid

    staging = Path(root, name, "staging")
    staging.mkdir(parents=True)
    suffix = "jsonl" if fmt == "json" else "parquet"
    for k, data in enumerate(files):
        (staging / f"{k:06d}.{suffix}").write_bytes(data)
    body_schema = StructType.fromDDL(SCHEMA)
    out = f"{root}/{name}/out"

    def handle(df, batch_id: int) -> None:
        rows = df.select(F.from_json("body", body_schema).alias("b"), "message_id", "_file").select(
            "b.*", "_file"
        )
        rows.write.mode("append").json(out)

    jvm = psutil.Process(driver_jvm_pid(spark))
    c0 = sum(jvm.cpu_times()[:2])
    query = (
        spark.readStream.format(fmt)
        .schema(spark_schema())
        .option("pathGlobFilter", f"*.{suffix}")
        .option("maxFilesPerTrigger", 2)
        .load(str(staging))
        .select("*", F.col("_metadata.file_path").alias("_file"))
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", f"{root}/{name}/ckpt")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    cpu = sum(jvm.cpu_times()[:2]) - c0
    written = spark.read.json(out).count()
    assert written == n, (written, n)
    return cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3, help="Spark runs of each format, alternated")
    ap.add_argument("--compression", default="none")
    args = ap.parse_args()
    n = args.messages - args.messages % ROLL
    rolls = [messages(s, ROLL) for s in range(0, n, ROLL)]

    enc_json, jsonl = per_message(as_jsonl, rolls, n)
    enc_pq, parquet = per_message(lambda r: as_parquet(r, args.compression), rolls, n)
    meta_json, _ = per_message(lambda d: parse_columns(pa.BufferReader(d), len(d), META_COLUMNS), jsonl, n)
    meta_pq, _ = per_message(lambda d: pq.read_table(pa.BufferReader(d), columns=META_COLUMNS), parquet, n)
    size_json = sum(map(len, jsonl)) / n
    size_pq = sum(map(len, parquet)) / n

    from ingest.runtime.spark import make_session

    spark = make_session("local[2]", "bench-staged-format", {}, "ERROR")
    root = tempfile.mkdtemp(prefix="staged-format-")
    runs: dict[str, list[float]] = {"json": [], "parquet": []}
    try:
        for k in range(args.rounds):
            for fmt, files in (("json", jsonl), ("parquet", parquet)):
                runs[fmt].append(spark_cpu(spark, root, f"{fmt}{k}", files, fmt, n))
                print(f"round {k + 1} {fmt:8s} driver JVM {runs[fmt][-1]:6.1f} µs a message", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)

    last = {fmt: cpu[-1] for fmt, cpu in runs.items()}
    print(f"\n{n:,} messages, {ROLL:,} a file, Parquet compression {args.compression}")
    print("| stage | JSON lines | Parquet | Parquet / JSON lines |")
    print("|---|---|---|---|")
    for stage, a, b in (
        ("encode (receiver thread), µs a message", enc_json, enc_pq),
        ("meta columns (stager thread), µs a message", meta_json, meta_pq),
        ("Spark floor (driver JVM, last round), µs a message", last["json"], last["parquet"]),
        ("bytes a message", size_json, size_pq),
    ):
        print(f"| {stage} | {a:,.1f} | {b:,.1f} | {b / a:.2f}x |")
    total_json = enc_json + meta_json + last["json"]
    total_pq = enc_pq + meta_pq + last["parquet"]
    ratio = total_pq / total_json
    print(f"| all three stages, µs a message | {total_json:,.1f} | {total_pq:,.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
