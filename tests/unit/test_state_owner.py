"""The job a state table belongs to: recorded by its first job, another job refused naming state.path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deltalake import DeltaTable

from checkpoints.owner import record_owner
from checkpoints.state import StateTable
from ingest.config import parse_config
from ingest.errors import ConfigError
from ingest.intake.recovery import recover
from ingest.pipeline import Job
from tests.support.jobconfig import fake_source, job_config
from tests.support.jobs import run_main_in_session, write_config


def owner(path: Path) -> tuple[str, str] | None:
    from checkpoints.state_owner import table_owner  # here: without it, the tests fail, not the import

    return table_owner(DeltaTable(str(path)))


def opened(path: Path, name: str, checkpoint: Path | None) -> StateTable:
    st = StateTable(str(path), name, 60, None if checkpoint is None else str(checkpoint))
    st.open()
    return st


def test_the_first_job_records_itself_and_its_restart_keeps_the_table(tmp_path):
    st = opened(tmp_path / "state", "joba", tmp_path / "a" / "ckpt")
    st.commit(0, ["m1", "m2"])
    st.close()
    again = opened(tmp_path / "state", "joba", tmp_path / "a" / "ckpt")
    assert again.committed_batch() == 0 and sorted(again.keys()) == ["m1", "m2"]
    assert owner(tmp_path / "state") == ("joba", str(tmp_path / "a" / "ckpt"))


@pytest.mark.parametrize(("name", "checkpoint"), [("jobb", "a"), ("joba", "b"), ("jobb", "b")])
def test_another_job_is_refused_naming_state_path_and_writing_nothing(tmp_path, name, checkpoint):
    """Another name, or the same name on another checkpoint (its batch ids are not this table's)."""
    state = tmp_path / "state"
    opened(state, "joba", tmp_path / "a").commit(0, ["m1"])
    version = DeltaTable(str(state)).version()
    with pytest.raises(ConfigError) as err:
        opened(state, name, tmp_path / checkpoint)
    assert str(err.value).startswith(
        f"config key state.path: {state} belongs to job joba (checkpoint {tmp_path / 'a'}), not to "
        f"this job {name} (checkpoint {tmp_path / checkpoint}); two jobs cannot share a state table"
    )
    assert DeltaTable(str(state)).version() == version
    assert opened(state, "joba", tmp_path / "a").keys() == ["m1"]


def test_a_state_path_through_a_symlink_to_another_jobs_table_is_refused(tmp_path):
    (tmp_path / "b").mkdir()
    opened(tmp_path / "a" / "state", "joba", tmp_path / "a" / "ckpt").commit(0, ["m1"])
    link = tmp_path / "b" / "state"
    link.symlink_to(tmp_path / "a" / "state")
    with pytest.raises(ConfigError) as err:
        opened(link, "jobb", tmp_path / "b" / "ckpt")
    assert (
        f"config key state.path: {link} (which resolves to {tmp_path / 'a' / 'state'}) belongs to job joba"
        in str(err.value)
    )


def test_a_table_from_before_owners_is_adopted_by_the_first_job_that_opens_it(tmp_path):
    from checkpoints.state_owner import check_state_owner

    state = tmp_path / "state"
    old = opened(state, "joba", None)  # as the version before owners wrote it
    old.commit(0, ["m1"])
    old.commit(1, ["m2"])
    assert owner(state) is None
    check_state_owner(str(state), "jobb", str(tmp_path / "other"))  # what check runs: it reads only
    assert owner(state) is None
    adopted = opened(state, "joba", tmp_path / "ckpt")
    assert adopted.committed_batch() == 1 and sorted(adopted.keys()) == ["m1", "m2"]
    assert owner(state) == ("joba", str(tmp_path / "ckpt"))
    with pytest.raises(ConfigError, match="belongs to job joba"):
        opened(state, "jobb", tmp_path / "other")


def error_line(err: str) -> str:
    """The one ``error:`` line of a run's stderr, with no trace above it."""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert "Traceback" not in err and len(errors) == 1, err
    return errors[0]


def _start_without_spark(cfg: dict) -> None:
    """What a job's start does before its Spark session: owners recorded, the state table opened."""
    job = Job(parse_config(cfg), echo=lambda line: None)
    with job.lock:
        record_owner(job.cfg.checkpoint, job.cfg.name, ["fake in"])
        recover(job.cfg, job.acker, job.stager, job.echo).close()


def test_two_jobs_configs_on_one_state_path_the_second_refused_by_run_and_check(tmp_path):
    """Job b's config names job a's state.path (another checkpoint): its run and its check exit 2
    with one ``error:`` line naming state.path, before any Spark session; nothing is written."""
    state = tmp_path / "shared-state"
    a = job_config(fake_source(tmp_path / "a"), tmp_path / "a", name="joba", state={"path": str(state)})
    _start_without_spark(a)
    version = DeltaTable(str(state)).version()
    b = job_config(fake_source(tmp_path / "b"), tmp_path / "b", name="jobb", state={"path": str(state)})
    (tmp_path / "b").mkdir()
    config = write_config(tmp_path / "b", b)
    for args in ((), ("--check",)):
        code, out, err = run_main_in_session(config, args=args)
        assert code == 2, out + err
        owner = f"job joba (checkpoint {tmp_path / 'a' / 'checkpoint'})"
        assert error_line(err).startswith(f"error: config key state.path: {state} belongs to {owner}")
    assert DeltaTable(str(state)).version() == version
    assert not (tmp_path / "b" / "checkpoint").exists(), "nothing of job b was written"
    _start_without_spark(a)  # job a itself starts again


def test_check_refuses_another_jobs_checkpoint_as_run_does(tmp_path):
    a = job_config(fake_source(tmp_path), tmp_path, name="joba")
    record_owner(a["checkpoint"], "joba", ["fake in"])
    before = sorted(os.listdir(tmp_path / "checkpoint" / "mq_ingest"))
    c = job_config(fake_source(tmp_path), tmp_path, name="jobc", state={"path": str(tmp_path / "c")})
    code, out, err = run_main_in_session(write_config(tmp_path, c), args=("--check",))
    assert code == 2, out + err
    assert error_line(err).startswith(
        f"error: config key checkpoint: {tmp_path / 'checkpoint'} belongs to job joba"
    )
    assert sorted(os.listdir(tmp_path / "checkpoint" / "mq_ingest")) == before
    assert not (tmp_path / "c").exists()


def test_of_two_jobs_adopting_one_old_table_at_once_the_second_is_refused(tmp_path):
    """Both read the table without an owner; the first metadata commit lands, the other's fails
    (delta-rs: "Metadata changed since last commit") and its job finds the table owned."""
    from checkpoints.state_owner import claim

    state = tmp_path / "state"
    opened(state, "joba", None).commit(0, ["m1"])
    late = DeltaTable(str(state))  # jobb's snapshot, from before joba's adoption
    opened(state, "joba", tmp_path / "a")
    with pytest.raises(ConfigError, match="belongs to job joba"):
        claim(late, str(state), "jobb", str(tmp_path / "b"))
    assert owner(state) == ("joba", str(tmp_path / "a"))


def test_a_state_table_ahead_of_its_checkpoint_is_refused_by_check_and_by_the_start(tmp_path):
    """The checkpoint removed, the state kept: the new checkpoint's batches 0-3 would pass the replay
    guard as replays of the state's committed batch 3, and their messages be deleted unwritten."""
    from checkpoints.state_owner import check_state_owner

    state, checkpoint = tmp_path / "state", tmp_path / "checkpoint"  # where job_config puts them
    (checkpoint / "offsets").mkdir(parents=True)
    table = opened(state, "joba", checkpoint)
    for batch in range(4):
        (checkpoint / "offsets" / str(batch)).write_text("v1\n")
        table.commit(batch, [f"m{batch}"])
    table.close()
    check_state_owner(str(state), "joba", str(checkpoint))  # its own checkpoint: accepted
    (checkpoint / "offsets" / "3").unlink()  # a crash after the state commit, before Spark's: still fine
    (checkpoint / "offsets" / "2").unlink()
    why = (
        f"config key state.path: {state} has committed batch 3, but the checkpoint {checkpoint} has "
        "planned batches up to 1: its batches 2-3 would be taken for replays"
    )
    with pytest.raises(ConfigError, match=f"^{why}"):
        check_state_owner(str(state), "joba", str(checkpoint))
    for f in (checkpoint / "offsets").iterdir():
        f.unlink()
    with pytest.raises(ConfigError, match="has planned no batch: its batches 0-3 would be taken"):
        check_state_owner(str(state), "joba", str(checkpoint))
    with pytest.raises(ConfigError, match="has planned no batch"):  # the start refuses it too
        _start_without_spark(job_config(fake_source(tmp_path), tmp_path, name="joba"))
