"""A queue or sink server goes away for 15 s under a running job, then comes back: the job rides it out."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from sources.fake.store import FakeQueue
from tests.emulators.mns import start_emulator
from tests.support import sqs_server
from tests.support.jobs import body, job_config, metric, read_jsonl_dir, start_cli, stop_cli, write_config
from tests.support.mns_server import AK_ID, AK_SECRET, create_queue, depth, send_bodies
from tests.support.polling import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]

OUTAGE_SECONDS = 15
"""Longer than the sources' 10 s visibility timeout: messages in flight when the server went
away lose their leases meanwhile and come back, to be dropped as duplicates and deleted; the
receivers fail and back off 4-6 times (each receive retried inside first), the sink's batch
retries ~8 times, five times its default budget (~3 s). 30 s proved nothing more and cost
10-20 s a test more (up to a 10 s backoff after the server was back)."""


def event_names(path: Path) -> list[str]:
    msgs = [orjson.loads(line) for line in path.read_text().splitlines()]
    return [m["eventName"] for m in msgs if m.get("messageType") == "JOB_EVENT"]


def event_ids(tmp: Path) -> list[int]:
    return sorted(r["event_id"] for r in read_jsonl_dir(tmp / "out"))


def sqs_total(sqs, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs[n]) for n in names)


def moto_server(port: int = 0):
    from moto.server import ThreadedMotoServer

    sqs_server.atomic_moto_deletes()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server


def ride_out_a_queue_outage(tmp_path: Path, source: dict, send, go_down, come_back, left) -> None:
    """200 messages through a continuous job, the queue server down for 15 s, 200 more after it
    is back; then the books: each message once in the sink, the queue empty, the outage counted
    and reported, exit 0 on SIGTERM."""
    send(range(200))
    cfg = job_config(tmp_path, trigger={"mode": "processing_time", "interval": "500ms"})
    cfg["sources"] = [source | {"receivers": 2, "visibility_timeout": "10s", "format": "json"}]
    cfg["delivery"] = {"targets": [{"type": "file", "path": str(tmp_path / "events.jsonl")}]}
    proc = start_cli(write_config(tmp_path, cfg))
    try:
        wait_for(lambda: len(event_ids(tmp_path)) == 200, 180, "the first 200 messages in the sink")
        go_down()
        time.sleep(OUTAGE_SECONDS)  # the fault itself, not a wait for something to happen
        assert proc.poll() is None, "the job kept running through the outage"
        come_back()
        send(range(200, 400))
        wait_for(lambda: len(event_ids(tmp_path)) >= 400, 180, "the 200 sent after the outage")
        wait_for(lambda: left() == 0, 120, "the source queue empty")
    finally:
        code, out = stop_cli(proc)
    assert code == 0, out
    assert event_ids(tmp_path) == list(range(400)), "each message exactly once"
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    assert metric(prom, "mq_ingest_receive_errors_total") > 0, "the outage was seen and counted"
    names = event_names(tmp_path / "events.jsonl")
    assert names.index("RECEIVE_FAILING") < names.index("RECEIVE_RECOVERED")


def test_mns_server_down_for_15s_then_back(tmp_path):
    """The emulator stops listening and closes its connections; its queues are kept."""
    with start_emulator(AK_ID, AK_SECRET) as mns:
        queue = create_queue(mns.url, visibility_timeout=10)
        source = {"type": "mns", "name": "src", "endpoint": mns.url, "queueName": queue}
        source |= {
            "accessKeyId": AK_ID,
            "accessKeySecret": AK_SECRET,
            "batchSize": 16,
            "pollingWaitTime": "1s",
        }
        ride_out_a_queue_outage(
            tmp_path,
            source,
            send=lambda ids: send_bodies(mns.url, queue, [body(i) for i in ids]),
            go_down=mns.go_down,
            come_back=mns.come_back,
            left=lambda: depth(mns.url, queue),
        )


def test_sqs_server_down_for_15s_then_back(tmp_path):
    """moto stopped and started again on its port; its queues live in the process, so they
    survive. The job reaches it through ``FaultProxy``, which opens a new connection to moto
    for every request: without it, boto3's kept-alive connections would still be answered by
    the stopped server's handler threads, and the job would never see the outage."""
    import boto3

    servers = [moto_server()]
    host, port = servers[0].get_host_and_port()
    sqs = boto3.client("sqs", endpoint_url=f"http://{host}:{port}", region_name="us-east-1")
    src = sqs.create_queue(QueueName=f"outage-{os.getpid()}")["QueueUrl"]
    try:
        with sqs_server.FaultProxy(f"http://{host}:{port}") as proxy:
            source = {"type": "sqs", "name": "src", "sqs.url": src, "sqs.endpoint.url": proxy.url}
            ride_out_a_queue_outage(
                tmp_path,
                source | {"sqs.waittime.seconds": 1},
                send=lambda ids: sqs_server.send_bodies(sqs, src, [body(i) for i in ids]),
                go_down=lambda: servers.pop().stop(),
                come_back=lambda: servers.append(moto_server(port)),
                left=lambda: sqs_total(sqs, src),
            )
    finally:
        for server in servers:
            server.stop()


def test_sink_server_down_for_15s_then_back(tmp_path):
    """The SQS sink's server (moto, through FaultProxy as above) stops while batches are being
    written. The sink retries (``max_retries`` set to outlast the outage: its default gives up
    after about 3 s and fails the job, which a restart finishes); nothing is deleted from the
    source before its batch is written; a FIFO target (dedup id from the source message id)
    receives each message exactly once."""
    import boto3

    moto = moto_server()
    host, port = moto.get_host_and_port()
    sqs = boto3.client("sqs", endpoint_url=f"http://{host}:{port}", region_name="us-east-1")
    fifo = {"FifoQueue": "true"}
    dst = sqs.create_queue(QueueName=f"sink-outage-{os.getpid()}.fifo", Attributes=fifo)["QueueUrl"]
    source = FakeQueue(str(tmp_path / "queues"), "in")
    source.send_batch([{"body": body(i)} for i in range(200)])
    with sqs_server.FaultProxy(f"http://{host}:{port}") as proxy:
        sink = {"type": "sqs", "name": "out", "sqsUrl": dst, "aws.endpoint": proxy.url, "max_retries": 30}
        # Visibility 10 s, shorter than the outage: the batch's leases are extended while it retries.
        cfg = job_config(
            tmp_path,
            source={"visibility_timeout": "10s"},
            trigger={"mode": "processing_time", "interval": "500ms"},
            sinks=[sink],
        )
        proc = start_cli(write_config(tmp_path, cfg))
        try:
            wait_for(lambda: sqs_total(sqs, dst) == 200, 180, "the first 200 messages in the target")
            wait_for(lambda: source.count()["total"] == 0, 60, "the first 200 deleted from the source")
            moto.stop()
            try:
                source.send_batch([{"body": body(i)} for i in range(200, 400)])
                time.sleep(OUTAGE_SECONDS)  # the fault itself, not a wait for something to happen
                assert proc.poll() is None, "the job kept retrying through the outage"
                assert source.count()["total"] == 200, "nothing acked before its batch is written"
            finally:
                moto = moto_server(port)
            wait_for(lambda: sqs_total(sqs, dst) == 400, 180, "the 200 sent during the outage")
            wait_for(lambda: source.count()["total"] == 0, 60, "the source queue empty")
        finally:
            code, out = stop_cli(proc)
    ids = sorted(orjson.loads(b)["event_id"] for b in sqs_server.drain(sqs, dst))
    moto.stop()
    assert code == 0, out
    assert ids == list(range(400)), "each message exactly once"
