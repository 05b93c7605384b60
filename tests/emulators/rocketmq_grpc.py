"""A fake RocketMQ 5 proxy over gRPC (on rocketmq-python-client's servicer), for tests and local runs.

It answers what a producer of ``rocketmq-python-client`` 5.x needs: QueryRoute (READ_WRITE
queues on this same endpoint, accepting normal, FIFO, delay and transaction messages),
Heartbeat, the Telemetry settings handshake, SendMessage (one result entry per message) and
NotifyClientTermination. Every stored message is kept in :attr:`GrpcProxyEmulator.messages`.

It can refuse: with ``credentials`` every call must carry the ``MQv2-HMAC-SHA1`` authorization
of a known AccessKey (else UNAUTHORIZED); ``topics`` limits the topics that exist (else
TOPIC_NOT_FOUND); :meth:`GrpcProxyEmulator.fail_next` answers the next sends with an error code
such as TOO_MANY_REQUESTS. Run it alone, from the checkout's root, with
``python -m tests.emulators.rocketmq_grpc --port 0``.
"""

from __future__ import annotations

import argparse
import base64
import collections
import hashlib
import hmac
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson

_AUTH = re.compile(r"Credential=([^,\s]*),.*Signature=([0-9a-fA-F]*)")


@dataclass
class ProxyMessage:
    """One message as the proxy stored it."""

    topic: str
    namespace: str
    queue_id: int
    offset: int
    tag: str | None
    keys: list[str]
    message_group: str | None
    properties: dict[str, str]
    body: bytes
    message_id: str
    message_type: int
    received_at: float = field(default_factory=time.time)


class GrpcProxyEmulator:
    """The fake proxy on ``host:port`` (port 0: any free port); a context manager."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        queues: int = 4,
        credentials: dict[str, str] | None = None,
        topics: set[str] | None = None,
        workers: int = 32,
    ) -> None:
        import grpc
        from rocketmq.grpc_protocol import service_pb2_grpc

        self.host, self.queues, self.credentials, self.topics = host, queues, credentials, topics
        self.messages: list[ProxyMessage] = []
        self.calls: collections.Counter[str] = collections.Counter()
        self.refused: list[tuple[str, int, str]] = []
        """(method, status code, message) of every call answered with an error status."""
        self.lock = threading.Lock()
        self._failures: collections.deque[tuple[int, str]] = collections.deque()
        self._offsets: collections.Counter[tuple[str, int]] = collections.Counter()
        # A Telemetry stream holds a worker for the producer's whole life: size the pool for that.
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rocketmq-proxy")
        )
        service_pb2_grpc.add_MessagingServiceServicer_to_server(_servicer(self), self._server)
        self.port = self._server.add_insecure_port(f"{host}:{port}")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> GrpcProxyEmulator:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=None)

    def __enter__(self) -> GrpcProxyEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(
        self, n: int, code: int | None = None, message: str = "too many requests, try later"
    ) -> None:
        """Answer the next ``n`` SendMessage calls with status ``code`` (default TOO_MANY_REQUESTS)."""
        from rocketmq.grpc_protocol import Code

        with self.lock:
            self._failures.extend([(code or Code.TOO_MANY_REQUESTS, message)] * n)

    def bodies(self, topic: str | None = None) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.messages if topic is None or m.topic == topic]

    def check(self, method: str, metadata: tuple) -> tuple[int, str] | None:
        """Count the call; return the (code, message) refusal of a bad signature, else None."""
        from rocketmq.grpc_protocol import Code

        with self.lock:
            self.calls[method] += 1
        if self.credentials is None:
            return None
        meta = {k: v for k, v in metadata}
        m = _AUTH.search(meta.get("authorization", ""))
        secret = self.credentials.get(m.group(1)) if m else None
        if m is None or secret is None:
            return self._refuse(
                method, Code.UNAUTHORIZED, f"AccessKey {m.group(1) if m else ''!r} is not known"
            )
        want = hmac.new(secret.encode(), meta.get("x-mq-date-time", "").encode(), hashlib.sha1).hexdigest()
        if not hmac.compare_digest(want, m.group(2).lower()):
            return self._refuse(
                method, Code.UNAUTHORIZED, f"check signature failed for AccessKey {m.group(1)!r}"
            )
        return None

    def _refuse(self, method: str, code: int, message: str) -> tuple[int, str]:
        with self.lock:
            self.refused.append((method, code, message))
        return code, message

    def store(self, request) -> tuple[int, str, list]:
        """Store a SendMessage request's messages: (code, message, result entries)."""
        from rocketmq.grpc_protocol import Code, service_pb2

        with self.lock:
            if self._failures:
                code, message = self._failures.popleft()
                self.refused.append(("SendMessage", code, message))
                return code, message, []
        entries = []
        for msg in request.messages:
            topic = msg.topic.name
            if self.topics is not None and topic not in self.topics:
                return *self._refuse("SendMessage", Code.TOPIC_NOT_FOUND, f"topic {topic} not found"), []
            sp = msg.system_properties
            queue_id = sp.queue_id
            with self.lock:
                offset = self._offsets[(topic, queue_id)]
                self._offsets[(topic, queue_id)] += 1
                self.messages.append(
                    ProxyMessage(
                        topic, msg.topic.resource_namespace, queue_id, offset,
                        sp.tag if sp.HasField("tag") else None, list(sp.keys),
                        sp.message_group if sp.HasField("message_group") else None,
                        dict(msg.user_properties), bytes(msg.body), sp.message_id, sp.message_type,
                    )
                )  # fmt: skip
            ok = service_pb2.SendResultEntry(message_id=sp.message_id, offset=offset)
            ok.status.code, ok.status.message = Code.OK, "OK"
            entries.append(ok)
        return Code.OK, "OK", entries


