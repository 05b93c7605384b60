"""The job's own files on S3 (``s3a://``): ack journal, owner record, Spark's file-source log and
dead letters, through ``ingest.storage`` against moto's S3 server on 127.0.0.1 (no Spark: Spark's
checkpoint files are written in its layout, as S3A writes them, whole objects)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import orjson
import pytest

from checkpoints.journal import AckJournal, committed_batches, is_committed, planned_batches
from checkpoints.owner import check_owner, record_owner, recorded
from checkpoints.source_log import batch_files, check_home, committed_files, planned_files, prune
from ingest.batch.deadletter import DeadLetter
from ingest.errors import ConfigError, FatalError
from ingest.storage.aws import delta_options
from tests.support.jobs import ROOT
from tests.support.s3_server import S3Server, s3_server_in_env


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server_in_env("lake") as server:
        yield server


def put(s3: S3Server, key: str, data: bytes) -> None:
    s3.client().put_object(Bucket="lake", Key=key, Body=data)


def get(s3: S3Server, key: str) -> bytes:
    return s3.client().get_object(Bucket="lake", Key=key)["Body"].read()


def spark_checkpoint(s3: S3Server, prefix: str, offsets: dict[int, int], log: dict[str, list], commits=()):
    """Spark's checkpoint under ``prefix``: ``offsets/N`` (batch id -> log offset), the file
    source's log ``sources/0/<name>`` ([(staged key, log batch)]) and ``commits/N``."""
    for batch_id, offset in offsets.items():
        put(
            s3,
            f"{prefix}/offsets/{batch_id}",
            b'v1\n{"batchWatermarkMs":0}\n' + orjson.dumps({"logOffset": offset}),
        )
    for name, files in log.items():
        entries = [{"path": f"s3a://lake/{k}", "timestamp": 1, "batchId": b} for k, b in files]
        put(s3, f"{prefix}/sources/0/{name}", b"v1\n" + b"\n".join(orjson.dumps(e) for e in entries))
    for batch_id in commits:
        put(s3, f"{prefix}/commits/{batch_id}", b'v1\n{"nextBatchWatermarkMs":0}')
    return f"s3a://lake/{prefix}"


def test_the_ack_journal_and_the_owner_record_live_in_the_checkpoint_on_s3(s3):
    ckpt = spark_checkpoint(s3, "j/ckpt", {0: 0, 1: 1}, {}, commits=[0])
    journal = AckJournal(ckpt + "/mq_ingest")
    journal.write(0, [("src", "h0")])
    journal.write(1, [("src", "h1"), ("src", "h2", "bucket/payload")])
    assert s3.keys("lake", "j/ckpt/mq_ingest/") == [
        "j/ckpt/mq_ingest/acks/0.json",
        "j/ckpt/mq_ingest/acks/1.json",
    ]
    again = AckJournal(ckpt + "/mq_ingest")  # a restart reads what the last run wrote
    assert again.pending() == [0, 1]
    assert again.read(1) == [["src", "h1"], ["src", "h2", "bucket/payload"]]
    again.done(0)
    assert again.pending() == [1]
    assert (committed_batches(ckpt), planned_batches(ckpt)) == ({0}, {0, 1})
    assert is_committed(ckpt, 0) and not is_committed(ckpt, 1)

    assert recorded(ckpt) is None
    record_owner(ckpt, "orders", ["sqs q1"])
    assert recorded(ckpt) == ("orders", ["sqs q1"])
    assert orjson.loads(get(s3, "j/ckpt/mq_ingest/job.json")) == {"name": "orders", "queues": ["sqs q1"]}
    check_owner(ckpt, "orders", ["sqs q1", "sqs q2"])
    with pytest.raises(ConfigError, match=r"checkpoint: s3a://lake/j/ckpt belongs to job orders"):
        check_owner(ckpt, "billing", ["sqs q3"])


def test_the_file_source_log_names_staged_objects(s3):
    files = {
        "0": [("st/a.jsonl", 0), ("st/b%20c.jsonl", 0)],
        "1": [("st/d.jsonl", 1)],
        "2": [("st/e.jsonl", 2)],
    }
    ckpt = spark_checkpoint(s3, "l/ckpt", {0: 0, 1: 2}, files, commits=[0])
    assert batch_files(ckpt, 0) == ["s3a://lake/st/a.jsonl", "s3a://lake/st/b c.jsonl"]
    assert batch_files(ckpt, 1) == ["s3a://lake/st/d.jsonl", "s3a://lake/st/e.jsonl"]
    every = {f"s3a://lake/st/{n}.jsonl" for n in ("a", "b c", "d", "e")}
    assert planned_files(ckpt) == every
    assert committed_files(ckpt) == {"s3a://lake/st/a.jsonl", "s3a://lake/st/b c.jsonl"}
    check_home(ckpt, "s3://lake/st/", "s3a://lake/state")  # the same objects, spelled as the user wrote
    with pytest.raises(ConfigError, match=r"staged in s3a://lake/st, not in s3a://lake/moved: its folder"):
        check_home(ckpt, "s3a://lake/moved", "s3a://lake/state")
    with pytest.raises(ConfigError, match=r"staged in s3a://lake/st, not in /"):
        check_home(ckpt, "/srv/staging", "/srv/state")


