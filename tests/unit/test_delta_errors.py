"""The Delta sink's object-store errors come out as the sink's own: one line, naming the key, the
table, the cause and the request, transient or fatal, the secret nowhere. Real delta-rs against a
port where nothing listens (no Spark)."""

from __future__ import annotations

import doctest

import pyarrow as pa
import pytest

import ingest.storage.errors as errors  # the Delta sink's store_error lives there (the state table shares it)
from ingest.errors import FatalError, TransientError
from sinks.delta.config import DeltaSinkConfig
from sinks.delta.errors import store_error
from sinks.delta.files import FileWriter
from sinks.delta.table import DeltaTarget
from tests.support.delta_helpers import s3_options

SECRET = "s3cret-delta-errors-0123456789"


def test_doctests() -> None:
    assert doctest.testmod(errors).failed == 0


def options(endpoint: str) -> dict[str, str]:
    return s3_options(endpoint, SECRET, max_retries="0")


def target(endpoint: str) -> DeltaTarget:
    cfg = {"type": "delta", "name": "lake", "path": "s3://lake/events", "storage_options": options(endpoint)}
    return DeltaTarget(DeltaSinkConfig.model_validate(cfg))


def test_an_unreachable_store_is_a_transient_error_naming_the_key_the_table_and_the_request(
    free_port: int,
) -> None:
    endpoint = f"127.0.0.1:{free_port}"  # nothing listens there
    with pytest.raises(TransientError) as caught:
        target(f"http://{endpoint}").committed()
    line = str(caught.value)
    assert line.startswith("sinks.lake.path: cannot open the table at s3://lake/events: "), line
    assert "Connection refused" in line and f"GET http://{endpoint}/lake/events/_delta_log" in line
    assert "\n" not in line and "\x1b" not in line and SECRET not in line
    assert caught.value.__cause__ is None  # delta-rs's multi-line text is not chained under it


@pytest.mark.parametrize("answer", ["403 Forbidden", "<Code>InvalidAccessKeyId</Code>", "NoSuchBucket"])
def test_refused_credentials_or_a_missing_bucket_are_fatal(answer: str) -> None:
    text = f"\x1b[31mGeneric S3 error\x1b[0m\n  ↳ Error performing PUT http://s3/b/k?x=1\n  ↳ {answer}"
    err = OSError(text)
    got = store_error("sinks.lake.path", "commit to s3://b/t", err)
    assert isinstance(got, FatalError)
    assert (
        str(got)
        == f"sinks.lake.path: cannot commit to s3://b/t: Generic S3 error: {answer} (PUT http://s3/b/k)"
    )


def test_a_task_that_cannot_write_its_file_raises_the_sinks_error_naming_the_key(free_port: int) -> None:
    """The executor side (what each Spark task runs), called here directly; Spark's wrapping of it
    is undone by ``ingest.connector.executor_errors``, as for the other sinks."""
    endpoint = f"127.0.0.1:{free_port}"
    writer = FileWriter(
        "s3://lake/events", options(f"http://{endpoint}"), (), 1024**2, 7, key="sinks.lake.path"
    )
    batch = pa.RecordBatch.from_pylist([{"id": i} for i in range(10)])
    with pytest.raises(TransientError) as caught:
        list(writer(iter([batch])))
    line = str(caught.value)
    assert line.startswith("sinks.lake.path: cannot write a file under s3://lake/events: "), line
    assert "Connection refused" in line and endpoint in line and "\n" not in line and SECRET not in line
