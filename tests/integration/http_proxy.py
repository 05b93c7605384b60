"""A plain HTTP forward proxy on 127.0.0.1 that records each request: any method, any upstream."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_HOP = ("host", "content-length", "proxy-authorization", "proxy-connection", "connection")


class ForwardProxy:
    """Takes absolute-form requests (``GET http://host:port/path?query``), as HTTP clients send
    to a proxy, and forwards them to that host. ``calls`` holds (method, URL, Proxy-Authorization).
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                proxy._forward(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _forward(self, h: BaseHTTPRequestHandler) -> None:
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
