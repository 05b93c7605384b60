"""Staging on S3 (an ``s3a://`` staging.dir) against moto's S3 server on 127.0.0.1, without Spark:
each file one whole object, the gate holding files until it publishes them, an outage, recovery's
discard, and a missing bucket."""

from __future__ import annotations

import re
import uuid

import orjson
import pytest

from ingest.intake.envelope import read_columns
from ingest.intake.leases import InFlight
from ingest.intake.receiver import Backpressure
from ingest.intake.staging import Stager
from tests.support.envelopes import lines
from tests.support.polling import wait_for
from tests.support.s3_server import Relay, S3Server, s3_server

pytestmark = [pytest.mark.xdist_group("s3_staging")]  # one S3 server process for the module

PREFIX = "jobs/orders/staging"
NAME = re.compile(r"\d{20}-\d{6}-[0-9a-f]{8}\.jsonl")


@pytest.fixture(scope="module")
def server():
    with s3_server() as s3:
        yield s3


@pytest.fixture
def s3(server: S3Server, monkeypatch) -> S3Server:
    """The server, with the standard AWS settings a user would set pointing at it."""
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    return server


@pytest.fixture
def url(s3: S3Server) -> str:
    """A staging dir in a fresh bucket."""
    return f"s3a://{s3.bucket(f'st-{uuid.uuid4().hex[:10]}')}/{PREFIX}"


def bucket_of(url: str) -> str:
    return url.split("/")[2]


def staged(s3: S3Server, url: str) -> list[str]:
    """The names Spark's file source lists under the staging prefix (no ``_`` names), oldest first."""
    keys = s3.keys(bucket_of(url), PREFIX + "/")
    return [k.rsplit("/", 1)[1] for k in keys if not k.rsplit("/", 1)[1].startswith("_")]


def body(s3: S3Server, url: str, name: str) -> bytes:
    return s3.client().get_object(Bucket=bucket_of(url), Key=f"{PREFIX}/{name}")["Body"].read()


def ids(s3: S3Server, url: str) -> list[str]:
    """The message ids of every staged object, as many times as they are staged, sorted."""
    return sorted(
        orjson.loads(x)["message_id"] for name in staged(s3, url) for x in body(s3, url, name).splitlines()
    )


def expected(n: int) -> list[str]:
    return sorted(f"m{i}" for i in range(n))


def test_rolled_files_are_whole_objects_with_their_lines_named_as_locally(s3, url):
    files: list[tuple[str, bytes]] = []
    st = Stager(url, 10, 10**9, 60, on_file=lambda path, data: files.append((path, data)))
    st.start()
    try:
        assert s3.keys(bucket_of(url)) == [f"{PREFIX}/_mq_ingest"], "the prefix exists before any file"
        st.add(lines(10))
        st.add(lines(10, start=10))
        st.add(lines(5, start=20))  # under roll_messages: buffered
        assert ids(s3, url) == expected(20)
    finally:
        st.stop()  # writes what is buffered
    names = staged(s3, url)
    assert len(names) == 3 and all(NAME.fullmatch(n) for n in names)
    assert ids(s3, url) == expected(25)
    assert files == [(f"{url}/{n}", body(s3, url, n)) for n in names], "on_file gets the object's s3a:// URL"
    # A batch whose files are not in memory (a restart's) reads their columns from the objects.
    assert read_columns([f"{url}/{n}" for n in names], ["message_id"])["message_id"].to_pylist() == [
        f"m{i}" for i in range(25)
    ]


def test_the_gate_holds_files_out_of_the_listing_until_it_publishes_them_all(s3, url):
    st = Stager(url, 10, 10**9, 3600, batch_messages=1000, batch_wait=3600)
    st.start()
    try:
        for k in range(0, 200, 10):
            st.add(lines(10, start=k))  # a roll each, held: a batch of 1,000 is on course
        assert staged(s3, url) == [] and st.gate.files == 20 and st.gate.messages == 200
        st.flush()  # publishes all 20 (PUT several at once)
        assert len(staged(s3, url)) == 20 and st.gate.files == 0
        assert ids(s3, url) == expected(200)
    finally:
        st.stop()


def test_an_outage_pauses_the_receivers_and_loses_or_doubles_nothing(s3, url, monkeypatch):
    relay = Relay(s3.url)  # the stager reaches the server through it; the test reads it directly
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", relay.url)
    st = Stager(url, 10**6, 10**9, 0.05)
    backpressure = Backpressure(InFlight(), 10**6, 10**9, st)
    st.start()
    try:
        st.add(lines(10))
        wait_for(lambda: ids(s3, url) == expected(10))
        relay.down()
        st.add(lines(10, start=10))
        wait_for(lambda: st.failing, 30, "a PUT failed")
        assert backpressure.blocked(), "receivers pause while staged files cannot be written"
        assert f"s3a://{bucket_of(url)}/{PREFIX}/" in st.last_error
        st.add(lines(10, start=20))  # a receive in flight at the outage
        wait_for(lambda: st.buffered == 0, 30, "the later lines rolled too")
        assert st.failing and ids(s3, url) == expected(10)
        relay.up()
        wait_for(lambda: not st.failing, 30, "receivers resumed")
        assert not backpressure.blocked() and st.error is None
    finally:
        st.stop()
        relay.close()
    assert ids(s3, url) == expected(30), "every line once"


def test_recovery_discards_the_unplanned_objects_and_keeps_the_planned_ones(s3, url):
    st = Stager(url, 10, 10**9, 60)
    st.start()
    for k in range(0, 40, 10):
        st.add(lines(10, start=k))
    st.stop()
    names = staged(s3, url)
    assert len(names) == 4
    # Spark's log names files by URI, in either spelling of the bucket's scheme.
    bucket = bucket_of(url)
    keep = {f"s3a://{bucket}/{PREFIX}/{names[0]}", f"s3://{bucket}/{PREFIX}/{names[1]}"}
    restarted = Stager(url, 10, 10**9, 60)
    assert restarted.discard_except(keep) == 2
    assert staged(s3, url) == names[:2]
    assert f"{PREFIX}/_mq_ingest" in s3.keys(bucket), "the marker stays: Spark needs the prefix"


def test_a_missing_bucket_stops_staging_at_once_naming_the_staging_dir_and_the_bucket(s3):
    url = f"s3a://gone-{uuid.uuid4().hex[:8]}/{PREFIX}"
    st = Stager(url, 10, 10**9, 0.05, give_up_after=300)
    st.start()  # the marker's PUT fails: logged, the first publish tries it again
    try:
        st.add(lines(10))  # a roll: its publish fails, not retried for 300 s
        err = st.error
        assert err is not None, "a bucket that is gone is not retried"
        assert str(err).startswith(f"staging.dir {url}: bucket {bucket_of(url)} does not exist")
        assert s3.env["AWS_SECRET_ACCESS_KEY"] not in str(err)
        assert st.buffered == 0 and st.gate.messages == 10, "the lines are kept (their messages come back)"
    finally:
        st.stop()
