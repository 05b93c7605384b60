"""A job whose S3 locations cannot be used stops at start with one ``error:`` line naming the key
and the bucket, exit 2, before any message is received (real moto S3 server, real CLI)."""

from __future__ import annotations

import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, run_cli, write_config
from tests.support.s3_server import s3_server

pytestmark = pytest.mark.integration


def _job(tmp, bucket: str):
    q = FakeQueue(str(tmp / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(5)])
    cfg = job_config(
        tmp,
        checkpoint=f"s3a://{bucket}/job/checkpoint",
        state={"path": f"s3a://{bucket}/job/state"},
        staging={"dir": f"s3a://{bucket}/job/staging"},
    )
    return q, write_config(tmp, cfg)


def _refused(config, env: dict, said: str, q) -> None:
    done = run_cli(config, env=env, timeout=120)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr
    assert len(errors) == 1 and said in errors[0], done.stderr
    assert "testing" not in done.stderr  # the secret key
    assert q.count()["total"] == 5 and q.count()["in_flight"] == 0, q.count()  # nothing received


def test_a_missing_bucket_is_one_error_line(tmp_path):
    with s3_server() as s3:
        q, config = _job(tmp_path, "no-such-bucket")
        _refused(
            config,
            s3.env,
            "config key checkpoint: bucket no-such-bucket does not exist: s3a://no-such-bucket/job/checkpoint",
            q,
        )


def test_refused_credentials_are_one_error_line(tmp_path):
    with s3_server(refuse_credentials=True) as s3:
        q, config = _job(tmp_path, "lake")
        _refused(
            config, s3.env, "config key checkpoint: access to bucket lake refused: InvalidAccessKeyId", q
        )
