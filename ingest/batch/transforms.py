"""The transforms over the decoded rows: the job's Python function, then its SQL; each sink's SQL."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ingest.config import JobConfig
from ingest.config.callables import function_name, load_function
from ingest.decode import fetch_content
from ingest.errors import FatalError, describe, redact

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.connector.payload_store import PayloadStore

KEY = "transform_function"
"""The config key of the Python transform."""


class JobTransform:
    """``transform_function`` (imported when built), then the SQL ``transform`` over its output.

    A function that raises, or returns something other than a DataFrame, stops the batch with
    a ``FatalError`` naming the function: the batch is not committed, nothing of it is acked.
    The SQL function ``fetch_content`` is registered in the session first (where the job has a
    claim-check store to read through; ``stores``: the running job's, by source).
    """

    def __init__(self, cfg: JobConfig, stores: Mapping[str, PayloadStore] | None = None) -> None:
        self.sql = cfg.transform
        ref = cfg.transform_function
        self.label = function_name(ref) if ref is not None else ""
        self.function: Callable[[Any], Any] | None = load_function(ref, KEY) if ref is not None else None
        self.store = fetch_content.job_store(cfg, stores)
        self._registered = False

    def __call__(self, df: DataFrame) -> DataFrame:
        self.register(df.sparkSession)
        return apply_transform(self.python(df), self.sql)

    def register(self, spark: SparkSession) -> None:
        """Make ``fetch_content`` callable in ``spark``'s SQL (once), if the job has a store for it."""
        if self.store is not None and not self._registered:
            fetch_content.register(spark, self.store)
            self._registered = True

    def python(self, df: DataFrame) -> DataFrame:
        """The Python transform's output (``df`` itself without one)."""
        from pyspark.sql import DataFrame

        if self.function is None:
            return df
        try:
            out = self.function(df)
        except Exception as err:
            raise FatalError(redact(f"{KEY} {self.label}: {describe(err)}")) from err
        if not isinstance(out, DataFrame):
            raise FatalError(f"{KEY} {self.label} returned a {type(out).__name__}, not a DataFrame")
        return out


def apply_transform(good: DataFrame, transform: str | None) -> DataFrame:
    """The job's SQL ``transform`` over the decoded rows, registered as the view ``source``."""
    if not transform:
        return good
    good.createOrReplaceTempView("source")
    return good.sparkSession.sql(transform)
