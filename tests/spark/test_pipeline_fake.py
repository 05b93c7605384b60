"""End to end on a local SparkSession: fake queue → staging → Spark → dedup → files sink → ack."""

from __future__ import annotations

import gc
import hashlib
import weakref

import pytest

from checkpoints.state import StateTable
from ingest.config import parse_config
from ingest.connector import STAGING_FIELDS
from ingest.errors import FatalError
from ingest.pipeline import Job
from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir

pytestmark = pytest.mark.spark


def fill(tmp_path, n=300, dups=10, bad=3, start=0):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    ids = q.send_batch([{"body": body(i)} for i in range(start, start + n)])
    for mid in ids[:dups]:
        q.send(body(start + ids.index(mid)), message_id=mid)  # a redelivered duplicate
    bad_ids = [q.send(f"not json {k}") for k in range(bad)]
    return q, ids, bad_ids


def run(tmp_path, spark, **over) -> Job:
    job = Job(parse_config(job_config(tmp_path, **over)), echo=lambda s: None)
    code = job.run()
    assert code == 0
    return job


def event_ids(rows):
    return sorted(r["event_id"] for r in rows)


def state_keys(tmp_path):
    st = StateTable(str(tmp_path / "state"), "t-job", 86400)
    st.open()
    return st.keys()


@pytest.mark.parametrize("processes", [0, 1], ids=["in-driver", "child-process"])
def test_duplicates_dropped_bad_skipped_queue_empty(tmp_path, spark, processes):
    q, ids, bad_ids = fill(tmp_path)
    job = run(tmp_path, spark, source={"processes": processes})
    rows = read_jsonl_dir(tmp_path / "out")
    assert event_ids(rows) == list(range(300))
    assert {r["_meta"]["message_id"] for r in rows} == set(ids)
    # The output's _meta is the message's envelope, without the job's staging fields: no receipt
    # handle (it deletes the message), no second copy of the raw body, no staged file.
    meta = rows[0]["_meta"]
    assert {"source", "queue", "message_id", "md5", "sent_ts", "receive_count", "attributes"} <= set(meta)
    assert not set(meta) & set(STAGING_FIELDS)
    assert meta["attributes"]["ApproximateReceiveCount"] == str(meta["receive_count"])
    s = job.metrics.summary()
    assert s["received"] == 313
    assert s["duplicateMessages"] == 10
    assert s["deserializationErrors"] == 3
    assert s["written"] == 300
    assert s["deletedMessages"] == 313
    assert s["failedDeletes"] == 0
    assert q.count()["total"] == 0
    keys = state_keys(tmp_path)
    assert len(keys) == len(set(keys)) == 303
    assert set(keys) == set(ids) | set(bad_ids)


def test_dead_letter_keeps_body_and_error(tmp_path, spark):
    q, _, bad_ids = fill(tmp_path, n=50, dups=0, bad=4)
    run(
        tmp_path,
        spark,
        source={"on_bad_message": "dead_letter"},
        dead_letter={"path": str(tmp_path / "dlq")},
    )
    dead = read_jsonl_dir(tmp_path / "dlq")
    assert sorted(d["message_id"] for d in dead) == sorted(bad_ids)
    assert all(d["body"].startswith("not json") and "malformed JSON" in d["error"] for d in dead)
    assert len(read_jsonl_dir(tmp_path / "out")) == 50
    assert q.count()["total"] == 0


def test_json_nested_past_the_parsers_limit_is_dead_lettered_naming_the_limit(tmp_path, spark):
    q, _, bad_ids = fill(tmp_path, n=5, dups=0, bad=1)
    deep = q.send('{"event_id": 1, "action": ' + "[" * 9_999 + "]" * 9_999 + "}")
    run(
        tmp_path, spark, source={"on_bad_message": "dead_letter"}, dead_letter={"path": str(tmp_path / "dlq")}
    )
    dead = {d["message_id"]: d["error"] for d in read_jsonl_dir(tmp_path / "dlq")}
    assert dead == {
        deep: "JSON nested deeper than 1000 levels (the parser's limit)",
        bad_ids[0]: "malformed JSON or a value of the wrong type",
    }
    assert len(read_jsonl_dir(tmp_path / "out")) == 5
    assert q.count()["total"] == 0


