"""Delivery messages (reference fields, types), the start log split, config, the Delivery call sequence."""

from __future__ import annotations

import logging
import time
import uuid

import orjson
import pytest
from pydantic import ValidationError

from ingest.config.job_events import DeliveryConfig
from ingest.errors import redact
from ingest.metrics import Metrics
from ingest.ops.job_events.delivery import Delivery
from ingest.ops.job_events.messages import (
    Identity,
    MessageFactory,
    StartLogCapture,
    join_start_log,
    to_contents,
)
from ingest.ops.job_events.resources import ResourceSampler

# Field tables of the reference message delivery feature, in its order (+ our usage extensions).
JOB = ["messageType", "deploymentId", "deploymentName", "jobId", "tag"]
TAIL = ["workspace", "namespace", "messageId", "timestamp"]
START_LOG = [*JOB, "length", "offset", "content", *TAIL]
EVENT = [*JOB, "eventId", "eventName", "content", *TAIL]
QUOTA = ["messageType"]
QUOTA += [f"namespace{k}{w}" for k in ("Total", "Used") for w in ("CpuMemory", "Cpu", "Memory")]
QUOTA += ["resourceQueueName"]
QUOTA += [f"resourceQueue{k}{w}" for k in ("Total", "Used") for w in ("CpuMemory", "Cpu", "Memory")]
QUOTA += TAIL
USAGE = [*JOB, "jobUsedCpu", "jobUsedMemory", "messagesIn", "messagesOut", "inFlight", "sourceLag", *TAIL]

TYPES = {
    "length": int,
    "offset": int,
    "eventId": int,
    "timestamp": int,
    "jobUsedMemory": int,
    "messagesIn": int,
    "messagesOut": int,
    "inFlight": int,
    "jobUsedCpu": float,
    "sourceLag": dict,
}


def check(msg: dict, fields: list[str], kind: str) -> None:
    assert list(msg) == fields
    assert msg["messageType"] == kind
    for name, value in msg.items():
        if name.endswith(("Cpu", "CpuMemory")):
            assert type(value) is float, name
        elif name.endswith("Memory"):
            assert type(value) is int, name
        else:
            assert type(value) is TYPES.get(name, str), name
    uuid.UUID(msg["messageId"])
    assert abs(msg["timestamp"] - time.time() * 1000) < 600_000


@pytest.fixture
def factory() -> MessageFactory:
    return MessageFactory(Identity("dep-1", "orders", str(uuid.uuid4()), "prod", "ws-1", "ns-1"))


def test_every_message_type_has_every_reference_field_typed(factory):
    check(factory.start_log("line one\nline two", 1000)[0], START_LOG, "JOB_START_LOG")
    ev = factory.event("BATCH_FAILED", "batch 3 failed")
    check(ev, EVENT, "JOB_EVENT")
    assert (ev["eventId"], ev["eventName"], ev["deploymentName"], ev["tag"]) == (
        1,
        "BATCH_FAILED",
        "orders",
        "prod",
    )
    assert factory.event("BATCH_REPLAYED", "")["eventId"] == 2

    figures, queue_name = ResourceSampler(lambda: None, {}, "orders").quota()
    quota = factory.quota(figures, queue_name)
    check(quota, QUOTA, "RESOURCE_QUOTA")
    assert quota["resourceQueueName"] == "orders"
    assert (
        quota["namespaceTotalCpu"] >= 1
        and quota["namespaceTotalMemory"] > quota["resourceQueueUsedMemory"] > 0
    )
    gib = quota["namespaceTotalMemory"] / 2**30
    assert quota["namespaceTotalCpuMemory"] == round(max(quota["namespaceTotalCpu"], gib / 4), 3)

    usage = factory.usage(0.25, 123456789, 10, 8, 2, {"q": 5})
    check(usage, USAGE, "JOB_RESOURCE_USAGE")
    assert (usage["messagesIn"], usage["messagesOut"], usage["inFlight"], usage["sourceLag"]) == (
        10,
        8,
        2,
        {"q": 5},
    )
    assert dict(to_contents(usage))["sourceLag"] == '{"q":5}'
    assert all(isinstance(v, str) for _, v in to_contents(quota))
    ids = {m["messageId"] for m in (ev, quota, usage)}
    assert len(ids) == 3


