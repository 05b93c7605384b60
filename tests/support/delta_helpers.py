"""Helpers of the Delta sink's tests: the sink, its rows, the table read back, a racing writer, S3 options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from sinks.delta.config import DeltaSinkConfig
from sinks.delta.sink import DeltaSink

ROWS = "SELECT id, id % 3 AS part, concat('{tag}', id) AS v FROM range({lo}, {hi})"


def s3_options(endpoint: str, secret: str, **over: str) -> dict[str, str]:
    """delta-rs ``storage_options`` for an S3 endpoint on 127.0.0.1 (plain HTTP), with ``secret``
    as the secret access key, which the tests look for in every error and log."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    } | over


def sink(path, **over) -> DeltaSink:
    cfg = {"type": "delta", "name": "out", "path": str(path), "app_id": "job.out", "include_meta": False}
    return DeltaSink(DeltaSinkConfig(**(cfg | over)))


def rows(spark, lo: int, hi: int, tag: str = "v"):
    return spark.sql(ROWS.format(lo=lo, hi=hi, tag=tag))


def table(path) -> list[dict]:
    """The table's rows, read with deltalake (not the sink's code), sorted by id."""
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def other_rows(ids: list[int], **columns: list[Any]) -> pa.Table:
    data = {
        "id": pa.array(ids, pa.int64()),
        "part": pa.array([i % 3 for i in ids], pa.int64()),
        "v": pa.array([f"other{i}" for i in ids]),
    }
    return pa.table(data | {k: pa.array(v) for k, v in columns.items()})


def race(monkeypatch, owner: type, method: str, rival: Callable[[int], None], times: int) -> list[str]:
    """Before each of the sink's next ``times`` calls of ``owner.method`` (its commit), ``rival(n)``
    commits through its own handle; returns how each call ended ("committed" or the error's type)."""
    original = getattr(owner, method)
    outcomes: list[str] = []

    def commit_after_the_rival(self, *args, **kwargs):
        if len(outcomes) < times:
            rival(len(outcomes))
        try:
            result = original(self, *args, **kwargs)
        except Exception as err:
            outcomes.append(type(err).__name__)
            raise
        outcomes.append("committed")
        return result

    monkeypatch.setattr(owner, method, commit_after_the_rival)
    return outcomes
