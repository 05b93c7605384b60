"""``fetch_content`` without Spark: Arrow batches against moto's S3 server; the store it reads through.

The Spark path (the OSS events flow, end to end): ``tests/integration/test_fetch_content_e2e.py``.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyspark import cloudpickle  # what Spark ships functions with

from ingest.config import parse_config
from ingest.decode.fetch_content import _udf, fetch_batch, job_store
from ingest.errors import ConfigError, TransientError
from tests.support.jobconfig import fake_source, files_sink, job_config, sqs_source
from tests.support.sqs_server import store_for


def fetched(store, *columns: list) -> list[dict | None]:
    return fetch_batch(store, [pa.array(c, pa.string()) for c in columns]).to_pylist()


def test_each_row_gets_its_object_or_an_error_naming_bucket_and_key(moto_url, s3, bucket):
    s3.put_object(Bucket=bucket, Key="in/a.bin", Body=b"\xff\x00a")
    s3.put_object(Bucket=bucket, Key="in/big.bin", Body=b"x" * 17)
    store = store_for(moto_url, fetch_content_max_bytes=16, max_payload_bytes=1024)
    buckets = [bucket, bucket, bucket, None, bucket, "Not a bucket!", bucket]
    keys = ["in/a.bin", "in/big.bin", "in/gone.bin", "in/a.bin", None, "k", ""]

    ok, big, gone, no_bucket, no_key, invalid, empty = fetched(store, buckets, keys)

    assert ok == {"content": b"\xff\x00a", "error": None}
    assert big == {
        "content": None,
        "error": f"fetch_content: object 'in/big.bin' in bucket '{bucket}' is 17 bytes, "
        "over claim_check.fetch_content_max_bytes (16)",
    }
    assert gone["content"] is None
    assert gone["error"].startswith(
        f"fetch_content: GetObject of object 'in/gone.bin' in bucket '{bucket}' failed: NoSuchKey (HTTP 404)"
    )
    assert no_bucket is None and no_key is None  # a null argument: null, as FETCH_CONTENT's
    # An invalid bucket name is that row's error, not a transient one retried until the batch fails.
    assert invalid["content"] is None and "'Not a bucket!'" in invalid["error"] and "'k'" in invalid["error"]
    assert empty == {"content": None, "error": f"fetch_content: bucket '{bucket}' key '': both are needed"}


def test_oss_and_s3_uris_name_the_bucket_and_the_rest_is_the_key(moto_url, s3, bucket):
    s3.put_object(Bucket=bucket, Key="a/b/c.txt", Body=b"abc")
    uris = [f"oss://{bucket}/a/b/c.txt", f"s3://{bucket}/a/b/c.txt", None]
    uris += [f"https://{bucket}.example/a/b/c.txt", f"oss://{bucket}", f"oss://{bucket}/"]
    oss, s3_uri, null, https, no_key, empty_key = fetched(store_for(moto_url), uris)

    assert oss == s3_uri == {"content": b"abc", "error": None}
    assert null is None
    for row, uri in ((https, uris[3]), (no_key, uris[4]), (empty_key, uris[5])):
        assert row == {
            "content": None,
            "error": f"fetch_content: {uri!r} is not an oss://bucket/key or s3://bucket/key URI",
        }


def test_another_number_of_arguments_is_refused(moto_url):
    with pytest.raises(ValueError, match=r"takes \(uri\) or \(bucket, key\), not 3 arguments"):
        fetched(store_for(moto_url), ["b"], ["k"], ["x"])


def test_the_secret_never_appears_in_a_rows_error(moto_url, s3, bucket):
    secret = f"Fc5ecret{uuid.uuid4().hex}"
    store = store_for(moto_url, access_key_id="AKIDFETCHCONTENT", access_key_secret=secret)
    [row] = fetched(store, [bucket], [f"k-{secret}"])  # the error quotes the key
    assert row["content"] is None and "NoSuchKey" in row["error"] and secret not in row["error"]


def test_an_unreachable_store_fails_the_batch_without_the_secret():
    """Not a row's error: the task fails, so does the batch, which is replayed (nothing acked)."""
    secret = f"Fc5ecret{uuid.uuid4().hex}"
    store = store_for("http://127.0.0.1:9", max_retries=0, access_key_id="AKIDX", access_key_secret=secret)
    with pytest.raises(TransientError, match=r"GetObject of object 'k' in bucket 'b'.*127\.0\.0\.1:9") as err:
        fetched(store, ["b"], ["k"])
    assert secret not in str(err.value)


def test_the_function_ships_without_its_client_and_fetches_where_it_lands(moto_url, s3, bucket):
    """Spark pickles the function with cloudpickle for its executors: the client already made here
    stays behind (a client cannot be pickled) and the unpickled function makes its own."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    store = store_for(moto_url)
    assert store.get(bucket, "k") == b"v"  # the client exists in this process now
    shipped = cloudpickle.loads(cloudpickle.dumps(_udf(store)))
    assert shipped(pa.array([bucket]), pa.array(["k"])).to_pylist() == [{"content": b"v", "error": None}]


# --- which store: the job's one claim_check ------------------------------------------------


def job(tmp_path, sources: list[dict], transform: str | None = None, sink_transform: str | None = None):
    sink = files_sink(tmp_path) | ({"transform": sink_transform} if sink_transform else {})
    return parse_config(job_config(sources, tmp_path, [sink], transform=transform))


def sqs(name: str, **claim_check) -> dict:
    url = "http://127.0.0.1:9/000000000000/q"
    return sqs_source(url, "http://127.0.0.1:9", name, claim_check=claim_check)


CALL = "SELECT FETCH_CONTENT(concat('oss://b/', action)) AS f FROM source"


def test_the_store_is_that_of_the_jobs_one_source_with_a_claim_check(tmp_path):
    cfg = job(tmp_path, [fake_source(tmp_path, "plain"), sqs("events", endpoint_url="http://127.0.0.1:9")])
    store = job_store(cfg)
    assert store is not None and store.cfg.endpoint_url == "http://127.0.0.1:9"
    assert store.cfg.fetch_content_max_bytes == 64 * 1024**2  # the default cap
    assert job_store(job(tmp_path, [fake_source(tmp_path)])) is None  # not called: nothing to register


@pytest.mark.parametrize("where", ["transform", "sinks.out.transform"])
def test_a_call_without_a_claim_check_to_read_through_names_the_key(tmp_path, where):
    sql = {"transform": CALL} if where == "transform" else {"sink_transform": CALL}
    with pytest.raises(ConfigError, match=rf"^config key {where}: fetch_content reads through a source's"):
        job_store(job(tmp_path, [fake_source(tmp_path)], **sql))


def test_a_call_with_two_claim_checks_is_refused_naming_both_sources(tmp_path):
    cfg = job(tmp_path, [sqs("a"), sqs("b")], transform=CALL)
    with pytest.raises(ConfigError, match=r"^config key transform: .* sources \['a', 'b'\] each have one"):
        job_store(cfg)
    assert job_store(job(tmp_path, [sqs("a"), sqs("b")])) is None  # not called: no error


def test_the_cap_is_a_positive_size_that_fits_a_spark_row(tmp_path):
    for bad in (0, "3GiB"):
        with pytest.raises(ConfigError, match=r"sources\.a\.claim_check\.fetch_content_max_bytes: "):
            job(tmp_path, [sqs("a", fetch_content_max_bytes=bad)])
