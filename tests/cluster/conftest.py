"""The cluster layer's fixtures: the spark-submit bundle and a standalone cluster (support/cluster.py)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.cluster import Bundle, StandaloneCluster, build_bundle


@pytest.fixture(scope="session")
def spark_bundle(request, tmp_path_factory) -> Bundle:
    """The bundle, built once per session; the env archive is cached across sessions in pytest's cache."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the bundle is packed from a virtual environment")
    out = tmp_path_factory.mktemp("bundle")
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    return build_bundle(Path(cache.mkdir("mq-ingest-bundle")) if cache else out, out)


@pytest.fixture(scope="module")
def cluster():
    """A master and one worker (1 core, 1g) on 127.0.0.1 for the module; stopped by PID."""
    root = Path(tempfile.mkdtemp(prefix="mq-cluster-"))
    c = StandaloneCluster(root).start()
    yield c
    c.stop()
    shutil.rmtree(root, ignore_errors=True)
