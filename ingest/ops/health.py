"""The job's HTTP endpoint on the metrics port: Prometheus text at ``/metrics``, liveness at ``/healthz``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ingest.errors import redact
from ingest.worker import Worker

log = logging.getLogger(__name__)


class Endpoint(Worker):
    """Serves ``GET /metrics`` and ``GET /healthz`` from its thread (``metrics-http``).

    ``/healthz`` answers 200 ``ok`` while ``health()`` returns None, and 503 with its reason
    (one line, redacted) otherwise, so an orchestrator can restart a stuck job. A failing
    request is answered 500 and logged; it never reaches the job.

    Example:
        >>> from prometheus_client import CollectorRegistry
        >>> ep = Endpoint(CollectorRegistry(), lambda: None, "127.0.0.1", 0)
        >>> port = ep.start()
        >>> import urllib.request
        >>> urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read()
        b'ok\\n'
        >>> ep.stop()
    """

    def __init__(
        self, registry: CollectorRegistry, health: Callable[[], str | None], host: str, port: int
    ) -> None:
        super().__init__("metrics-http")
        self.registry = registry
        self.health = health
        self.host = host
        self.port = port
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> int:  # type: ignore[override]  # a Worker's start, returning the port too
        """Bind and serve; return the bound port (useful with port 0)."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    status, kind, body = endpoint._answer(self.path.split("?", 1)[0])
                except Exception as err:
                    log.warning("metrics endpoint: %s failed: %s", self.path, redact(str(err)))
                    status, kind, body = 500, "text/plain", b"internal error\n"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # scrapes every few seconds would flood the job's log

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self._target = self._server.serve_forever  # this server's, even if stop() comes first
        super().start()
        return self._server.server_address[1]

    def _answer(self, path: str) -> tuple[int, str, bytes]:
        if path in ("/", "/metrics"):
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path == "/healthz":
            reason = self.health()
            if reason is None:
                return 200, "text/plain; charset=utf-8", b"ok\n"
            line = redact(reason).replace("\n", " ")
            return 503, "text/plain; charset=utf-8", f"unhealthy: {line}\n".encode()
        return 404, "text/plain", b"not found\n"

    def stop(self, timeout: float | None = None) -> bool:
        """Stop serving and close the socket; return whether the thread has ended."""
        server, self._server = self._server, None
        self.stopping.set()
        if server is not None:
            server.shutdown()  # serve_forever returns
            server.server_close()
        return self.join(timeout)
