"""The demo (conf/local.yaml) run twice: the second seeding of the drained queue writes nothing twice."""

from __future__ import annotations

import pytest
import yaml

from sources.fake.store import FakeQueue
from tests.support.jobs import ROOT, read_jsonl_dir, run_in_session, summary

pytestmark = pytest.mark.spark


def test_a_second_demo_run_reseeds_the_empty_queue_and_the_sink_holds_each_event_once(tmp_path):
    """conf/local.yaml as it is, its ``data/`` under the test's directory and a smaller seed."""
    text = (ROOT / "conf" / "local.yaml").read_text().replace(" data/", f" {tmp_path}/data/")
    cfg = yaml.safe_load(text)
    cfg["sources"][0]["seed"] = {"messages": 40, "duplicates": 3, "malformed": 2}
    config = tmp_path / "local.yaml"
    config.write_text(yaml.safe_dump(cfg))
    runs = [run_in_session(config) for _ in range(2)]
    assert [code for code, _ in runs] == [0, 0], runs[-1][1][-3000:]
    first, second = (summary(out) for _, out in runs)
    assert (first["received"], first["written"], first["deserializationErrors"]) == (45, 40, 2)
    assert second["received"] == 45, "the drained queue is seeded again"
    assert second["written"] == 0 and second["duplicateMessages"] >= 40, second
    events = [r["event_id"] for r in read_jsonl_dir(tmp_path / "data" / "out" / "events")]
    assert sorted(events) == list(range(40)), "each event once after two runs"
    assert FakeQueue(str(tmp_path / "data" / "queues"), "events").count()["total"] == 0
