"""Job event delivery to a file, to the SLS emulator through the real SDK, and through a files sink."""

from __future__ import annotations

import time
import zlib
from pathlib import Path

import orjson
import pytest
import requests

from ingest.config.job_events import DeliveryConfig
from ingest.metrics import Metrics
from ingest.ops.job_events.delivery import Delivery
from ingest.ops.job_events.messages import join_start_log, to_contents
from tests.emulators.sls import SlsEmulator

pytestmark = pytest.mark.integration

CREDS = {"dev-ak": ("dev-secret", None), "sts-ak": ("sts-secret", "sts-token-1")}
PROJECT, LOGSTORE = "mq-ingest", "job-events"


@pytest.fixture
def sls():
    with SlsEmulator(CREDS, logstores={PROJECT: {LOGSTORE}}) as emulator:
        yield emulator


def sls_target(endpoint: str, **extra) -> dict:
    target = {"type": "sls", "project": PROJECT, "logstore": LOGSTORE, "endpoint": endpoint}
    target |= {"accessKeyId": "dev-ak", "accessKeySecret": "dev-secret", "topic": "jobs", "source": "host-1"}
    return target | extra


def read_lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def run_job(cfg: dict, spark=None, events: int = 3) -> tuple[Delivery, Metrics]:
    """The calls a streaming run makes: start, events, started, more events, close."""
    metrics = Metrics("orders")
    delivery = Delivery(DeliveryConfig.model_validate(cfg), "orders", metrics, lambda: spark, {})
    delivery.log_handler().add_line("config loaded from job.yaml")
    delivery.start()
    metrics.inc("received", 3, source="q")
    delivery.started()
    for i in range(events):
        delivery.event("BATCH_REPLAYED", f"batch {i} replayed")
    delivery.close("FINISHED")
    return delivery, metrics


def test_file_and_sls_targets_receive_the_same_messages(sls, tmp_path):
    out = tmp_path / "events.jsonl"
    targets = [
        {"type": "file", "path": str(out)},
        sls_target(sls.endpoint, name="sls-ak"),
        sls_target(
            f"http://{sls.endpoint}",
            name="sls-sts",
            authorizationMode="sts_token",
            accessKeyId="sts-ak",
            accessKeySecret="sts-secret",
            securityToken="sts-token-1",
            auth_version="v4",
            region="cn-hangzhou",
            compress="none",
        ),
    ]
    delivery, _ = run_job({"deploymentName": "orders-prod", "targets": targets})

    msgs = read_lines(out)
    kinds = [m["messageType"] for m in msgs]
    assert kinds.count("JOB_EVENT") == 6 and kinds.count("JOB_START_LOG") == 1
    assert kinds.count("JOB_RESOURCE_USAGE") == 1
    assert "config loaded from job.yaml" in join_start_log(
        [m for m in msgs if m["messageType"] == "JOB_START_LOG"]
    )
    n = len(msgs)
    assert delivery.counters() == {
        "file-0": {"delivered": n, "dropped": 0, "failed": 0},
        "sls-ak": {"delivered": n, "dropped": 0, "failed": 0},
        "sls-sts": {"delivered": n, "dropped": 0, "failed": 0},
    }
    assert sls.errors == []
    for creds, auth, compression, sts in (("v1", "v1", "lz4", False), ("v4", "v4", "none", True)):
        logs = [entry for entry in sls.logs if entry["auth"] == auth]
        assert len(logs) == n, creds
        for entry, msg in zip(logs, msgs, strict=True):
            assert entry["contents"] == dict(to_contents(msg))
            assert (entry["project"], entry["logstore"], entry["topic"], entry["source"]) == (
                PROJECT,
                LOGSTORE,
                "jobs",
                "host-1",
            )
            assert (entry["compression"], entry["sts"]) == (compression, sts)
            assert entry["time"] == msg["timestamp"] // 1000
            assert entry["time_ns"] == msg["timestamp"] % 1000 * 1_000_000
    assert orjson.loads(sls.logs[-1]["contents"]["sourceLag"]) == {}


