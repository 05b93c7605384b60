"""Helpers for SQS tests on moto: a server, queue fill/drain, configs, and a fault-injecting HTTP proxy."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from ingest.config.claim_check import ClaimCheckConfig
from ingest.connector.payload_store import PayloadStore
from sinks.sqs.config import SqsSinkConfig
from sources.sqs.config import SqsSourceConfig
from tests.support.local_http import LocalHTTPServer
from tests.support.polling import wait_for


def atomic_moto_deletes() -> None:
    """Make moto's SQS deletes atomic, as SQS's are (in this process; idempotent).

    moto 5's ``Queue.delete_message`` rebuilds the queue's message list outside the lock its
    ``add_message`` takes, so two DeleteMessageBatch calls at once (the acker sends several) can
    each put back what the other removed: a delete that answered success is undone, and the
    handle, marked deleted, deletes nothing again. Seen under load: a drain deleted all of its 62
    rows and 10 messages were still on the queue. The same lock around the rebuild fixes it.
    """
    from moto.sqs.models import Queue

    if getattr(Queue.delete_message, "atomic", False):
        return
    delete = Queue.delete_message

    def delete_message(self, receipt_handle: str) -> None:
        with self._messages_lock:
            delete(self, receipt_handle)

    delete_message.atomic = True  # type: ignore[attr-defined]
    Queue.delete_message = delete_message  # type: ignore[method-assign]


@contextmanager
def moto_server():
    """moto's server mode (the real SQS wire protocol) on 127.0.0.1; yields its URL."""
    from moto.server import ThreadedMotoServer

    atomic_moto_deletes()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def object_keys(s3, bucket: str) -> set[str]:
    """The keys in an S3 bucket (up to 1,000)."""
    return {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}


def source_cfg(url: str, endpoint: str, **options: Any) -> SqsSourceConfig:
    base = {"type": "sqs", "name": "src", "sqs.url": url, "sqs.endpoint.url": endpoint}
    return SqsSourceConfig.model_validate(base | {"sqs.waittime.seconds": 1} | options)


def sink_cfg(url: str, endpoint: str, **options: Any) -> SqsSinkConfig:
    return SqsSinkConfig.model_validate(
        {"type": "sqs", "name": "out", "sqsUrl": url, "aws.endpoint": endpoint} | options
    )


def store_for(moto_url: str, **options) -> PayloadStore:
    """A store on moto's S3, with the credentials of an SQS source (the environment's)."""
    owner = source_cfg("http://127.0.0.1/000000000000/q", moto_url)
    return PayloadStore(ClaimCheckConfig(endpoint_url=moto_url, **options), owner)


def send_bodies(sqs, url: str, bodies: Iterable[str], group: Callable[[int], str] | None = None) -> None:
    """Put ``bodies`` on the queue, 10 per call (FIFO: ``group(i)`` and dedup id ``d<i>``)."""
    bodies = list(bodies)
    for start in range(0, len(bodies), 10):
        entries = []
        for k, body in enumerate(bodies[start : start + 10]):
            entry = {"Id": str(k), "MessageBody": body}
            if group:
                entry |= {"MessageGroupId": group(start + k), "MessageDeduplicationId": f"d{start + k}"}
            entries.append(entry)
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


def wait_all_visible(sqs, url: str, timeout: float = 60.0) -> None:
    """Poll until no message of the queue is in flight (a killed job's receives timed out)."""

    def hidden() -> int:
        names = ["ApproximateNumberOfMessagesNotVisible"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return int(attrs["ApproximateNumberOfMessagesNotVisible"])

    wait_for(lambda: hidden() == 0, timeout, f"every message of {url} visible again", every=0.2)


def drain(sqs, url: str, attributes: bool = False) -> list:
    """Receive and delete everything visible; the bodies (or whole messages with ``attributes``)."""
    out = []
    while True:
        msgs = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageSystemAttributeNames=["All"]
        ).get("Messages", [])
        if not msgs:
            return out
        out += msgs if attributes else [m["Body"] for m in msgs]
        entries = [{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)]
        sqs.delete_message_batch(QueueUrl=url, Entries=entries)


def _json_error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": message}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-query-error": f"{code};Receiver"}
    return status, headers, body


FAULTS = {
    "throttle": _json_error(400, "RequestThrottled", "Rate exceeded"),
    "500": _json_error(500, "InternalError", "We encountered an internal error"),
    "503": _json_error(503, "ServiceUnavailable", "Service is unavailable"),
}