def _servicer(emulator: GrpcProxyEmulator):
    """The MessagingService servicer bound to ``emulator``."""
    from rocketmq.grpc_protocol import (
        Code,
        MessageType,
        Permission,
        definition_pb2,
        service_pb2,
        service_pb2_grpc,
    )

    def status(response, code: int = Code.OK, message: str = "OK"):
        response.status.code, response.status.message = code, message
        return response

    class Servicer(service_pb2_grpc.MessagingServiceServicer):
        def QueryRoute(self, request, context):
            refusal = emulator.check("QueryRoute", context.invocation_metadata())
            if refusal:
                return status(service_pb2.QueryRouteResponse(), *refusal)
            topic = request.topic.name
            if emulator.topics is not None and topic not in emulator.topics:
                return status(
                    service_pb2.QueryRouteResponse(), Code.TOPIC_NOT_FOUND, f"topic {topic} not found"
                )
            response = service_pb2.QueryRouteResponse()
            for qid in range(emulator.queues):
                q = response.message_queues.add(id=qid, permission=Permission.READ_WRITE)
                q.topic.CopyFrom(request.topic)
                q.broker.name, q.broker.id = "broker-a", 0
                q.broker.endpoints.scheme = definition_pb2.AddressScheme.IPv4
                q.broker.endpoints.addresses.add(host=emulator.host, port=emulator.port)
                q.accept_message_types.extend(
                    [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION]
                )
            return status(response)

        def Heartbeat(self, request, context):
            return status(
                service_pb2.HeartbeatResponse(),
                *(emulator.check("Heartbeat", context.invocation_metadata()) or ()),
            )

        def Telemetry(self, request_iterator, context):
            emulator.check("Telemetry", context.invocation_metadata())
            for command in request_iterator:
                if command.HasField("settings"):
                    reply = service_pb2.TelemetryCommand()
                    reply.settings.CopyFrom(command.settings)
                    reply.settings.publishing.max_body_size = 4 * 1024 * 1024
                    reply.settings.backoff_policy.max_attempts = 3
                    yield status(reply)

        def SendMessage(self, request, context):
            refusal = emulator.check("SendMessage", context.invocation_metadata())
            if refusal:
                return status(service_pb2.SendMessageResponse(), *refusal)
            code, message, entries = emulator.store(request)
            response = service_pb2.SendMessageResponse()
            response.entries.extend(entries)
            return status(response, code, message)

        def NotifyClientTermination(self, request, context):
            emulator.check("NotifyClientTermination", context.invocation_metadata())
            return status(service_pb2.NotifyClientTerminationResponse())

    return Servicer()


def main(argv: list[str] | None = None) -> None:
    """Run the fake proxy in the foreground; print its address, then one JSON line per stored message."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--access-key", help="require calls signed with this AccessKey...")
    parser.add_argument("--secret-key", help="...and this secret")
    parser.add_argument("--topic", action="append", help="topics that exist (default: any)")
    args = parser.parse_args(argv)
    creds = {args.access_key: args.secret_key} if args.access_key else None
    topics = set(args.topic) if args.topic else None
    emulator = GrpcProxyEmulator(
        args.host, args.port, queues=args.queues, credentials=creds, topics=topics
    ).start()
    print(f"RocketMQ gRPC proxy emulator listening on {emulator.address}", flush=True)
    seen = 0
    try:
        while True:
            time.sleep(0.2)
            with emulator.lock:
                new = emulator.messages[seen:]
            seen += len(new)
            for m in new:
                line = {"topic": m.topic, "namespace": m.namespace, "queue": m.queue_id, "tag": m.tag}
                line |= {"keys": m.keys, "group": m.message_group, "properties": m.properties}
                line["body"] = base64.b64encode(m.body).decode()
                sys.stdout.write(orjson.dumps(line).decode() + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        emulator.stop()


if __name__ == "__main__":
    main()
