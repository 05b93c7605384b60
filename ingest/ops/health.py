"""The job's HTTP endpoint on the metrics port: Prometheus text at ``/metrics``, liveness at ``/healthz``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ingest.errors import redact
from ingest.worker import Worker

log = logging.getLogger(__name__)

IDLE_TIMEOUT = 5.0
"""Seconds a connection may send nothing (or take no answer) before it is closed: an idle or
stuck client holds one thread, never more than this."""


class _Server(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` whose failed requests go to the log, not as a trace to stderr."""

    daemon_threads = True
    request_queue_size = 64  # the listen backlog (5 by default): a burst of clients is not made to retry

    def handle_error(self, request: Any, client_address: Any) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError)):  # the client went away or stalled
            log.debug("metrics endpoint: connection from %s dropped: %s", client_address[0], err)
        else:
            log.warning(
                "metrics endpoint: a request from %s failed: %s: %s",
                client_address[0],
                type(err).__name__,
                redact(str(err)),
            )


class Endpoint(Worker):
    """Serves ``GET /metrics`` and ``GET /healthz`` (and ``HEAD``, the same without the body)
    from its thread (``metrics-http``).

    ``/healthz`` answers 200 ``ok`` while ``health()`` returns None, and 503 with its reason
    (one line, redacted) otherwise, so an orchestrator can restart a stuck job. A failing
    request is answered 500 and logged; it never reaches the job. A client that drops its
    connection is a DEBUG line; one that sends nothing for ``idle_timeout`` seconds is closed.

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
        self.idle_timeout = IDLE_TIMEOUT
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> int:  # type: ignore[override]  # a Worker's start, returning the port too
        """Bind and serve; return the bound port (useful with port 0)."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            timeout = endpoint.idle_timeout  # the socket's: a read or write waits no longer

            def do_GET(self) -> None:
                self._reply(with_body=True)

            def do_HEAD(self) -> None:
                self._reply(with_body=False)

            def _reply(self, with_body: bool) -> None:
                try:
                    status, kind, body = endpoint._answer(self.path.split("?", 1)[0])
                except Exception as err:
                    log.warning("metrics endpoint: %s failed: %s", self.path, redact(str(err)))
                    status, kind, body = 500, "text/plain", b"internal error\n"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # scrapes every few seconds would flood the job's log

        self._server = _Server((self.host, self.port), Handler)
        self._target = self._server.serve_forever  # this server's, even if stop() comes first
        self.port = self._server.server_address[1]
        super().start()
        return self.port

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
