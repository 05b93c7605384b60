"""An MNS message as the pipeline's ``Received``: the body's base64, system fields, user properties."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ingest.connector import Received


def decode_body(wire: str, base64_body: bool) -> tuple[str, bool]:
    """(text, body_base64) of a body as MNS returned it.

    With ``base64_body`` the body is base64-decoded (whitespace ignored); if that fails it was
    not encoded and is kept as it is. Decoded bytes that are not UTF-8 are passed on as
    base64 with the flag set.

    >>> decode_body("aGk=", True), decode_body("plain text", True), decode_body("/w==", True)
    (('hi', False), ('plain text', False), ('/w==', True))
    """
    if not base64_body:
        return wire, False
    try:
        raw = base64.b64decode("".join(wire.split()), validate=True)
    except (binascii.Error, ValueError):
        return wire, False
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), True


def _property(value: Any) -> str:
    """A user property as text; Binary ones as ``binary:<base64>`` (as the SQS source does)."""
    if value.get_data_type() == "BINARY":
        return "binary:" + base64.b64encode(value.get_binary_value()).decode("ascii")
    return str(value.get_string_value_by_type())


def received(m: Any, base64_body: bool) -> Received:
    """An SDK ``Message`` as the pipeline's ``Received``: its body decoded, its system fields as
    attributes, its user properties as message attributes."""
    body, is_b64 = decode_body(m.message_body or "", base64_body)
    attrs = {
        "MessageId": m.message_id,
        "ReceiptHandle": m.receipt_handle,
        "EnqueueTime": str(m.enqueue_time),
        "FirstDequeueTime": str(m.first_dequeue_time),
        "DequeueCount": str(m.dequeue_count),
        "Priority": str(m.priority),
        "MessageBodyMD5": m.message_body_md5,
        "NextVisibleTime": str(m.next_visible_time),
    }
    if m.message_group_id:
        attrs["MessageGroupId"] = m.message_group_id
    props = getattr(m, "user_properties", None) or {}
    return Received(
        message_id=m.message_id,
        receipt_handle=m.receipt_handle,
        body=body,
        body_base64=is_b64,
        md5=m.message_body_md5,
        sent_ts=m.enqueue_time,
        first_receive_ts=m.first_dequeue_time or None,
        receive_count=max(1, m.dequeue_count),
        enqueue_ts=m.enqueue_time,
        group_id=m.message_group_id or None,
        priority=m.priority,
        attributes=attrs,
        message_attributes={k: _property(v) for k, v in props.items()},
        message_attribute_types={k: str(v.get_data_type()) for k, v in props.items()},
    )
