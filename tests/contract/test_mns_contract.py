"""The source contract on MNS: the emulator on 127.0.0.1 through aliyun-mns-sdk, a fresh queue per test."""

from __future__ import annotations

import pytest

from ingest.intake.processes import ProcessSource
from ingest.intake.processes import make_source as build_source
from sources.mns.source import MnsSource
from tests.support.mns_server import create_queue, send_bodies, source_cfg
from tests.support.source_contract import Harness, SourceContract

pytestmark = pytest.mark.integration


class TestMnsContract(SourceContract):
    @pytest.fixture
    def harness(self, mns):
        queue = create_queue(mns.url, visibility_timeout=2)
        source = MnsSource(source_cfg(mns.url, queue, name="contract", visibility_timeout=2))
        yield Harness(source, lambda bodies: send_bodies(mns.url, queue, bodies))
        source.close()


class TestMnsProcessContract(SourceContract):
    """The same contract with the MNS calls made in a child process (``processes: 1``): handles
    renewed by a visibility change in the child are the ones the driver acks with."""

    @pytest.fixture
    def harness(self, mns):
        queue = create_queue(mns.url, visibility_timeout=2)
        source = build_source(source_cfg(mns.url, queue, name="contract", visibility_timeout=2, processes=1))
        assert isinstance(source, ProcessSource)
        yield Harness(source, lambda bodies: send_bodies(mns.url, queue, bodies))
        source.close()
