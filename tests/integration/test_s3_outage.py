"""An S3 outage of 15 s in the middle of a continuous job with everything on S3 loses nothing: the
stager, the state commit, the acker and Spark's S3A retry, receivers pause, and the job carries on
when the store is back.

The store goes away as a network outage does: a relay in front of moto's S3 server refuses
connections and cuts the open ones (``tests/support/s3_server.Relay``); the server keeps its objects.
"""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, start_cli, write_config
from tests.support.polling import wait_for
from tests.support.s3_server import Relay, aws_env, s3_server

pytestmark = pytest.mark.integration
LAKE = "s3a://lake/orders"
OUTAGE = 15.0
MET = re.compile(
    "staging (write|publish) failed|retrying committing batch|acker: cannot read the checkpoint"
    "|lease not renewed"
)
"""The job's lines saying a part of it met the outage."""


def test_an_outage_of_15s_loses_nothing_and_the_job_resumes(tmp_path):
    with s3_server() as s3:
        s3.bucket("lake")
        relay = Relay(s3.url)
        q = FakeQueue(str(tmp_path / "queues"), "in")
        q.send_batch([{"body": body(i)} for i in range(100)])
        cfg = job_config(
            tmp_path,
            source={"visibility_timeout": "60s"},
            checkpoint=f"{LAKE}/checkpoint",
            state={"path": f"{LAKE}/state"},
            staging={"dir": f"{LAKE}/staging", "roll_messages": 50, "roll_interval": "100ms"},
            sinks=[{"type": "files", "name": "out", "path": f"{LAKE}/out", "format": "jsonl"}],
            trigger={"mode": "processing_time", "interval": "500ms"},
        )
        cfg.pop("metrics", None)
        proc = start_cli(write_config(tmp_path, cfg), env=aws_env(relay.url))
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
        reader.start()

        def ids() -> list[int]:
            return sorted(r["event_id"] for r in s3.jsonl_rows("lake", "orders/out/"))

        def wait(cond, timeout: float, what: str) -> None:
            """``wait_for``, failing with the job's output so far."""
            try:
                wait_for(cond, timeout, what)
            except AssertionError as err:
                raise AssertionError(f"{err}: {len(ids())} rows\n{''.join(lines)[-8000:]}") from None

        try:
            wait(lambda: len(ids()) == 100, 240, "the first 100 rows in the sink")
            relay.down()
            ended = time.monotonic() + OUTAGE
            q.send_batch([{"body": body(i)} for i in range(100, 300)])
            # Which part meets it first depends on timing: the stager (if the receivers take the new
            # messages before their pacing pauses them on batch 0's unacked ones), the state commit
            # of batch 0, the acker, the lease (tests/unit/test_staging_s3.py has the stager's own).
            wait(lambda: any(MET.search(line) for line in lines), OUTAGE, "the job meeting the outage")
            wait_for(lambda: time.monotonic() >= ended, OUTAGE + 1, "the outage's end", every=0.2)
            relay.up()
            wait(lambda: len(ids()) >= 300, 240, "every row after the outage")
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
            relay.close()
        reader.join(10)
        out = "".join(lines)
        assert proc.returncode == 0, out[-6000:]
        assert ids() == list(range(300)), out[-6000:]  # each once
        assert q.count()["total"] == 0, q.count()
