"""Staging: files appear whole (temp name, fsync, rename), roll by count, bytes and time."""

from __future__ import annotations

import time
from dataclasses import asdict

import orjson

from ingest.connector import STAGING_FIELDS, Received
from ingest.connector.envelope import FIELDS, FILE_COLUMN
from ingest.intake.envelope import encode
from ingest.intake.staging import TMP_DIR, Stager
from tests.support.envelopes import lines


def staged(tmp_path):
    return sorted(tmp_path.glob("*.jsonl"))


def test_envelope_has_every_field():
    rec = orjson.loads(lines(1)[0])
    assert sorted(rec) == sorted(name for name, _ in FIELDS)  # readers take columns by name
    assert rec["message_id"] == "m0" and rec["source"] == "src" and rec["receiver"] == "src#0"


def test_the_staging_fields_the_files_sink_leaves_out_are_envelope_columns():
    assert set(STAGING_FIELDS) <= {name for name, _ in FIELDS} | {FILE_COLUMN}


def test_envelope_keeps_every_value_of_a_received_message():
    m = Received(
        message_id="m1",
        receipt_handle="h1",
        body='say "hi"\n',
        body_base64=True,
        md5="d41d8cd98f00b204e9800998ecf8427e",
        sent_ts=1,
        first_receive_ts=2,
        receive_count=3,
        enqueue_ts=4,
        sender_id="s",
        group_id="g",
        dedup_id="d",
        sequence_number="18",
        priority=5,
        attributes={"SentTimestamp": "1"},
        message_attributes={"k": "v"},
        message_attribute_types={"k": "String"},
    )
    first, second = (orjson.loads(line) for line in encode("src", "q", "src#1", [m, m]))
    own = {"source": "src", "queue": "q", "receiver": "src#1"}
    assert first == {**asdict(m), **own, "received_at": first["received_at"], "arrival": first["arrival"]}
    assert second["arrival"] == first["arrival"] + 1
    assert abs(first["received_at"] - time.time() * 1000) < 60_000


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


def test_held_rolls_nothing_until_released_then_keeps_every_line(tmp_path):
    st = Stager(str(tmp_path), roll_messages=10, roll_bytes=10**9, roll_interval=0.05)
    st.start()
    with st.held():
        st.add(lines(25))  # over the roll size, and the timer is due within 50 ms
        time.sleep(0.3)
        assert staged(tmp_path) == [] and st.buffered == 25
    deadline = time.monotonic() + 5
    while st.buffered and time.monotonic() < deadline:  # the timer rolls once released
        time.sleep(0.02)
    st.stop()
    ids = [orjson.loads(x)["message_id"] for f in staged(tmp_path) for x in f.read_bytes().splitlines()]
    assert ids == [f"m{i}" for i in range(25)]


def test_a_body_that_cannot_be_utf8_is_staged_as_its_bytes_flagged_base64():
    """A JSON reply can carry a lone surrogate (``\\ud800``): no UTF-8 holds it, so the body is
    staged as its code units' bytes, base64 with the flag, never altered; the others as they are."""
    import base64

    messages = [Received("m1", "h1", "fine"), Received("m2", "h2", "a\ud800b"), Received("m3", "h3", "é")]
    staged = [orjson.loads(line) for line in encode("s", "q", "s#0", messages)]
    assert [(e["message_id"], e["body_base64"]) for e in staged] == [
        ("m1", False),
        ("m2", True),
        ("m3", False),
    ]
    assert base64.b64decode(staged[1]["body"]) == b"a\xed\xa0\x80b"
    assert (staged[0]["body"], staged[2]["body"]) == ("fine", "é")
    assert staged[0]["arrival"] < staged[1]["arrival"] < staged[2]["arrival"]