def test_sls_refusals_are_counted_as_failed(sls, tmp_path):
    targets = [
        sls_target(sls.endpoint, name="bad-secret", accessKeySecret="wrong", attempts=2),
        sls_target(sls.endpoint, name="no-logstore", logstore="missing", attempts=2),
        sls_target(sls.endpoint, name="no-token", accessKeyId="sts-ak", accessKeySecret="sts-secret"),
    ]
    delivery, _ = run_job({"targets": targets, "scope": ["JOB_EVENT"]}, events=1)
    counts = delivery.counters()
    assert {name: c["delivered"] for name, c in counts.items()} == dict.fromkeys(counts, 0)
    assert {name: c["failed"] + c["dropped"] for name, c in counts.items()} == dict.fromkeys(counts, 4)
    # Refusals are fatal: one request per batch, no retries.
    assert sorted({e.split(":")[0] for e in sls.errors}) == [
        "LogStoreNotExist",
        "SecurityTokenExpired",
        "SignatureNotMatch",
    ]
    assert sls.logs == []


DEFAULT_CHAIN_JOB = """
import json, sys
from ingest.config.job_events import DeliveryConfig
from ingest.ops.job_events.delivery import Delivery
from ingest.metrics import Metrics

cfg = DeliveryConfig.model_validate({"targets": [json.loads(sys.argv[1])]})
delivery = Delivery(cfg, "orders", Metrics("orders"), lambda: None, {})
delivery.start()
delivery.event("BATCH_REPLAYED", "batch 0 replayed")
delivery.close("FINISHED")
print(json.dumps(delivery.counters()))
"""


