"""The end-of-run lines: each sink's rows, not their sum, and the machine-readable figures."""

from __future__ import annotations

from types import SimpleNamespace

import orjson

from ingest.batch.info import BatchInfo
from ingest.config import parse_config
from ingest.metrics import Metrics
from ingest.ops.summary import RunSummary
from tests.support.jobconfig import fake_source, files_sink, job_config


def run_summary(tmp_path, sinks: list[dict]) -> tuple[RunSummary, Metrics, list[str]]:
    cfg = parse_config(job_config(fake_source(tmp_path), tmp_path, sinks))
    metrics, lines = Metrics("t-job"), []
    depths = SimpleNamespace(get=lambda now=False: {})
    return RunSummary(cfg, metrics, SimpleNamespace(), depths, lines.append), metrics, lines  # type: ignore[arg-type]


def test_the_summary_prints_what_each_sink_wrote(tmp_path):
    copy = {"type": "fake", "name": "copy", "path": str(tmp_path / "queues"), "queue": "copy"}
    summary, metrics, lines = run_summary(tmp_path, [files_sink(tmp_path), copy])
    metrics.inc("received", 300)
    metrics.inc("written", 300, sink="out")
    metrics.inc("written", 300, sink="copy")
    summary.report()
    line = next(line for line in lines if line.startswith("summary: "))
    assert "received=300 " in line and " written=out:300,copy:300 " in line, line
    figures = orjson.loads(next(line for line in lines if line.startswith("SUMMARY "))[len("SUMMARY ") :])
    assert figures["writtenBySink"] == {"out": 300, "copy": 300}
    assert figures["written"] == 600  # rows accepted by all sinks, as the metric counts them


def test_a_sink_that_wrote_nothing_shows_zero_and_batch_lines_match(tmp_path):
    second = files_sink(tmp_path, name="other", path=str(tmp_path / "other"))
    summary, metrics, lines = run_summary(tmp_path, [files_sink(tmp_path), second])
    metrics.inc("written", 7, sink="out")
    info = BatchInfo(rows=7, new=7, dropped=0, bad=0, written={"out": 7}, latency=0.5, phases={})
    summary.batch(0, info, in_flight=0)
    assert "batch 0: rows=7 new=7 dropped=0 bad=0 written=out:7,other:0 latency=0.50s" in lines[0]
    summary.report()
    assert " written=out:7,other:0 " in next(line for line in lines if line.startswith("summary: "))
