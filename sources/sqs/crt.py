"""SQS's per-message calls over awscrt: SigV4 signing and HTTP/1.1 in C, JSON bodies through orjson."""

from __future__ import annotations

import hashlib
import io
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from ingest.errors import TransientError, redact
from sources.sqs.crt_threads import keep_thread_state

JSON_10 = "application/x-amz-json-1.0"


class CrtSqs:
    """SQS JSON-protocol calls (``ReceiveMessage``, ``DeleteMessageBatch``…) through the AWS Common Runtime.

    boto3 spends most of a message's client CPU in Python (request building, signing, urllib3,
    parsing); here signing and HTTP run in C and the bodies go through orjson, about a fifth of
    it (figures in ``docs/performance-history.md``). A caller waiting for a reply holds no GIL:
    the I/O runs on awscrt's event-loop thread. Thread-safe; connections are pooled,
    one request at a time each (HTTP/1.1 keep-alive).

    Requests and replies are those of boto3 (same member names), except that a message
    attribute's ``BinaryValue`` stays base64 text. An error reply raises botocore's
    ``ClientError`` carrying what botocore would have parsed (code, query-compatible code,
    message, HTTP status), so ``sources.sqs.errors.classify`` treats both clients alike;
    connection errors and timeouts raise ``TransientError``, redacted.

    Args:
        endpoint_url: ``http(s)://host[:port]`` the calls go to (boto3's resolved endpoint).
        region: the signing region.
        credentials: botocore credentials (refreshable ones refresh as botocore decides).
        proxy_url: an ``http://`` or ``https://`` proxy, with ``user:password@`` if it needs Basic auth.
        read_timeout: seconds to wait for a reply (a long poll's wait plus a margin).
        connect_timeout: seconds to wait for a connection.
    """

    def __init__(
        self,
        endpoint_url: str,
        region: str,
        credentials: Any,
        proxy_url: str | None = None,
        read_timeout: float = 30,
        connect_timeout: float = 10,
    ) -> None:
        from awscrt import io as crt_io

        parts = urlsplit(endpoint_url)
        self.endpoint_url = endpoint_url
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.read_timeout = read_timeout
        self._credentials = credentials
        self.region = region
        self._provider: tuple[tuple[str, str, str | None], Any] | None = None
        self._socket = crt_io.SocketOptions()
        self._socket.connect_timeout_ms = int(connect_timeout * 1000)
        self._socket.keep_alive = True
        self._tls_context: Any = None
        self._tls = self._tls_options(self.host) if self.tls else None
        self._proxy = self._proxy_options(proxy_url) if proxy_url else None
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    def call(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One SQS call, its reply parsed: ``call("ReceiveMessage", {"QueueUrl": …})``. No retries here.

        A pooled connection the server has closed meanwhile is replaced once, silently.
        """
        from awscrt import auth, http

        body = orjson.dumps(payload)
        headers = http.HttpHeaders(
            [
                ("Host", self.host_header),
                ("Content-Type", JSON_10),
                ("X-Amz-Target", f"AmazonSQS.{action}"),
                ("Content-Length", str(len(body))),
            ]
        )
        request = http.HttpRequest("POST", "/", headers, io.BytesIO(body))
        config = auth.AwsSigningConfig(
            region=self.region,
            service="sqs",
            credentials_provider=self._credentials_provider(),
            signed_body_value=hashlib.sha256(body).hexdigest(),
        )
        auth.aws_sign_request(request, config).result()
        for fresh in (False, True):
            conn = self._connection(action, fresh)
            try:
                status, reply_headers, data = self._exchange(conn, request, body, action)
            except _Stale:
                continue
            self._release(conn)
            if status >= 300:
                raise _client_error(action, status, reply_headers, data)
            return orjson.loads(data) if data else {}
        raise TransientError(f"SQS {action} at {self.endpoint_url}: the connection closed before a reply")

    def close(self) -> None:
        """Close the pooled connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.http.close()

    def _credentials_provider(self) -> Any:
        """A static awscrt provider of botocore's current credentials, made anew when they change
        (botocore refreshes role and STS credentials before they expire)."""
        from awscrt.auth import AwsCredentialsProvider

        frozen = self._credentials.get_frozen_credentials()
        key = (frozen.access_key, frozen.secret_key, frozen.token)
        cached = self._provider
        if cached is None or cached[0] != key:
            cached = self._provider = (key, AwsCredentialsProvider.new_static(*key))
        return cached[1]

    def _tls_options(self, server_name: str) -> Any:
        """TLS to ``server_name`` (the endpoint, or an ``https://`` proxy), trusting ``AWS_CA_BUNDLE``
        when set, as boto3 does, else the system's store."""
        import os

        from awscrt import io as crt_io

        if self._tls_context is None:
            options = crt_io.TlsContextOptions()
            bundle = os.environ.get("AWS_CA_BUNDLE")
            if bundle:
                options.override_default_trust_store_from_path(ca_filepath=bundle)
            self._tls_context = crt_io.ClientTlsContext(options)
        connection = self._tls_context.new_connection_options()
        connection.set_server_name(server_name)
        return connection

    def _proxy_options(self, proxy_url: str) -> Any:
        """awscrt's proxy options for ``http(s)://[user:password@]host:port`` (Basic auth when
        userinfo is given): TLS to the proxy itself for ``https://``; an HTTPS endpoint is reached
        through a CONNECT tunnel (TLS end to end, the proxy sees only the host and port), an HTTP
        one by forwarding (absolute-form requests)."""
        from awscrt import http

        parts = urlsplit(proxy_url)
        secure = parts.scheme.lower() == "https"
        kwargs: dict[str, Any] = {
            "tls_connection_options": self._tls_options(parts.hostname or "") if secure else None,
            "connection_type": (
                http.HttpProxyConnectionType.Tunneling
                if self.tls
                else http.HttpProxyConnectionType.Forwarding
            ),
        }
        if parts.username is not None:
            kwargs["auth_type"] = http.HttpProxyAuthenticationType.Basic
            kwargs["auth_username"] = unquote(parts.username)
            kwargs["auth_password"] = unquote(parts.password or "")
        return http.HttpProxyOptions(parts.hostname or "", parts.port or (443 if secure else 80), **kwargs)

    def _connection(self, action: str, fresh: bool) -> _Conn:
        from awscrt import http

        if not fresh:
            with self._lock:
                while self._idle:
                    conn = self._idle.pop()
                    if conn.http.is_open():
                        return _Conn(conn.http, reused=True)
        pending = http.HttpClientConnection.new(
            host_name=self.host,
            port=self.port,
            socket_options=self._socket,
            tls_connection_options=self._tls,
            proxy_options=self._proxy,
        )
        wait = self._socket.connect_timeout_ms / 1000 + 1
        try:
            connected = pending.result(timeout=wait)
        except Exception as err:
            where = f"SQS {action}: cannot connect to {self.endpoint_url}"
            if self._proxy is not None:
                where += f" through the proxy {self._proxy.host_name}:{self._proxy.port}"
            why = f"no connection in {wait:g} s" if isinstance(err, FutureTimeout) else str(err)
            raise TransientError(redact(f"{where}: {why}")) from err
        return _Conn(connected, reused=False)

    def _exchange(self, conn: _Conn, request: Any, body: bytes, action: str) -> tuple[int, list, bytes]:
        reply: dict[str, Any] = {"status": 0, "headers": [], "chunks": []}

        def on_response(http_stream: Any, status_code: int, headers: list, **_: Any) -> None:
            keep_thread_state()  # the event-loop thread's first callback of the request
            reply["status"], reply["headers"] = status_code, headers

        def on_body(http_stream: Any, chunk: bytes, **_: Any) -> None:
            reply["chunks"].append(chunk)

        request.body_stream = io.BytesIO(body)
        try:
            stream = conn.http.request(request, on_response=on_response, on_body=on_body)
            stream.activate()
            stream.completion_future.result(timeout=self.read_timeout)
        except FutureTimeout:
            conn.http.close()
            raise TransientError(
                f"SQS {action} at {self.endpoint_url}: no reply in {self.read_timeout:g} s"
            ) from None
        except Exception as err:
            conn.http.close()
            if conn.reused and not reply["status"]:
                raise _Stale() from err
            raise TransientError(redact(f"SQS {action} at {self.endpoint_url}: {err}")) from err
        return reply["status"], reply["headers"], b"".join(reply["chunks"])

    def _release(self, conn: _Conn) -> None:
        if conn.http.is_open():
            with self._lock:
                self._idle.append(conn)


class _Conn:
    __slots__ = ("http", "reused")

    def __init__(self, http: Any, reused: bool) -> None:
        self.http, self.reused = http, reused


class _Stale(Exception):
    """A pooled connection failed before any reply: the server had closed it."""


def _client_error(action: str, status: int, headers: list, data: bytes) -> Exception:
    """botocore's ``ClientError`` for an error reply, its fields as botocore's JSON parser sets them.

    SQS is query-compatible: the ``x-amzn-query-error`` header (``Code;Sender``) gives the
    code the query protocol used, which botocore reports as the error code. A body that is
    not JSON (an XML error from a proxy or an IAM layer) becomes the message, the code left empty.
    """
    from botocore.exceptions import ClientError

    error: dict[str, Any] = {"Code": "", "Message": ""}
    try:
        parsed = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        error["Code"] = str(parsed.get("__type", parsed.get("code", ""))).rsplit("#", 1)[-1]
        error["Message"] = str(parsed.get("message", parsed.get("Message", "")))
    else:
        error["Message"] = data.decode("utf-8", "replace")
    query = next((v for k, v in headers if k.lower() == "x-amzn-query-error"), "")
    if query:
        error["QueryErrorCode"] = error["Code"]
        error["Code"], _, fault = query.partition(";")
        error["Type"] = fault
    response = {"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, action)
