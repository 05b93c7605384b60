"""The MNS fast path (``sources.mns.wire``) gives the SDK's results, field for field, without minidom.

No server: the replies are the XML MNS documents for BatchReceiveMessage, decoded by both
``decode_batch`` and the SDK's own ``BatchRecvMessageDecoder``; the emulator tests run the
same client against a server.
"""

from __future__ import annotations

import pytest
from mns.mns_exception import MNSClientNetworkException
from mns.mns_xml_handler import BatchRecvMessageDecoder, ReceiptHandlesEncoder

from sources.mns.wire import decode_batch, encode_handles

NS = "http://mns.aliyuncs.com/doc/v1/"


def _message(
    body: str = "aGVsbG8=", extra: str = "", handle: str = "1-ODU4OTkzNDU5My0x", **drop: bool
) -> str:
    fields = {
        "MessageId": "5F290C926D472878-2-14D9529A8FA-200000001",
        "ReceiptHandle": handle,
        "MessageBodyMD5": "C5DD56A39F5F7BB8B3337C6D11B6D8C7",
        "MessageBody": body,
        "EnqueueTime": "1250700979248",
        "NextVisibleTime": "1250700799348",
        "FirstDequeueTime": "1250700779318",
        "DequeueCount": "1",
        "Priority": "8",
    }
    inner = "".join(f"<{k}>{v}</{k}>" for k, v in fields.items() if not drop.get(k))
    return f"<Message>{inner}{extra}</Message>"


def _reply(*messages: str) -> bytes:
    body = "".join(messages)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<Messages xmlns="{NS}">\n{body}\n</Messages>'.encode()


def _fields(entry) -> dict:
    props = ("user_properties", "system_properties")
    return vars(entry) | {p: {k: vars(v) for k, v in getattr(entry, p).items()} for p in props}


def _same(xml: bytes) -> list[dict]:
    ours = [_fields(e) for e in decode_batch(xml)]
    theirs = [_fields(e) for e in BatchRecvMessageDecoder.decode(xml, False)]
    assert ours == theirs
    return ours


def test_messages_decode_as_the_sdk_decodes_them():
    got = _same(
        _reply(
            _message(),
            _message(
                body="a &amp; &lt;b&gt; é 中", handle="2-x", extra="<MessageGroupId>g1</MessageGroupId>"
            ),
            _message(body="  spaced  "),
        )
    )
    assert [m["message_body"] for m in got] == ["aGVsbG8=", "a & <b> é 中", "  spaced  "]
    assert got[1]["message_group_id"] == "g1" and got[0]["message_group_id"] == ""
    assert (got[0]["dequeue_count"], got[0]["priority"], got[0]["enqueue_time"]) == (1, 8, 1250700979248)


def test_a_reply_with_properties_is_decoded_by_the_sdk():
    props = (
        "<UserProperties><PropertyValue><Name>k</Name><Value>v</Value><Type>STRING</Type>"
        "</PropertyValue></UserProperties>"
    )
    got = _same(_reply(_message(), _message(extra=props)))
    assert got[0]["user_properties"] == {}
    assert [(k, v["string_value"]) for k, v in got[1]["user_properties"].items()] == [("k", "v")]


@pytest.mark.parametrize(
    "xml",
    [
        b"<Messages><Message>",  # cut short
        b"",
        f'<Error xmlns="{NS}"><Code>X</Code></Error>'.encode(),  # no Messages element
        _reply(_message(MessageBody=True)),  # a required field missing
        _reply(_message(body="")),  # an empty body: the SDK drops the element, then misses it
        _reply(_message().replace("<Priority>8<", "<Priority>high<")),
    ],
    ids=["truncated", "empty", "no-messages", "missing-field", "empty-body", "bad-int"],
)
def test_a_damaged_reply_raises_what_the_sdk_raises(xml):
    with pytest.raises(MNSClientNetworkException) as ours:
        decode_batch(xml, "req-1")
    with pytest.raises(MNSClientNetworkException) as theirs:
        BatchRecvMessageDecoder.decode(xml, False, "req-1")
    assert ours.value.type == theirs.value.type == "RespDataDamaged"
    assert ours.value.req_id == "req-1"


def test_an_empty_reply_is_no_messages():
    assert _same(_reply()) == []


@pytest.mark.parametrize("handles", [["1-abc"], ["a&b", "<c>", 'd"e', "f'g", "中"], []])
def test_delete_bodies_are_the_sdks_bytes(handles):
    assert encode_handles(handles) == ReceiptHandlesEncoder.encode(handles)


def test_body_decoding_examples():
    import doctest

    from sources.mns import messages

    assert doctest.testmod(messages).attempted and doctest.testmod(messages).failed == 0
