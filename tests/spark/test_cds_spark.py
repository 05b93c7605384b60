"""The class archive built for real: a Spark job's JVM dumps it, and the next session maps it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ingest.tools import cds

pytestmark = pytest.mark.spark

SESSION = """
from ingest.runtime.spark import make_session
# -Xshare:on (after ours, so it wins): the JVM refuses to start unless it maps the archive.
spark = make_session("local[1]", "cds-check", {"spark.driver.extraJavaOptions": "-Xshare:on"}, "ERROR")
args = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
print("ARGS", " ".join(str(a) for a in args))
print("ROWS", spark.range(5).count())
"""


def test_built_archive_is_mapped_by_the_next_session(tmp_path, monkeypatch):
    monkeypatch.setenv("MQ_INGEST_CACHE", str(tmp_path / "cache"))
    path = cds.build()
    assert path is not None and path.stat().st_size > 10 * 2**20, "a dump of Spark's classes"
    assert [p.name for p in path.parent.iterdir()] == [path.name], "no partial file left"
    env = {**os.environ, "MQ_INGEST_CACHE": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    assert f"-XX:SharedArchiveFile={path}" in out
    assert "ROWS 5" in out
