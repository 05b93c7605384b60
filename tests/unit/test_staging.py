"""Staging: files appear whole (temp name, fsync, rename), roll by count, bytes and time."""

from __future__ import annotations

import time

import orjson

from ingest.envelope import FIELDS
from ingest.staging import TMP_DIR, Stager
from tests.unit.envelopes import lines


def staged(tmp_path):
    return sorted(tmp_path.glob("*.jsonl"))


def test_envelope_has_every_field():
    rec = orjson.loads(lines(1)[0])
    assert list(rec) == [name for name, _ in FIELDS]
    assert rec["message_id"] == "m0" and rec["source"] == "src" and rec["receiver"] == "src#0"


def test_rolls_by_count_and_keeps_every_line(tmp_path):
    st = Stager(str(tmp_path), roll_messages=10, roll_bytes=10**9, roll_interval=60)
    st.start()
    for k in range(5):
        st.add(lines(7, start=k * 7))
    st.stop()
    files = staged(tmp_path)
    ids = [orjson.loads(x)["message_id"] for f in files for x in f.read_bytes().splitlines()]
    assert sorted(ids) == sorted(f"m{i}" for i in range(35))
    assert len(files) == 3  # 14, 14, then the rest (7) at stop
    assert not list((tmp_path / TMP_DIR).iterdir())


def test_rolls_by_bytes(tmp_path):
    st = Stager(str(tmp_path), roll_messages=10**6, roll_bytes=2000, roll_interval=60)
    st.start()
    for k in range(10):
        st.add(lines(5, start=k * 5))
    st.stop()
    files = staged(tmp_path)
    assert len(files) > 1
    assert sum(len(f.read_bytes().splitlines()) for f in files) == 50


def test_rolls_by_time(tmp_path):
    st = Stager(str(tmp_path), roll_messages=10**6, roll_bytes=10**9, roll_interval=0.1)
    st.start()
    st.add(lines(3))
    deadline = time.monotonic() + 5
    while not staged(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.02)
    files = staged(tmp_path)
    st.stop()
    assert len(files) == 1 and len(files[0].read_bytes().splitlines()) == 3


def test_no_file_for_nothing(tmp_path):
    st = Stager(str(tmp_path), roll_messages=10, roll_bytes=10**9, roll_interval=60)
    st.start()
    st.stop()
    assert staged(tmp_path) == []
