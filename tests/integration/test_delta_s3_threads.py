"""The Delta sink's driver-side table calls on S3 leave the process's other Python threads running.

The job's driver runs receivers, visibility extensions and the acker in threads next to the
sink. A delta-rs call that blocks on S3 while holding the GIL stalls them all, for as long as
its retries last (delta-rs's default ``retry_timeout``: 3 minutes). Here moto serves S3 from a
thread of the same process: a call that holds the GIL through its requests never gets an answer,
so the check runs in a child process under a deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import boto3
import pyarrow as pa
from moto.server import ThreadedMotoServer

from sinks.delta.config import DeltaSinkConfig
from sinks.delta.table import DeltaTarget

server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
url = f"http://{host}:{port}"
boto3.client("s3", endpoint_url=url, region_name="us-east-1").create_bucket(Bucket="lake")
options = {
    "AWS_ENDPOINT_URL": url,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
cfg = DeltaSinkConfig(type="delta", name="lake", path="s3://lake/events", storage_options=options)
target = DeltaTarget(cfg)
print("before", target.committed(), flush=True)  # no table yet
target.table(pa.schema([("id", pa.int64())]))  # created
print("commit", target.commit([], 0), flush=True)
print("after", DeltaTarget(cfg).committed(), flush=True)  # a new run opens the table
print("maintain", target.maintain(), flush=True)  # compaction and vacuum
server.stop()
"""


def test_opening_creating_committing_and_maintaining_an_s3_table_leave_other_threads_running():
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"a table call held the GIL (moto in the same process never answered): {err.stdout!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:4] == [
        "before -1",
        "commit True",
        "after 0",
        "maintain {'files_compacted': 0, 'files_vacuumed': 0}",
    ], done.stdout
