"""The Delta sink on an ``s3://`` table: moto's S3 server on 127.0.0.1, through delta-rs
``storage_options``. The Spark tasks write the Parquet files into the bucket (delta-rs's storage
handler), the driver commits them; read back with ``deltalake.DeltaTable(..., storage_options=...)``.

delta-rs 1.6 commits to S3 with conditional puts (``If-None-Match: *``), which moto honours: no
``AWS_S3_ALLOW_UNSAFE_RENAME`` and no lock are needed, and a commit racing another writer's
lands after it instead of overwriting it.

moto runs in its own process here (``moto_url`` below replaces the suite's, which ``s3`` and
``bucket`` then use): some delta-rs 1.6 calls (``DeltaTable.is_deltatable``, ``alter``, its
storage handler's file operations) block on the network while holding the GIL, so a moto
server thread in the test's own process would never answer them.
"""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import traceback
import urllib.request
import uuid
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ingest.errors import FatalError, TransientError
from sinks.delta.config import DeltaSinkConfig
from sinks.delta.files import FileWriter
from sinks.delta.sink import DeltaSink
from tests.support.delta_helpers import other_rows, race, s3_options
from tests.support.delta_helpers import rows as plain_rows
from tests.support.polling import wait_for
from tests.support.sqs_server import object_keys

# One worker under xdist: the module's moto server is started once.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("delta_s3")]

SECRET = f"s3cret-{uuid.uuid4().hex}"
"""The secret access key in ``storage_options`` (moto takes any): it must show nowhere."""

ROWS = (
    "SELECT id, concat('p: ', id % 3) AS part, concat('v', id) AS v, "
    "named_struct('message_id', concat('m', id), 'receipt_handle', 'h', 'body', '{{}}', "
    "'received_at', 1000 + id, 'arrival', id) AS _meta FROM range({lo}, {hi})"
)


