"""The two RocketMQ producers behind one small interface: the native remoting client (4.x) and gRPC (5.x)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from ingest.connector import CallRefused
from ingest.errors import FatalError, IngestError, TransientError, redact
from sinks.rocketmq.config import RocketMqSinkConfig
from sinks.rocketmq.probe import Diagnosis, credentials, probe_grpc, probe_remoting

log = logging.getLogger(__name__)
_home_lock = threading.Lock()
_logs_placed: set[str] = set()
_NATIVE_LOG_WARN = 3
"""librocketmq's log level WARN (FATAL 1 … TRACE 6); it logs every send at INFO."""
_REFUSED_MESSAGE_CODES = frozenset({
    "ILLEGAL_MESSAGE_TAG", "ILLEGAL_MESSAGE_KEY", "ILLEGAL_MESSAGE_GROUP", "ILLEGAL_MESSAGE_PROPERTY_KEY",
    "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", "MESSAGE_CORRUPTED", "MESSAGE_BODY_TOO_LARGE",
    "MESSAGE_BODY_EMPTY", "MESSAGE_PROPERTIES_TOO_LARGE", "PAYLOAD_TOO_LARGE",
})  # fmt: skip
"""gRPC status codes that refuse one message, not the whole batch."""


@dataclass(frozen=True)
class OutMessage:
    """One message to send: body, keys (the source message id by default), sharding key, user properties."""

    body: bytes
    keys: str | None = None
    sharding_key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    source_id: str | None = None


class Transport(Protocol):
    """A producer: ``start`` once, ``send`` from several threads, ``shutdown`` once."""

    def start(self) -> None: ...

    def send(self, msg: OutMessage) -> str: ...

    def classify(self, err: BaseException) -> IngestError: ...

    def shutdown(self) -> None: ...


def make_transport(cfg: RocketMqSinkConfig) -> Transport:
    """The producer ``cfg.transport`` names; nothing connects before ``start``."""
    return GrpcTransport(cfg) if cfg.transport == "grpc" else RemotingTransport(cfg)


@contextlib.contextmanager
def client_logs(log_dir: str | None, client: str):
    """``$HOME`` is ``log_dir`` while ``client`` ("native" or "grpc") first sets up its log file here.

    Both clients put their log files under ``$HOME/logs/`` (librocketmq ignores its log-path
    setting; the 5.x client configures logging when ``rocketmq`` is first imported, and the
    5.x package's ``__init__`` imports it even for ``rocketmq.client``), so that is the only
    way to move them. A client already set up elsewhere in the process keeps its place.
    """
    with _home_lock:
        done = client in _logs_placed or (client == "grpc" and "rocketmq.v5.log" in sys.modules)
        if not log_dir or done:
            yield
            return
        os.makedirs(log_dir, exist_ok=True)
        home = os.environ.get("HOME")
        os.environ["HOME"] = log_dir
        try:
            yield
            _logs_placed.add(client)
        finally:
            if home is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = home


def _verdict(what: str, diagnosis: Diagnosis | None) -> IngestError:
    """The error for a failed call, with the cluster's own reason when a probe found one."""
    if diagnosis is None:
        return TransientError(redact(what))
    return (FatalError if diagnosis.fatal else TransientError)(redact(f"{diagnosis.reason}; {what}"))


