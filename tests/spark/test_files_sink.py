"""The files sink reuses its columns across batches: each batch's _meta shape gets its own."""

from __future__ import annotations

import pytest

from sinks.files.config import FilesSinkConfig
from sinks.files.sink import FilesSink
from tests.support.jobs import read_jsonl_dir

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
