"""Where the job's own files may live: a local path or S3, each spelled for Hadoop and delta-rs."""

from __future__ import annotations

import doctest

import pytest

from ingest.config import parse_config
from ingest.errors import ConfigError
from ingest.storage import location

BASE = {
    "name": "j",
    "sources": [{"type": "fake", "name": "q", "path": "/tmp/q"}],
    "sinks": [{"type": "console", "name": "c"}],
    "checkpoint": "s3a://lake/cp",
    "state": {"path": "s3://lake/state"},
    "staging": {"dir": "s3a://lake/staging"},
}


def test_doctests() -> None:
    assert doctest.testmod(location).failed == 0


def test_a_job_on_s3_loads() -> None:
    cfg = parse_config(BASE)
    assert (cfg.checkpoint, cfg.state.path, cfg.staging.dir) == (
        "s3a://lake/cp",
        "s3://lake/state",
        "s3a://lake/staging",
    )


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("checkpoint", "gs://lake/cp", "checkpoint: gs:// is read by Hadoop only"),
        ("checkpoint", "s3a:///cp", "checkpoint: s3a:///cp names no bucket"),
        ("checkpoint", "s3a://lake/staging/cp", "staging.dir: s3a://lake/staging contains checkpoint"),
        # s3:// and s3a:// name the same objects
        (
            "checkpoint",
            "s3://lake/staging",
            "staging.dir: s3a://lake/staging is the same directory as checkpoint",
        ),
    ],
)
def test_own_directories_refused(key: str, value: str, said: str) -> None:
    with pytest.raises((ConfigError, ValueError)) as err:
        parse_config({**BASE, key: value})
    assert said in str(err.value)
