"""The checkpoint lock: held for exactly a job's run, however the run ends."""

from __future__ import annotations

import pytest

from checkpoints.lock import CheckpointLock
from ingest.config import parse_config
from ingest.errors import ConfigError, FatalError
from ingest.pipeline import Job
from tests.support.jobconfig import fake_source, job_config


def test_the_lock_is_held_for_the_with_block_only(tmp_path):
    with CheckpointLock(str(tmp_path)) as held:
        assert held._fd is not None
        with pytest.raises(ConfigError, match="in use by another running instance"):
            CheckpointLock(str(tmp_path)).acquire()
    again = CheckpointLock(str(tmp_path))
    again.acquire()  # free once the block ended
    again.release()


def test_the_lock_is_released_when_the_block_raises(tmp_path):
    with pytest.raises(RuntimeError), CheckpointLock(str(tmp_path)):
        raise RuntimeError("the run failed")
    with CheckpointLock(str(tmp_path)):
        pass


def _fail_open(monkeypatch, job: Job) -> None:
    from checkpoints.state import StateTable

    def broken(self) -> None:
        raise FatalError("state table unreadable")

    monkeypatch.setattr(StateTable, "open", broken)


def _fail_reconcile(monkeypatch, job: Job) -> None:
    def broken() -> int:
        raise FatalError("state table unreadable")

    monkeypatch.setattr(job.acker, "reconcile", broken)


@pytest.mark.parametrize("fault", [_fail_open, _fail_reconcile], ids=["open", "reconcile"])
def test_a_run_whose_state_fails_to_open_lets_the_lock_go(tmp_path, monkeypatch, fault):
    cfg = parse_config(job_config(fake_source(tmp_path), tmp_path, [{"type": "console", "name": "out"}]))
    job = Job(cfg, echo=lambda s: None)
    fault(monkeypatch, job)
    with pytest.raises(FatalError, match="state table unreadable"):
        job.run()
    again = CheckpointLock(cfg.checkpoint)
    again.acquire()  # this process's own failed run let the lock go
    again.release()
