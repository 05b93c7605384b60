"""``fetch_content``, the reference's FETCH_CONTENT: a SQL function downloading the object a row names.

It reads through the job's claim-check store (:class:`ingest.connector.payload_store.PayloadStore`: the S3
API of AWS S3, OSS, moto or LocalStack, with the endpoint and credentials of the source's
``claim_check``), in the executors, as a vectorised (Arrow) Python UDF. It returns
``STRUCT<content BINARY, error STRING>``: an object that is missing, denied or over
``claim_check.fetch_content_max_bytes`` gives a null ``content`` and an ``error`` naming its
bucket and key, and the batch goes on; transient errors that outlast the retries fail the task,
hence the batch, which is replayed, as for claim-check payloads (:mod:`ingest.decode.payloads`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa

from ingest.config import JobConfig
from ingest.connector.payload_store import PayloadStore, PayloadUnavailable, payload_stores
from ingest.errors import ConfigError, redact

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME = "fetch_content"
"""The SQL function's name (Spark resolves function names case-insensitively: ``FETCH_CONTENT`` too)."""
RESULT = "struct<content:binary,error:string>"
"""What it returns: the object's bytes, or why there are none (both null for a null argument)."""
CAP = "fetch_content_max_bytes"
"""The claim-check option capping one object's size."""
_URI = re.compile(r"(oss|s3)://([^/?#]+)/(.+)", re.DOTALL)
_CALLED = re.compile(rf"\b{NAME}\s*\(", re.IGNORECASE)


def job_store(cfg: JobConfig, stores: Mapping[str, PayloadStore] | None = None) -> PayloadStore | None:
    """The store ``fetch_content`` reads through: that of the job's one source with a ``claim_check``.

    ``stores`` are the job's claim-check stores by source (as the running job resolved them);
    without them they are made from ``cfg``. None when no transform calls the function and no
    single store exists; ``ConfigError`` naming the transform's key when one calls it and the
    job has no source with a ``claim_check``, or several (which one to read through is not clear).
    """
    if stores is None:
        stores = payload_stores({s.name: s for s in cfg.sources})
    transforms = [("transform", cfg.transform)]
    transforms += [(f"sinks.{s.name}.transform", s.transform) for s in cfg.sinks]
    caller = next((key for key, sql in transforms if sql and _CALLED.search(sql)), None)
    if len(stores) == 1:
        return next(iter(stores.values()))
    if caller is None:
        return None
    if not stores:
        raise ConfigError(
            f"config key {caller}: {NAME} reads through a source's claim_check (its endpoint_url, "
            "credentials and fetch_content_max_bytes), and no source has one"
        )
    raise ConfigError(
        f"config key {caller}: {NAME} reads through one source's claim_check, and sources "
        f"{sorted(stores)} each have one"
    )


def register(spark: SparkSession, store: PayloadStore) -> None:
    """Make ``fetch_content`` callable in the session's SQL (the job's and its sinks' transforms)."""
    from pyspark.sql.functions import arrow_udf

    # The stubs type only the deprecated functionType form; Spark takes the type hints instead.
    spark.udf.register(NAME, arrow_udf(_udf(store), RESULT))  # type: ignore[call-overload]


def _udf(store: PayloadStore) -> Callable[..., pa.Array]:
    """The UDF's function (Spark reads its type hints): it holds only the store, whose client is
    made in each executor."""

    def fetch_content(*args: pa.Array) -> pa.Array:
        return fetch_batch(store, args)

    return fetch_content


def fetch_batch(store: PayloadStore, args: Sequence[pa.Array]) -> pa.StructArray:
    """``fetch_content`` over one Arrow batch: ``args`` are the URIs, or the buckets and the keys.

    Up to ``claim_check.fetch_threads`` objects are fetched at once. Raises ``ValueError`` for
    another number of arguments, ``TransientError`` once a get's retries run out.
    """
    if len(args) not in (1, 2):
        raise ValueError(f"{NAME} takes (uri) or (bucket, key), not {len(args)} arguments")
    targets = [_target(values) for values in zip(*(a.to_pylist() for a in args), strict=True)]
    objects = {i: t for i, t in enumerate(targets) if isinstance(t, tuple)}
    contents: list[bytes | None] = [None] * len(targets)
    errors: list[str | None] = [t if isinstance(t, str) else None for t in targets]
    if objects:
        threads = min(store.cfg.fetch_threads, len(objects))
        with ThreadPoolExecutor(threads, thread_name_prefix=NAME) as pool:
            got = pool.map(lambda where: _get(store, *where), objects.values())
            for i, (content, error) in zip(objects, got, strict=True):
                contents[i], errors[i] = content, error
    nulls = pa.array([t is None for t in targets], pa.bool_())
    return pa.StructArray.from_arrays(
        [pa.array(contents, pa.large_binary()), pa.array(errors, pa.string())],
        names=["content", "error"],
        mask=nulls,
    )


def _target(values: tuple) -> tuple[str, str] | str | None:
    """(bucket, key) to fetch, the error of a URI that names no object, or None for a null argument."""
    if any(v is None for v in values):
        return None
    if len(values) == 2:
        return str(values[0]), str(values[1])
    match = _URI.fullmatch(str(values[0]))
    if match is None:
        uri = redact(str(values[0]))
        return f"{NAME}: {uri[:200]!r} is not an oss://bucket/key or s3://bucket/key URI"
    return match.group(2), match.group(3)


def _get(store: PayloadStore, bucket: str, key: str) -> tuple[bytes | None, str | None]:
    """(content, None), or (None, why) for an object no retry would bring (missing, denied, too large)."""
    if not bucket or not key:
        return None, f"{NAME}: bucket {bucket!r} key {key!r}: both are needed"
    try:
        return store.get(bucket, key, CAP), None
    except PayloadUnavailable as err:
        return None, f"{NAME}: {err}"  # redacted where raised
