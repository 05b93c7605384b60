"""The MNS queue operations of the emulator: the request signature check, routing, and XML replies.

``MnsApi`` answers one request at a time on a ``Store`` (``tests.emulators.mns_store``) and
knows nothing of HTTP connections; ``tests.emulators.mns.MnsEmulator`` serves it over HTTP.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import time
from typing import Any
from urllib.parse import unquote
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from tests.emulators.mns_queue import BATCH_BYTES_MAX, BATCH_MAX, MnsError, checked_int, invalid
from tests.emulators.mns_store import Store

NS = "http://mns.aliyuncs.com/doc/v1/"
VERSION = "2015-06-06"
MAX_CLOCK_SKEW = 900
"""Seconds a request's ``Date`` may differ from the server clock (MNS: 15 minutes)."""
SEND_FIELDS = ("MessageId", "MessageBodyMD5")
PEEK_FIELDS = (*SEND_FIELDS, "MessageBody", "EnqueueTime", "FirstDequeueTime", "DequeueCount", "Priority")
RECEIVE_FIELDS = (*PEEK_FIELDS, "ReceiptHandle", "NextVisibleTime")
QUEUE_FIELDS: tuple[str, ...] = ("ActiveMessages", "InactiveMessages", "DelayMessages", "CreateTime")
QUEUE_FIELDS += ("LastModifyTime", "QueueName", "VisibilityTimeout", "MaximumMessageSize")
QUEUE_FIELDS += ("MessageRetentionPeriod", "DelaySeconds", "PollingWaitSeconds", "LoggingEnabled")
Reply = tuple[int, bytes, dict[str, str]]


class Drop(Exception):
    """Close the connection without a reply (fault injection)."""


def _fields(values: dict[str, Any], names: tuple[str, ...]) -> str:
    return "".join(f"<{k}>{escape(str(values[k]))}</{k}>" for k in names)


def _error_fields(err: MnsError) -> str:
    return f"<ErrorCode>{err.code}</ErrorCode><ErrorMessage>{escape(err.message)}</ErrorMessage>"


def _check_count(n: int, what: str) -> None:
    if not 1 <= n <= BATCH_MAX:
        raise invalid(f"the count of {what}", 1, BATCH_MAX)


def doc(root: str, inner: str) -> bytes:
    """An XML reply body: ``inner`` in a ``root`` element of the MNS namespace."""
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="{NS}">{inner}</{root}>'.encode()


def _parse(body: bytes) -> ElementTree.Element:
    try:
        return ElementTree.fromstring(body)
    except ElementTree.ParseError:
        raise MnsError(400, "MalformedXML", "The XML you provided was not well-formed.") from None


def _local(el: ElementTree.Element) -> str:
    return el.tag.rsplit("}", 1)[-1]


def _children(el: ElementTree.Element) -> dict[str, str]:
    return {_local(c): c.text or "" for c in el}


def _query(raw: str) -> dict[str, str]:
    # Split by hand: parse_qs would turn the '+' of a receipt handle into a space.
    out = {}
    for part in filter(None, raw.split("&")):
        key, _, value = part.partition("=")
        out[key.lower()] = unquote(value)
    return out


def _entry(fields: dict[str, str]) -> dict[str, Any]:
    """A send entry from a ``<Message>``: body, and delay and priority when given."""
    entry: dict[str, Any] = {"body": fields.get("MessageBody", "")}
    if fields.get("DelaySeconds"):
        entry["delay"] = checked_int("DelaySeconds", fields["DelaySeconds"], " seconds")
    if fields.get("Priority"):
        entry["priority"] = checked_int("Priority", fields["Priority"])
    return entry


