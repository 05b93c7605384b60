"""A RocketMQ 4 name server and broker on one port, over the remoting protocol, for tests and local runs.

The real native client (``rocketmq-client-python``) talks to it as to a cluster: it asks the
name server for the topic route (GET_ROUTEINFO_BY_TOPIC), which names this same address as
the only broker, then sends (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE), heartbeats
and unregisters. Every stored message is kept in :attr:`RemotingEmulator.messages`.

It can refuse: with ``credentials`` every request must carry an ACL signature made with a
known AccessKey and its secret (else NO_PERMISSION); ``topics`` limits the topics that exist
(else TOPIC_NOT_EXIST); :meth:`RemotingEmulator.fail_next` answers the next sends with a
broker error such as SYSTEM_BUSY. Run it alone, from the checkout's root, with
``python -m tests.emulators.rocketmq_remoting --port 0``.
"""

from __future__ import annotations

import argparse
import base64
import collections
import socket
import socketserver
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field

import orjson

from sinks.rocketmq import wire

SYSTEM_PROPERTIES = frozenset({
    "KEYS", "TAGS", "WAIT", "DELAY", "UNIQ_KEY", "MIN_OFFSET", "MAX_OFFSET", "TRAN_MSG", "PGROUP",
    "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
    "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME", "SHARDING_KEY", "__SHARDINGKEY",
})  # fmt: skip
"""Property names the client and broker use themselves; the rest are user properties."""


@dataclass
class StoredMessage:
    """One message as the broker stored it."""

    topic: str
    queue_id: int
    offset: int
    tags: str | None
    keys: list[str]
    properties: dict[str, str]
    body: bytes
    producer_group: str
    code: int
    received_at: float = field(default_factory=time.time)

    @property
    def user_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties.items() if k not in SYSTEM_PROPERTIES}


