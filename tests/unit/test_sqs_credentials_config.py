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


@pytest.mark.parametrize(
    ("java_class", "ours"),
    [
        ("com.amazonaws.auth.DefaultAWSCredentialsProviderChain", "default"),
        ("com.amazon.auth.DefaultAWSCredentialsProviderChain", "default"),  # as the Confluent page spells it
        ("com.amazonaws.auth.profile.ProfileCredentialsProvider", "profile"),
        ("com.amazonaws.auth.STSAssumeRoleSessionCredentialsProvider", "assume_role"),
        ("software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider", "default"),
    ],
)
def test_confluent_provider_classes_are_our_providers(java_class, ours):
    extra = {"profile": {"aws.profile": "dev"}, "assume_role": {"sqs.role.arn": "arn:aws:iam::1:role/r"}}
    given = SOURCE | {"sqs.credentials.provider.class": java_class} | extra.get(ours, {})
    assert SqsSourceConfig.model_validate(given).credentials_provider == ours


def test_an_unknown_provider_class_is_refused_naming_the_key(tmp_path):
    from ingest.config import load_config
    from ingest.errors import ConfigError
    from tests.support.jobconfig import job_config

    source = SOURCE | {"sqs.credentials.provider.class": "com.example.MyProvider", "region": "us-east-1"}
    path = tmp_path / "job.yaml"
    import yaml

    path.write_text(yaml.safe_dump(job_config(source, tmp_path)))
    with pytest.raises(ConfigError, match=r"sqs\.credentials\.provider\.class 'com\.example\.MyProvider'"):
        load_config(path)


@pytest.mark.parametrize(
    "ref", ["tests.support.credential_sources:KeysProvider", "tests.support.credential_sources:expiring_keys"]
)
def test_a_python_provider_class_is_the_custom_provider(ref):
    cfg = SqsSourceConfig.model_validate(SOURCE | {"sqs.credentials.provider.class": ref})
    assert (cfg.credentials_provider, cfg.credentials_class) == ("custom", ref)
    with pytest.raises(ValidationError, match=r"sqs\.credentials\.provider says static"):
        SqsSourceConfig.model_validate(
            SOURCE | {"sqs.credentials.provider.class": ref, "sqs.credentials.provider": "static"}
        )
    with pytest.raises(ValidationError, match=r"custom goes with sqs\.credentials\.provider\.class"):
        SqsSourceConfig.model_validate(SOURCE | {"sqs.credentials.provider": "custom"})


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("no_such_pkg.creds:provider", "cannot import no_such_pkg.creds: ModuleNotFoundError: "),
        ("json:no_such_provider", "json has no attribute 'no_such_provider'"),
        ("os:sep", "os:sep is a str, not a botocore CredentialProvider or a function returning credentials"),
    ],
)
def test_a_provider_that_cannot_be_had_is_one_error_line_of_check_naming_the_key(ref, why, tmp_path, capsys):
    """``check`` builds the source (no Spark yet): the reference is found, or named, there."""
    import yaml

    from ingest.run import main
    from tests.support.jobconfig import job_config

    source = SOURCE | {"sqs.credentials.provider.class": ref}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job_config(source, tmp_path)))
    assert main(["--config", str(tmp_path / "job.yaml"), "--check"]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: config key sources.in.sqs.credentials.provider.class: {why}"), line


def test_what_a_provider_function_gives_becomes_botocore_credentials(monkeypatch):
    """Keys with an expiry stay refreshable (the function is asked again); a wrong answer names the key."""
    from botocore.credentials import RefreshableCredentials

    from ingest.errors import FatalError
    from sources.sqs.credentials import provided_credentials
    from tests.support import credential_sources

    ref = "tests.support.credential_sources:expiring_keys"
    credential_sources.issued.clear()
    creds = provided_credentials(ref)
    assert isinstance(creds, RefreshableCredentials)
    first = creds.get_frozen_credentials()
    second = creds.get_frozen_credentials()  # 5 minutes left: inside botocore's refresh window
    assert [first.access_key, second.access_key] == credential_sources.issued[-2:]
    assert second.token == f"token-{second.access_key}"
    plain = {"access_key": "AKIAPLAIN00000000001", "secret_key": "s"}
    monkeypatch.setattr(credential_sources, "expiring_keys", lambda: plain)
    frozen = provided_credentials(ref).get_frozen_credentials()
    assert (frozen.access_key, frozen.secret_key, frozen.token) == ("AKIAPLAIN00000000001", "s", None)
    for wrong, said in (({"access_key": "AKIA"}, "a mapping without access_key"), (None, "gave nothing")):
        monkeypatch.setattr(credential_sources, "expiring_keys", lambda wrong=wrong: wrong)
        with pytest.raises(FatalError, match=rf"^sqs\.credentials\.provider\.class {ref} .*{said}"):
            provided_credentials(ref)


def test_the_java_sdk_environment_names_are_read_when_the_standard_ones_are_unset(monkeypatch):
    """The Java SDK's default chain reads AWS_ACCESS_KEY / AWS_SECRET_KEY too; boto3's does not."""
    from sources.sqs.client import _session

    cfg = SqsSourceConfig.model_validate(SOURCE | {"region": "us-east-1"})
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY", "AKIAJAVANAMES0000001")
    monkeypatch.setenv("AWS_SECRET_KEY", "java-secret")
    creds = _session(cfg).get_credentials()
    assert (creds.access_key, creds.secret_key) == ("AKIAJAVANAMES0000001", "java-secret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASTANDARD00000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "standard-secret")
    assert _session(cfg).get_credentials().access_key == "AKIASTANDARD00000001", "the standard names win"


@pytest.mark.parametrize(
    ("connector", "key"), [(SOURCE, "sqs.proxy.url"), (SINK, "proxy_url")], ids=["source", "sink"]
)
def test_a_proxy_url_of_another_scheme_is_refused_naming_the_key(connector, key, tmp_path):
    from ingest.config import parse_config
    from ingest.errors import ConfigError
    from tests.support.jobconfig import fake_source, job_config

    given = connector | {key: "socks5://alice:hunter2@proxy.local:1080"}
    if connector is SOURCE:
        data = job_config(given, tmp_path)
    else:
        data = job_config(fake_source(tmp_path), tmp_path, sinks=[given])
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    line = str(err.value).splitlines()[0]
    assert key in line and "'socks5' is not http or https" in line and "hunter2" not in str(err.value)


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("https://proxy.local:3128", "https://proxy.local:3128"),
        ("http://proxy.local:3128", "http://proxy.local:3128"),
        ("proxy.local:3128", "http://proxy.local:3128"),  # botocore reads a bare host:port as http://
    ],
)
def test_http_and_https_proxy_urls_are_taken(given, used):
    assert SqsSourceConfig.model_validate(SOURCE | {"sqs.proxy.url": given}).proxy_url == used
    assert SqsSinkConfig.model_validate(SINK | {"proxy_url": given}).proxy_url == used
