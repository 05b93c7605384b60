"""Frames the driver makes (dead letters, events, a table to create) run no Python on executors."""

from __future__ import annotations

import pytest

from ingest.runtime.frames import string_frame
from sinks.jdbc.sink import empty_frame

pytestmark = pytest.mark.spark


def test_a_string_frame_holds_the_rows_and_is_scanned_in_the_jvm(spark):
    df = string_frame(spark, ["id", "note"], [("a", None), ("b", "ü\n")])
    assert [tuple(r) for r in df.orderBy("id").collect()] == [("a", None), ("b", "ü\n")]
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema] == [
        ("id", "string", True),
        ("note", "string", True),
    ]
    # A list given to createDataFrame is scanned as an RDD of pickled rows, which starts the Python
    # worker daemon (~160 MiB that stays) at the first action; a local table is read in the JVM.
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" in plan and "ExistingRDD" not in plan, plan
    assert string_frame(spark, ["id"], []).count() == 0


def test_an_empty_frame_keeps_its_schema_and_runs_no_task(spark):
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", StringType(), False), StructField("n", LongType(), True)])
    df = empty_frame(spark, schema)
    assert df.schema == schema  # NOT NULL kept: a table created from it has the batch's columns
    assert df.rdd.getNumPartitions() == 0 and df.count() == 0  # no partition: no Python worker