class FaultProxy(LocalHTTPServer):
    """An HTTP proxy on 127.0.0.1 in front of moto that injects faults and records every call.

    Use its ``url`` as the client's endpoint, or as its HTTP proxy (``sqs.proxy.url``): it
    takes both origin-form and absolute-form requests. ``faults`` is consumed one per
    request: ``throttle`` (400 RequestThrottled), ``500``, ``503``, ``drop`` (connection
    closed, nothing forwarded), ``drop_after`` (forwarded, then closed without a reply),
    ``fail_entries`` (a ``*Batch`` call forwarded without its odd entries, which are
    reported failed with SenderFault false), ``pass``. Entries whose body contains
    ``refuse_marker`` are never forwarded and fail with SenderFault true. The next ``repeat``
    ReceiveMessage replies that hold messages carry their first message twice: one delivery,
    one receipt handle, handed out twice, as moto does now and then to concurrent receivers.
    """

    quiet = True

    def __init__(self, upstream: str, faults: Iterable[str] = ()) -> None:
        self.upstream = urlsplit(upstream)
        self.faults = list(faults)
        self.refuse_marker: str | None = None
        self.deny: set[str] = set()
        self.repeat = 0
        """ReceiveMessage replies still to come whose first message is repeated."""
        """Actions answered 400 AccessDenied, as for credentials without that permission."""
        self.calls: list[tuple[str, dict, dict[str, str]]] = []
        """(action, JSON request, headers) of every request, faulted ones included."""
        self.sent_batch = threading.Event()
        self._lock = threading.Lock()
        super().__init__()

    def actions(self, name: str) -> list[dict]:
        """The JSON requests of every ``name`` call (e.g. ``SendMessageBatch``)."""
        with self._lock:
            return [req for action, req, _ in self.calls if action == name]

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        data = h.rfile.read(int(h.headers.get("Content-Length", 0)))
        action = (h.headers.get("X-Amz-Target") or ".").rsplit(".", 1)[-1]
        request = json.loads(data) if data else {}
        with self._lock:
            self.calls.append((action, json.loads(data) if data else {}, dict(h.headers.items())))
            fault = self.faults.pop(0) if self.faults else "pass"
        if action in self.deny:
            return self._reply(
                h, *_json_error(400, "AccessDenied", f"not authorized to perform sqs:{action}")
            )
        if fault in FAULTS:
            return self._reply(h, *FAULTS[fault])
        if fault == "drop":
            return self._drop(h)
        failed = []
        entries = request.get("Entries")
        if entries is not None:
            keep = []
            for i, entry in enumerate(entries):
                if self.refuse_marker and self.refuse_marker in entry.get("MessageBody", ""):
                    failed.append((entry["Id"], True, "InvalidMessageContents"))
                elif fault == "fail_entries" and i % 2 == 1:
                    failed.append((entry["Id"], False, "InternalError"))
                else:
                    keep.append(entry)
            request["Entries"] = keep
            data = json.dumps(request).encode()
            if action == "SendMessageBatch":
                self.sent_batch.set()
        if entries is not None and not request["Entries"]:
            status, headers, body = 200, {"Content-Type": "application/x-amz-json-1.0"}, b"{}"
        else:
            status, headers, body = self._forward(h, data)
        if fault == "drop_after":
            return self._drop(h)
        if action == "ReceiveMessage" and status == 200:
            body = self._repeat_first(body)
        if failed and status == 200:
            reply = json.loads(body or b"{}")
            reply.setdefault("Successful", [])
            reply["Failed"] = reply.get("Failed", []) + [
                {"Id": i, "SenderFault": sender, "Code": code, "Message": "injected by FaultProxy"}
                for i, sender, code in failed
            ]
            body = json.dumps(reply).encode()
        self._reply(h, status, headers, body)

    def _repeat_first(self, body: bytes) -> bytes:
        reply = json.loads(body or b"{}")
        with self._lock:
            if not self.repeat or not reply.get("Messages"):
                return body
            self.repeat -= 1
        reply["Messages"].insert(1, reply["Messages"][0])
        return json.dumps(reply).encode()

    def _forward(self, h: BaseHTTPRequestHandler, data: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            skip = ("host", "content-length", "proxy-authorization", "proxy-connection", "connection")
            headers = {k: v for k, v in h.headers.items() if k.lower() not in skip}
            path = urlsplit(h.path).path or "/"  # absolute-form when used as an HTTP proxy
            conn.request("POST", path, body=data, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            keep = ("content-type", "x-amzn-requestid", "x-amzn-query-error")
            return resp.status, {k: v for k, v in resp.getheaders() if k.lower() in keep}, body
        finally:
            conn.close()

    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    @staticmethod
    def _drop(h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        h.connection.close()
