"""The SLS PutLogs request format the emulator checks: the LogGroup protobuf, body compression, signatures.

A ``LogGroup`` body decodes without a protobuf library (``decode_log_group``); ``DECOMPRESS``
undoes ``x-log-compresstype`` (lz4 block, deflate, none; zstd when the ``zstd`` module is
installed); ``v1_signature`` and ``v4_signature`` compute what a request signed with the
``LOG ak:sig`` (HMAC-SHA1) or ``SLS4-HMAC-SHA256`` scheme should carry. A failed check raises
``SlsError`` with SLS's error code and status.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import re
import time
import zlib
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

V4_AUTH = re.compile(
    r"^SLS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/sls/aliyun_v4_request,Signature=(\w+)$"
)
"""A v4 ``Authorization`` header: access key id, day, region, signature."""
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


DECOMPRESS: dict[str, Callable[[bytes, int], bytes]] = {
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


def v1_signature(h: dict[str, str], path: str, query: list, body: bytes, secret: str) -> str:
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


def v4_signature(h: dict[str, str], path: str, query: list, body: bytes, secret: str) -> str:
    """The v4 signature the request should carry (after checking the payload hash and x-log-date)."""
    m = V4_AUTH.match(h["authorization"])
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
