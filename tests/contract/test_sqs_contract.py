"""The source contract on SQS, over moto's server mode on 127.0.0.1 with boto3."""

from __future__ import annotations

import pytest

from ingest.config.sources import SqsSourceConfig
from sources.sqs import SqsSource
from tests.contract.suite import Harness, SourceContract

pytestmark = pytest.mark.integration


class TestSqsContract(SourceContract):
    @pytest.fixture
    def harness(self, sqs, make_queue, moto_url):
        url = make_queue()
        cfg = SqsSourceConfig.model_validate(
            {
                "type": "sqs",
                "name": "c",
                "sqs.url": url,
                "sqs.endpoint.url": moto_url,
                "visibility_timeout": 2,
                "sqs.waittime.seconds": 1,
            }
        )

        def send(bodies):
            for i in range(0, len(bodies), 10):
                entries = [{"Id": str(k), "MessageBody": b} for k, b in enumerate(bodies[i : i + 10])]
                sqs.send_message_batch(QueueUrl=url, Entries=entries)

        return Harness(SqsSource(cfg), send)
