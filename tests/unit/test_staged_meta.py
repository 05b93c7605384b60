"""StagedMeta: a batch's meta columns kept as files are staged equal those read from the files."""

from __future__ import annotations

from pathlib import Path

from ingest.connector import Received
from ingest.intake.envelope import encode, read_columns
from ingest.intake.staged_meta import StagedMeta
from ingest.intake.staging import Stager

COLUMNS = [
    "source",
    "receipt_handle",
    "enqueue_ts",
    "sent_ts",
    "received_at",
    "arrival",
    "payload_ref",
    "message_id",
]


def _lines(prefix: str, n: int) -> list[bytes]:
    msgs = [
        Received(message_id=f"{prefix}{i}", receipt_handle=f"h-{prefix}{i}", body='{"a": 1}', sent_ts=i)
        for i in range(n)
    ]
    return encode("src", "q", "src#0", msgs)


def test_files_staged_are_read_from_memory_as_they_would_be_from_disk(tmp_path: Path) -> None:
    meta = StagedMeta(COLUMNS, max_rows=1000)
    stager = Stager(str(tmp_path / "st"), 10, 1 << 20, 60.0, on_file=meta.add)
    stager.add(_lines("a", 10))  # rolls at 10 lines
    stager.add(_lines("b", 4))
    stager.flush()
    files = sorted(str(p) for p in (tmp_path / "st").glob("*.jsonl"))
    assert len(files) == 2 and len(meta) == 2
    expected = read_columns(files, COLUMNS)
    for f in files:  # prove the rows come from memory: the files no longer hold them
        Path(f).write_bytes(b"")
    got = meta.read(files)
    assert got.equals(expected)
    assert got["message_id"].to_pylist() == [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(4)]
    meta.forget(files)
    assert len(meta) == 0


def test_a_file_not_kept_is_read_from_disk_in_its_place(tmp_path: Path) -> None:
    meta = StagedMeta(COLUMNS, max_rows=1000)
    paths = []
    for name, prefix in (("1.jsonl", "x"), ("2.jsonl", "y"), ("3.jsonl", "z")):
        data = b"\n".join(_lines(prefix, 3)) + b"\n"
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
        if name != "2.jsonl":
            meta.add(paths[-1], data)
    got = meta.read(paths)
    assert got["message_id"].to_pylist() == ["x0", "x1", "x2", "y0", "y1", "y2", "z0", "z1", "z2"]
    assert meta.read([]).num_rows == 0


def test_the_oldest_files_go_past_max_rows_and_bad_content_is_only_not_kept(tmp_path: Path) -> None:
    meta = StagedMeta(COLUMNS, max_rows=5)
    for i in range(3):
        meta.add(str(tmp_path / f"{i}.jsonl"), b"\n".join(_lines(f"m{i}", 3)) + b"\n")
    assert len(meta) == 1  # 3 files of 3 rows: only the newest fits in 5 rows
    meta.add(str(tmp_path / "bad.jsonl"), b"{not json\n")  # logged, not raised
    assert len(meta) == 1
