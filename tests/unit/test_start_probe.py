"""The start probe on a queue nobody listens on: retried as the source's calls are; then a drain stops."""

from __future__ import annotations

import logging

import pytest

from ingest.connector import Source
from ingest.errors import FatalError, TransientError
from ingest.intake.probe import probe_sources
from sources.mns.config import MnsSourceConfig
from sources.mns.source import MnsSource
from sources.sqs.config import SqsSourceConfig
from sources.sqs.source import SqsSource


def sqs_at(port: int, **options) -> SqsSource:
    """An SQS source whose queue and endpoint are on 127.0.0.1:``port`` (closed: connections refused)."""
    url = f"http://127.0.0.1:{port}/000000000000/gone"
    base = {"type": "sqs", "name": "src", "sqs.url": url, "sqs.endpoint.url": f"http://127.0.0.1:{port}"}
    return SqsSource(SqsSourceConfig.model_validate(base | {"sqs.region": "us-east-1"} | options))


def count_calls(source: SqsSource, action: str) -> list[str]:
    """Every ``action`` request the source's boto3 client sends, as it sends it (a botocore event)."""
    sent: list[str] = []
    client = source._clients.client()  # the probe's thread's client: this thread's
    client.meta.events.register(f"before-send.sqs.{action}", lambda **kw: sent.append(action))
    return sent


@pytest.mark.parametrize(
    ("delete_message", "action"), [(True, "DeleteMessage"), (False, "GetQueueAttributes")]
)
def test_the_sqs_probe_retries_an_unreachable_queue_then_raises_a_transient_error(
    free_port, delete_message, action
):
    source = sqs_at(free_port, **{"sqs.max.retries": 2, "delete_message": delete_message})
    sent = count_calls(source, action)
    try:
        with pytest.raises(TransientError) as raised:
            source.probe()
    finally:
        source.close()
    assert len(sent) == 3, "the first try and sqs.max.retries more"
    text = str(raised.value)
    assert text.startswith(f"cannot reach SQS queue {source.queue} at http://127.0.0.1:{free_port} ")
    assert "(sqs.max.retries: 2)" in text and "EndpointConnectionError" in text


def test_the_mns_probe_raises_a_transient_error_naming_the_queue_and_endpoint(free_port):
    endpoint = f"http://127.0.0.1:{free_port}"
    cfg = {"type": "mns", "name": "src", "endpoint": endpoint, "queueName": "gone", "max_retries": 1}
    source = MnsSource(
        MnsSourceConfig.model_validate(cfg | {"accessKeyId": "id", "accessKeySecret": "s3cret-key"})
    )
    try:
        with pytest.raises(
            TransientError, match=rf"^cannot reach MNS queue gone at {endpoint} \(max_retries: 1\): "
        ):
            source.probe()
    finally:
        source.close()


def test_a_drain_stops_on_an_unreachable_queue_naming_the_source(free_port):
    source = sqs_at(free_port, **{"sqs.max.retries": 0})
    try:
        with pytest.raises(
            FatalError, match=rf"^source src: cannot reach SQS queue \S+ at http://127.0.0.1:{free_port} "
        ):
            probe_sources([source], drain=True)
    finally:
        source.close()


def test_a_streaming_job_warns_and_goes_on_for_its_queue_may_come_back(free_port, caplog):
    source = sqs_at(free_port, **{"sqs.max.retries": 0})
    try:
        with caplog.at_level(logging.WARNING, logger="ingest.intake.probe"):
            probe_sources([source], drain=False)
    finally:
        source.close()
    [record] = [r for r in caplog.records if r.name == "ingest.intake.probe"]
    assert record.getMessage().startswith(f"source src: cannot reach SQS queue {source.queue} ")
    assert record.getMessage().endswith("its receivers keep retrying")


class Quiet(Source):
    """A source on the base class's default probe (as the fake queue and datagen are)."""

    name, queue, max_batch, visibility_timeout = "quiet", "q", 1, 30.0


class Refusing(Quiet):
    """A source whose probe finds what retrying cannot fix."""

    name = "bad"
    can_probe = True

    def probe(self) -> None:
        raise FatalError("queue q: wrong keys")


@pytest.mark.parametrize("drain", [True, False])
def test_a_fatal_probe_stops_either_mode_and_the_default_probe_passes(drain):
    probe_sources([Quiet()], drain=drain)
    with pytest.raises(FatalError, match=r"^queue q: wrong keys$"):
        probe_sources([Quiet(), Refusing()], drain=drain)