class MnsApi:
    """The queue REST API of one emulated account: ``credentials`` (AccessKey id → secret), ``store``."""

    def __init__(self, credentials: dict[str, str], store: Store) -> None:
        self.credentials = credentials
        self.store = store

    def authenticate(self, method: str, target: str, headers: Any, body: bytes) -> None:
        """Check the request's headers and signature as MNS does; raise MnsError if they fail."""
        if headers.get("x-mns-version") != VERSION:
            raise MnsError(400, "InvalidVersionHeader", f"x-mns-version must be {VERSION}.")
        date = headers.get("date")
        if not date:
            raise MnsError(400, "MissingDateHeader", "Date header is required.")
        try:
            sent = email.utils.parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            raise MnsError(400, "InvalidDateHeader", "The Date header format is invalid.") from None
        if abs(time.time() - sent) > MAX_CLOCK_SKEW:
            raise MnsError(408, "TimeExpired", "The http request you sent is expired.")
        md5 = headers.get("content-md5", "")
        if body and md5 and md5 != base64.b64encode(hashlib.md5(body).hexdigest().encode()).decode():
            raise MnsError(400, "InvalidDegist", "The Content-MD5 you specified is invalid.")
        auth = headers.get("authorization")
        if not auth:
            raise MnsError(400, "MissingAuthorizationHeader", "Authorization header is required.")
        scheme, _, cred = auth.partition(" ")
        key_id, _, signature = cred.partition(":")
        if scheme != "MNS" or not key_id or not signature:
            raise MnsError(400, "InvalidAuthorizationHeader", "The Authorization header format is invalid.")
        secret = self.credentials.get(key_id)
        if secret is None:
            raise MnsError(403, "InvalidAccessKeyId", "The AccessKey Id you provided is not exist.")
        mns_headers = sorted(
            (k.lower(), v.strip()) for k, v in headers.items() if k.lower().startswith("x-mns-")
        )
        canonical = "".join(f"{k}:{v}\n" for k, v in mns_headers)
        content_type = headers.get("content-type", "")
        to_sign = f"{method}\n{md5}\n{content_type}\n{date}\n{canonical}{target}"
        expected = base64.b64encode(hmac.new(secret.encode(), to_sign.encode(), hashlib.sha1).digest())
        if not hmac.compare_digest(expected.decode(), signature):
            text = "The request signature we calculated does not match the signature you provided."
            raise MnsError(403, "SignatureDoesNotMatch", text)

    def handle(self, method: str, target: str, body: bytes, host: str) -> Reply:
        """Route one authenticated request to its operation."""
        path, _, raw_query = target.partition("?")
        parts, query = path.strip("/").split("/"), _query(raw_query)
        if len(parts) not in (2, 3) or parts[0] != "queues" or (len(parts) == 3 and parts[2] != "messages"):
            raise MnsError(400, "InvalidRequestURL", "Http request URL format invalid.")
        name, on_messages = parts[1], len(parts) == 3
        action = self._action(method, on_messages, query, body)
        fault = self.store.take_fault(action)
        if fault is not None and fault.entries is None:
            if fault.code == "drop":
                raise Drop()
            raise MnsError(500, fault.code, "Injected failure.")
        return self._run(action, name, query, body, host, fault)

    @staticmethod
    def _action(method: str, on_messages: bool, query: dict[str, str], body: bytes) -> str:
        if not on_messages:
            actions = {"GET": "GetQueueAttributes", "DELETE": "DeleteQueue"}
            action = {"PUT": "CreateQueue", **actions}.get(method)
        elif method == "POST":
            action = "BatchSendMessage" if _local(_parse(body)) == "Messages" else "SendMessage"
        elif method == "GET":
            action = "PeekMessage" if query.get("peekonly") == "true" else "ReceiveMessage"
            action = "Batch" + action if "numofmessages" in query else action
        elif method == "DELETE":
            action = "DeleteMessage" if "receipthandle" in query else "BatchDeleteMessage"
        else:
            action = "ChangeMessageVisibility" if method == "PUT" else None
        if action is None:
            raise MnsError(400, "InvalidRequestURL", "Http request URL format invalid.")
        return action

    def _run(
        self, action: str, name: str, query: dict[str, str], body: bytes, host: str, fault: Any
    ) -> Reply:
        store = self.store
        if action == "CreateQueue":
            status = 201 if store.create_queue(name, _children(_parse(body)) if body else {}) else 204
            return status, b"", {"Location": f"http://{host}/queues/{name}"}
        if action == "GetQueueAttributes":
            return 200, doc("Queue", _fields(store.get_attributes(name), QUEUE_FIELDS)), {}
        if action == "DeleteQueue":
            store.delete_queue(name)
            return 204, b"", {}
        if action.endswith("SendMessage"):
            return self._send(name, body, action == "BatchSendMessage", fault)
        if action.endswith(("ReceiveMessage", "PeekMessage")):
            peek, batch = action.endswith("PeekMessage"), action.startswith("Batch")
            n = checked_int("numOfMessages", query["numofmessages"]) if batch else 1
            if peek:
                got = store.peek(name, n)
            else:
                wait = query.get("waitseconds")  # absent: the queue's PollingWaitSeconds
                got = store.receive(
                    name, n, None if wait is None else checked_int("waitseconds", wait, " seconds")
                )
            names = PEEK_FIELDS if peek else RECEIVE_FIELDS
            if not batch:
                return 200, doc("Message", _fields(got[0], names)), {}
            return 200, doc("Messages", "".join(f"<Message>{_fields(m, names)}</Message>" for m in got)), {}
        if action == "DeleteMessage":
            (err,) = store.delete(name, [query["receipthandle"]])
            if err is not None:
                raise err
            return 204, b"", {}
        if action == "BatchDeleteMessage":
            return self._batch_delete(name, [el.text or "" for el in _parse(body)], fault)
        if "receipthandle" not in query:
            raise MnsError(400, "MissingReceiptHandle", "ReceiptHandle is required.")
        seconds = checked_int("VisibilityTimeout", query["visibilitytimeout"], " seconds")
        handle, visible = store.change_visibility(name, query["receipthandle"], seconds)
        values = {"ReceiptHandle": handle, "NextVisibleTime": visible}
        return 200, doc("ChangeVisibility", _fields(values, ("ReceiptHandle", "NextVisibleTime"))), {}

    def _send(self, name: str, body: bytes, batch: bool, fault: Any) -> Reply:
        entries = [_entry(_children(m)) for m in _parse(body)] if batch else [_entry(_children(_parse(body)))]
        _check_count(len(entries), "messages")
        if batch and sum(len(e["body"].encode("utf-8")) for e in entries) > BATCH_BYTES_MAX:
            raise invalid("the total size of messages", 1, BATCH_BYTES_MAX, " bytes")
        results = self.store.send(name, entries, fault)
        if not batch:
            if isinstance(results[0], MnsError):
                raise results[0]
            return 201, doc("Message", _fields(results[0], SEND_FIELDS)), {}
        items, status = [], 201
        for r in results:
            if isinstance(r, MnsError):
                status = max(status, r.status)
                items.append(_error_fields(r))
            else:
                items.append(_fields(r, SEND_FIELDS))
        return status, doc("Messages", "".join(f"<Message>{i}</Message>" for i in items)), {}

    def _batch_delete(self, name: str, handles: list[str], fault: Any) -> Reply:
        _check_count(len(handles), "receipt handles")
        results = self.store.delete(name, handles, fault)
        failed = [(h, e) for h, e in zip(handles, results, strict=True) if e is not None]
        if not failed:
            return 204, b"", {}
        inner = "".join(
            f"<Error>{_error_fields(e)}<ReceiptHandle>{escape(h)}</ReceiptHandle></Error>" for h, e in failed
        )
        return 404, doc("Errors", inner), {}
