"""MNS's two per-message calls with C XML: BatchReceiveMessage replies, BatchDeleteMessage bodies.

aliyun-mns-sdk parses every reply with ``xml.dom.minidom`` and writes every request body with
it: pure-Python DOM building that costs more than half of the client's CPU on a receive and
delete loop. ``FastClient`` is the SDK's own ``MNSClient`` (signing, HTTP, credentials, error
replies and their exceptions all unchanged) with those two calls reading and writing XML
through ``xml.etree.ElementTree`` (expat in C). A reply that carries message properties goes to
the SDK's decoder, so what a caller gets is the SDK's result, field for field.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from mns.mns_client import URISEC_MESSAGE, URISEC_QUEUE, MNSClient
from mns.mns_exception import MNSClientNetworkException
from mns.mns_http import RequestInternal
from mns.mns_request import ReceiveMessageResponseEntry
from mns.mns_tool import BatchDeleteMessageValidator, BatchReceiveMessageValidator
from mns.mns_xml_handler import XMLNS, BatchDeleteMessageDecoder, BatchRecvMessageDecoder

_PROPERTIES = ("UserProperties", "SystemProperties")
_INTS = ("DequeueCount", "EnqueueTime", "FirstDequeueTime", "Priority", "NextVisibleTime")
_STRINGS = ("MessageId", "MessageBodyMD5", "ReceiptHandle")


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def decode_batch(xml_data: bytes | str, req_id: str | None = None) -> list[Any]:
    """A BatchReceiveMessage reply as the SDK's ``ReceiveMessageResponseEntry`` list, bodies as sent.

    Raises the SDK's ``MNSClientNetworkException("RespDataDamaged")`` where the SDK would: an
    unreadable reply, no ``Messages`` element, or a message without a required field.
    """
    try:
        root = ElementTree.fromstring(xml_data)
    except ElementTree.ParseError:
        raise MNSClientNetworkException("RespDataDamaged", xml_data, req_id) from None
    if _local(root.tag) != "Messages":
        found = next((e for e in root.iter() if _local(e.tag) == "Messages"), None)
        if found is None:
            raise MNSClientNetworkException("RespDataDamaged", xml_data, req_id)
        root = found
    skip = len(root.tag) - len("Messages")  # the "{namespace}" prefix every tag carries
    fields_list = []
    for message in root:
        if message.tag[skip:] != "Message":
            continue
        fields = {}
        for child in message:
            name = child.tag[skip:]
            if name in _PROPERTIES:
                return list(BatchRecvMessageDecoder.decode(xml_data, False, req_id))
            if child.text is not None or len(child):  # minidom keeps only elements with content
                fields[name] = child.text or ""
        fields_list.append(fields)
    try:
        return [_entry(fields) for fields in fields_list]
    except (KeyError, ValueError):
        raise MNSClientNetworkException("RespDataDamaged", xml_data, req_id) from None


def _entry(fields: dict[str, str]) -> Any:
    entry = ReceiveMessageResponseEntry()
    entry.message_body = fields["MessageBody"]
    (
        entry.dequeue_count,
        entry.enqueue_time,
        entry.first_dequeue_time,
        entry.priority,
        entry.next_visible_time,
    ) = (int(fields[k]) for k in _INTS)
    entry.message_id, entry.message_body_md5, entry.receipt_handle = (fields[k] for k in _STRINGS)
    entry.message_group_id = fields.get("MessageGroupId", "")
    entry.user_properties = {}
    entry.system_properties = {}
    return entry


def _escape(text: str) -> str:
    # The escapes minidom's writer applies to text, so the body is byte for byte the SDK's.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;").replace(">", "&gt;")


def encode_handles(handles: list[str]) -> bytes:
    """A BatchDeleteMessage body, the bytes the SDK's ``ReceiptHandlesEncoder`` writes."""
    inner = "".join(f"<ReceiptHandle>{_escape(h)}</ReceiptHandle>" for h in handles)
    text = f'<?xml version="1.0" encoding="utf-8"?><ReceiptHandles xmlns="{XMLNS}">{inner}</ReceiptHandles>'
    return text.encode("utf-8")


class FastClient(MNSClient):
    """``MNSClient`` with BatchReceiveMessage and BatchDeleteMessage through ElementTree.

    Bodies are returned as sent (the caller decodes base64: ``Queue.set_encoding(False)``);
    a request that asks the SDK to decode them goes the SDK's way.
    """

    def batch_receive_message(self, req: Any, resp: Any) -> None:
        if req.base64decode:
            super().batch_receive_message(req, resp)
            return
        BatchReceiveMessageValidator.validate(req)
        uri = f"/{URISEC_QUEUE}/{req.queue_name}/{URISEC_MESSAGE}?numOfMessages={req.batch_size}"
        if req.wait_seconds != -1:
            uri += f"&waitseconds={req.wait_seconds}"
        req_inter = RequestInternal(req.method, uri)
        self.build_header(req, req_inter)
        resp_inter = self.http.send_request(req_inter)
        resp.status, resp.header = resp_inter.status, resp_inter.header
        self.check_status(req_inter, resp_inter, resp)
        if resp.error_data == "":
            resp.message_list = decode_batch(resp_inter.data, req_inter.get_req_id())

    def batch_delete_message(self, req: Any, resp: Any) -> None:
        BatchDeleteMessageValidator.validate(req)
        req_inter = RequestInternal(req.method, f"/{URISEC_QUEUE}/{req.queue_name}/{URISEC_MESSAGE}")
        req_inter.data = encode_handles(req.receipt_handle_list)
        self.build_header(req, req_inter)
        resp_inter = self.http.send_request(req_inter)
        resp.status, resp.header = resp_inter.status, resp_inter.header
        self.check_status(req_inter, resp_inter, resp, BatchDeleteMessageDecoder)