def test_prune_drops_gone_staged_objects_of_committed_batches(s3):
    put(s3, "p/st/kept.jsonl", b"{}\n")  # committed, but cleanSource has not deleted it yet
    files = [
        ("p/st/gone-0.jsonl", 0),
        ("p/st/kept.jsonl", 1),
        ("p/st/gone-1.jsonl", 1),
        ("p/st/next.jsonl", 2),
    ]
    ckpt = spark_checkpoint(s3, "p/ckpt", {0: 0, 1: 1, 2: 2}, {"2.compact": files}, commits=[0, 1])
    assert prune(ckpt) == 2
    lines = get(s3, "p/ckpt/sources/0/2.compact").splitlines()
    assert lines[0] == b"v1"
    assert [(orjson.loads(x)["path"], orjson.loads(x)["batchId"]) for x in lines[1:]] == [
        ("s3a://lake/p/st/kept.jsonl", 1),
        ("s3a://lake/p/st/next.jsonl", 2),
    ]
    assert s3.keys("lake", "p/ckpt/sources/") == ["p/ckpt/sources/0/2.compact"]  # rewritten in place
    assert batch_files(ckpt, 2) == ["s3a://lake/p/st/next.jsonl"]  # the replay still finds its files
    assert prune(ckpt) == 0


def test_dead_letters_are_written_whole_to_s3(s3):
    DeadLetter("s3a://lake/dlq", None).write_records([{"error": "too big"}], 4, "out")  # type: ignore[typeddict-item]
    assert s3.keys("lake", "dlq/") == ["dlq/batch_id=4-out.jsonl"]
    assert orjson.loads(get(s3, "dlq/batch_id=4-out.jsonl")) == {"batch_id": 4, "error": "too big"}


REOPEN = """
import sys
from checkpoints.state import StateTable
state = StateTable(sys.argv[1], "orders", 3600, sys.argv[2])
state.open()
print(state.committed_batch(), sorted(state.keys()), state.unseen(["k1", "k9"]).to_pylist())
"""


def test_the_state_table_on_s3_commits_reopens_and_refuses_another_job(s3):
    from deltalake import DeltaTable

    from checkpoints.state import StateTable
    from checkpoints.state_owner import check_not_ahead, check_state_owner

    ckpt = spark_checkpoint(s3, "t/ckpt", {0: 0, 1: 0}, {})
    state = StateTable("s3a://lake/t/state", "orders", 3600, ckpt)
    state.open()
    assert state.commit(0, ["k1", "k2"]) and state.commit(1, ["k2", "k3"])
    assert not state.commit(1, ["k4"]), "a replayed batch writes nothing"
    state.close()

    env = {**os.environ, **s3.env, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", REOPEN, "s3://lake/t/state", "s3://lake/t/ckpt/"]  # spelled otherwise
    out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "1 ['k1', 'k2', 'k3'] [False, True]", out.stderr[-2000:]

    check_not_ahead("s3a://lake/t/state", 1, ckpt)
    with pytest.raises(
        ConfigError, match=r"state.path: s3a://lake/t/state has committed batch 2, but the checkpoint"
    ):
        check_not_ahead("s3a://lake/t/state", 2, ckpt)
    check_state_owner("s3a://lake/t/state", "orders", ckpt)
    with pytest.raises(
        ConfigError,
        match=r"state.path: s3a://lake/t/state belongs to job orders \(checkpoint s3a://lake/t/ckpt\)",
    ):
        StateTable("s3a://lake/t/state", "billing", 3600, "s3a://lake/b/ckpt").open()

    table = DeltaTable("s3://lake/t/state", storage_options=delta_options()).to_pyarrow_table()
    assert sorted(table.column("key").to_pylist()) == ["k1", "k2", "k3"]


def test_a_state_table_in_a_missing_bucket_is_one_line_naming_state_path_and_the_bucket(s3):
    from checkpoints.state import StateTable

    with pytest.raises(FatalError) as caught:
        StateTable("s3a://no-such-bucket/state", "orders", 3600).open()
    line = str(caught.value)
    assert line.startswith("state.path: cannot open the state table at s3a://no-such-bucket/state: "), line
    assert "NoSuchBucket" in line or "does not exist" in line, line
    assert "\n" not in line and "testing" not in line
