"""Delivery channels: a JSON-lines file, any project sink (via a one-column DataFrame), an SLS Logstore.

A channel sends one batch of messages per ``send(messages, batch_id)`` and raises
``TransientError`` (worth another try) or ``FatalError``; the sender thread in
``ingest.ops.job_events.delivery`` owns retries (``call_with_retries``) and the counters. ``batch_id`` is
the same for every try of a batch, so a sink keyed on it replaces its own output.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ingest.config.job_events import DeliveryTarget, FileTarget, SinkTarget, SlsTarget
from ingest.errors import FatalError, IngestError, TransientError, redact
from ingest.ops.job_events.messages import to_contents, to_json
from ingest.runtime.frames import string_frame


class Channel(Protocol):
    """Where delivered messages go."""

    name: str

    def ready(self) -> bool:
        """False while the channel cannot send yet (messages wait, nothing is counted)."""
        ...

    def send(self, messages: list[dict[str, Any]], batch_id: int) -> None: ...

    def close(self) -> None: ...


class FileChannel:
    """Appends one JSON line per message to ``path`` and fsyncs once per batch.

    A failed write is cut back to where the batch began, so a retried batch is not doubled.
    """

    def __init__(self, target: FileTarget, name: str) -> None:
        self.name = name
        self.path = Path(target.path)
        self._fh: Any = None

    def ready(self) -> bool:
        return True

    def send(self, messages: list[dict[str, Any]], batch_id: int) -> None:
        data = b"".join(to_json(m) + b"\n" for m in messages)
        start = None
        try:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open across batches
            start = self._fh.seek(0, os.SEEK_END)
            self._fh.write(data)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as err:
            self.close()
            if start is not None:
                with open(self.path, "r+b") as fh:
                    fh.truncate(start)
            raise TransientError(f"delivery file {self.path}: {err.strerror or err}") from None

    def close(self) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            fh.close()


class SinkChannel:
    """Writes each batch through a project sink as a DataFrame with one column, ``body``.

    The DataFrame is made on the job's SparkSession (``spark_provider``); until it exists the
    channel is not ready and messages wait in its queue.
    """

    def __init__(self, target: SinkTarget, name: str, spark_provider: Callable[[], Any]) -> None:
        from ingest.config.registry import build_sink

        self.name = name
        self.sink = build_sink(target.sink)
        self.spark_provider = spark_provider

    def ready(self) -> bool:
        try:
            return self.spark_provider() is not None
        except Exception:
            return False

    def send(self, messages: list[dict[str, Any]], batch_id: int) -> None:
        spark = self.spark_provider()
        if spark is None:
            raise TransientError(f"delivery {self.name}: no SparkSession")
        rows = [(to_json(m).decode(),) for m in messages]
        try:
            spark.sparkContext.setLocalProperty("spark.job.description", f"mq-ingest delivery {self.name}")
            df = string_frame(spark, ["body"], rows).coalesce(1)
            self.sink.write(df, batch_id)
        except IngestError:
            raise
        except Exception as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise TransientError(f"delivery {self.name}: {redact(first)}") from None

    def close(self) -> None:
        self.sink.close()


_RETRYABLE_SLS = {
    "InternalServerError",
    "RequestTimeout",
    "LogRequestError",
    "ServerBusy",
    "WriteQuotaExceed",
    "ShardWriteQuotaExceed",
    "ExceedQuota",
}


@functools.cache
def _one_try_client() -> type:
    """The SDK's LogClient, with each request tried once: retries live in ``call_with_retries``.

    ``LogClient._send`` retries 5xx and connection errors ten times, a second apart; raising
    our own errors from ``_sendRequest`` (which ``_send`` does not catch) skips that loop.
    """
    from aliyun.log import LogClient, LogException

    class OneTryLogClient(LogClient):
        def _sendRequest(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super()._sendRequest(*args, **kwargs)  # type: ignore[misc]  # untyped SDK
            except LogException as err:
                code, status = err.get_error_code(), err.get_resp_status() or 0
                text = redact(f"SLS {code} (HTTP {status}): {err.get_error_message()}")
                if code in _RETRYABLE_SLS or status >= 500 or status == 429:
                    raise TransientError(text) from None
                raise FatalError(text) from None

    return OneTryLogClient


def _default_chain() -> Any:
    """An SDK credentials provider over Alibaba Cloud's default credential chain
    (``alibabacloud-credentials``): asked on every request, so a refreshed STS token is used."""
    from alibabacloud_credentials.client import Client
    from aliyun.log.credentials import Credentials, CredentialsProvider

    chain = Client()

    class DefaultChain(CredentialsProvider):
        def get_credentials(self) -> Any:
            try:
                got = chain.get_credential()
            except Exception as err:  # the library raises its own CredentialException, or OSError
                raise FatalError(
                    redact(f"no credentials from Alibaba Cloud's default chain: {err}")
                ) from None
            return Credentials(got.access_key_id, got.access_key_secret, got.security_token)

    return DefaultChain()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


class SlsChannel:
    """PutLogs to an SLS Logstore: each message one log, its fields the log's contents.

    The log time is the message's ``timestamp`` (seconds, nanosecond part kept); the
    LogGroup's topic and source come from the target.
    """

    def __init__(self, target: SlsTarget, name: str) -> None:
        self.name = name
        self.target = target
        self.endpoint = target.endpoint or f"https://{target.region}.log.aliyuncs.com"
        self.source = target.source or socket.gethostname()
        self._client: Any = None

    def ready(self) -> bool:
        return True

    def _make_client(self) -> Any:
        t = self.target
        if t.access_key_id is None or t.access_key_secret is None:  # sts_token: the default chain
            keys: dict[str, Any] = {"credentials_provider": _default_chain()}
        else:
            keys = {
                "accessKeyId": t.access_key_id,
                "accessKey": t.access_key_secret.get_secret_value(),
                "securityToken": t.security_token.get_secret_value() if t.security_token else None,
            }
        client = _one_try_client()(
            self.endpoint, source=self.source, auth_version=t.auth_version, region=t.region or "", **keys
        )
        client.timeout = t.timeout
        host = urlsplit(self.endpoint if "://" in self.endpoint else f"//{self.endpoint}").hostname or ""
        if _is_ip(host):
            # The SDK recognises only a bare IPv4 endpoint without port as an address; anything
            # else gets the project prepended as a DNS label, which an IP cannot take.
            client._isRowIp = True
        return client

    def send(self, messages: list[dict[str, Any]], batch_id: int) -> None:
        from aliyun.log import LogItem, PutLogsRequest

        if self._client is None:
            self._client = self._make_client()
        items = []
        for m in messages:
            ms = int(m["timestamp"])
            items.append(LogItem(ms // 1000, to_contents(m), (ms % 1000) * 1_000_000))
        request = PutLogsRequest(
            self.target.project,
            self.target.logstore,
            self.target.topic,
            self.source,
            items,
            compress=self.target.compress != "none",
            compress_type="lz4" if self.target.compress == "lz4" else None,
        )
        try:
            self._client.put_logs(request)
        except IngestError:
            raise
        except Exception as err:
            raise TransientError(redact(f"SLS {self.target.project}/{self.target.logstore}: {err}")) from None

    def close(self) -> None:
        client, self._client = self._client, None
        session = getattr(client, "_session", None)
        if session is not None:
            session.close()


def build_channel(target: DeliveryTarget, name: str, spark_provider: Callable[[], Any]) -> Channel:
    """The channel a target describes; network clients are made on first send."""
    if isinstance(target, FileTarget):
        return FileChannel(target, name)
    if isinstance(target, SinkTarget):
        return SinkChannel(target, name, spark_provider)
    return SlsChannel(target, name)
