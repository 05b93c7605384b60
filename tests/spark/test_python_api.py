"""The Python API in a notebook's SparkSession: the plugins page's example runs a job through the
example plugin's connectors (registered in code) in the suite's session, which stays up."""

from __future__ import annotations

import pytest

from ingest.batch.query import CHECKPOINT_MANAGER as MANAGER
from tests.support import plugins
from tests.support.jobs import read_jsonl_dir

pytestmark = pytest.mark.spark


def test_the_pages_example_runs_a_job_in_the_given_session_and_leaves_it_running(spark, tmp_path):
    from pyspark.sql import SparkSession

    code = plugins.page_examples()["python-api"].replace('"data/', f'"{tmp_path}/data/')
    namespace = {"spark": spark}
    before = spark.conf.get(MANAGER, None)
    try:
        spark.conf.unset(MANAGER)  # the session as a notebook has it
        with plugins.registered():
            exec(compile(code, "docs/extending/plugins.md", "exec"), namespace)  # asserts exit 0
        assert spark.conf.get(MANAGER, None) is None, "the job put the session's setting back"
    finally:
        if before is not None:
            spark.conf.set(MANAGER, before)
    assert namespace["job"].spark is spark  # the session given, not one of its own
    rows = read_jsonl_dir(tmp_path / "data" / "out")
    assert sorted(row["n"] for row in rows) == list(range(100))  # each event once
    assert SparkSession.getActiveSession() is spark and spark.range(3).count() == 3  # not stopped
