"""The reference Flink SQL scripts (conf/*.sql) run as written through ``python -m ingest.run --sql``,
against the MNS and RocketMQ emulators through the real SDKs and clients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mns.queue import QueueMeta

from tests.support.jobs import ROOT, read_jsonl_dir, run_cli, start_cli, stop_cli, summary
from tests.support.mns_server import AK_ID, AK_SECRET, account, depth, send_bodies
from tests.support.oss_notifications import notification
from tests.support.polling import wait_for
from tests.support.rocketmq_servers import AK_ID as RMQ_ID
from tests.support.rocketmq_servers import AK_SECRET as RMQ_SECRET
from tests.support.rocketmq_servers import emulator, installed, messages

pytestmark = [pytest.mark.integration, pytest.mark.spark]
needs_remoting = pytest.mark.skipif(
    not installed("remoting"), reason="the RocketMQ 4 client is not installed"
)


def settings(tmp: Path, mode: str = "available_now", **staging) -> Path:
    """Job settings under ``tmp``: what a script cannot hold (``staging`` adds staging options)."""
    path = tmp / "job.settings.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "work_dir": str(tmp / "work"),
                "trigger": {"mode": mode, "interval": "500ms"},
                "staging": {"roll_messages": 500, "roll_interval": "200ms", **staging},
                "spark": {"master": "local[2]", "log_level": "ERROR"},
            }
        )
    )
    return path


def sql(script: str, tmp: Path, mode: str = "available_now", **staging) -> list[str]:
    return ["--sql", str(ROOT / "conf" / script), "--settings", str(settings(tmp, mode, **staging))]


def mns_env(mns) -> dict[str, str]:
    return {"mns_endpoint": mns.url, "ak_id": AK_ID, "ak_secret": AK_SECRET}


def test_mns_example_1_prints_every_json_event_once(tmp_path, mns):
    account(mns.url).get_queue("my-events-queue").create(QueueMeta())
    events = [
        {"userId": i, "action": "click", "timestamp": "2026-01-02T03:04:05.678Z", "payload": f"p{i}"}
        for i in range(20)
    ]
    send_bodies(mns.url, "my-events-queue", [json.dumps(e) for e in events] + ["{not json"])
    # As in Flink, the script as written stops at the bad body: skipping it is asked for here.
    script = (ROOT / "conf" / "mns_json_console.sql").read_text()
    skipping = script.replace("'format' = 'json'\n", "'format' = 'json',\n'on_bad_message' = 'skip'\n")
    assert skipping != script
    (tmp_path / "mns_json_console.sql").write_text(skipping)
    args = ["--sql", str(tmp_path / "mns_json_console.sql"), "--settings", str(settings(tmp_path))]
    done = run_cli(args, env=mns_env(mns))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    s = summary(done.stdout)
    assert (s["written"], s["deserializationErrors"]) == (20, 1)
    printed = [line for line in done.stdout.splitlines() if line.startswith("|") and "click" in line]
    assert len(printed) == 20
    assert {line.split("|")[4].strip() for line in printed} == {f"p{i}" for i in range(20)}
    assert all("2026-01-02 03:04:05.678" in line for line in printed)
    assert depth(mns.url, "my-events-queue") == 0
    assert AK_SECRET not in done.stdout + done.stderr


def test_mns_example_2_keeps_object_created_notifications(tmp_path, mns):
    account(mns.url).get_queue("oss-events-queue").create(QueueMeta())
    created = [notification(key=f"img/{i}.jpg", size=1000 + i) for i in range(4)]
    removed = notification("ObjectRemoved:DeleteObject", key="img/old.jpg")
    send_bodies(mns.url, "oss-events-queue", [json.dumps(n) for n in [*created, removed]])
    done = run_cli(sql("mns_oss_events.sql", tmp_path), env=mns_env(mns))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("|") and "img/" in line]
    assert sorted(line.split("|")[3].strip() for line in rows) == [f"img/{i}.jpg" for i in range(4)]
    assert all("ObjectCreated:PutObject" in line for line in rows)
    assert summary(done.stdout)["written"] == 4
    assert depth(mns.url, "oss-events-queue") == 0


def rmq_env(server, tag: str = "") -> dict[str, str]:
    env = {"rmq_endpoint": server.address, "rmq_access_id": RMQ_ID, "rmq_access_key": RMQ_SECRET}
    return env | {"rmq_topic": "orders", "rmq_group": "GID_sql", "rmq_tag": tag}


@needs_remoting
def test_rocketmq_csv_example_sends_each_generated_row_once(tmp_path):
    server = emulator("remoting", str(tmp_path / "logs"), credentials={RMQ_ID: RMQ_SECRET})
    try:
        done = run_cli(sql("rocketmq_csv.sql", tmp_path), env=rmq_env(server, tag="TagCsv"))
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        got = messages(server)
        assert sorted(m.keys[0] for m in got) == sorted(f"orders-{n}" for n in range(100))
        rows = sorted((m.body.decode().split(",") for m in got), key=lambda r: int(r[0]))
        assert [int(r[0]) for r in rows] == list(range(1, 101))
        assert all(r[1] == "12" and len(r[2]) == 12 for r in rows)
        assert {getattr(m, "tags", None) or m.tag for m in got} == {"TagCsv"} and {m.topic for m in got} == {
            "orders"
        }
        assert RMQ_SECRET not in done.stdout + done.stderr
    finally:
        server.stop()


@needs_remoting
def test_rocketmq_binary_example_streams_datagen_rows_until_stopped(tmp_path):
    server = emulator("remoting", str(tmp_path / "logs"), credentials={RMQ_ID: RMQ_SECRET})
    try:
        # The in-flight cap keeps batches small: else the first one takes the ~80,000 rows datagen
        # made while Spark started, and the stop waits for all of them to be sent.
        script = sql("rocketmq_binary.sql", tmp_path, mode="processing_time", max_in_flight=2000)
        proc = start_cli(script, env=rmq_env(server))
        wait_for(lambda: len(messages(server)) >= 500 or proc.poll() is not None, 180, "500 messages sent")
        code, out = stop_cli(proc)
        assert code == 0, out[-3000:]
        got = messages(server)
        keys = [m.keys[0] for m in got]
        assert len(keys) == len(set(keys)) >= 500  # each generated row once
        assert all(len(m.body) == 5 and m.body.decode().isalnum() for m in got)
    finally:
        server.stop()


def test_a_statement_set_writes_two_sinks_and_spark_errors_point_at_the_insert(tmp_path):
    script = tmp_path / "set.sql"
    out = tmp_path / "out"
    script.write_text(
        "CREATE TABLE gen (id BIGINT, name STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '40',\n"
        "  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000');\n"
        f"CREATE TABLE files (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '{out}',"
        " 'format' = 'json');\n"
        "CREATE TABLE p (id BIGINT, shout STRING) WITH ('connector' = 'print');\n"
        "BEGIN STATEMENT SET;\n"
        "INSERT INTO files SELECT * FROM gen WHERE id % 2 = 0;\n"
        "INSERT INTO p SELECT id, UPPER(name) FROM gen WHERE id <= 3;\n"
        "END;\n"
    )
    args = ["--sql", str(script), "--settings", str(settings(tmp_path))]
    done = run_cli(args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = read_jsonl_dir(out)
    assert sorted(r["id"] for r in rows) == list(range(2, 41, 2)) and set(rows[0]) == {"id", "name"}
    printed = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("|") and line.split("|")[1].strip().isdigit()
    ]
    assert sorted(int(line.split("|")[1]) for line in printed) == [1, 2, 3]

    script.write_text(script.read_text().replace("UPPER(name)", "NO_SUCH_FUNCTION(name)"))
    done = run_cli(args)
    assert done.returncode == 2
    assert f"error: {script}, line 7, column 1: INSERT INTO p: " in done.stderr
    assert "NO_SUCH_FUNCTION" in done.stderr


def test_spark_submit_runs_a_script_too(tmp_path):
    """``spark-submit ingest/run.py --sql job.sql``: the script path, under a JVM spark-submit started."""
    import os
    import subprocess
    import sys

    from ingest.tools import bundle

    out = tmp_path / "out"
    script = tmp_path / "gen.sql"
    script.write_text(
        "CREATE TABLE gen (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '25',"
        " 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100');\n"
        f"CREATE TABLE out (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}',"
        " 'format' = 'json');\n"
        "INSERT INTO out SELECT id FROM gen;\n"
    )
    cmd = [bundle.spark_submit_path(), "--master", "local[1]"]
    cmd += [
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
    ]
    cmd += [str(ROOT / "ingest" / "run.py"), "--sql", str(script), "--settings", str(settings(tmp_path))]
    done = subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(r["id"] for r in read_jsonl_dir(out)) == list(range(1, 26))
    assert summary(done.stdout)["written"] == 25
