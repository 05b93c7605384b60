"""Delivery settings changed while the job runs take effect within the reload interval (reference: 10 s)."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

from ingest.config import load_config
from ingest.config.job_events import DeliveryConfig
from ingest.metrics import Metrics
from ingest.ops.job_events import JobEvents
from ingest.ops.job_events.delivery import Delivery
from tests.support.polling import wait_for


def read(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def names(path: Path) -> list[str]:
    return [m["eventName"] for m in read(path) if m["messageType"] == "JOB_EVENT"]


def test_reconfigure_moves_the_messages_to_the_new_targets_and_keeps_the_identity(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first = DeliveryConfig.model_validate({"targets": [{"type": "file", "path": str(a)}]})
    delivery = Delivery(first, "job", Metrics("job"), lambda: None, {})
    delivery.start()
    delivery.event("BEFORE", "to a")
    second = DeliveryConfig.model_validate(
        {"targets": [{"type": "file", "path": str(b)}], "scope": ["JOB_EVENT"]}
    )
    assert delivery.reconfigure(second) and not delivery.reconfigure(second)  # the same again: nothing to do
    delivery.event("AFTER", "to b")
    delivery.close("FINISHED")
    assert names(a) == ["STARTING", "BEFORE"] and names(b) == ["AFTER", "FINISHED"]
    assert {m["jobId"] for m in read(a) + read(b)} == {read(a)[0]["jobId"]}
    assert {m["messageType"] for m in read(b)} == {"JOB_EVENT"}  # the new scope applies


def test_a_changed_config_file_reaches_a_running_job(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    path = tmp_path / "job.yaml"
    job = {
        "name": "reload",
        "sources": [{"type": "fake", "name": "s", "path": str(tmp_path / "q")}],
        "schema": "a INT",
        "sinks": [{"type": "console", "name": "out"}],
        "checkpoint": str(tmp_path / "c"),
        "state": {"path": str(tmp_path / "s")},
        "staging": {"dir": str(tmp_path / "st")},
        "delivery": {"targets": [{"type": "file", "path": str(a)}]},
    }
    path.write_text(yaml.safe_dump(job))
    cfg = load_config(path)
    events = JobEvents(
        cfg, Metrics("reload"), lambda: None, {}, reload=lambda: load_config(path), reload_interval=0.1
    )
    events.start()
    try:
        path.write_text("name: [broken")  # an edit in progress: ignored, the old targets stay
        events.event("STILL_A", "x")
        wait_for(lambda: "STILL_A" in names(a), 5, "an event on the old target")
        job["delivery"] = {"targets": [{"type": "file", "path": str(b)}]}
        path.write_text(yaml.safe_dump(job))
        wait_for(lambda: "DELIVERY_CHANGED" in names(b), 5, "the new target in use")
        events.event("ON_B", "y")
    finally:
        events.close("FINISHED")
    assert "ON_B" in names(b) and "ON_B" not in names(a)
