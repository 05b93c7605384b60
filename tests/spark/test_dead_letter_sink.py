"""``dead_letter: {sink: NAME}``: the bad messages reach that sink, the good rows the others."""

from __future__ import annotations

import pytest

from ingest.config import parse_config
from ingest.pipeline import Job
from sources.fake.store import FakeQueue
from tests.support.jobconfig import files_sink
from tests.support.jobs import body, job_config, read_jsonl_dir, run_cli, write_config

pytestmark = pytest.mark.spark


def fill(tmp_path, n: int, bad: int) -> FakeQueue:
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(n)] + [{"body": f"not json {k}"} for k in range(bad)])
    return q


def _config(tmp_path, **over) -> dict:
    return job_config(
        tmp_path,
        source={"on_bad_message": "dead_letter"},
        transform="SELECT event_id, action FROM source",
        sinks=[
            files_sink(tmp_path, transform="SELECT event_id FROM source WHERE event_id % 2 = 0"),
            files_sink(tmp_path, name="copy", path=str(tmp_path / "copy")),
            files_sink(tmp_path, name="dlq", path=str(tmp_path / "dlq"), transform="SELECT body FROM source"),
        ],
        dead_letter={"sink": "dlq"},
        **over,
    )


def test_bad_messages_reach_the_dead_letter_sink_and_good_rows_the_others(tmp_path, spark):
    q = fill(tmp_path, n=40, bad=3)
    lines: list[str] = []
    job = Job(parse_config(_config(tmp_path)), echo=lines.append)
    assert job.run() == 0
    # The summary counts the rows of the data sinks; the dead-letter sink's are deadLettered.
    assert any(line.startswith("summary:") and " written=out:20,copy:40 " in line for line in lines), lines
    # Each data sink got its own transform over the job's, not the dead-letter sink's.
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(0, 40, 2))
    copy = read_jsonl_dir(tmp_path / "copy")
    assert sorted(r["event_id"] for r in copy) == list(range(40))
    assert all(set(r) == {"event_id", "action"} for r in copy)
    # The dead-letter sink got the bad bodies only, through its own transform.
    dead = read_jsonl_dir(tmp_path / "dlq")
    assert sorted(d["body"] for d in dead) == [f"not json {k}" for k in range(3)]
    assert all(set(d) == {"body"} for d in dead)
    s = job.metrics.summary()
    assert s["deadLettered"] == 3 and s["deserializationErrors"] == 3
    assert s["deletedMessages"] == 43
    assert q.count()["total"] == 0


def test_a_batch_of_good_messages_only_runs_with_a_dead_letter_sink(tmp_path, spark):
    q = fill(tmp_path, n=25, bad=0)
    assert Job(parse_config(_config(tmp_path)), echo=lambda s: None).run() == 0
    assert len(read_jsonl_dir(tmp_path / "copy")) == 25
    assert not read_jsonl_dir(tmp_path / "dlq")
    assert q.count()["total"] == 0


def test_check_reports_what_the_dead_letter_sink_receives(tmp_path):
    r = run_cli(["--config", str(write_config(tmp_path, _config(tmp_path))), "--check"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        "sink out receives columns ['event_id']; sink copy receives columns ['event_id', 'action']; "
        "sink dlq receives columns ['body']"
    ) in r.stdout
    cfg = _config(tmp_path)
    cfg["sinks"][2]["transform"] = "SELECT event_id FROM source"  # not a column of a bad message
    r = run_cli(["--config", str(write_config(tmp_path, cfg)), "--check"])
    assert r.returncode == 2, r.stdout + r.stderr
    assert "config key sinks.dlq.transform:" in r.stderr and "event_id" in r.stderr
