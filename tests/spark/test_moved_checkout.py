"""A job folder copied or moved after a run: the checkpoint is named as another folder's, with what to do."""

from __future__ import annotations

import shutil

import pytest
import yaml

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir, run_cli, run_in_session, write_config

pytestmark = pytest.mark.spark


def test_a_copied_folder_stops_naming_both_staging_dirs_and_what_to_do(tmp_path, spark):
    first = tmp_path / "a"
    first.mkdir()
    FakeQueue(str(first / "queues"), "in").send_batch([{"body": body(i)} for i in range(30)])
    code, out = run_in_session(write_config(first, job_config(first)))
    assert code == 0, out
    copy = tmp_path / "b"
    shutil.copytree(first, copy)
    cfg = yaml.safe_load((copy / "job.yaml").read_text().replace(str(first), str(copy)))
    q = FakeQueue(str(copy / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(30, 40)])

    r = run_cli(write_config(copy, cfg), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: config key checkpoint:"), r.stderr
    assert f"staged in {first / 'staging'}, not in {copy / 'staging'}" in errors[0]
    assert "copied or moved" in errors[0] and "start afresh: remove the checkpoint" in errors[0]
    assert q.count()["visible"] == 10, "nothing was read"

    for part in ("checkpoint", "state", "staging"):  # what the error says to do
        shutil.rmtree(copy / part)
    shutil.move(copy / "out", copy / "out.before")
    code, out = run_in_session(write_config(copy, cfg))
    assert code == 0, out
    assert sorted(r["event_id"] for r in read_jsonl_dir(copy / "out")) == list(range(30, 40))
    assert sorted(r["event_id"] for r in read_jsonl_dir(copy / "out.before")) == list(range(30))
    assert q.count()["total"] == 0