class RemotingTransport:
    """``rocketmq-client-python`` (librocketmq, the remoting protocol of RocketMQ 4 and Aliyun TCP endpoints).

    With ``instanceID`` the topic and group carry the instance namespace (``instanceID%topic``),
    as Alibaba Cloud's clients send them. The native client swallows the broker's reason when a
    send fails ("No route info of this topic"), so :meth:`classify` asks the name server and
    broker itself, with a signed route query and heartbeat, to tell refused credentials and
    missing topics (fatal) from an unreachable or busy cluster (transient).
    """

    def __init__(self, cfg: RocketMqSinkConfig) -> None:
        self.cfg = cfg
        ns = f"{cfg.instance_id}%" if cfg.instance_id else ""
        self.topic, self.group = ns + cfg.topic, ns + cfg.producer_group
        self.producer: Any = None

    def start(self) -> None:
        with client_logs(self.cfg.client_log_dir, "native"):
            from rocketmq.client import Producer
            from rocketmq.ffi import dll

            producer = Producer(
                self.group,
                orderly=bool(self.cfg.sharding_key_column),
                # Below the outer deadline, so the client's own timeout (and message) usually wins.
                timeout=max(100, int(self.cfg.send_timeout * 800)),
                max_message_size=self.cfg.max_message_size,
            )
            dll.SetProducerLogLevel(producer._handle, _NATIVE_LOG_WARN)
        # One client instance per producer: producers of one group in one process would clash.
        dll.SetProducerInstanceName(
            producer._handle, f"mq-ingest-{os.getpid()}-{uuid.uuid4().hex[:8]}".encode()
        )
        producer.set_namesrv_addr(self.cfg.endpoint)
        creds = credentials(self.cfg)
        if creds:
            producer.set_session_credentials(*creds, "ALIYUN")
        producer.start()
        self.producer = producer

    def send(self, msg: OutMessage) -> str:
        from rocketmq.client import Message
        from rocketmq.ffi import dll

        m = Message(self.topic)
        try:
            if msg.keys:
                m.set_keys(msg.keys)
            if self.cfg.tag:
                m.set_tags(self.cfg.tag)
            for k, v in msg.properties.items():
                m.set_property(k, v)
            # set_body stops at the first NUL byte; binary bodies need the length-aware call.
            dll.SetByteMessageBody(m._handle, msg.body, len(msg.body))
            if msg.sharding_key is not None:
                result = self.producer.send_orderly_with_sharding_key(m, msg.sharding_key)
            else:
                result = self.producer.send_sync(m)
        finally:
            m.destroy()
        return result.msg_id

    def classify(self, err: BaseException) -> IngestError:
        """Fatal for refused credentials or a missing topic (asked of the cluster), else transient."""
        what = f"send to RocketMQ topic {self.topic} via {self.cfg.endpoint} failed: {err}"
        return _verdict(what, probe_remoting(self.cfg, self.topic, self.group))

    def shutdown(self) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            # Not destroy(): freeing a shut-down producer crashes librocketmq (of the 0.5.0rc2 wheel).
            producer.shutdown()


class GrpcTransport:
    """``rocketmq-python-client`` 5.x (gRPC to a RocketMQ 5 proxy); ``instanceID`` is the namespace.

    The producer group has no meaning in RocketMQ 5 and is not sent. Sharding keys become FIFO
    message groups.
    """

    def __init__(self, cfg: RocketMqSinkConfig) -> None:
        self.cfg = cfg
        self.producer: Any = None

    def configuration(self):
        from rocketmq.v5.client import ClientConfiguration, Credentials

        ak, sk = credentials(self.cfg) or ("", "")
        # request_timeout goes into a protobuf seconds field: whole seconds, under the outer deadline.
        timeout = max(1, int(self.cfg.send_timeout * 0.8))
        return ClientConfiguration(
            self.cfg.endpoint, Credentials(ak, sk), self.cfg.instance_id or "", timeout
        )

    def start(self) -> None:
        with client_logs(self.cfg.client_log_dir, "grpc"):
            from rocketmq.v5.producer import Producer
        producer = Producer(self.configuration(), [self.cfg.topic])
        producer.startup()
        self.producer = producer

    def send(self, msg: OutMessage) -> str:
        from rocketmq.v5.model import Message

        m = Message()
        m.topic, m.body = self.cfg.topic, msg.body
        if self.cfg.tag:
            m.tag = self.cfg.tag
        if msg.keys:
            m.keys = msg.keys
        if msg.sharding_key:
            m.message_group = msg.sharding_key
        for k, v in msg.properties.items():
            m.add_property(k, v)
        return self.producer.send(m).message_id

    def classify(self, err: BaseException) -> IngestError:
        """Fatal: bad credentials, missing topic, bad settings; CallRefused: this message; else transient."""
        from rocketmq.grpc_protocol import Code
        from rocketmq.v5.exception import (
            BadRequestException,
            ClientException,
            ForbiddenException,
            IllegalArgumentException,
            NotFoundException,
            UnauthorizedException,
        )

        what = f"send to RocketMQ topic {self.cfg.topic} via {self.cfg.endpoint} failed: {err}"
        code = Code.Name(err.code) if isinstance(err, ClientException) and err.code in Code.values() else ""
        if isinstance(err, (UnauthorizedException, ForbiddenException)):
            return FatalError(
                redact(f"the proxy refused the credentials of accessId {self.cfg.access_id!r}; {what}")
            )
        if isinstance(err, NotFoundException):
            return FatalError(redact(what))
        if code in _REFUSED_MESSAGE_CODES or isinstance(err, IllegalArgumentException):
            return CallRefused(redact(str(err)))
        if isinstance(err, BadRequestException):
            return FatalError(redact(what))
        if not isinstance(err, ClientException) and "route" in str(err):
            return _verdict(what, probe_grpc(self.cfg, self.configuration()))
        return TransientError(redact(what))

    def shutdown(self) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            producer.shutdown()
