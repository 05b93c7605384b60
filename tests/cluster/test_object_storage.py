"""A job with nothing on a shared path: a standalone cluster of a master and two workers, each with
a scratch directory of its own, and the job's staging, checkpoint, state and sink on S3.

The driver (spark-submit's Python, client mode) receives from its fake queue and stages objects
on moto's S3 server; the executors list and read them through S3A and write the files sink's
output there; no node reads another's local files. spark-submit returns the job's exit code.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from sources.fake.store import FakeQueue
from tests.support import jobconfig
from tests.support.cluster import StandaloneCluster
from tests.support.jobs import body
from tests.support.s3_server import s3_server

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("cluster")]
LAKE = "s3a://lake/cluster-job"


def test_a_drain_with_everything_on_s3_on_two_workers_is_exactly_once(tmp_path, spark_bundle):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    ids = q.send_batch([{"body": body(i)} for i in range(300)])
    for i in range(10):  # redeliveries of the same message id
        q.send(body(i), message_id=ids[i])
    cfg = jobconfig.job_config(
        [jobconfig.fake_source(tmp_path, name="fake")],
        tmp_path,
        name="cluster-job",
        spark={"master": "", "log_level": "WARN"},
        checkpoint=f"{LAKE}/checkpoint",
        state={"path": f"{LAKE}/state"},
        staging={"dir": f"{LAKE}/staging", "roll_messages": 50},
        sinks=[{"type": "files", "name": "out", "path": f"{LAKE}/out", "format": "jsonl"}],
    )
    cfg.pop("metrics", None)
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(cfg))
    root = Path(tempfile.mkdtemp(prefix="mq-cluster-s3-"))
    with s3_server() as s3:
        s3.bucket("lake")
        cluster = StandaloneCluster(root, workers=2).start()
        try:
            code, out = cluster.run(
                spark_bundle,
                config,
                tmp_path / "submit.log",
                env=s3.env,
                s3a=True,
                **{"spark.cores.max": "2"},
            )
        finally:
            cluster.stop()
        log = cluster.log_text()
        shutil.rmtree(root, ignore_errors=True)
        assert code == 0, out[-6000:] + log
        rows = s3.jsonl_rows("lake", "cluster-job/out/")
        assert sorted(r["event_id"] for r in rows) == list(range(300)), out[-6000:]
        assert len({r["_meta"]["message_id"] for r in rows}) == 300
        assert s3.keys("lake", "cluster-job/state/_delta_log/"), "no state table on S3"
    assert q.count()["total"] == 0
    # Nothing of the job went to a local path: only the queue, the config and the log are here.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml", "queues", "submit.log"]