def test_sts_token_without_keys_takes_alibaba_clouds_default_credential_chain(sls, tmp_path):
    """No keys in the config: the STS credentials come from the chain (here its environment step;
    the library reads the environment at import, hence a process of its own). The ECS metadata
    step is switched off so nothing but 127.0.0.1 is ever called."""
    import json
    import os
    import subprocess
    import sys

    target = sls_target(sls.endpoint, name="sls-chain", authorizationMode="sts_token", attempts=1)
    del target["accessKeyId"], target["accessKeySecret"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALIBABA_CLOUD_")}
    env |= {
        "ALIBABA_CLOUD_ACCESS_KEY_ID": "sts-ak",
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "sts-secret",
        "ALIBABA_CLOUD_SECURITY_TOKEN": "sts-token-1",
        "ALIBABA_CLOUD_ECS_METADATA_DISABLED": "true",
        "ALIBABA_CLOUD_CREDENTIALS_FILE": str(tmp_path / "none"),
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", DEFAULT_CHAIN_JOB, json.dumps(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    counts = json.loads(done.stdout.strip().splitlines()[-1])["sls-chain"]
    assert counts["delivered"] >= 2 and counts["failed"] == counts["dropped"] == 0, counts
    assert sls.errors == []
    assert sls.logs and all(entry["sts"] for entry in sls.logs), "signed with the chain's STS token"
    assert "sts-secret" not in done.stdout + done.stderr


def test_emulator_takes_a_deflated_log_group_signed_by_the_sdk(sls):
    """Other SLS clients send deflate; build the body with the SDK's protobuf and sign it with its auth."""
    from aliyun.log.auth import make_auth
    from aliyun.log.credentials import StaticCredentialsProvider
    from aliyun.log.proto import LogGroupRaw

    group = LogGroupRaw()
    group.Topic, group.Source = "t", "s"
    log = group.Logs.add()
    log.Time = int(time.time())
    content = log.Contents.add()
    content.Key, content.Value = "messageType", b"JOB_EVENT"
    tag = group.LogTags.add()
    tag.Key, tag.Value = "__pack_id__", "abc"
    raw = group.SerializeToString()
    body = zlib.compress(raw)
    resource = f"/logstores/{LOGSTORE}/shards/route"
    headers = {"x-log-bodyrawsize": str(len(raw)), "Content-Type": "application/x-protobuf"}
    headers |= {"x-log-compresstype": "deflate", "x-log-apiversion": "0.6.0", "Host": f"{PROJECT}.127.0.0.1"}
    params = {"key": "k1"}
    make_auth(StaticCredentialsProvider("dev-ak", "dev-secret", None)).sign_request(
        "POST", resource, params, headers, body
    )
    reply = requests.post(
        f"http://{sls.endpoint}{resource}", params=params, data=body, headers=headers, timeout=10
    )
    assert reply.status_code == 200, reply.text
    [entry] = sls.logs
    assert entry["contents"] == {"messageType": "JOB_EVENT"} and entry["tags"] == {"__pack_id__": "abc"}
    assert entry["compression"] == "deflate"

    headers["Authorization"] = headers["Authorization"][:-4] + "AAA="
    reply = requests.post(
        f"http://{sls.endpoint}{resource}", params=params, data=body, headers=headers, timeout=10
    )
    assert reply.status_code == 401 and reply.json()["errorCode"] == "SignatureNotMatch"


def test_a_dead_sls_endpoint_neither_blocks_events_nor_loses_count(free_port, tmp_path):
    """Nothing listens on free_port: every send is refused; the file target is not held up."""
    out = tmp_path / "events.jsonl"
    dead = sls_target(f"127.0.0.1:{free_port}", name="dead", queue_size=5, batch_size=2, attempts=2)
    dead |= {"linger": 0, "dead_pause": 600, "timeout": 2}
    cfg = DeliveryConfig.model_validate(
        {"scope": ["JOB_EVENT"], "targets": [{"type": "file", "path": str(out)}, dead]}
    )
    delivery = Delivery(cfg, "orders", Metrics("orders"), lambda: None, {})
    delivery.start()
    for i in range(50):
        delivery.event("RECEIVER_PAUSED", f"q#{i} paused")
    deadline = time.monotonic() + 60
    while delivery.counters()["dead"]["failed"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    sender = delivery.senders["dead"]
    delivery.close("FINISHED")
    counts = delivery.counters()
    offered = counts["file-0"]["delivered"]
    assert offered == 52 and len(read_lines(out)) == 52  # STARTING, 50 events, FINISHED
    assert counts["dead"]["delivered"] == 0 and counts["dead"]["failed"] >= 1
    assert counts["dead"]["dropped"] >= 52 - 5 - 2 * counts["dead"]["failed"]
    assert counts["dead"]["failed"] + counts["dead"]["dropped"] == offered
    assert not sender.thread.running  # close did not sit out the 600 s dead pause


@pytest.mark.spark
def test_sink_target_writes_through_the_files_sink(spark, tmp_path):
    out = tmp_path / "events.jsonl"
    sink_dir = tmp_path / "sink"
    targets = [
        {"type": "file", "path": str(out)},
        {"type": "sink", "name": "files", "sink": {"type": "files", "name": "events", "path": str(sink_dir)}},
    ]
    # The first Spark job of a cold session can take longer than the default 10 s flush bound.
    delivery, _ = run_job({"targets": targets, "flush_timeout": 300}, spark=spark)
    expected = read_lines(out)
    batches = sorted(sink_dir.glob("batch_id=*"))
    assert batches and all((b / "_SUCCESS").exists() for b in batches)
    rows = [
        orjson.loads(line) for b in batches for f in sorted(b.glob("part-*.json")) for line in f.open("rb")
    ]
    assert [orjson.loads(r["body"]) for r in rows] == expected
    assert delivery.counters()["files"] == {"delivered": len(expected), "dropped": 0, "failed": 0}
    running = next(m for m in expected if m.get("eventName") == "RUNNING")
    assert spark.sparkContext.applicationId in running["content"]
    assert spark.sparkContext.applicationId in join_start_log(
        [m for m in expected if m["messageType"] == "JOB_START_LOG"]
    )

    figures, queue_name = delivery.sampler.quota()
    assert queue_name == spark.sparkContext.applicationId
    assert figures["resourceQueueTotalCpu"] == 2.0  # local[2]
    assert 0 < figures["resourceQueueTotalMemory"] < figures["namespaceTotalMemory"]
    assert figures["resourceQueueUsedMemory"] > 100 * 2**20  # the driver's JVM is in the tree
