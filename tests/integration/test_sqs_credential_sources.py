"""SqsSource signs with the keys of a user's provider and of the container endpoint, through awscrt and boto3.

moto takes any key, so a FaultProxy in front of it (the source's endpoint) records the requests:
the access key id in each ``Authorization`` header is the one that signed it.
"""

from __future__ import annotations

import re

import pytest

from sources.sqs.source import SqsSource
from tests.support import credential_sources
from tests.support.credential_sources import CLASS_KEY, ContainerCredentials
from tests.support.source_contract import receive_n
from tests.support.sqs_server import FaultProxy, send_bodies, source_cfg

pytestmark = pytest.mark.integration

CLIENTS = pytest.mark.parametrize("client", ["crt", "boto3"])
"""``sqs.client``: awscrt (the default) and plain boto3 must take the credentials alike."""
_KEY_ID = re.compile(r"Credential=([A-Z0-9]+)/")


def _signed(proxy: FaultProxy) -> list[tuple[str, str, str | None]]:
    """(action, access key id, security token) of every request the proxy saw."""
    out = []
    for action, _, headers in proxy.calls:
        found = _KEY_ID.search(headers.get("Authorization", ""))
        out.append((action, found.group(1) if found else "", headers.get("X-Amz-Security-Token")))
    return out


def _read_one(url: str, endpoint: str, **options: str) -> str:
    src = SqsSource(source_cfg(url, endpoint, visibility_timeout=30, **options))
    try:
        msg = receive_n(src, 1)[0]
        assert src.ack([msg.receipt_handle]).deleted == [msg.receipt_handle]
        return msg.body
    finally:
        src.close()


@CLIENTS
def test_a_provider_class_of_the_users_own_signs_the_calls(client, sqs, make_queue, moto_url):
    url = make_queue()
    send_bodies(sqs, url, ["by-class"])
    provider = {"sqs.credentials.provider.class": "tests.support.credential_sources:KeysProvider"}
    with FaultProxy(moto_url) as proxy:
        assert _read_one(url, proxy.url, **provider, **{"sqs.client": client}) == "by-class"
    signed = _signed(proxy)
    assert {a for a, _, _ in signed} >= {"ReceiveMessage", "DeleteMessageBatch"}
    assert {key for _, key, _ in signed} == {CLASS_KEY}


@CLIENTS
def test_a_provider_function_is_called_again_before_its_keys_expire(client, sqs, make_queue, moto_url):
    """Keys with an expiry stay refreshable: the function gives new ones each time botocore asks
    (its keys expire within botocore's refresh window), and each call is signed with the newest."""
    url = make_queue()
    send_bodies(sqs, url, ["by-function"])
    credential_sources.issued.clear()
    provider = {"sqs.credentials.provider.class": "tests.support.credential_sources:expiring_keys"}
    with FaultProxy(moto_url) as proxy:
        assert _read_one(url, proxy.url, **provider, **{"sqs.client": client}) == "by-function"
    signed = _signed(proxy)
    issued = list(credential_sources.issued)
    assert signed and all(key in issued and token == f"token-{key}" for _, key, token in signed)
    assert len({key for _, key, _ in signed}) >= 2, f"refreshed between calls: {signed}"


@CLIENTS
def test_container_credentials_from_the_full_uri_endpoint_sign_the_calls(
    client, sqs, make_queue, moto_url, tmp_path, monkeypatch
):
    """The default chain with nothing but ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` (ECS, EKS Pod
    Identity): both clients ask that endpoint and sign with the key it serves."""
    url = make_queue()
    send_bodies(sqs, url, ["from-container"])
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-token")
    with ContainerCredentials("ASIACONTAINER0000001") as endpoint, FaultProxy(moto_url) as proxy:
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{endpoint.url}/v1/credentials")
        assert _read_one(url, proxy.url, **{"sqs.client": client}) == "from-container"
    assert endpoint.asked and set(endpoint.asked) == {("/v1/credentials", "pod-token")}
    signed = _signed(proxy)
    assert signed and set(signed) >= {("ReceiveMessage", endpoint.key, endpoint.token)}
    assert {(key, token) for _, key, token in signed} == {(endpoint.key, endpoint.token)}
