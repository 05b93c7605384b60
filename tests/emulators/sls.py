"""An Alibaba Cloud SLS PutLogs emulator on 127.0.0.1 that checks and records what real clients send.

It speaks the PutLogs wire format: ``POST /logstores/<logstore>/shards/lb`` (or ``/route?key=``),
the project as the first label of the ``Host`` header, a protobuf ``LogGroup`` body compressed
as ``x-log-compresstype`` says (lz4 block, deflate or none; zstd when the ``zstd`` module is
installed) from ``x-log-bodyrawsize`` bytes, signed with the v1 (``LOG ak:sig``, HMAC-SHA1) or
v4 (``SLS4-HMAC-SHA256``) scheme, optionally with an STS ``x-acs-security-token``. A request
that fails a check gets SLS's JSON error (``errorCode``/``errorMessage``) and status.

For local development::

    python -m tests.emulators.sls --port 8790 --access-key-id dev --access-key-secret devsecret

prints each received log as a JSON line; point an ``sls`` delivery target at
``endpoint: 127.0.0.1:8790``.
"""

from __future__ import annotations

import argparse
import base64
import email.utils
import hashlib
import hmac
import json
import re
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

_PATH = re.compile(r"^/logstores/([^/]+)/shards/(lb|route)$")
_V4 = re.compile(
    r"^SLS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/sls/aliyun_v4_request,Signature=(\w+)$"
)
MAX_SKEW = 900.0
"""Seconds a request's date may differ from the clock, as SLS allows."""


