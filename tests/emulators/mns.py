"""An Alibaba Cloud MNS (Simple Message Queue) emulator on 127.0.0.1 that the real aliyun-mns-sdk talks to.

The queue half of the MNS REST API 2015-06-06: XML in ``http://mns.aliyuncs.com/doc/v1/``, the
``MNS AccessKeyId:Signature`` HMAC-SHA1 signature, ``Date``, ``x-mns-version`` and ``Content-MD5``
checked on every request (an STS ``security-token`` is accepted unchecked), MNS's error codes
and statuses, the lower-case ``x-mns-request-id`` header. Queue CRUD, (Batch)SendMessage,
(Batch)ReceiveMessage with long polling, (Batch)PeekMessage, (Batch)DeleteMessage (partial
failures as a 404 ``<Errors>`` list) and ChangeMessageVisibility (``tests.emulators.mns_api``),
on the in-memory ``tests.emulators.mns_store``. For local development, from the checkout's root::

    python -m tests.emulators.mns --port 8791 --access-key-id dev --access-key-secret devsecret --queue q

prints the endpoint URL. In tests: ``with start_emulator("id", "secret") as mns: Account(mns.url, ...)``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

from tests.emulators.mns_api import VERSION, Drop, MnsApi, doc
from tests.emulators.mns_queue import MnsError
from tests.emulators.mns_store import Store


class MnsEmulator(MnsApi):
    """A running emulator: ``url`` for clients, ``store`` for inspection and fault injection."""

    def __init__(self, access_key_id: str, access_key_secret: str, host: str = "127.0.0.1", port: int = 0):
        super().__init__({access_key_id: access_key_secret}, Store())
        self.server = _Server((host, port), _Handler)
        self.server.emulator = self
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="mns-emulator", daemon=True)

    def start(self) -> MnsEmulator:
        self._thread.start()
        return self

    def go_down(self) -> None:
        """Stop answering, as a server that went away: the port refuses connections and the
        open ones are closed. The queues and their messages are kept for ``come_back``."""
        self.server.shutdown()
        self.server.server_close()
        self.server.close_connections()

    def come_back(self) -> None:
        """Serve again on the same port, with the queues as ``go_down`` left them."""
        self.server = _Server(self.server.server_address, _Handler)
        self.server.emulator = self
        self._thread = threading.Thread(target=self.server.serve_forever, name="mns-emulator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.store.close()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> MnsEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    emulator: MnsEmulator

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        with self._connections_lock:
            self._connections.add(conn)
        return conn, addr

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Close every open client connection (keep-alive ones would otherwise go on being served)."""
        with self._connections_lock:
            conns, self._connections = list(self._connections), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients dropping keep-alive connections is normal


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each reply waits ~40 ms for the client's delayed ACK
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        emulator, method = self.server.emulator, self.command
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        host = self.headers.get("Host", "127.0.0.1")
        request_id = uuid.uuid4().hex[:24].upper()
        try:
            emulator.authenticate(method, self.path, self.headers, body)
            status, payload, extra = emulator.handle(method, self.path, body, host)
        except Drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        except MnsError as err:
            inner = f"<Code>{err.code}</Code><Message>{escape(err.message)}</Message>"
            inner += f"<RequestId>{request_id}</RequestId><HostId>http://{escape(host)}</HostId>"
            status, payload, extra = err.status, doc("Error", inner), {}
        self.send_response(status)
        self.send_header("x-mns-request-id", request_id)
        self.send_header("x-mns-version", VERSION)
        if payload:
            self.send_header("Content-Type", "text/xml;charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = _serve


def start_emulator(
    access_key_id: str, access_key_secret: str, host: str = "127.0.0.1", port: int = 0
) -> MnsEmulator:
    """Start an emulator in a daemon thread; ``.url`` is its endpoint, ``.stop()`` ends it."""
    return MnsEmulator(access_key_id, access_key_secret, host, port).start()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C or SIGTERM; the first line printed is the endpoint URL."""
    p = argparse.ArgumentParser(prog="python -m tests.emulators.mns", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--access-key-id", required=True)
    p.add_argument("--access-key-secret", required=True)
    p.add_argument("--queue", action="append", default=[], help="create this queue at start (repeatable)")
    args = p.parse_args(argv)
    emulator = MnsEmulator(args.access_key_id, args.access_key_secret, args.host, args.port)
    for name in args.queue:
        emulator.store.create_queue(name, {})
    print(emulator.url, flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        emulator.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.store.close()
        emulator.server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
