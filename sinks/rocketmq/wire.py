"""The RocketMQ remoting wire format: frames, JSON headers, message properties, the ACL signature."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import socket
import struct
from typing import Any, BinaryIO

import orjson

SEND_MESSAGE = 10
HEART_BEAT = 34
UNREGISTER_CLIENT = 35
GET_ROUTEINFO_BY_TOPIC = 105
SEND_MESSAGE_V2 = 310
SEND_BATCH_MESSAGE = 320

SUCCESS = 0
SYSTEM_ERROR = 1
SYSTEM_BUSY = 2
REQUEST_CODE_NOT_SUPPORTED = 3
MESSAGE_ILLEGAL = 13
NO_PERMISSION = 16
TOPIC_NOT_EXIST = 17

RESPONSE_FLAG = 1
"""Bit 0 of ``flag`` marks a response; bit 1 a one-way request."""
COMPRESSED_FLAG = 1
"""Bit 0 of a message's ``sysFlag``: the body is zlib-compressed."""
SEND_V2_FIELDS = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
    "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch",
}  # fmt: skip
"""SEND_MESSAGE_V2 sends the SEND_MESSAGE header fields under one-letter names."""
_opaque = itertools.count(1)


class WireError(Exception):
    """A malformed frame, or the peer closed the connection mid-frame."""


def encode_frame(header: dict[str, Any], body: bytes = b"") -> bytes:
    """One frame: total length, serialize type (0 = JSON) and header length, JSON header, body."""
    head = orjson.dumps(header)
    return struct.pack(">II", 4 + len(head) + len(body), len(head)) + head + body


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """Read one frame: (header, body), or None at a clean end of stream."""
    prefix = stream.read(8)
    if not prefix:
        return None
    if len(prefix) < 8:
        raise WireError("connection closed inside a frame prefix")
    total, mark = struct.unpack(">II", prefix)
    if mark >> 24 != 0:
        raise WireError(f"serialize type {mark >> 24} is not supported (JSON only)")
    head_len = mark & 0xFFFFFF
    rest = stream.read(total - 4)
    if len(rest) < total - 4 or head_len > total - 4:
        raise WireError("connection closed inside a frame")
    return orjson.loads(rest[:head_len]), rest[head_len:]


def pack_properties(props: dict[str, str]) -> str:
    """Message properties as the wire string ``KEY\\x01value\\x02...``."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def unpack_properties(text: str) -> dict[str, str]:
    """The inverse of :func:`pack_properties`."""
    out = {}
    for item in text.split("\x02"):
        if item:
            key, _, value = item.partition("\x01")
            out[key] = value
    return out


def decode_batch(body: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """Split a SEND_BATCH_MESSAGE body into (flag, body, properties) per message."""
    out, pos = [], 0
    while pos < len(body):
        total, _magic, _crc, flag, body_len = struct.unpack_from(">iiiii", body, pos)
        start = pos + 20
        payload = body[start : start + body_len]
        (props_len,) = struct.unpack_from(">h", body, start + body_len)
        props = body[start + body_len + 2 : start + body_len + 2 + props_len].decode()
        out.append((flag, payload, unpack_properties(props)))
        pos += total
    return out


def signature(fields: dict[str, Any], body: bytes, secret: str) -> str:
    """The ACL signature: base64 HMAC-SHA1 over the field values sorted by name, then the body."""
    text = "".join(str(fields[k]) for k in sorted(fields) if k != "Signature").encode() + body
    return base64.b64encode(hmac.new(secret.encode(), text, hashlib.sha1).digest()).decode()


def request(
    code: int,
    fields: dict[str, Any],
    body: bytes = b"",
    credentials: tuple[str, str] | None = None,
    channel: str = "ALIYUN",
) -> bytes:
    """A request frame, signed as the native client signs it when ``credentials`` (ak, sk) are given."""
    ext = {k: str(v) for k, v in fields.items()}
    if credentials:
        ext |= {"AccessKey": credentials[0], "OnsChannel": channel}
        ext["Signature"] = signature(ext, body, credentials[1])
    header = {"code": code, "language": "PYTHON", "version": 0, "opaque": next(_opaque), "flag": 0}
    return encode_frame({**header, "extFields": ext}, body)


def call(address: str, frame: bytes, timeout: float) -> tuple[int, str, bytes]:
    """Send one request frame to ``host:port`` and return the response's (code, remark, body)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(frame)
        with sock.makefile("rb") as stream:
            got = read_frame(stream)
    if got is None:
        raise WireError(f"{address} closed the connection without answering")
    header, body = got
    return int(header.get("code", -1)), str(header.get("remark") or ""), body
