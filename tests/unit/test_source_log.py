"""Reading Spark's file-source log: which staged files each micro-batch planned (no Spark here:
the checkpoint files are written in Spark's own layout; tests/spark checks it against Spark)."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson

from checkpoints.source_log import batch_files, committed_files, planned_files, prune
from ingest.intake.staging import TMP_DIR, Stager


def _entries(path):
    return [orjson.loads(line) for line in path.read_bytes().splitlines()[1:] if line.strip()]


def write_log(path, entries):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"v1\n" + b"\n".join(orjson.dumps(e) for e in entries))


def checkpoint(tmp_path, offsets, log):
    """offsets: batch id -> log offset; log: log file name -> [(file, log batch)]."""
    ckpt = tmp_path / "ckpt"
    for batch_id, offset in offsets.items():
        p = ckpt / "offsets" / str(batch_id)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b'v1\n{"batchWatermarkMs":0}\n' + orjson.dumps({"logOffset": offset}))
    for name, files in log.items():
        entries = [{"path": f"file:///staging/{f}", "timestamp": 1, "batchId": b} for f, b in files]
        write_log(ckpt / "sources" / "0" / name, entries)
    return str(ckpt)


def test_each_batch_gets_the_files_of_its_log_offsets(tmp_path):
    ckpt = checkpoint(
        tmp_path,
        {0: 0, 1: 2},
        {"0": [("a.jsonl", 0), ("b.jsonl", 0)], "1": [("c.jsonl", 1)], "2": [("d%20e.jsonl", 2)]},
    )
    assert batch_files(ckpt, 0) == ["/staging/a.jsonl", "/staging/b.jsonl"]
    # Batch 1 spans log batches 1 and 2 (after a restart Spark may plan several at once).
    assert batch_files(ckpt, 1) == ["/staging/c.jsonl", "/staging/d e.jsonl"]


def test_a_log_batch_in_a_compact_file_is_found(tmp_path):
    compact = [(f"f{i}.jsonl", i) for i in range(10)]
    ckpt = checkpoint(tmp_path, {8: 8, 9: 9, 10: 10}, {"9.compact": compact, "10": [("g.jsonl", 10)]})
    assert batch_files(ckpt, 9) == ["/staging/f9.jsonl"]
    assert batch_files(ckpt, 10) == ["/staging/g.jsonl"]
    assert planned_files(ckpt) == {f"/staging/f{i}.jsonl" for i in range(10)} | {"/staging/g.jsonl"}


def test_unknown_when_the_log_cannot_say(tmp_path):
    ckpt = checkpoint(tmp_path, {0: 0, 2: 1}, {"0": [("a.jsonl", 0)]})
    assert batch_files(ckpt, 5) is None  # no offsets file
    assert batch_files(ckpt, 2) is None  # the previous batch's offsets are gone
    ckpt2 = checkpoint(tmp_path / "x", {0: 3}, {"0": [("a.jsonl", 0)]})
    assert batch_files(ckpt2, 0) is None  # log batches 1..3 are missing
    remote = tmp_path / "r"
    ckpt3 = checkpoint(remote, {0: 0}, {})
    write_log(remote / "ckpt" / "sources" / "0" / "0", [{"path": "gs://b/a.jsonl", "batchId": 0}])
    assert batch_files(ckpt3, 0) is None  # staged where the job reads nothing (s3a: test_state_s3.py)
    assert planned_files(str(tmp_path / "none")) == set()


def test_discard_except_keeps_the_given_files_only(tmp_path):
    staging = tmp_path / "staging"
    (staging / TMP_DIR).mkdir(parents=True)
    for name in ("planned.jsonl", "stale.jsonl"):
        (staging / name).write_text("{}\n")
    (staging / TMP_DIR / "partial.jsonl").write_text("{")
    (staging / "_other").write_text("kept: not a staged file")
    st = Stager(str(staging), roll_messages=10, roll_bytes=10**6, roll_interval=60)
    # Compared by name: the log may spell the directory another way.
    assert st.discard_except({"/elsewhere/../staging/planned.jsonl"}) == 2
    assert sorted(p.name for p in staging.iterdir()) == ["_other", "_tmp", "planned.jsonl"]
    assert not list((staging / TMP_DIR).iterdir())


def committed(ckpt, *batch_ids):
    for b in batch_ids:
        p = Path(ckpt) / "commits" / str(b)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b'v1\n{"nextBatchWatermarkMs":0}')


def test_prune_drops_gone_files_of_committed_batches_only(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "kept.jsonl").write_text("{}\n")  # committed, but cleanSource has not deleted it yet
    files = [("gone-0.jsonl", 0), ("kept.jsonl", 1), ("gone-1.jsonl", 1), ("next.jsonl", 2)]
    ckpt = checkpoint(tmp_path, {0: 0, 1: 1, 2: 2}, {"3": [("after.jsonl", 3)]})
    log_dir = tmp_path / "ckpt" / "sources" / "0"
    compact = log_dir / "2.compact"  # this test's files, not the helper's /staging/...
    write_log(compact, [{"path": f"file://{staging}/{f}", "timestamp": 1, "batchId": b} for f, b in files])
    (log_dir / ".2.compact.crc").write_bytes(b"stale checksum")
    committed(ckpt, 0, 1)  # batch 2 planned (offsets/2) but not committed: a replay needs its files

    assert prune(ckpt) == 2
    assert [(e["path"].rsplit("/", 1)[1], e["batchId"]) for e in _entries(compact)] == [
        ("kept.jsonl", 1),
        ("next.jsonl", 2),
    ]
    assert compact.read_bytes().startswith(b"v1\n")
    assert not (log_dir / ".2.compact.crc").exists()
    assert [p.name for p in log_dir.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    assert batch_files(ckpt, 2) == [f"{staging}/next.jsonl"]  # the replay still finds its files
    assert (log_dir / "3").exists()  # log batches after the compact file are Spark's, untouched
    assert prune(ckpt) == 0  # nothing left to drop: the file is not rewritten
    assert {p.rsplit("/", 1)[1] for p in planned_files(ckpt)} == {"kept.jsonl", "next.jsonl", "after.jsonl"}
    # What a restart reads: the planned files of batches after the last commit (a replay), and
    # of the last committed batch (Spark lists them at start, then cleanSource deletes them).
    at_restart = planned_files(ckpt, at_restart=True)
    assert {p.rsplit("/", 1)[1] for p in at_restart} == {"kept.jsonl", "next.jsonl", "after.jsonl"}
    committed(ckpt, 2)
    at_restart = planned_files(ckpt, at_restart=True)
    assert {p.rsplit("/", 1)[1] for p in at_restart} == {"next.jsonl", "after.jsonl"}


def test_prune_leaves_a_log_it_cannot_read_as_it_is(tmp_path, caplog):
    ckpt = checkpoint(tmp_path, {0: 0}, {"0.compact": [("a.jsonl", 0)]})
    committed(ckpt, 0)
    compact = tmp_path / "ckpt" / "sources" / "0" / "0.compact"
    for content in (b"v2\n" + compact.read_bytes()[3:], b"v1\n{not json", b'v1\n{"path": "gs://b/a.jsonl"}'):
        compact.write_bytes(content)
        with caplog.at_level(logging.WARNING, logger="checkpoints.source_log"):
            assert prune(ckpt) == 0
        assert compact.read_bytes() == content
    assert "file-source log of" in caplog.text and str(tmp_path / "ckpt") in caplog.text


def test_prune_does_nothing_before_the_first_commit_or_compaction(tmp_path):
    ckpt = checkpoint(tmp_path, {0: 0}, {"0.compact": [("a.jsonl", 0)]})
    assert prune(ckpt) == 0  # no commits/: batch 0 may be replayed
    assert planned_files(ckpt, at_restart=True) == {"/staging/a.jsonl"}
    committed(ckpt, 0)
    assert planned_files(ckpt, at_restart=True) == {"/staging/a.jsonl"}  # the last committed batch
    (tmp_path / "ckpt" / "sources" / "0" / "0.compact").rename(tmp_path / "ckpt" / "sources" / "0" / "0")
    assert prune(ckpt) == 0  # no compact file yet
    assert prune(str(tmp_path / "none")) == 0


def test_committed_files_are_those_of_batches_spark_committed_only(tmp_path):
    ckpt = checkpoint(
        tmp_path,
        {0: 0, 1: 2, 2: 3},
        {"0": [("a.jsonl", 0)], "1": [("b.jsonl", 1)], "2": [("c.jsonl", 2)], "3": [("d.jsonl", 3)]},
    )
    assert committed_files(ckpt) == set()  # nothing committed: every file may still be read
    committed(ckpt, 0, 1)  # batch 2 planned, not committed: a replay reads d.jsonl again
    assert committed_files(ckpt) == {"/staging/a.jsonl", "/staging/b.jsonl", "/staging/c.jsonl"}
    write_log(tmp_path / "ckpt" / "sources" / "0" / "1", [{"path": "file:///staging/b.jsonl"}])
    assert "/staging/b.jsonl" not in committed_files(ckpt), "an entry without its batch is not taken"
    (tmp_path / "ckpt" / "sources" / "0" / "0").write_bytes(b"v1\n{not json")
    assert committed_files(ckpt) == set(), "a log it cannot read frees nothing"