class SlsError(Exception):
    """A request the emulator refuses, as SLS would."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _fields(buf: bytes):
    """Yield (field number, value) of a protobuf message: ints for varint/fixed, bytes otherwise."""
    pos, end = 0, len(buf)

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= end:
                raise SlsError(400, "PostBodyInvalid", "truncated varint")
            result |= (buf[pos] & 0x7F) << shift
            pos += 1
            if not buf[pos - 1] & 0x80:
                return result
            shift += 7

    while pos < end:
        key = varint()
        wire = key & 7
        if wire == 0:
            yield key >> 3, varint()
            continue
        if wire not in (1, 2, 5):
            raise SlsError(400, "PostBodyInvalid", f"unsupported wire type {wire}")
        n = varint() if wire == 2 else (8 if wire == 1 else 4)
        if pos + n > end:
            raise SlsError(400, "PostBodyInvalid", "truncated field")
        chunk = buf[pos : pos + n]
        pos += n
        yield key >> 3, chunk if wire == 2 else int.from_bytes(chunk, "little")


def _pair(buf: bytes) -> tuple[str, str]:
    got = dict(_fields(buf))
    return got.get(1, b"").decode(), got.get(2, b"").decode("utf-8", "replace")


def decode_log_group(buf: bytes) -> dict[str, Any]:
    """A LogGroup as a dict: topic, source, machine_uuid, tags, logs (time, time_ns, contents)."""
    group: dict[str, Any] = {"topic": "", "source": "", "machine_uuid": "", "tags": {}, "logs": []}
    names = {3: "topic", 4: "source", 5: "machine_uuid"}
    for number, value in _fields(buf):
        if number == 1:  # Log: 1 Time, 2 Contents (Key, Value), 4 Time_ns
            log: dict[str, Any] = {"time": None, "time_ns": None, "contents": {}}
            for n, v in _fields(value):
                if n == 2:
                    log["contents"].update([_pair(v)])
                elif n in (1, 4):
                    log["time" if n == 1 else "time_ns"] = v
            if log["time"] is None:
                raise SlsError(400, "PostBodyInvalid", "a log without Time")
            group["logs"].append(log)
        elif number in names:
            group[names[number]] = value.decode()
        elif number == 6:
            group["tags"].update([_pair(value)])
    return group


def _zstd(body: bytes, raw_size: int) -> bytes:
    try:
        import zstd
    except ImportError:
        raise SlsError(400, "InvalidCompressType", "zstd is not installed here") from None
    return zstd.decompress(body)


def _lz4(body: bytes, raw_size: int) -> bytes:
    import lz4.block

    return lz4.block.decompress(body, uncompressed_size=raw_size)


_DECOMPRESS: dict[str, Callable[[bytes, int], bytes]] = {
    "": lambda body, raw_size: body,
    "lz4": _lz4,
    "deflate": lambda body, raw_size: zlib.decompress(body),
    "zstd": _zstd,
}


def _signed_headers(h: dict[str, str], v4: bool) -> list[tuple[str, str]]:
    # x-log-date repeats Date for proxies that drop it; v1 clients add it after signing.
    return sorted(
        (k, v)
        for k, v in h.items()
        if not k.startswith("x-log-meta-")
        and (k.startswith(("x-acs-", "x-log-")) or (v4 and k in ("content-type", "host")))
        and (v4 or k != "x-log-date")
    )


def _check_date(sent: float) -> None:
    if abs(time.time() - sent) > MAX_SKEW:
        raise SlsError(400, "RequestTimeTooSkewed", "the request date is too far from the server's clock")


def _v1_signature(h: dict[str, str], path: str, query: list, body: bytes, secret: str) -> str:
    """The v1 signature the request should carry (after checking Content-MD5 and Date)."""
    md5 = h.get("content-md5", "")
    if body and md5 != hashlib.md5(body).hexdigest().upper():
        raise SlsError(400, "InvalidContentMD5", "Content-MD5 does not match the body")
    if h.get("x-log-signaturemethod") != "hmac-sha1":
        raise SlsError(400, "InvalidSignatureMethod", "x-log-signaturemethod must be hmac-sha1")
    try:
        _check_date(email.utils.parsedate_to_datetime(h.get("date", "")).timestamp())
    except (TypeError, ValueError):
        raise SlsError(400, "InvalidDateFormat", "bad Date header") from None
    xh = "".join(f"{k}:{v}\n" for k, v in _signed_headers(h, v4=False))
    resource = path + ("?" + "&".join(f"{k}={v}" for k, v in sorted(query)) if query else "")
    text = f"POST\n{md5}\n{h.get('content-type', '')}\n{h.get('date', '')}\n{xh}{resource}"
    return base64.b64encode(hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()).decode()


def _v4_signature(h: dict[str, str], path: str, query: list, body: bytes, secret: str) -> str:
    """The v4 signature the request should carry (after checking the payload hash and x-log-date)."""
    m = _V4.match(h["authorization"])
    if m is None:
        raise ValueError("not a v4 Authorization header")
    _, day, region, _ = m.groups()
    payload = hashlib.sha256(body).hexdigest()
    if h.get("x-log-content-sha256") != payload:
        raise SlsError(400, "InvalidContentSha256", "x-log-content-sha256 does not match the body")
    stamp = h.get("x-log-date", "")
    try:
        _check_date(datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp())
    except ValueError:
        raise SlsError(400, "InvalidDateFormat", "bad x-log-date header") from None
    signed = _signed_headers(h, v4=True)
    canonical = "\n".join(
        [
            "POST",
            path,
            "&".join(k + ("=" + quote(v, safe="~") if v else "") for k, v in sorted(query)),
            "".join(f"{k}:{v.strip()}\n" for k, v in signed),
            ";".join(k for k, _ in signed),
            payload,
        ]
    )
    scope = f"{day}/{region}/sls/aliyun_v4_request"
    to_sign = f"SLS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = ("aliyun_v4" + secret).encode()
    for part in (day, region, "sls", "aliyun_v4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


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
        v4 = _V4.match(auth)
        if not v4 and not re.match(r"^LOG [^:]+:.+$", auth):
            raise SlsError(401, "Unauthorized", "missing or malformed Authorization")
        ak, given = (v4.group(1), v4.group(4)) if v4 else auth[4:].split(":", 1)
        if ak not in self.credentials:
            raise SlsError(401, "InvalidAccessKeyId", f"access key {ak} does not exist")
        secret, token = self.credentials[ak]
        if token is not None and h.get("x-acs-security-token") != token:
            raise SlsError(401, "SecurityTokenExpired", "the STS security token is missing or wrong")
        query = parse_qsl(url.query, keep_blank_values=True)
        expected = (_v4_signature if v4 else _v1_signature)(h, url.path, query, body, secret)
        if not hmac.compare_digest(expected, given):
            raise SlsError(401, "SignatureNotMatch", "signature does not match")
        kind = h.get("x-log-compresstype", "")
        if kind not in _DECOMPRESS or not h.get("x-log-bodyrawsize", "").isdigit():
            raise SlsError(400, "InvalidCompressType", "unknown x-log-compresstype or no x-log-bodyrawsize")
        try:
            data = _DECOMPRESS[kind](body, int(h["x-log-bodyrawsize"]))
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
