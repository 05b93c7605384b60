"""Staging files that must be small: ``roll_bytes`` caps a file, and a roll that does not fit the
volume is written in smaller files, with every line once and in order.

The volume is a capacity on the staged files in place: a write that would take them past it fails
with ``ENOSPC``, as the kernel's would, so removing or emptying a file frees its bytes.
tests/spark/test_small_staging_job.py runs a job on a real 2 MiB tmpfs.
"""

from __future__ import annotations

import errno
import itertools

import orjson

from ingest.connector import Received
from ingest.intake.envelope import encode
from ingest.intake.staged_files import HELD_DIR
from ingest.intake.staging import TMP_DIR, Stager
from tests.support.envelopes import lines
from tests.support.polling import wait_for

LINE = 450
"""About the bytes of one staged line of ``lines()`` (newline included); they differ a little."""


def size(batch: list[bytes]) -> int:
    return sum(len(x) + 1 for x in batch)


def assert_full(datas: list[bytes], cap: int) -> None:
    """Each file is at most ``cap`` bytes, and could not have taken the next file's first line."""
    for data, after in itertools.pairwise(datas):
        assert len(data) <= cap
        assert len(data) + len(after.split(b"\n", 1)[0]) + 1 > cap, "a file cut short"
    assert len(datas[-1]) <= cap


def ids(data: bytes) -> list[str]:
    return [orjson.loads(x)["message_id"] for x in data.splitlines()]


def m(first: int, stop: int) -> list[str]:
    return [f"m{i}" for i in range(first, stop)]


class Files:
    """Every file the stager put in place, in order: (path, content), via ``on_file``."""

    def __init__(self) -> None:
        self.staged: list[tuple[str, bytes]] = []

    def __call__(self, path: str, data: bytes) -> None:
        self.staged.append((path, data))

    def ids(self) -> list[str]:
        return [i for _, data in self.staged for i in ids(data)]


def small_volume(st: Stager, monkeypatch, capacity: int) -> None:
    """Staged files in place, listed or held by the gate, may hold ``capacity`` bytes in all; a
    write past it fails with ENOSPC."""
    write = st._write

    def limited(data: bytes, n: int) -> str:
        used = sum(p.stat().st_size for p in [*st.dir.glob("*.jsonl"), *st.dir.glob(f"{HELD_DIR}/*.jsonl")])
        if used + len(data) > capacity:
            raise OSError(errno.ENOSPC, "No space left on device", str(st.dir / TMP_DIR / "x.jsonl"))
        return write(data, n)

    monkeypatch.setattr(st, "_write", limited)


def test_a_buffer_over_roll_bytes_is_staged_in_files_of_at_most_roll_bytes_in_order(tmp_path):
    files = Files()
    st = Stager(str(tmp_path), roll_messages=10**6, roll_bytes=5 * LINE, roll_interval=60, on_file=files)
    st.start()
    with st.held():  # nothing rolls: the buffer grows to 23 lines, over four times roll_bytes
        st.add(lines(23, start=10))
    st.stop()
    datas = [data for _, data in files.staged]
    assert len(datas) == 5
    assert_full(datas, 5 * LINE)
    assert files.ids() == m(10, 33), "every line once, in order"
    on_disk = sorted(tmp_path.glob("*.jsonl"))
    assert [p.read_bytes() for p in on_disk] == datas, "the names sort as the files were written"


def test_a_line_longer_than_roll_bytes_is_a_file_of_its_own(tmp_path):
    files = Files()
    st = Stager(str(tmp_path), roll_messages=10**6, roll_bytes=2 * LINE, roll_interval=60, on_file=files)
    long = encode("src", "q", "src#0", [Received(message_id="m10", receipt_handle="h", body="x" * 3 * LINE)])
    st.add(lines(1, start=11))
    st.add(long)
    st.add(lines(1, start=12))
    st.flush()
    assert [ids(data) for _, data in files.staged] == [["m11"], ["m10"], ["m12"]]


def test_rolling_by_bytes_writes_full_files_and_keeps_the_rest_buffered(tmp_path):
    files = Files()
    st = Stager(str(tmp_path), roll_messages=10**6, roll_bytes=7 * LINE, roll_interval=60, on_file=files)
    for k in range(10):
        st.add(lines(3, start=10 + 3 * k))  # over roll_bytes in the middle of an add
    assert 0 < st.buffered < 7, "the rest waits for more lines"
    st.flush()
    datas = [data for _, data in files.staged]
    assert len(datas) == 5
    assert_full(datas[:-1], 7 * LINE)  # no small file after each full one; the last at the flush
    assert files.ids() == m(10, 40)


def test_a_roll_that_does_not_fit_is_split_and_the_rest_written_once_space_frees(tmp_path, monkeypatch):
    files = Files()
    staged: list[int] = []
    st = Stager(
        str(tmp_path),
        roll_messages=40,
        roll_bytes=10**9,
        roll_interval=0.05,
        on_file=files,
        on_staged=staged.append,
    )
    small_volume(st, monkeypatch, capacity=15 * LINE)
    st.start()
    try:
        st.add(lines(40, start=10))  # rolls 40 lines at once: 20, then 10, fail; 10 fits, and so on
        assert 0 < len(files.ids()) <= 15 and st.failing and st.error is None
        assert files.ids() == m(10, 10 + len(files.ids())), "the first lines, in order"
        assert st.buffered == 40 - len(files.ids()), "the lines not written stay buffered"
        assert not list((tmp_path / TMP_DIR).iterdir()), "no partial file is left behind"
        for _ in range(3):  # Spark reads the files in place and cleanSource deletes them
            for p in tmp_path.glob("*.jsonl"):
                p.unlink()
            wait_for(lambda: len(files.ids()) == 40 or (st.failing and bool(list(tmp_path.glob("*.jsonl")))))
    finally:
        st.stop()
    assert files.ids() == m(10, 50), "every line staged once, in order: no file written twice"
    assert sum(staged) == 40 and st.lines_written == 40
    assert max(len(data) for _, data in files.staged) <= 15 * LINE
    assert not st.failing


def test_a_full_volume_empties_files_of_committed_batches_to_make_room(tmp_path, monkeypatch):
    files = Files()
    done: list[str] = []
    st = Stager(
        str(tmp_path),
        roll_messages=10,
        roll_bytes=10**9,
        roll_interval=60,
        on_file=files,
        reclaimable=lambda: list(done),
    )
    batches = [lines(10, start=10 + 10 * k) for k in range(3)]
    # Room for the first two rolls and less than a line more (lines differ by a few bytes).
    small_volume(st, monkeypatch, capacity=size(batches[0]) + size(batches[1]) + LINE // 2)
    st.add(batches[0])
    st.add(batches[1])  # the volume is full now
    first, second = (path for path, _ in files.staged)
    done.append(first)  # Spark committed the batch that read the first file; not the second
    st.add(batches[2])
    assert not st.failing and st.buffered == 0
    assert files.ids() == m(10, 40) and len(files.staged) == 3, "rolled whole, in the room freed"
    sizes = {p.name: p.stat().st_size for p in tmp_path.glob("*.jsonl")}
    assert sizes[first.rsplit("/", 1)[1]] == 0, "emptied, not removed: Spark still lists and deletes it"
    assert sizes[second.rsplit("/", 1)[1]] == size(batches[1]), "a file no committed batch read is kept"
