"""Spark's side of a job on S3 through Hadoop's S3A, against moto's S3 server on 127.0.0.1.

The job's own query (``start_query``) reads staged objects from ``s3a://``, keeps its checkpoint
on ``s3a://`` and writes the files sink (``s3a://``) and the Delta sink (``s3://``, delta-rs) in
``foreachBatch``, over batches, a replay of a batch whose commit Spark had not written, and a
restart of the query: every message once in both sinks.

The suite's shared session carries S3A's jars (``tests/conftest.py``: the cache ``make dev``
fills; measured +1 s of start-up a worker, no more resident memory until S3A is used). S3A's
settings for this module's server are ``s3a.spark_settings()`` from the server's standard AWS settings,
set on the running session without the ``spark.hadoop.`` prefix (the session started before
the server; a job gets them at start, ``tests/unit/test_s3a_conf.py``), and removed after.
"""

from __future__ import annotations

import uuid

import orjson
import pytest
from deltalake import DeltaTable

from ingest.batch.check import check_job
from ingest.batch.query import start_query
from ingest.config import parse_config
from ingest.runtime import s3a
from ingest.storage.aws import delta_options
from sinks.delta.config import DeltaSinkConfig
from sinks.delta.sink import DeltaSink
from sinks.files.config import FilesSinkConfig
from sinks.files.sink import FilesSink
from tests.support.jobs import job_config
from tests.support.s3_server import s3_server_in_env

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def s3(spark):
    """A server, its settings in the environment and on the shared session, and a bucket of this
    module's own (S3A caches a file system per bucket: another module's server gets another)."""
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if "hadoop-aws" not in jars:
        pytest.fail("the shared session has no S3A jars: run `make s3a-jars` (make dev does)")
    with s3_server_in_env() as server:
        hadoop = {k.removeprefix("spark.hadoop."): v for k, v in s3a.spark_settings().items()}
        for key, value in hadoop.items():
            spark.conf.set(key, value)
        server.name = server.bucket(f"s3a-{uuid.uuid4().hex[:12]}")
        try:
            yield server
        finally:
            for key in hadoop:
                spark.conf.unset(key)


def stage(s3, name: str, ids: range) -> None:
    """One staged object of envelope lines, as the stager writes it (a whole PUT)."""
    lines = (
        orjson.dumps(
            {
                "source": "q",
                "queue": "q",
                "message_id": f"m{i}",
                "receipt_handle": f"h{i}",
                "body": orjson.dumps({"id": i}).decode(),
                "received_at": i,
                "arrival": i,
            }
        )
        for i in ids
    )
    s3.client().put_object(Bucket=s3.name, Key=f"staging/{name}.jsonl", Body=b"\n".join(lines) + b"\n")


def test_a_query_on_s3_writes_files_and_delta_once_over_a_replay_and_a_restart(spark, s3, tmp_path):
    b = s3.name
    cfg = parse_config(
        job_config(
            tmp_path,
            checkpoint=f"s3://{b}/checkpoint",  # s3:// and s3a:// name the same objects
            staging={"dir": f"s3a://{b}/staging"},
            trigger={"mode": "processing_time", "interval": 0.2},
        )
    )
    files = FilesSink(FilesSinkConfig(type="files", name="out", path=f"s3://{b}/out"))
    delta = DeltaSink(DeltaSinkConfig(type="delta", name="lake", path=f"s3://{b}/table").for_job("j"))
    batches: list[int] = []

    def handle(df, batch_id: int) -> None:
        rows = df.selectExpr("message_id", "CAST(get_json_object(body, '$.id') AS INT) AS id", "_file")
        files.write(rows, batch_id)
        delta.write(rows.drop("_file"), batch_id)
        batches.append(batch_id)

    s3.client().put_object(Bucket=b, Key="staging/_mq_ingest", Body=b"")  # the prefix exists for Spark
    stage(s3, "a", range(0, 5))
    query = start_query(spark, cfg, handle)
    query.processAllAvailable()
    stage(s3, "b", range(5, 12))
    query.processAllAvailable()
    query.stop()
    assert batches == [0, 1]
    # Batch 1 ran but its commit is lost (a crash before Spark wrote it): the restart replays it.
    s3.client().delete_object(Bucket=b, Key="checkpoint/commits/1")
    query = start_query(spark, cfg, handle)
    query.processAllAvailable()
    stage(s3, "c", range(12, 15))
    query.processAllAvailable()
    query.stop()

    assert batches == [0, 1, 1, 2]
    out = spark.read.json(f"s3a://{b}/out").collect()
    assert sorted(r["id"] for r in out) == list(range(15))  # once each, the replay overwrote its own
    assert {r["_file"].rsplit("/", 1)[-1] for r in out} == {"a.jsonl", "b.jsonl", "c.jsonl"}
    assert all(r["_file"].startswith(f"s3a://{b}/staging/") for r in out)
    keys = s3.keys(b, "out/")
    assert {k.split("/")[1] for k in keys} == {"batch_id=0", "batch_id=1", "batch_id=2"}
    assert sum(k.endswith("/_SUCCESS") for k in keys) == 3 and not any("_temporary" in k for k in keys)
    table = DeltaTable(f"s3://{b}/table", storage_options=delta_options())  # no options of the sink's
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(15))
    assert table.transaction_version("j.lake") == 2
    commits = [k for k in s3.keys(b, "checkpoint/commits/") if not k.endswith("/")]  # S3A's folder marker
    assert commits == [f"checkpoint/commits/{n}" for n in range(3)]


def test_check_job_warns_when_the_session_has_no_s3a(spark, s3, tmp_path, monkeypatch, caplog):
    """The shared session has the jars; a cache elsewhere and a job naming none: a warning."""
    cfg = parse_config(job_config(tmp_path, checkpoint=f"s3a://{s3.name}/c"))
    caplog.set_level("WARNING", logger="ingest.batch.check")
    check_job(cfg, spark)
    assert "S3A" not in caplog.text
    monkeypatch.setenv("MQ_INGEST_CACHE", str(tmp_path / "empty-cache"))
    # A session started without them cannot run beside the shared one in this process: its
    # settings stand in (an empty SparkConf: no spark.jars).
    from pyspark import SparkConf

    monkeypatch.setattr(spark.sparkContext, "getConf", lambda: SparkConf(loadDefaults=False))
    check_job(cfg, spark)
    assert f"checkpoint: s3a://{s3.name}/c is read through Hadoop's S3A" in caplog.text
    assert f"hadoop-aws-{s3a.hadoop_version()}.jar" in caplog.text
