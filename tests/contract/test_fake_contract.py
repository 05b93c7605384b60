"""The source contract on the file-backed fake queue (standard and FIFO)."""

from __future__ import annotations

import pytest

from ingest.intake.processes import ProcessSource
from ingest.intake.processes import make_source as build_source
from sources.fake.config import FakeSourceConfig
from sources.fake.source import FakeSource
from tests.support.source_contract import Harness, SourceContract


class TestFakeContract(SourceContract):
    fifo = False

    @pytest.fixture
    def harness(self, tmp_path):
        cfg = FakeSourceConfig(
            type="fake", name="c", path=str(tmp_path), queue="q", fifo=self.fifo, visibility_timeout=1.0
        )
        source = FakeSource(cfg)
        # One group per body: the contract is about visibility and handles, not FIFO group locks.
        group = (lambda i: {"group_id": f"g{i}"}) if self.fifo else (lambda i: {})
        yield Harness(
            source,
            lambda bodies: source.store.send_batch([{"body": b, **group(i)} for i, b in enumerate(bodies)]),
        )
        source.close()


class TestFakeFifoContract(TestFakeContract):
    fifo = True


class TestFakeProcessContract(SourceContract):
    """The same contract with the source's calls made in a child process (``processes: 1``)."""

    @pytest.fixture
    def harness(self, tmp_path):
        cfg = FakeSourceConfig(
            type="fake", name="c", path=str(tmp_path), queue="q", visibility_timeout=1.0, processes=1
        )
        source = build_source(cfg)
        assert isinstance(source, ProcessSource)
        sender = FakeSource(cfg.model_copy(update={"processes": 0}))
        yield Harness(source, lambda bodies: sender.store.send_batch([{"body": b} for b in bodies]))
        source.close()
        sender.close()