@pytest.fixture(scope="module")
def moto_url():
    """moto's server (S3) in a child process on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url), timeout=60, what="moto's server")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
            return True
    except OSError:
        return False


def options(endpoint: str, **over: str) -> dict[str, str]:
    return s3_options(endpoint, SECRET, **over)


def sink(uri: str, opts: dict[str, str], **over) -> DeltaSink:
    cfg = {"type": "delta", "name": "lake", "path": uri, "storage_options": opts, "app_id": "job.lake"}
    return DeltaSink(DeltaSinkConfig(**(cfg | over)))


def rows(spark, lo: int, hi: int):
    return spark.sql(ROWS.format(lo=lo, hi=hi))


def ids(uri: str, opts: dict[str, str]) -> list[int]:
    return sorted(DeltaTable(uri, storage_options=opts).to_pyarrow_table(columns=["id"])["id"].to_pylist())


def test_the_sink_writes_an_s3_table_each_id_once_and_a_replay_adds_no_commit(
    spark, s3, bucket, moto_url, caplog, capfd
):
    caplog.set_level(logging.INFO)
    uri, opts = f"s3://{bucket}/events", options(moto_url)
    out = sink(uri, opts, partition_by=["part"], vacuum_retention=0)
    assert out.write(rows(spark, 0, 30), 0).written == 30
    assert out.write(rows(spark, 30, 50), 1).written == 20
    version, before = DeltaTable(uri, storage_options=opts).version(), object_keys(s3, bucket)
    assert out.write(rows(spark, 30, 50), 1).written == 0  # the replay of batch 1
    assert "holds batch 1 already" in caplog.text and object_keys(s3, bucket) == before
    dt = DeltaTable(uri, storage_options=opts)
    assert dt.version() == version and dt.transaction_version("job.lake") == 1
    got = sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in got] == list(range(50))
    assert got[7]["part"] == "p: 1" and got[7]["v"] == "v7"
    assert got[7]["_meta"] == {"message_id": "m7", "received_at": 1007}  # no staging fields

    # The tasks' files (named part-<batch>-<uuid>, not delta-rs's) are the bucket's data objects,
    # under Hive-escaped partition directories (":" is %3A; the log URI-encodes the paths again).
    paths = [unquote(p) for p in pa.table(dt.get_add_actions(flatten=True))["path"].to_pylist()]
    named = re.compile(r"part=p%3A [012]/part-0000000[01]-[0-9a-f]{32}\.parquet")
    assert all(named.fullmatch(p) for p in paths), paths
    keys = object_keys(s3, bucket)
    assert {k for k in keys if k.endswith(".parquet")} == {f"events/{p}" for p in paths}

    # Maintenance on S3: compaction, and the vacuum removes what a killed batch left.
    stray = "events/part=p%3A 0/part-00000002-deadbeef.parquet"
    s3.put_object(Bucket=bucket, Key=stray, Body=b"left by a batch killed before its commit")
    done = out.maintain()
    assert done["files_compacted"] > 0 and done["files_vacuumed"] >= 1
    assert stray not in object_keys(s3, bucket)
    assert ids(uri, opts) == list(range(50))
    assert DeltaTable(uri, storage_options=opts).transaction_version("job.lake") == 1

    seen = capfd.readouterr()
    assert SECRET not in caplog.text + seen.out + seen.err
    assert SECRET not in repr(out.cfg) + repr(FileWriter(uri, opts, (), 1024**2, 0))  # what a log could show


def test_on_s3_a_racing_append_is_kept_and_a_commit_that_keeps_losing_leaves_no_files(
    spark, s3, bucket, moto_url, monkeypatch
):
    uri, opts = f"s3://{bucket}/events", options(moto_url)
    out = sink(uri, opts, include_meta=False, commit_retries=0)
    out.write(plain_rows(spark, 0, 10), 0)
    rival = race(
        monkeypatch,
        DeltaTable,
        "create_write_transaction",
        lambda n: write_deltalake(uri, other_rows([1000]), mode="append", storage_options=opts),
        times=1,
    )
    assert out.write(plain_rows(spark, 10, 20), 1).written == 10
    assert rival == ["committed"]  # at the next version: the other writer's commit is not overwritten
    assert ids(uri, opts) == [*range(20), 1000]
    monkeypatch.undo()

    written: list[set[str]] = []

    def schema_change(n: int) -> None:
        written.append({k for k in object_keys(s3, bucket) if "/part-00000002-" in k})
        write_deltalake(
            uri, other_rows([2000], w=["x"]), mode="append", schema_mode="merge", storage_options=opts
        )

    rival = race(monkeypatch, DeltaTable, "create_write_transaction", schema_change, times=1)
    with pytest.raises(FatalError, match=r"(?s)^sinks\.lake: commit batch 2: .*0 retries spent"):
        out.write(plain_rows(spark, 20, 30), 2)
    assert rival == ["CommitFailedError"]
    assert written[0], "the tasks wrote the batch's files into the bucket before the commit"
    assert not {k for k in object_keys(s3, bucket) if "/part-00000002-" in k}  # deleted after it failed
    assert ids(uri, opts) == [*range(20), 1000, 2000]
    assert DeltaTable(uri, storage_options=opts).transaction_version("job.lake") == 1


def test_a_wrong_endpoint_fails_the_batch_without_the_secret_in_errors_or_logs(
    spark, free_port, caplog, capfd
):
    caplog.set_level(logging.DEBUG, logger="sinks")
    endpoint = f"127.0.0.1:{free_port}"  # nothing listens there
    out = sink("s3://lake/events", options(f"http://{endpoint}", max_retries="0"))
    with pytest.raises(TransientError) as caught:  # an outage: the batch fails, a restart retries it
        out.write(rows(spark, 0, 10), 0)
    line = str(caught.value)
    # One line (delta-rs nests its causes over lines, in colour), naming the key, the table,
    # the cause and where it failed.
    assert line.startswith("sinks.lake.path: cannot open the table at s3://lake/events: "), line
    assert "Connection refused" in line and endpoint in line and "\n" not in line and "\x1b" not in line
    text = "".join(traceback.format_exception(caught.value))
    seen = capfd.readouterr()
    assert SECRET not in text + caplog.text + seen.out + seen.err