class RemotingEmulator:
    """Name server + broker on ``host:port`` (port 0: any free port); a context manager."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        queues: int = 4,
        credentials: dict[str, str] | None = None,
        topics: set[str] | None = None,
        broker_name: str = "broker-a",
    ) -> None:
        self.queues = queues
        self.credentials = credentials
        self.topics = topics
        self.broker_name = broker_name
        self.messages: list[StoredMessage] = []
        self.requests: collections.Counter[int] = collections.Counter()
        self.refused: list[tuple[int, int, str]] = []
        """(request code, response code, remark) of every request answered with an error."""
        self.clients: dict[str, set[str]] = {}
        """Client id → producer groups, from heartbeats; unregistered clients are removed."""
        self.lock = threading.Lock()
        self._failures: collections.deque[tuple[int, str]] = collections.deque()
        self._offsets: collections.Counter[tuple[str, int]] = collections.Counter()
        self._server = _Server((host, port), _Handler)
        self._server.emulator = self
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> RemotingEmulator:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="rocketmq-emulator", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> RemotingEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(
        self, n: int, code: int = wire.SYSTEM_BUSY, remark: str = "[TIMEOUT_CLEAN_QUEUE]broker busy"
    ) -> None:
        """Answer the next ``n`` send requests with ``code`` instead of storing them."""
        with self.lock:
            self._failures.extend([(code, remark)] * n)

    def bodies(self, topic: str | None = None) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.messages if topic is None or m.topic == topic]

    # -- request handling (connection threads) --

    def handle(self, header: dict, body: bytes) -> tuple[int, str, dict[str, str], bytes]:
        """Answer one request: (code, remark, extFields, body)."""
        code = int(header.get("code", -1))
        ext = {k: str(v) for k, v in (header.get("extFields") or {}).items()}
        with self.lock:
            self.requests[code] += 1
        refusal = self._check_signature(ext, body)
        if refusal:
            return wire.NO_PERMISSION, refusal, {}, b""
        if code == wire.GET_ROUTEINFO_BY_TOPIC:
            return self._route(ext.get("topic", ""))
        if code in (wire.SEND_MESSAGE, wire.SEND_MESSAGE_V2, wire.SEND_BATCH_MESSAGE):
            if code == wire.SEND_MESSAGE_V2:
                ext = {wire.SEND_V2_FIELDS.get(k, k): v for k, v in ext.items()}
            return self._send(code, ext, body)
        if code == wire.HEART_BEAT:
            beat = orjson.loads(body) if body else {}
            groups = {p.get("groupName", "") for p in beat.get("producerDataSet") or []}
            with self.lock:
                self.clients[beat.get("clientID", "")] = groups
            return wire.SUCCESS, "", {}, b""
        if code == wire.UNREGISTER_CLIENT:
            with self.lock:
                self.clients.pop(ext.get("clientID", ""), None)
            return wire.SUCCESS, "", {}, b""
        remark = f"request code {code} is not supported by the emulator"
        return wire.REQUEST_CODE_NOT_SUPPORTED, remark, {}, b""

    def _check_signature(self, ext: dict[str, str], body: bytes) -> str | None:
        if self.credentials is None:
            return None
        access_key = ext.get("AccessKey", "")
        secret = self.credentials.get(access_key)
        if secret is None:
            return f"AccessKey {access_key!r} is not known"
        if ext.get("Signature") != wire.signature(ext, body, secret):
            return f"Check signature failed for AccessKey {access_key!r}"
        return None

    def _route(self, topic: str) -> tuple[int, str, dict[str, str], bytes]:
        if self.topics is not None and topic not in self.topics:
            return wire.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}", {}, b""
        n = self.queues
        route = {
            "orderTopicConf": "",
            "queueDatas": [
                {
                    "brokerName": self.broker_name,
                    "readQueueNums": n,
                    "writeQueueNums": n,
                    "perm": 6,
                    "topicSynFlag": 0,
                }
            ],
            "brokerDatas": [
                {"cluster": "emulator", "brokerName": self.broker_name, "brokerAddrs": {"0": self.address}}
            ],
            "filterServerTable": {},
        }
        return wire.SUCCESS, "", {}, orjson.dumps(route)

    def _send(self, code: int, ext: dict[str, str], body: bytes) -> tuple[int, str, dict[str, str], bytes]:
        topic, queue_id = ext.get("topic", ""), int(ext.get("queueId", "0"))
        if self.topics is not None and topic not in self.topics:
            return wire.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!", {}, b""
        with self.lock:
            if self._failures:
                failed, remark = self._failures.popleft()
                return failed, remark, {}, b""
        if code == wire.SEND_BATCH_MESSAGE:
            parts = wire.decode_batch(body)
        else:
            flag, sys_flag = int(ext.get("flag", "0")), int(ext.get("sysFlag", "0"))
            payload = zlib.decompress(body) if sys_flag & wire.COMPRESSED_FLAG else body
            parts = [(flag, payload, wire.unpack_properties(ext.get("properties", "")))]
        group, ids, first = ext.get("producerGroup", ""), [], self._offsets[(topic, queue_id)]
        with self.lock:
            for _flag, payload, props in parts:
                offset = self._offsets[(topic, queue_id)]
                self._offsets[(topic, queue_id)] += 1
                keys = [k for k in props.get("KEYS", "").split(" ") if k]
                stored = StoredMessage(
                    topic, queue_id, offset, props.get("TAGS"), keys, props, payload, group, code
                )
                self.messages.append(stored)
                ids.append(f"7F000001{self._server.server_address[1]:08X}{len(self.messages):016X}")
        return (
            wire.SUCCESS,
            "",
            {"msgId": ",".join(ids), "queueId": str(queue_id), "queueOffset": str(first)},
            b"",
        )


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    emulator: RemotingEmulator


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        emulator: RemotingEmulator = self.server.emulator  # type: ignore[attr-defined]
        while True:
            try:
                got = wire.read_frame(self.rfile)  # type: ignore[arg-type]  # a binary stream
            except (OSError, wire.WireError):
                return
            if got is None:
                return
            header, body = got
            code, remark, ext, out = emulator.handle(header, body)
            if code != wire.SUCCESS:
                with emulator.lock:
                    emulator.refused.append((int(header.get("code", -1)), code, remark))
            if int(header.get("flag", 0)) & 2:  # one-way: no answer
                continue
            response = {
                "code": code,
                "language": "JAVA",
                "version": 0,
                "opaque": header.get("opaque", 0),
                "flag": wire.RESPONSE_FLAG,
                "remark": remark,
                "extFields": ext,
                "serializeTypeCurrentRPC": "JSON",
            }
            try:
                self.wfile.write(wire.encode_frame(response, out))
            except OSError:
                return


def main(argv: list[str] | None = None) -> None:
    """Run the emulator in the foreground; print its address, then one JSON line per stored message."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9876)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--access-key", help="require requests signed with this AccessKey...")
    parser.add_argument("--secret-key", help="...and this secret")
    parser.add_argument("--topic", action="append", help="topics that exist (default: any)")
    args = parser.parse_args(argv)
    creds = {args.access_key: args.secret_key} if args.access_key else None
    emulator = RemotingEmulator(
        args.host,
        args.port,
        queues=args.queues,
        credentials=creds,
        topics=set(args.topic) if args.topic else None,
    ).start()
    print(f"RocketMQ remoting emulator listening on {emulator.address}", flush=True)
    seen = 0
    try:
        while True:
            time.sleep(0.2)
            with emulator.lock:
                new = emulator.messages[seen:]
            seen += len(new)
            for m in new:
                line = {"topic": m.topic, "queue": m.queue_id, "tags": m.tags, "keys": m.keys}
                line["properties"] = m.user_properties
                line["body"] = base64.b64encode(m.body).decode()
                sys.stdout.write(orjson.dumps(line).decode() + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        emulator.stop()


if __name__ == "__main__":
    main()