def test_fail_policy_stops_naming_the_message_and_acks_nothing(tmp_path, spark):
    q, _, bad_ids = fill(tmp_path, n=20, dups=0, bad=1)
    job = Job(parse_config(job_config(tmp_path, source={"on_bad_message": "fail"})), echo=lambda s: None)
    with pytest.raises(FatalError) as err:
        job.run()
    assert bad_ids[0] in str(err.value)
    assert "on_bad_message is fail" in str(err.value)
    assert job.metrics.summary()["deletedMessages"] == 0
    assert q.count()["total"] == 21


def test_transform_filters_but_every_message_is_acked(tmp_path, spark):
    q, _ids, _ = fill(tmp_path, n=100, dups=0, bad=0)
    run(
        tmp_path,
        spark,
        transform="SELECT event_id, amount * 2 AS doubled FROM source WHERE event_id % 10 = 0",
    )
    rows = read_jsonl_dir(tmp_path / "out")
    assert sorted(r["event_id"] for r in rows) == list(range(0, 100, 10))
    assert all(r["doubled"] == r["event_id"] for r in rows)
    assert q.count()["total"] == 0


def test_a_transform_still_reads_the_staging_fields_of_meta(tmp_path, spark):
    """The files sink leaves the staging fields out of the _meta it writes, not out of the rows a
    transform reads: the raw body and the receipt handle stay selectable there."""
    q, _ids, _ = fill(tmp_path, n=20, dups=0, bad=0)
    run(
        tmp_path,
        spark,
        transform="SELECT event_id, _meta.body AS raw, _meta.receipt_handle AS handle, _meta FROM source",
    )
    rows = sorted(read_jsonl_dir(tmp_path / "out"), key=lambda r: r["event_id"])
    assert [r["raw"] for r in rows] == [body(i) for i in range(20)]
    assert all(r["handle"] for r in rows)
    assert all(not set(r["_meta"]) & set(STAGING_FIELDS) and r["_meta"]["message_id"] for r in rows)
    assert q.count()["total"] == 0


def test_second_run_only_processes_new_messages(tmp_path, spark):
    q, ids, _ = fill(tmp_path, n=40, dups=0, bad=0)
    run(tmp_path, spark)
    # The same ids again (a late redelivery) plus new ones: only the new ones are written.
    for i, mid in enumerate(ids[:5]):
        q.send(body(i), message_id=mid)
    q.send_batch([{"body": body(i)} for i in range(40, 60)])
    job = run(tmp_path, spark)
    assert job.metrics.summary()["duplicateMessages"] == 5
    assert event_ids(read_jsonl_dir(tmp_path / "out")) == list(range(60))
    assert q.count()["total"] == 0


def test_a_finished_job_is_freed_though_sparks_query_outlives_it(tmp_path, spark):
    """A process that runs jobs one after another (a notebook, ``make bench``) keeps none of the
    finished ones, their state table and key index: PySpark keeps the function foreachBatch runs
    in Py4J's pool for as long as the JVM holds the stopped query."""
    fill(tmp_path, n=20, dups=0, bad=0)
    job = run(tmp_path, spark)
    gone = weakref.ref(job)
    del job
    gc.collect()
    assert gone() is None, "the finished job is still referenced: " + repr(gc.get_referrers(gone())[:3])


def test_backpressure_drains_in_rounds(tmp_path, spark):
    q, _ids, _ = fill(tmp_path, n=400, dups=0, bad=0)
    job = run(tmp_path, spark, staging={"dir": str(tmp_path / "staging"), "max_in_flight": 100})
    assert event_ids(read_jsonl_dir(tmp_path / "out")) == list(range(400))
    assert job.metrics.total("backpressurePauses") >= 1
    # Receivers check the cap before each receive: at most one batch per receiver over it.
    assert job.inflight.peak <= 100 + 2 * 50
    assert job.metrics.total("batches") >= 2
    assert q.count()["total"] == 0


def test_a_drain_prints_its_progress_with_what_the_queue_still_holds(tmp_path, spark):
    import re

    fill(tmp_path, n=400, dups=0, bad=0)
    lines: list[str] = []
    cfg = job_config(
        tmp_path,
        staging={"dir": str(tmp_path / "staging"), "max_in_flight": 100},
        trigger={"mode": "available_now", "progress_interval": "100ms"},
    )
    assert Job(parse_config(cfg), echo=lines.append).run() == 0
    pattern = re.compile(
        r"drain: received ([\d,]+), written out:([\d,]+), deleted ([\d,]+); "
        r"left on the queues: (\S+) ~([\d,]+)"
    )
    seen = [m for m in map(pattern.match, lines) if m]
    assert seen, lines
    figures = [[int(g.replace(",", "")) for g in (m[1], m[2], m[3], m[5])] for m in seen]
    assert all(0 <= written <= received <= 400 and left <= 400 for received, written, _, left in figures)
    assert [f[0] for f in figures] == sorted(f[0] for f in figures)  # received only grows
    assert any(left < 400 for *_, left in figures) and {m[4] for m in seen} == {cfg["sources"][0]["name"]}


