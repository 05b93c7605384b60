"""MNS → Spark end to end on the emulator: the reference examples (conf/mns_*.yaml) via ``ingest.run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mns.queue import QueueMeta

from tests.support.jobs import ROOT, read_jsonl_dir, run_cli, summary
from tests.support.mns_server import AK_ID, AK_SECRET, account, depth, send_bodies
from tests.support.oss_notifications import notification

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def job_from(conf: str, tmp: Path, **over) -> Path:
    """The example job with its state under ``tmp``, draining (available_now) with short polls."""
    cfg = yaml.safe_load((ROOT / "conf" / conf).read_text())
    cfg["sources"][0]["pollingWaitTime"] = "1s"
    cfg |= {
        "checkpoint": str(tmp / "checkpoint"),
        "state": {"path": str(tmp / "state")},
        "staging": {"dir": str(tmp / "staging"), "roll_messages": 500, "roll_interval": "200ms"},
        "trigger": {"mode": "available_now", "idle_rounds": 1},
        "spark": {"master": "local[2]", "log_level": "ERROR"},
        "metrics": {"file": str(tmp / "metrics.prom")},
    } | over
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def env(mns) -> dict[str, str]:
    return {"MNS_ENDPOINT": mns.url, "MNS_ACCESS_KEY_ID": AK_ID, "MNS_ACCESS_KEY_SECRET": AK_SECRET}


def test_example_1_json_events_to_console(tmp_path, mns):
    account(mns.url).get_queue("my-events-queue").create(QueueMeta())
    events = [
        {
            "userId": i,
            "action": "click" if i % 2 else "view",
            "timestamp": "2026-01-02T03:04:05.678Z",
            "payload": f"p{i}",
        }
        for i in range(30)
    ]
    send_bodies(mns.url, "my-events-queue", [json.dumps(e) for e in events] + ["{not json"])
    done = run_cli(job_from("mns_json_console.yaml", tmp_path), env=env(mns))
    assert done.returncode == 0, done.stdout + done.stderr
    s = summary(done.stdout)
    assert (s["written"], s["deserializationErrors"], s["deletedMessages"]) == (
        30,
        1,
        31 + s["duplicateMessages"],
    )
    assert "2026-01-02 03:04:05.678" in done.stdout and "p29" in done.stdout  # the console sink printed
    assert depth(mns.url, "my-events-queue") == 0
    assert AK_SECRET not in done.stdout + done.stderr


def test_example_2_oss_notifications_keep_object_created(tmp_path, mns):
    account(mns.url).get_queue("oss-events-queue").create(QueueMeta())
    created = [notification(key=f"img/{i}.jpg", size=1000 + i) for i in range(5)]
    removed = notification("ObjectRemoved:DeleteObject", key="img/old.jpg")
    # base64 on the wire, as OSS delivers them (send_bodies' default), plus a body that is no notification
    send_bodies(
        mns.url, "oss-events-queue", [json.dumps(n) for n in [*created[:4], removed]] + ['{"userId": 1}']
    )
    raw_json = json.dumps(created[4])  # a notification that arrives as plain JSON, not base64
    send_bodies(mns.url, "oss-events-queue", [raw_json], encode=False)
    out = tmp_path / "out"
    sink = {"type": "files", "name": "print_sink", "path": str(out), "format": "jsonl", "include_meta": False}
    done = run_cli(job_from("mns_oss_events.yaml", tmp_path, sinks=[sink]), env=env(mns))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = sorted(read_jsonl_dir(out), key=lambda r: r["ossObjectKey"])
    assert [(r["eventName"], r["ossBucketName"], r["ossObjectKey"], r["ossObjectSize"]) for r in rows] == [
        ("ObjectCreated:PutObject", "media-in", f"img/{i}.jpg", 1000 + i) for i in range(5)
    ]
    assert set(rows[0]) == {"eventName", "ossBucketName", "ossObjectKey", "ossObjectSize", "eventTime"}
    assert rows[0]["eventTime"].startswith("2026-03-01T11:43:06")
    s = summary(done.stdout)
    assert (s["deserializationErrors"], s["deletedMessages"]) == (1, 7 + s["duplicateMessages"])
    assert depth(mns.url, "oss-events-queue") == 0


def test_parquet_record_sets_give_one_row_per_record(tmp_path, mns):
    """Each MNS message carries one Parquet file; every record reaches the sink once."""
    import base64

    from tests.support.decode_helpers import encode, records
    from tests.support.jobs import read_jsonl_dir

    account(mns.url).get_queue("parquet-queue").create(QueueMeta())
    bodies = [encode("parquet", records(i * 3, 3)) for i in range(4)] + [b"PAR1 but not parquet \xff"]
    send_bodies(mns.url, "parquet-queue", [base64.b64encode(b).decode() for b in bodies], encode=False)
    out = tmp_path / "out"
    path = job_from(
        "mns_json_console.yaml",
        tmp_path,
        schema="id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP",
        transform=None,
        sinks=[{"type": "files", "name": "out", "path": str(out), "format": "jsonl"}],
    )
    cfg = yaml.safe_load(path.read_text())
    cfg["sources"][0] |= {"queueName": "parquet-queue", "format": "parquet"}
    path.write_text(yaml.safe_dump(cfg))
    done = run_cli(path, env=env(mns))
    assert done.returncode == 0, done.stdout + done.stderr
    s = summary(done.stdout)
    assert (s["written"], s["deserializationErrors"], s["deletedMessages"]) == (12, 1, 5)
    rows = read_jsonl_dir(out)
    assert sorted((r["id"], r["name"], r["amount"]) for r in rows) == [
        (r["id"], r["name"], r["amount"]) for r in records(0, 12)
    ]
    assert depth(mns.url, "parquet-queue") == 0


def test_bare_avro_records_and_container_files_on_mns(tmp_path, spark, mns):
    """``format: avro`` as Flink writes it (one bare record, schema from the DDL), and container files."""
    import base64
    import io

    import fastavro
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    from ingest.decode.avro_schema import avro_schema

    ddl = "userId BIGINT, action STRING, amount DOUBLE"
    writer = fastavro.parse_schema(avro_schema(to_arrow_schema(StructType.fromDDL(ddl), timezone="UTC")))

    def bare(i: int) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, writer, {"userId": i, "action": f"a{i}", "amount": i / 2})
        return buf.getvalue()

    container = io.BytesIO()
    fastavro.writer(container, writer, [{"userId": i, "action": f"a{i}", "amount": i / 2} for i in (10, 11)])
    bodies = [bare(i) for i in range(5)] + [container.getvalue(), b"\x02\x04"]
    account(mns.url).get_queue("avro-queue").create(QueueMeta())
    send_bodies(mns.url, "avro-queue", [base64.b64encode(b).decode() for b in bodies], encode=False)
    out = tmp_path / "out"
    path = job_from(
        "mns_json_console.yaml",
        tmp_path,
        schema=ddl,
        transform=None,
        sinks=[{"type": "files", "name": "out", "path": str(out), "format": "jsonl", "include_meta": False}],
    )
    cfg = yaml.safe_load(path.read_text())
    cfg["sources"][0] |= {"queueName": "avro-queue", "format": "avro"}
    path.write_text(yaml.safe_dump(cfg))
    done = run_cli(path, env=env(mns))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = sorted(read_jsonl_dir(out), key=lambda r: r["userId"])
    assert rows == [{"userId": i, "action": f"a{i}", "amount": i / 2} for i in (0, 1, 2, 3, 4, 10, 11)]
    s = summary(done.stdout)
    assert (s["written"], s["deserializationErrors"], s["deletedMessages"]) == (7, 1, 7)
    assert depth(mns.url, "avro-queue") == 0
