"""Helpers for RocketMQ sink tests: the emulator of each transport, a silent listener, sink configs."""

from __future__ import annotations

import importlib.metadata
import socket
import threading
from pathlib import Path
from typing import Any

from sinks.rocketmq.config import RocketMqSinkConfig
from sinks.rocketmq.transports import client_logs

AK_ID = "LTAI-test-ak"
AK_SECRET = "rmq-secret-7d41c0aa"
TOPIC = "orders"
GROUP = "GID_ingest"


def installed(transport: str) -> bool:
    """Whether the client of ``transport`` is installed (without importing it: that sets up its logs)."""
    dist, need = ("rocketmq-python-client", "rocketmq/v5/producer/producer.py")
    if transport == "remoting":
        dist, need = ("rocketmq-client-python", "rocketmq/librocketmq.so")  # the bundled native library
    try:
        files = importlib.metadata.distribution(dist).files or []
    except importlib.metadata.PackageNotFoundError:
        return False
    return any(str(f) == need and Path(str(f.locate())).exists() for f in files)


def emulator(transport: str, log_dir: str, **options: Any):
    """A started emulator for ``transport`` (remoting name server + broker, or the gRPC proxy fake)."""
    if transport == "grpc":
        from tests.emulators.rocketmq_grpc import GrpcProxyEmulator

        with client_logs(log_dir, "grpc"):  # it loads the 5.x client's package, which sets up its logs
            return GrpcProxyEmulator(**options).start()
    from tests.emulators.rocketmq_remoting import RemotingEmulator

    return RemotingEmulator(**options).start()


def sink_cfg(transport: str, endpoint: str, log_dir: str, **options: Any) -> RocketMqSinkConfig:
    """A sink config with the reference option names, signed with the test credentials."""
    base = {
        "type": "rocketmq",
        "name": "mq",
        "topic": TOPIC,
        "endpoint": endpoint,
        "accessId": AK_ID,
        "accessKey": AK_SECRET,
        "producerGroup": GROUP,
        "retryTimes": 2,
        "sleepTimeMs": 50,
        "transport": transport,
        "send_timeout": "5s",
        "client_log_dir": log_dir,
    }
    return RocketMqSinkConfig.model_validate(base | options)


def messages(server: Any) -> list[Any]:
    with server.lock:
        return list(server.messages)


class SilentListener:
    """Accepts connections and reads, never answers: a hung name server or proxy."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self.closing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._swallow, args=(conn,), daemon=True).start()

    @staticmethod
    def _swallow(conn: socket.socket) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            return

    def __enter__(self) -> SilentListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.sock.close()
        for conn in self.conns:
            conn.close()
