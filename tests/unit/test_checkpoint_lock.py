"""The checkpoint lock: held for exactly a job's run, however the run ends."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

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


def _jvm_record(checkpoint, driver: str, jvm: subprocess.Popen) -> None:
    from checkpoints.lease import start_time as _start_time

    (Path(checkpoint) / "mq_ingest").mkdir(parents=True, exist_ok=True)
    (Path(checkpoint) / "mq_ingest" / "jvm").write_text(f"{driver} {jvm.pid} {_start_time(jvm.pid)}")


def test_a_start_ends_the_jvm_a_dead_driver_left_before_it_reads_the_checkpoint(tmp_path, monkeypatch):
    """A killed driver's JVM lingers until it sees its stdin close; it may still plan a batch, so
    the next start waits for it, and kills it once ``ORPHAN_WAIT`` is over. (``sleep`` stands in
    for the JVM: what counts is the process, not what it runs.)"""
    monkeypatch.setattr("checkpoints.lock.ORPHAN_WAIT", 0.2)
    orphan = subprocess.Popen(["sleep", "60"])
    try:
        _jvm_record(tmp_path, "999999999 1", orphan)  # a driver pid no process has
        with CheckpointLock(str(tmp_path)):
            assert orphan.wait(timeout=5) == -signal.SIGKILL
            assert not (tmp_path / "mq_ingest" / "jvm").exists()
    finally:
        orphan.kill()
        orphan.wait()


def test_a_start_leaves_a_jvm_whose_driver_lives(tmp_path):
    """A process that ran this job and goes on with another keeps its JVM."""
    from checkpoints.lease import start_time as _start_time

    jvm = subprocess.Popen(["sleep", "60"])
    try:
        _jvm_record(tmp_path, f"{os.getpid()} {_start_time(os.getpid())}", jvm)
        with CheckpointLock(str(tmp_path)) as lock:
            assert jvm.poll() is None
            lock.record_jvm(jvm.pid)
        assert (tmp_path / "mq_ingest" / "jvm").read_text().split()[2] == str(jvm.pid)
    finally:
        jvm.kill()
        jvm.wait()


def test_a_checkpoint_that_cannot_be_created_exits_2_naming_the_key(tmp_path, capsys):
    from ingest.run import main

    cfg = job_config(fake_source(tmp_path), tmp_path)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({**cfg, "checkpoint": "/proc/mq-ingest-ckpt"}))
    assert main(["--config", str(tmp_path / "job.yaml")]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert (
        line == "error: config key checkpoint: cannot create /proc/mq-ingest-ckpt: No such file or directory"
    )
