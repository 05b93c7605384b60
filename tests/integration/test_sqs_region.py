"""Which region an SQS source or sink talks to: the queue URL's, the option, AWS_REGION, the profile.

moto keeps queues per region, so a client in the wrong region finds no queue: each case below
receives or sends through boto3 against moto's server, and fails if the region resolved wrong.
"""

from __future__ import annotations

import uuid

import boto3
import pytest

from ingest.errors import ConfigError
from sinks.sqs.sink import SqsSink
from sources.sqs.client import resolve_region
from sources.sqs.source import SqsSource
from tests.support.source_contract import receive_n
from tests.support.sqs_server import sink_cfg, source_cfg

pytestmark = pytest.mark.integration


@pytest.fixture
def no_region_env(monkeypatch, tmp_path):
    """No region from the environment or a profile, unless a test sets one."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    return tmp_path / "config"


@pytest.fixture
def eu_queue(moto_url):
    """A queue in eu-west-1 holding one message; its (moto) URL."""
    sqs = boto3.client("sqs", endpoint_url=moto_url, region_name="eu-west-1")
    url = sqs.create_queue(QueueName=f"eu-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello from eu-west-1")
    yield url
    sqs.delete_queue(QueueUrl=url)


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("https://sqs.eu-west-1.amazonaws.com/123456789012/q", "eu-west-1"),
        ("https://ap-southeast-2.queue.amazonaws.com/123456789012/q", "ap-southeast-2"),
        ("https://sqs.us-gov-west-1.amazonaws.com/123456789012/q", "us-gov-west-1"),
        ("https://vpce-0a1b2c-abc.sqs.cn-north-1.vpce.amazonaws.com/123456789012/q", "cn-north-1"),
        ("http://sqs.eu-central-1.localhost.localstack.cloud:4566/000000000000/q", "eu-central-1"),
    ],
)
def test_the_region_is_read_from_the_queue_url(url, region, no_region_env):
    assert resolve_region(url, None, None, "sqs.region") == region
    assert resolve_region(url, region, None, "sqs.region") == region
    with pytest.raises(
        ConfigError, match=rf"config key sqs.region: us-east-7 is not the region of queue .*\({region}\)"
    ):
        resolve_region(url, "us-east-7", None, "sqs.region")


def test_the_url_region_wins_over_the_environment(moto_url, eu_queue, no_region_env, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    name = eu_queue.rsplit("/", 1)[1]
    aws_url = f"https://sqs.eu-west-1.amazonaws.com/123456789012/{name}"  # sent to moto's endpoint
    src = SqsSource(source_cfg(aws_url, moto_url))
    assert src.cfg.region == "eu-west-1"
    assert [m.body for m in receive_n(src, 1)] == ["hello from eu-west-1"]


def test_option_then_aws_region_then_profile(moto_url, eu_queue, no_region_env, monkeypatch):
    assert [
        m.body for m in receive_n(SqsSource(source_cfg(eu_queue, moto_url, **{"sqs.region": "eu-west-1"})), 1)
    ]
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    sink = SqsSink(sink_cfg(eu_queue, moto_url))
    assert sink.cfg.region == "eu-west-1"
    monkeypatch.delenv("AWS_REGION")
    no_region_env.write_text("[profile eu]\nregion = eu-west-1\n")
    src = SqsSource(
        source_cfg(eu_queue, moto_url, **{"sqs.credentials.provider": "profile", "aws.profile": "eu"})
    )
    assert src.cfg.region == "eu-west-1"


def test_no_region_anywhere_is_a_clear_error(moto_url, eu_queue, no_region_env):
    with pytest.raises(
        ConfigError, match=r"config key sources.src.sqs.region: no region for queue .*AWS_REGION"
    ):
        SqsSource(source_cfg(eu_queue, moto_url))
    with pytest.raises(ConfigError, match=r"config key sinks.out.aws.region: no region"):
        SqsSink(sink_cfg(eu_queue, moto_url))