def test_a_long_start_log_is_split_by_offset_and_rejoins(factory):
    text = "\n".join(f"2026-01-01 INFO ingest: line {i} – ünïcode ✓" for i in range(2000))
    parts = factory.start_log(text, 1000)
    assert len(parts) == -(-len(text) // 1000) > 1
    assert [p["offset"] for p in parts] == list(range(0, len(text), 1000))
    assert {p["length"] for p in parts} == {len(text)}
    assert all(len(p["content"]) == 1000 for p in parts[:-1]) and 0 < len(parts[-1]["content"]) <= 1000
    assert len({p["jobId"] for p in parts}) == 1 and len({p["messageId"] for p in parts}) == len(parts)
    assert join_start_log(list(reversed(parts))) == text
    with pytest.raises(ValueError, match="cover"):
        join_start_log(parts[:-1])
    assert factory.start_log("", 1000)[0]["length"] == 0


def test_start_log_capture_redacts_and_is_bounded():
    redact.add(["s3cr3t-value"])
    cap = StartLogCapture(max_chars=1024, level=logging.INFO)
    logger = logging.getLogger("test.delivery.capture")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(cap)
    try:
        logger.debug("not captured")
        logger.info("key=%s", "s3cr3t-value")
        for i in range(100):
            logger.warning("filler line %03d %s", i, "x" * 40)
        text = cap.stop()
        logger.info("after stop")
    finally:
        logger.removeHandler(cap)
    assert "not captured" not in text and "after stop" not in text
    assert "key=***" in text and "s3cr3t" not in text
    assert "filler line 000" in text and "[start log cut at 1024 characters" in text
    assert len(text) < 1024 + 100


def test_delivery_config_defaults_limits_and_errors():
    cfg = DeliveryConfig.model_validate(
        {"deploymentId": "d1", "targets": [{"type": "file", "path": "/tmp/x"}]}
    )
    assert (cfg.deployment_id, cfg.quota_interval, cfg.usage_interval, cfg.namespace) == (
        "d1",
        30.0,
        600.0,
        "default",
    )
    assert cfg.scope == ["JOB_START_LOG", "JOB_EVENT", "RESOURCE_QUOTA", "JOB_RESOURCE_USAGE"]
    assert cfg.target_names() == ["file-0"]
    sls = {"type": "sls", "project": "my-proj", "logstore": "jobs", "region": "cn-hangzhou"}
    sls |= {"accessKeyId": "id", "accessKeySecret": "secret"}
    sink = {"type": "sink", "sink": {"type": "files", "name": "ev", "path": "/tmp/ev"}}
    cfg = DeliveryConfig.model_validate({"quota_interval": "1m", "targets": [sls, sink]})
    assert cfg.quota_interval == 60.0 and cfg.target_names() == ["sls-0", "sink-1"]
    bad = [
        ({"targets": []}, "targets"),
        ({"targets": [{"type": "file", "path": "x", "colour": 1}]}, "colour"),
        ({"targets": [{"type": "kafka"}]}, "type"),
        ({"targets": [sls | {"authorizationMode": "sts_token"}]}, "securityToken"),
        ({"targets": [{k: v for k, v in sls.items() if k != "region"}]}, "endpoint or region"),
        ({"quota_interval": "0s", "targets": [sls]}, "quota_interval"),
        ({"targets": [sls | {"batch_size": 5000}]}, "batch_size"),
        ({"targets": [sls | {"name": "a"}, sls | {"name": "a"}]}, "duplicate"),
    ]
    for data, needle in bad:
        with pytest.raises(ValidationError, match=needle):
            DeliveryConfig.model_validate(data)


class _LaggingSource:
    reports_lag = True  # declared, as a source declares its capabilities (ingest.connector.Source)

    def lag(self) -> int:
        return 7


class _PlainSource:
    reports_lag = False


def _read(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_delivery_sequence_of_a_clean_run(tmp_path):
    """The calls the pipeline makes for a run with a failed, replayed batch and a clean finish."""
    out = tmp_path / "events.jsonl"
    cfg = DeliveryConfig.model_validate(
        {
            "tag": "t1",
            "start_log_part_chars": 256,
            "targets": [{"type": "file", "path": str(out), "linger": 0}],
        }
    )
    cap = StartLogCapture(cfg.start_log_max_chars)
    logger = logging.getLogger("test.delivery.run")
    logger.setLevel(logging.INFO)
    logger.addHandler(cap)
    metrics = Metrics("orders")
    sources = {"q": _LaggingSource(), "plain": _PlainSource()}
    delivery = Delivery(cfg, "orders", metrics, lambda: None, sources, capture=cap)
    try:
        logger.info("config loaded: %s", "x" * 600)
        delivery.start()
        logger.info("spark session started")
        delivery.event("RECEIVER_PAUSED", "q#0 paused")
        delivery.event("RECEIVER_RESUMED", "q#0 resumed")
        metrics.inc("received", 5, source="q")
        metrics.inc("written", 4, sink="out")
        metrics.set("inFlight", 1)
        delivery.started()
        delivery.started()  # idempotent
        logger.info("after start: not in the start log")
        delivery.event("BATCH_FAILED", "batch 3: ValueError: boom")
        delivery.event("BATCH_REPLAYED", "batch 3 replayed")
        delivery.event("STOPPING", "signal 15")
        delivery.close("FINISHED")
        delivery.close("FINISHED")  # idempotent
    finally:
        logger.removeHandler(cap)
    msgs = _read(out)
    events = [m for m in msgs if m["messageType"] == "JOB_EVENT"]
    names = ["STARTING", "RECEIVER_PAUSED", "RECEIVER_RESUMED", "RUNNING"]
    names += ["BATCH_FAILED", "BATCH_REPLAYED", "STOPPING", "FINISHED"]
    assert [e["eventName"] for e in events] == names
    assert [e["eventId"] for e in events] == list(range(1, 9))
    for e in events:
        check(e, EVENT, "JOB_EVENT")
    parts = [m for m in msgs if m["messageType"] == "JOB_START_LOG"]
    assert len(parts) > 2
    log_text = join_start_log(parts)
    assert (
        "config loaded" in log_text and "spark session started" in log_text and "after start" not in log_text
    )
    [usage] = [m for m in msgs if m["messageType"] == "JOB_RESOURCE_USAGE"]
    check(usage, USAGE, "JOB_RESOURCE_USAGE")
    assert (usage["messagesIn"], usage["messagesOut"], usage["inFlight"]) == (5, 4, 1)
    assert usage["sourceLag"] == {"q": 7} and usage["jobUsedMemory"] > 0
    assert len({m["jobId"] for m in msgs}) == 1 and {m["tag"] for m in msgs} == {"t1"}
    assert delivery.counters() == {"file-0": {"delivered": len(msgs), "dropped": 0, "failed": 0}}


def test_delivery_sequence_of_a_failed_run_sends_the_start_log_and_the_error(tmp_path):
    out = tmp_path / "events.jsonl"
    redact.add(["hunter2-secret"])
    cfg = DeliveryConfig.model_validate({"targets": [{"type": "file", "path": str(out)}]})
    delivery = Delivery(cfg, "orders", Metrics("orders"), lambda: None, {})
    delivery.log_handler().handle(
        logging.makeLogRecord({"msg": "loading", "levelno": 20, "levelname": "INFO"})
    )
    delivery.start()
    delivery.event("BATCH_FAILED", "batch 0: FatalError: bad token hunter2-secret")
    delivery.close("FAILED", "FatalError: bad token hunter2-secret")
    msgs = _read(out)
    assert [m["eventName"] for m in msgs if m["messageType"] == "JOB_EVENT"] == [
        "STARTING",
        "BATCH_FAILED",
        "FAILED",
    ]
    assert msgs[-2]["content"] == "FatalError: bad token ***" and "hunter2" not in out.read_text()
    assert msgs[-1]["messageType"] == "JOB_START_LOG" and "loading" in msgs[-1]["content"]
    assert not [m for m in msgs if m["messageType"] == "JOB_RESOURCE_USAGE"]  # never ran


def test_scope_and_periodic_quota(tmp_path):
    out = tmp_path / "events.jsonl"
    cfg = DeliveryConfig.model_validate(
        {
            "scope": ["RESOURCE_QUOTA"],
            "quota_interval": 1,
            "targets": [{"type": "file", "path": str(out), "linger": 0}],
        }
    )
    delivery = Delivery(cfg, "orders", Metrics("orders"), lambda: None, {})
    delivery.start()
    deadline = time.monotonic() + 30
    while delivery.counters()["file-0"]["delivered"] < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    delivery.close("FINISHED")
    msgs = _read(out)
    assert len(msgs) >= 2 and {m["messageType"] for m in msgs} == {"RESOURCE_QUOTA"}
    for m in msgs:
        check(m, QUOTA, "RESOURCE_QUOTA")


def test_start_log_lines_logged_before_a_secret_was_registered_are_masked_when_sent(tmp_path):
    out = tmp_path / "events.jsonl"
    cfg = DeliveryConfig.model_validate({"targets": [{"type": "file", "path": str(out), "linger": 0}]})
    cap = StartLogCapture(cfg.start_log_max_chars)
    delivery = Delivery(cfg, "orders", Metrics("orders"), lambda: None, {}, capture=cap)
    cap.add_line("reading token early-secret-9 from the environment")  # before redact knew it
    redact.add(["early-secret-9"])
    delivery.start()
    delivery.started()
    delivery.close("FINISHED")
    text = join_start_log([m for m in _read(out) if m["messageType"] == "JOB_START_LOG"])
    assert "reading token *** from the environment" in text
    assert "early-secret-9" not in out.read_text()
