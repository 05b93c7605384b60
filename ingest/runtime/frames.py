"""DataFrames of rows the driver holds, built without starting a Python worker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def string_frame(
    spark: SparkSession, names: Sequence[str], rows: Sequence[Sequence[str | None]]
) -> DataFrame:
    """A DataFrame of nullable string columns ``names`` holding ``rows`` (tuples in that order).

    Why not ``spark.createDataFrame(rows, schema)``: PySpark parallelizes a list as a Python RDD, so
    the first action on it starts the Python worker daemon and a worker per task (~160 MiB that stays,
    as workers are reused), in a job that may otherwise run no Python on its executors. An Arrow
    table is converted in the JVM.

    >>> string_frame(spark, ["id", "note"], [("a", None)]).collect()  # doctest: +SKIP
    [Row(id='a', note=None)]
    """
    import pyarrow as pa

    columns = [pa.array([row[i] for row in rows], pa.string()) for i in range(len(names))]
    return spark.createDataFrame(pa.Table.from_arrays(columns, names=list(names)))
