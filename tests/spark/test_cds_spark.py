"""The class archive built for real: a Spark job's JVM dumps it, and the next session maps it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.runtime import cds_archive
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


def _built_by_this_checkout() -> Path | None:
    """The archive ``make test`` built before the suite (``make cds``, the same ``cds.build``), if
    it is newer than the code that builds it: building another costs a Spark job's run."""
    path = cds.archive_path()
    code = max(Path(m.__file__).stat().st_mtime for m in (cds, cds_archive))
    return path if path is not None and path.is_file() and path.stat().st_mtime > code else None


def test_built_archive_is_mapped_by_the_next_session(tmp_path, monkeypatch):
    path = _built_by_this_checkout()
    if path is None:
        monkeypatch.setenv("MQ_INGEST_CACHE", str(tmp_path / "cache"))
        path = cds.build()
    assert path is not None and path.stat().st_size > 10 * 2**20, "a dump of Spark's classes"
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".partial")], "no partial file left"
    env = {**os.environ, "MQ_INGEST_CACHE": str(path.parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    assert f"-XX:SharedArchiveFile={path}" in out
    assert "ROWS 5" in out
