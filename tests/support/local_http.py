"""An HTTP server on 127.0.0.1 in a background thread, for the tests' proxies in front of real servers."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # dropped connections are the point


class LocalHTTPServer:
    """Serves ``methods`` with ``handle`` on an ephemeral port of 127.0.0.1 while used as a context.

    Subclasses set ``methods`` and write ``handle``; ``url`` is the server's base URL.
    """

    methods: ClassVar[tuple[str, ...]] = ("POST",)
    quiet: ClassVar[bool] = False
    """Drop the tracebacks of failed connections (a proxy that closes them on purpose)."""

    def __init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                server.handle(self)

        for method in self.methods:
            setattr(Handler, f"do_{method}", Handler._any)
        cls = _QuietServer if self.quiet else ThreadingHTTPServer
        self.server = cls(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
