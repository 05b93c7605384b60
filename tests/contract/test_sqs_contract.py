"""The source contract on SQS: moto's server mode on 127.0.0.1 through boto3, a fresh queue per test."""

from __future__ import annotations

import pytest

from ingest.intake.processes import ProcessSource
from ingest.intake.processes import make_source as build_source
from sources.sqs.source import SqsSource
from tests.support.source_contract import Harness, SourceContract
from tests.support.sqs_server import send_bodies, source_cfg

pytestmark = pytest.mark.integration


class TestSqsContract(SourceContract):
    @pytest.fixture
    def harness(self, sqs, make_queue, moto_url):
        url = make_queue()
        source = SqsSource(source_cfg(url, moto_url, name="contract", visibility_timeout=2))
        yield Harness(source, lambda bodies: send_bodies(sqs, url, bodies))
        source.close()


class TestSqsProcessContract(SourceContract):
    """The same contract with the SQS calls made in two child processes (``processes: 2``)."""

    @pytest.fixture
    def harness(self, sqs, make_queue, moto_url):
        url = make_queue()
        source = build_source(source_cfg(url, moto_url, name="contract", visibility_timeout=2, processes=2))
        assert isinstance(source, ProcessSource)
        yield Harness(source, lambda bodies: send_bodies(sqs, url, bodies))
        source.close()
