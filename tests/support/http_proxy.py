"""An HTTP forward proxy on 127.0.0.1 that records each request: any method, any upstream, CONNECT tunnels."""

from __future__ import annotations

import contextlib
import http.client
import selectors
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.support.local_http import LocalHTTPServer

_HOP = ("host", "content-length", "proxy-authorization", "proxy-connection", "connection")


class ForwardProxy(LocalHTTPServer):
    """Takes absolute-form requests (``GET http://host:port/path?query``), as HTTP clients send
    to a proxy, and forwards them to that host; ``CONNECT host:port`` opens a tunnel to it (as
    clients reach an HTTPS endpoint) and relays bytes both ways until either side closes.
    ``calls`` holds (method, URL or ``host:port``, Proxy-Authorization).

    With ``tls=(cert, key)`` the proxy itself speaks TLS (an ``https://`` proxy URL). ``errors``
    holds what broke a tunnel other than a side closing it.
    """

    methods = ("GET", "PUT", "POST", "DELETE", "HEAD", "CONNECT")

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._tunnels: set[socket.socket] = set()
        self._closing = False
        super().__init__()
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            # the handshake in the handler's thread, on first read: one stalled client holds up no other
            listener = context.wrap_socket(
                self.server.socket, server_side=True, do_handshake_on_connect=False
            )
            self.server.socket = listener
            self.url = self.url.replace("http://", "https://")

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.calls.append((h.command, h.path, h.headers.get("Proxy-Authorization")))
        if h.command == "CONNECT":
            self._tunnel(h)
            return
        target = urlsplit(h.path)
        data = h.rfile.read(int(h.headers.get("Content-Length", 0)))
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP}
            path = target.path + (f"?{target.query}" if target.query else "")
            conn.request(h.command, path or "/", body=data or None, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                    h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(body)
        finally:
            conn.close()

    def tunnels(self) -> list[str]:
        """The ``host:port`` of each CONNECT so far."""
        with self._lock:
            return [target for method, target, _ in self.calls if method == "CONNECT"]

    def _tunnel(self, h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True  # the connection is the tunnel's now: no second request on it
        host, _, port = h.path.rpartition(":")
        try:
            upstream = socket.create_connection((host, int(port)), timeout=10)
        except (OSError, ValueError) as err:
            h.send_error(502, f"cannot connect to {h.path}: {err}")
            return
        client = h.connection
        with self._lock:
            if self._closing:
                upstream.close()
                return
            self._tunnels |= {client, upstream}
        try:
            # Clients send nothing after CONNECT before this reply, so rfile's buffer holds nothing.
            h.send_response(200, "Connection established")
            h.end_headers()
            h.wfile.flush()
            upstream.settimeout(None)
            _relay(client, upstream)
        except OSError:
            pass  # a side reset the connection, or __exit__ shut it down
        except BaseException as err:  # kept for the test to see, then raised
            self.errors.append(err)
            raise
        finally:
            with self._lock:
                self._tunnels -= {client, upstream}
            upstream.close()

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._closing = True
            open_ = list(self._tunnels)
        for sock in open_:  # ends each relay (it reads end of file) so no thread outlives the proxy
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        super().__exit__(*exc)


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes between ``a`` and ``b`` until one of them closes (a TLS socket's decrypted
    bytes may wait in its buffer, unseen by the selector: those are read first)."""
    other = {a: b, b: a}
    with selectors.DefaultSelector() as sel:
        sel.register(a, selectors.EVENT_READ)
        sel.register(b, selectors.EVENT_READ)
        while True:
            ready = [s for s in (a, b) if isinstance(s, ssl.SSLSocket) and s.pending()]
            ready = ready or [key.fileobj for key, _ in sel.select()]  # type: ignore[misc]
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                other[sock].sendall(data)
