"""SQS over HTTPS: a TLS front on 127.0.0.1 (a certificate made for the test) before moto's server,
reached directly or through a proxy's CONNECT tunnel (the proxy plain HTTP or itself TLS)."""

from __future__ import annotations

import base64
import http.client
import logging
import socket
import ssl
import subprocess
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import pytest

from ingest.errors import TransientError
from sinks.sqs.sink import SqsPartitionWriter
from sources.sqs.source import SqsSource
from tests.support.http_proxy import ForwardProxy
from tests.support.local_http import LocalHTTPServer
from tests.support.source_contract import receive_n
from tests.support.sqs_server import drain, send_bodies, sink_cfg, source_cfg

pytestmark = pytest.mark.integration

CLIENTS = pytest.mark.parametrize("client", ["crt", "boto3"])
BASIC = "Basic " + base64.b64encode(b"u@x:p:w").decode()


class TlsFront(LocalHTTPServer):
    """Terminates TLS with ``cert``/``key`` and forwards each request to ``upstream`` over plain HTTP."""

    def __init__(self, upstream: str, cert: str, key: str) -> None:
        super().__init__()
        self.upstream = urlsplit(upstream)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = self.url.replace("http://", "https://")
        self.requests = 0

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        self.requests += 1
        data = h.rfile.read(int(h.headers.get("Content-Length", 0)))
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() != "content-length"}
            conn.request(h.command, h.path, body=data, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1 (openssl), as a CA bundle too."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


@CLIENTS
def test_https_endpoint_with_a_ca_bundle(client, certificate, sqs, make_queue, moto_url, monkeypatch):
    url = make_queue()
    send_bodies(sqs, url, [f"m{i}" for i in range(15)])
    monkeypatch.setenv("AWS_CA_BUNDLE", certificate[0])
    with TlsFront(moto_url, *certificate) as front:
        src = SqsSource(source_cfg(url, front.url, visibility_timeout=30, **{"sqs.client": client}))
        got = receive_n(src, 15)
        assert sorted(m.body for m in got) == sorted(f"m{i}" for i in range(15))
        handles = [m.receipt_handle for m in got]
        assert sorted(src.ack(handles).deleted) == sorted(handles)
        src.close()
        assert front.requests >= 3
    assert drain(sqs, url) == []


def test_https_endpoint_with_an_unknown_certificate_is_refused(certificate, make_queue, moto_url):
    url = make_queue()
    with TlsFront(moto_url, *certificate) as front:
        options = {"sqs.client": "crt", "sqs.max.retries": 0}
        src = SqsSource(source_cfg(url, front.url, visibility_timeout=30, **options))
        with pytest.raises(TransientError) as err:
            src.receive(1, 0)
        src.close()
    assert front.url.split("//")[1] in str(err.value) and front.requests == 0


@CLIENTS
@pytest.mark.parametrize("proxy_tls", [False, True], ids=["http-proxy", "https-proxy"])
def test_https_endpoint_through_a_proxy_tunnel(
    client, proxy_tls, certificate, sqs, make_queue, moto_url, monkeypatch, caplog
):
    """The calls go through one CONNECT to the endpoint's host:port, with the proxy's Basic auth
    (from sqs.proxy.user/password, or from the https:// proxy URL itself), TLS end to end; the
    https:// proxy is verified with the endpoint's CA bundle (AWS_CA_BUNDLE)."""
    caplog.set_level(logging.DEBUG)
    url = make_queue()
    send_bodies(sqs, url, [f"t{i}" for i in range(12)])
    monkeypatch.setenv("AWS_CA_BUNDLE", certificate[0])
    with TlsFront(moto_url, *certificate) as front, ForwardProxy(certificate if proxy_tls else None) as proxy:
        if proxy_tls:
            auth = {"sqs.proxy.url": proxy.url.replace("https://", "https://u%40x:p%3Aw@")}
        else:
            auth = {"sqs.proxy.url": proxy.url, "sqs.proxy.user": "u@x", "sqs.proxy.password": "p:w"}
        options = {"sqs.client": client, **auth}
        src = SqsSource(source_cfg(url, front.url, visibility_timeout=30, **options))
        got = receive_n(src, 12)
        handles = [m.receipt_handle for m in got]
        assert sorted(src.ack(handles).deleted) == sorted(handles)
        src.close()
        assert front.requests >= 3  # receives and deletes reached the endpoint, only through the tunnel
    assert sorted(m.body for m in got) == sorted(f"t{i}" for i in range(12))
    assert proxy.tunnels() and set(proxy.tunnels()) == {front.url.split("//")[1]}
    assert [c for c in proxy.calls if c[0] != "CONNECT"] == []  # nothing forwarded in the clear
    assert {auth for _, _, auth in proxy.calls} == {BASIC}
    assert proxy.errors == [] and "p:w" not in caplog.text and "p%3Aw" not in caplog.text
    assert drain(sqs, url) == []


@CLIENTS
def test_sink_sends_to_an_https_endpoint_through_a_proxy_tunnel(
    client, certificate, sqs, make_queue, moto_url, monkeypatch
):
    url = make_queue()
    monkeypatch.setenv("AWS_CA_BUNDLE", certificate[0])
    with TlsFront(moto_url, *certificate) as front, ForwardProxy() as proxy:
        cfg = sink_cfg(
            url, front.url, client=client, proxy_url=proxy.url, proxy_user="u@x", proxy_password="p:w"
        )
        rows = [{"body": f"s{i}", "source_id": f"id-{i}"} for i in range(15)]
        assert SqsPartitionWriter(cfg).write(rows) == (15, [])
    assert set(proxy.tunnels()) == {front.url.split("//")[1]}
    assert {auth for _, _, auth in proxy.calls} == {BASIC} and proxy.errors == []
    assert sorted(drain(sqs, url)) == sorted(f"s{i}" for i in range(15))


@CLIENTS
def test_http_endpoint_through_an_https_proxy(client, certificate, sqs, make_queue, moto_url, monkeypatch):
    """A plain-HTTP endpoint's requests are forwarded (absolute-form), over TLS to the proxy."""
    url = make_queue()
    send_bodies(sqs, url, ["a", "b"])
    monkeypatch.setenv("AWS_CA_BUNDLE", certificate[0])
    with ForwardProxy(certificate) as proxy:
        options = {"sqs.client": client, "sqs.proxy.url": proxy.url}
        src = SqsSource(source_cfg(url, moto_url, visibility_timeout=30, **options))
        got = receive_n(src, 2)
        assert len(src.ack([m.receipt_handle for m in got]).deleted) == 2
        src.close()
    assert sorted(m.body for m in got) == ["a", "b"]
    assert proxy.calls and {(method, target) for method, target, _ in proxy.calls} == {
        ("POST", f"{moto_url}/")
    }
    assert drain(sqs, url) == []


def test_an_https_proxy_with_an_unknown_certificate_is_refused(
    certificate, make_queue, moto_url, monkeypatch
):
    """boto3 (urllib3) leaves an https:// proxy unverified when the endpoint is plain HTTP, unless a
    proxy CA bundle is named: the client names one, so the proxy's self-signed certificate is refused.
    (crt verifies it too, but takes its 10 s connect timeout to say so.)"""
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    url = make_queue()
    with ForwardProxy(certificate) as proxy:
        options = {"sqs.client": "boto3", "sqs.proxy.url": proxy.url, "sqs.max.retries": 0}
        src = SqsSource(source_cfg(url, moto_url, visibility_timeout=30, **options))
        with pytest.raises(TransientError) as err:
            src.receive(1, 0)
        src.close()
    assert "proxy" in str(err.value) and proxy.calls == []


def test_an_unreachable_proxy_is_named_without_its_password(make_queue, moto_url):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = make_queue()
    options = {
        "sqs.client": "crt",
        "sqs.proxy.url": f"http://u:s3cret-pw@127.0.0.1:{port}",
        "sqs.max.retries": 0,
    }
    src = SqsSource(source_cfg(url, moto_url, visibility_timeout=30, **options))
    with pytest.raises(TransientError) as err:
        src.receive(1, 0)
    src.close()
    assert f"through the proxy 127.0.0.1:{port}" in str(err.value) and "s3cret-pw" not in str(err.value)
