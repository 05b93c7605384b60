"""The files sink reuses its columns across batches: each batch's _meta shape gets its own."""

from __future__ import annotations

import pytest

from sinks.files.config import FilesSinkConfig
from sinks.files.sink import FilesSink
from tests.support.jobs import read_jsonl_dir
from tests.support.mounts import tmpfs

pytestmark = pytest.mark.spark


def test_one_sink_writes_batches_whose_meta_differs_each_with_its_own_columns(spark, tmp_path):
    sink = FilesSink(FilesSinkConfig(type="files", name="out", path=str(tmp_path / "out")))
    envelope = "named_struct('message_id', 'm1', 'receipt_handle', 'h1', 'body', '{}')"
    shapes = [
        f"SELECT 1 AS id, {envelope} AS _meta",
        "SELECT 2 AS id, named_struct('message_id', 'm2', 'queue', 'q') AS _meta",  # built by a transform
        "SELECT 3 AS id, 'plain' AS _meta",  # not a struct: kept as it is
        f"SELECT 4 AS id, {envelope} AS _meta",  # the first shape again
    ]
    reports = [sink.write(spark.sql(sql), batch_id) for batch_id, sql in enumerate(shapes)]
    assert [r.written for r in reports] == [1, 1, 1, 1]
    rows = {r["id"]: r["_meta"] for r in read_jsonl_dir(tmp_path / "out")}
    assert rows == {
        1: {"message_id": "m1"},  # the handle and the raw body are staging fields
        2: {"message_id": "m2", "queue": "q"},
        3: "plain",
        4: {"message_id": "m1"},
    }


def test_a_write_the_disk_refuses_fails_naming_the_sink_and_the_path(spark, tmp_path):
    """The machine fault of tests/unit/test_machine_faults.py: a plain file where the output
    folder should be makes every write under it fail with an IOException from the file system."""
    from ingest.errors import FatalError

    (tmp_path / "out").write_text("not a folder")
    sink = FilesSink(FilesSinkConfig(type="files", name="events", path=str(tmp_path / "out")))
    with pytest.raises(FatalError) as err:
        sink.write(spark.sql("SELECT 1 AS id"), 7)
    text = str(err.value)
    assert text.startswith(f"sinks.events.path: cannot write {tmp_path / 'out'}/batch_id=7: "), text
    assert "Exception" in text and "\n" not in text


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs: a real ``No space left on device``."""
    with tmpfs(tmp_path / "small", "size=64k") as mount:
        yield mount


def test_a_full_disk_fails_the_write_naming_the_sink_the_path_and_the_cause(spark, full_disk):
    from ingest.errors import FatalError

    sink = FilesSink(FilesSinkConfig(type="files", name="events", path=str(full_disk / "out")))
    rows = spark.range(20_000).selectExpr("id", "repeat('x', 40) AS pad")  # ~1 MiB of JSON lines
    with pytest.raises(FatalError) as err:
        sink.write(rows, 3)
    text = str(err.value)
    assert text.startswith(f"sinks.events.path: cannot write {full_disk}/out/batch_id=3: "), text
    assert "No space left on device" in text
