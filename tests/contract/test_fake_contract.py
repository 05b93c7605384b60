"""The source contract on the file-backed fake queue."""

from __future__ import annotations

import pytest

from ingest.config.sources import FakeSourceConfig
from sources.fake import FakeSource
from tests.contract.suite import Harness, SourceContract


class TestFakeContract(SourceContract):
    @pytest.fixture
    def harness(self, tmp_path):
        cfg = FakeSourceConfig(type="fake", name="c", path=str(tmp_path), queue="q", visibility_timeout=1.0)
        source = FakeSource(cfg)
        return Harness(source, lambda bodies: source.store.send_batch([{"body": b} for b in bodies]))
