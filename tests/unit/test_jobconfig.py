"""The shared job-config builder makes configs the job accepts, with its state under the root given."""

from __future__ import annotations

from ingest.config import parse_config
from tests.support.jobconfig import fake_source, files_sink, job_config


def test_the_default_job_validates_with_everything_under_the_root(tmp_path):
    cfg = parse_config(job_config(fake_source(tmp_path), tmp_path))
    assert cfg.checkpoint == str(tmp_path / "checkpoint") and cfg.staging.roll_messages == 200
    assert [s.name for s in cfg.sinks] == ["out"] and cfg.sources[0].path == str(tmp_path / "queues")


def test_staging_settings_keep_the_roots_dir_and_other_keys_replace_whole(tmp_path):
    cfg = job_config(
        fake_source(tmp_path),
        tmp_path,
        [files_sink(tmp_path, name="o2")],
        staging={"max_in_flight": 10},
        trigger={"mode": "processing_time"},
    )
    assert cfg["staging"] == {"dir": str(tmp_path / "staging"), "max_in_flight": 10}
    assert cfg["trigger"] == {"mode": "processing_time"} and cfg["sinks"][0]["name"] == "o2"
    parse_config(cfg)
