"""An Alibaba Cloud SLS PutLogs emulator on 127.0.0.1 that checks and records what real clients send.

It speaks the PutLogs wire format: ``POST /logstores/<logstore>/shards/lb`` (or ``/route?key=``),
the project as the first label of the ``Host`` header, a protobuf ``LogGroup`` body compressed
as ``x-log-compresstype`` says (lz4 block, deflate or none; zstd when the ``zstd`` module is
installed) from ``x-log-bodyrawsize`` bytes, signed with the v1 (``LOG ak:sig``, HMAC-SHA1) or
v4 (``SLS4-HMAC-SHA256``) scheme, optionally with an STS ``x-acs-security-token`` (the format:
``tests.emulators.sls_wire``). A request that fails a check gets SLS's JSON error
(``errorCode``/``errorMessage``) and status.

For local development, from the checkout's root::

    python -m tests.emulators.sls --port 8790 --access-key-id dev --access-key-secret devsecret

prints each received log as a JSON line; point an ``sls`` delivery target at
``endpoint: 127.0.0.1:8790``.
"""

from __future__ import annotations

import argparse
import hmac
import json
import re
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.emulators.sls_wire import (
    DECOMPRESS,
    V4_AUTH,
    SlsError,
    decode_log_group,
    v1_signature,
    v4_signature,
)

_PATH = re.compile(r"^/logstores/([^/]+)/shards/(lb|route)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        status, body = 200, b""
        try:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.server.emulator._put_logs(self.command, self.path, self.headers, raw)  # type: ignore[attr-defined]
        except SlsError as err:
            status = err.status
            body = json.dumps({"errorCode": err.code, "errorMessage": str(err)}).encode()
            self.server.emulator.errors.append(f"{err.code}: {err}")  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("x-log-requestid", uuid.uuid4().hex.upper())
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass


class SlsEmulator:
    """PutLogs on 127.0.0.1. ``credentials``: access key id → (secret, required STS token or None).

    With ``logstores`` (``{"project": {"logstore", …}}``) other names get ProjectNotExist /
    LogStoreNotExist; without, any is accepted. ``logs`` holds every accepted log with its
    group's project, logstore, topic, source and tags and how it came (compression, auth, sts);
    ``errors`` every refusal as ``"Code: message"``.
    """

    def __init__(
        self,
        credentials: dict[str, tuple[str, str | None]],
        logstores: dict[str, set[str]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        on_log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.credentials = credentials
        self.logstores = logstores
        self.on_log = on_log
        self.logs: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), _Handler)
        self.server.daemon_threads = True
        self.server.emulator = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(0.05,), name="sls-emulator", daemon=True
        )

    @property
    def endpoint(self) -> str:
        """``host:port`` to give a client as its endpoint."""
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"

    def __enter__(self) -> SlsEmulator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _put_logs(self, method: str, target: str, headers: Any, body: bytes) -> None:
        url = urlsplit(target)
        m = _PATH.match(url.path)
        if method != "POST" or not m:
            raise SlsError(404, "RequestNotSupported", f"{method} {url.path} is not PutLogs")
        h = {k.lower(): v for k, v in headers.items()}
        project, logstore = h.get("host", "").split(".", 1)[0], m.group(1)
        if self.logstores is not None and project not in self.logstores:
            raise SlsError(404, "ProjectNotExist", f"project {project} does not exist")
        if self.logstores is not None and logstore not in self.logstores[project]:
            raise SlsError(404, "LogStoreNotExist", f"logstore {logstore} does not exist")
        if h.get("x-log-apiversion") != "0.6.0" or h.get("content-type") != "application/x-protobuf":
            raise SlsError(400, "InvalidRequest", "needs x-log-apiversion 0.6.0 and application/x-protobuf")
        auth = h.get("authorization", "")
        v4 = V4_AUTH.match(auth)
        if not v4 and not re.match(r"^LOG [^:]+:.+$", auth):
            raise SlsError(401, "Unauthorized", "missing or malformed Authorization")
        ak, given = (v4.group(1), v4.group(4)) if v4 else auth[4:].split(":", 1)
        if ak not in self.credentials:
            raise SlsError(401, "InvalidAccessKeyId", f"access key {ak} does not exist")
        secret, token = self.credentials[ak]
        if token is not None and h.get("x-acs-security-token") != token:
            raise SlsError(401, "SecurityTokenExpired", "the STS security token is missing or wrong")
        query = parse_qsl(url.query, keep_blank_values=True)
        expected = (v4_signature if v4 else v1_signature)(h, url.path, query, body, secret)
        if not hmac.compare_digest(expected, given):
            raise SlsError(401, "SignatureNotMatch", "signature does not match")
        kind = h.get("x-log-compresstype", "")
        if kind not in DECOMPRESS or not h.get("x-log-bodyrawsize", "").isdigit():
            raise SlsError(400, "InvalidCompressType", "unknown x-log-compresstype or no x-log-bodyrawsize")
        try:
            data = DECOMPRESS[kind](body, int(h["x-log-bodyrawsize"]))
        except SlsError:
            raise
        except Exception as err:
            raise SlsError(400, "PostBodyUncompressError", f"cannot decompress: {err}") from None
        if len(data) != int(h["x-log-bodyrawsize"]):
            raise SlsError(400, "PostBodyUncompressError", "decompressed size != x-log-bodyrawsize")
        group = decode_log_group(data)
        base = {k: group[k] for k in ("topic", "source", "tags")}
        base.update(project=project, logstore=logstore, compression=kind or "none")
        base.update(auth="v4" if v4 else "v1", sts="x-acs-security-token" in h)
        records = [{**base, **log} for log in group["logs"]]
        with self._lock:
            self.logs.extend(records)
        if self.on_log is not None:
            for record in records:
                self.on_log(record)


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C, printing each received log as one JSON line."""
    p = argparse.ArgumentParser(prog="python -m tests.emulators.sls", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8790)
    p.add_argument("--access-key-id", required=True)
    p.add_argument("--access-key-secret", required=True)
    p.add_argument("--security-token", help="require this STS token")
    args = p.parse_args(argv)
    creds = {args.access_key_id: (args.access_key_secret, args.security_token)}
    emulator = SlsEmulator(
        creds,
        host=args.host,
        port=args.port,
        on_log=lambda r: print(json.dumps(r, ensure_ascii=False), flush=True),
    )
    print(f"SLS emulator on http://{emulator.endpoint} (Ctrl-C stops)", flush=True)
    try:
        emulator.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