def test_prometheus_output_counts_redeliveries_staging_depth_and_ack_latency(tmp_path, spark):
    from prometheus_client.parser import text_string_to_metric_families

    q, _ids, _ = fill(tmp_path, n=60, dups=0, bad=0)
    early = q.receive(20, 0, 0.2)  # another consumer took 20 and let them go: they come back
    assert len(early) == 20
    cfg = job_config(tmp_path, metrics={"file": str(tmp_path / "m.prom"), "queue_depth_interval": "50ms"})
    job = Job(parse_config(cfg), echo=lambda s: None)
    assert job.run() == 0
    from prometheus_client import generate_latest

    samples = {
        (s.name, s.labels.get("source", "")): s.value
        for fam in text_string_to_metric_families(generate_latest(job.metrics.registry).decode())
        for s in fam.samples
    }
    src = cfg["sources"][0]["name"]
    assert samples[("mq_ingest_redelivered_messages_total", src)] == 20
    assert samples[("mq_ingest_staged_total", "")] == 60 == samples[("mq_ingest_received_total", src)]
    assert 0 <= samples[("mq_ingest_queue_depth", src)] <= 60
    assert samples[("mq_ingest_ack_latency_seconds_total", src)] > 0
    assert 0 < samples[("mq_ingest_ack_latency_max_seconds", src)] < 120


def test_missing_field_and_ignore_parse_errors(tmp_path, spark):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send(body(1))
    missing = q.send('{"event_id": 2, "user_id": 1}')
    wrong_type = q.send('{"event_id": "three"}')
    run(tmp_path, spark, source={"json.fail-on-missing-field": True})
    rows = read_jsonl_dir(tmp_path / "out")
    assert [r["event_id"] for r in rows] == [1]
    assert q.count()["total"] == 0
    assert missing and wrong_type


def test_ignore_parse_errors_keeps_rows_with_nulls(tmp_path, spark):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send(body(1))
    q.send('{"event_id": "three", "action": "view"}')
    job = run(tmp_path, spark, source={"json.ignore-parse-errors": True})
    rows = read_jsonl_dir(tmp_path / "out")
    assert len(rows) == 2
    assert job.metrics.summary()["deserializationErrors"] == 0


def test_csv_and_raw_formats(tmp_path, spark):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": f"{i},alice,{i * 1.5}"} for i in range(5)] + [{"body": "x,y,z"}])
    run(tmp_path, spark, source={"format": "csv"}, schema="id INT, name STRING, score DOUBLE")
    rows = read_jsonl_dir(tmp_path / "out")
    assert sorted((r["id"], r["score"]) for r in rows) == [(i, i * 1.5) for i in range(5)]

    raw = tmp_path / "raw"
    q2 = FakeQueue(str(raw / "queues"), "in")
    q2.send_batch([{"body": "plain text ünïcode"}, {"body": "{not json"}])
    run(raw, spark, source={"format": "raw"}, schema="data STRING")
    assert sorted(r["data"] for r in read_jsonl_dir(raw / "out")) == ["plain text ünïcode", "{not json"]


def test_start_time_skips_older_messages(tmp_path, spark):
    import time

    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(5)])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    q.send_batch([{"body": body(i)} for i in range(5, 8)])
    job = run(tmp_path, spark, source={"startTimeMs": cut})
    assert event_ids(read_jsonl_dir(tmp_path / "out")) == [5, 6, 7]
    assert job.metrics.summary()["skippedBeforeStart"] == 5
    assert q.count()["total"] == 0


