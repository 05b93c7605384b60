"""An HTTP proxy on 127.0.0.1 failing the first N requests: 503 throttling or a dropped connection."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

THROTTLED = (
    b'<?xml version="1.0"?><ErrorResponse><Error><Type>Receiver</Type><Code>ServiceUnavailable</Code>'
    b"<Message>Service is unavailable</Message></Error><RequestId>fault</RequestId></ErrorResponse>"
)


class FaultProxy:
    """Forwards to ``upstream``; the first ``fail`` requests get 503 (odd ones) or a dropped connection."""

    def __init__(self, upstream: str, fail: int) -> None:
        self.upstream = urlparse(upstream)
        self.remaining = fail
        self.failed = 0
        self.forwarded = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                data = self.rfile.read(length)
                with proxy._lock:
                    fault = proxy.remaining > 0
                    if fault:
                        proxy.remaining -= 1
                        proxy.failed += 1
                        drop = proxy.failed % 2 == 0
                if fault and drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault:
                    self.send_response(503)
                    self.send_header("Content-Type", "text/xml")
                    self.send_header("Content-Length", str(len(THROTTLED)))
                    self.end_headers()
                    self.wfile.write(THROTTLED)
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request("POST", self.path, body=data, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in (
                        "content-length",
                        "transfer-encoding",
                        "connection",
                        "date",
                        "server",
                    ):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with proxy._lock:
                    proxy.forwarded += 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
