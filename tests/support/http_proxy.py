"""A plain HTTP forward proxy on 127.0.0.1 that records each request: any method, any upstream."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.support.local_http import LocalHTTPServer

_HOP = ("host", "content-length", "proxy-authorization", "proxy-connection", "connection")


class ForwardProxy(LocalHTTPServer):
    """Takes absolute-form requests (``GET http://host:port/path?query``), as HTTP clients send
    to a proxy, and forwards them to that host. ``calls`` holds (method, URL, Proxy-Authorization).
    """

    methods = ("GET", "PUT", "POST", "DELETE", "HEAD")

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()
        super().__init__()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.calls.append((h.command, h.path, h.headers.get("Proxy-Authorization")))
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