def test_streaming_mode_graceful_stop_and_metrics_endpoint(tmp_path, spark, free_port):
    import threading
    import time
    import urllib.request

    cfg = job_config(
        tmp_path,
        trigger={"mode": "processing_time", "interval": "300ms"},
        metrics={"file": str(tmp_path / "m.prom"), "port": free_port},
    )
    job = Job(parse_config(cfg), echo=lambda s: None)
    result = {}
    runner = threading.Thread(target=lambda: result.setdefault("code", job.run()))
    runner.start()
    q = FakeQueue(str(tmp_path / "queues"), "in")
    deadline = time.monotonic() + 120
    for k in range(3):  # messages arrive while the job streams
        q.send_batch([{"body": body(i)} for i in range(k * 50, k * 50 + 50)])
        time.sleep(0.5)
    while job.metrics.total("written") < 150 and time.monotonic() < deadline:
        time.sleep(0.2)
    text = urllib.request.urlopen(f"http://127.0.0.1:{free_port}/metrics", timeout=10).read().decode()
    job.stop()
    runner.join(120)
    assert result["code"] == 0
    assert event_ids(read_jsonl_dir(tmp_path / "out")) == list(range(150))
    assert q.count()["total"] == 0
    assert 'mq_ingest_written_total{job="t-job",sink="out"} 150.0' in text
    assert "mq_ingest_deleted_messages_total" in (tmp_path / "m.prom").read_text()


def test_parquet_and_fake_queue_sinks(tmp_path, spark):
    import pyarrow.dataset as ds

    q, ids, _ = fill(tmp_path, n=50, dups=0, bad=0)
    sinks = [
        {
            "type": "files",
            "name": "pq",
            "path": str(tmp_path / "pq"),
            "format": "parquet",
            "include_meta": False,
        },
        {"type": "fake", "name": "fwd", "path": str(tmp_path / "queues"), "queue": "fwd", "fifo": True},
    ]
    run(tmp_path, spark, sinks=sinks)
    table = ds.dataset(str(tmp_path / "pq"), format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("event_id").to_pylist()) == list(range(50))
    assert "_meta" not in table.column_names
    fwd = FakeQueue(str(tmp_path / "queues"), "fwd", fifo=True)
    assert fwd.count()["total"] == 50
    # The same source messages through a job with fresh state (as a replay would send them):
    # the FIFO target drops them, its dedup id being derived from the source message id.
    q.send_batch([{"body": body(i), "message_id": mid} for i, mid in enumerate(ids)])
    fresh = tmp_path / "fresh"
    job = run(
        tmp_path,
        spark,
        sinks=sinks,
        checkpoint=str(fresh / "ck"),
        state={"path": str(fresh / "st")},
        staging={"dir": str(fresh / "sg")},
    )
    assert job.metrics.summary()["written"] == 100  # 50 files rows + 50 accepted by the queue...
    assert fwd.count()["total"] == 50  # ...but not enqueued twice


def test_a_transform_that_reads_part_of_the_batch_still_counts_every_bad_message(tmp_path, spark):
    """LIMIT may stop Spark before it reads the bad rows: they are found and routed all the same."""
    q, _ids, bad_ids = fill(tmp_path, n=50, dups=0, bad=3)
    job = run(
        tmp_path,
        spark,
        transform="SELECT * FROM source LIMIT 1",
        source={"on_bad_message": "dead_letter"},
        dead_letter={"path": str(tmp_path / "dlq")},
    )
    assert job.metrics.summary()["deserializationErrors"] == 3
    dead = read_jsonl_dir(tmp_path / "dlq")
    assert sorted(r["message_id"] for r in dead) == sorted(bad_ids)
    assert q.count()["total"] == 0


@pytest.mark.parametrize(
    ("dedup_key", "key_of"),
    [
        # an envelope column: the batch reads it with pyarrow, kept as each file was staged
        ("md5", lambda i: hashlib.md5(body(i).encode()).hexdigest()),
        # an expression: the batch selects it with Spark
        ("get_json_object(body, '$.event_id')", str),
    ],
)
def test_a_dedup_key_other_than_the_message_id_drops_resent_content(tmp_path, spark, dedup_key, key_of):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(20)])
    q.send_batch([{"body": body(i)} for i in range(5)])  # the same content again, new message ids
    cfg = job_config(tmp_path)
    cfg["state"]["dedup_key"] = dedup_key
    job = Job(parse_config(cfg), echo=lambda s: None)
    assert job.run() == 0
    assert event_ids(read_jsonl_dir(tmp_path / "out")) == list(range(20))
    s = job.metrics.summary()
    assert (s["duplicateMessages"], s["written"], s["deletedMessages"]) == (5, 20, 25)
    assert q.count()["total"] == 0
    assert sorted(state_keys(tmp_path)) == sorted(key_of(i) for i in range(20))
