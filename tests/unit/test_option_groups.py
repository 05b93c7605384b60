"""A dotted option group given nested (``backoff: {initial_interval: 200ms}``, as ``staging:`` nests)
is its dotted keys, in every config model; errors name a source or sink by its ``name``."""

from __future__ import annotations

import pytest

from ingest.config import parse_config
from ingest.errors import ConfigError
from tests.support.jobconfig import fake_source, job_config

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/events"


def job(tmp_path, sink: dict | None = None, source: dict | None = None) -> dict:
    store = {"type": "python", "name": "store", "function": "my_sinks:write"} | (sink or {})
    return job_config(source or fake_source(tmp_path), tmp_path, [store])


def test_a_nested_group_is_its_dotted_keys_on_a_sink_and_a_source(tmp_path):
    nested = parse_config(job(tmp_path, {"backoff": {"initial_interval": "200ms", "max_interval": "2s"}}))
    dotted = parse_config(job(tmp_path, {"backoff.initial_interval": "200ms", "backoff.max_interval": "2s"}))
    assert nested.sinks[0] == dotted.sinks[0]
    assert (nested.sinks[0].backoff_initial_interval, nested.sinks[0].backoff_max_interval) == (0.2, 2.0)
    sqs = {"type": "sqs", "name": "in", "sqs": {"url": QUEUE, "waittime": {"seconds": 5}}}
    sqs |= {"json": {"ignore-parse-errors": True}, "aws.access.key.id": "AKIDEXAMPLE"}
    sqs |= {"aws": {"secret": {"access": {"key": "s3cr3t"}}}, "sqs.credentials.provider": "static"}
    source = parse_config(job(tmp_path, source=sqs)).sources[0]
    assert (source.url, source.wait_time_seconds, source.json_ignore_parse_errors) == (QUEUE, 5, True)
    assert source.secret_access_key.get_secret_value() == "s3cr3t"


def test_an_option_given_both_ways_is_refused_naming_it(tmp_path):
    both = {"backoff": {"initial_interval": "200ms"}, "backoff.initial_interval": "1s"}
    with pytest.raises(ConfigError) as refused:
        parse_config(job(tmp_path, both))
    assert str(refused.value) == (
        "<dict>: sinks.store.backoff.initial_interval: given twice: as backoff.initial_interval "
        "and nested under backoff"
    )


def test_errors_name_the_sink_and_the_key_inside_a_nested_group(tmp_path):
    for bad, line in (
        ({"initial_interval": 0}, "sinks.store.backoff.initial_interval: Input should be greater than 0"),
        ({"initial_intervl": "1s"}, "sinks.store.backoff.initial_intervl: Extra inputs are not permitted"),
    ):
        with pytest.raises(ConfigError) as refused:
            parse_config(job(tmp_path, {"backoff": bad}))
        assert str(refused.value) == f"<dict>: {line}"
    with pytest.raises(ConfigError, match=r"^<dict>: sources\.src\.receivers: Input should be"):
        parse_config(job(tmp_path, source=fake_source(tmp_path, receivers=0)))
