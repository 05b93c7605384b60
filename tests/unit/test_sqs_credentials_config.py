"""Incomplete SQS credentials are refused at config time, each under the connector's own option names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sinks.sqs.config import SqsSinkConfig
from sources.sqs.config import SqsSourceConfig

URL = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
SOURCE = {"type": "sqs", "name": "in", "sqs.url": URL}
SINK = {"type": "sqs", "name": "out", "sqsUrl": URL}


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"aws.access.key.id": "AKID"}, "aws.access.key.id and aws.secret.access.key go together"),
        (
            {"sqs.credentials.provider": "BASIC"},
            "sqs.credentials.provider static needs aws.access.key.id and its secret",
        ),
        ({"sqs.credentials.provider": "profile"}, "sqs.credentials.provider profile needs aws.profile"),
        ({"sqs.credentials.provider": "ASSUME_ROLE"}, "assume_role needs sqs.role.arn"),
        ({"sqs.proxy.user": "u"}, "sqs.proxy.user needs sqs.proxy.url"),
    ],
)
def test_source(options, error):
    with pytest.raises(ValidationError, match=error):
        SqsSourceConfig.model_validate(SOURCE | options)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"aws.credentials.provider.basic.secretkey": "s"}, "the access key id and secret key go together"),
        ({"aws.credentials.provider": "BASIC"}, "BASIC/static needs an access key id and secret key"),
        (
            {"aws.credentials.provider": "PROFILE"},
            "PROFILE needs aws.credentials.provider.profile.name",
        ),
        ({"aws.credentials.provider": "assume_role"}, "ASSUME_ROLE needs aws.credentials.provider.role.arn"),
        ({"proxy_user": "u"}, "proxy_user needs proxy_url"),
    ],
)
def test_sink(options, error):
    with pytest.raises(ValidationError, match=error):
        SqsSinkConfig.model_validate(SINK | options)


def test_flink_provider_names_are_ours():
    keys = {"aws.access.key.id": "AKID", "aws.secret.access.key": "s"}
    assert (
        SqsSourceConfig.model_validate(
            SOURCE | keys | {"sqs.credentials.provider": "BASIC"}
        ).credentials_provider
        == "static"
    )
    sink = SqsSinkConfig.model_validate(SINK | {"aws.credentials.provider": "ENV_VAR"})
    assert sink.credentials_provider == "default"
