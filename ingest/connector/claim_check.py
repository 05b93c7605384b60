"""Claim-check for queue connectors: the Extended Client's pointer format, and offloading a sink's records.

A source marks a received pointer (``mark_pointer``: the message's ``payload_ref``); the job
fetches its payload in Spark and deletes it after the ack (``ingest.connector.payload_store``);
a sink puts records over its threshold in the bucket and sends pointers instead (``Offloader``).
The options are ``ingest.config.claim_check.ClaimCheckConfig``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import orjson

from ingest.config.claim_check import ClaimCheckConfig
from ingest.connector.payload_store import PayloadStore
from ingest.connector.source import Received
from ingest.errors import FatalError

POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
LEGACY_POINTER_CLASS = "com.amazon.sqs.javamessaging.MessageS3Pointer"
SIZE_ATTRIBUTE = "ExtendedPayloadSize"
"""The message attribute (Number) that marks a pointer and gives the payload's size in bytes."""
LEGACY_SIZE_ATTRIBUTE = "SQSLargePayloadSize"
SIZE_ATTRIBUTES = (SIZE_ATTRIBUTE, LEGACY_SIZE_ATTRIBUTE)
INVALID_REF = ""
"""``payload_ref`` of a message marked as a pointer whose body is not one: a bad message."""


def pointer_body(bucket: str, key: str) -> str:
    """The Extended Client's pointer body for an object.

    >>> pointer_body("b", "k")
    '["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}]'
    """
    return orjson.dumps([POINTER_CLASS, {"s3BucketName": bucket, "s3Key": key}]).decode()


def parse_pointer(body: str) -> tuple[str, str]:
    """(bucket, key) of a pointer body; ``ValueError`` saying why when it is not one.

    >>> parse_pointer('["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3BucketName":"b","s3Key":"k"}]')
    ('b', 'k')
    """
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValueError("the body is not JSON") from None
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], dict)):
        raise ValueError("the body is not a [class, {s3BucketName, s3Key}] pointer")
    if value[0] not in (POINTER_CLASS, LEGACY_POINTER_CLASS):
        raise ValueError(f"unknown pointer class {str(value[0])[:80]!r}")
    bucket, key = value[1].get("s3BucketName"), value[1].get("s3Key")
    if not (isinstance(bucket, str) and bucket and isinstance(key, str) and key):
        raise ValueError("the pointer lacks s3BucketName or s3Key")
    return bucket, key


def looks_like_pointer(body: str) -> bool:
    """A cheap first test for a pointer body (MNS, where no attribute marks one)."""
    return body.startswith('["') and (POINTER_CLASS in body[:60] or LEGACY_POINTER_CLASS in body[:60])


def payload_ref(body: str, attributes: Mapping[str, str], by_attribute: bool) -> str | None:
    """The ``payload_ref`` envelope value of a received message: ``bucket/key``, ``INVALID_REF``
    (marked as a pointer but not one), or None (an ordinary message).

    Args:
        body: the message body as received.
        attributes: its message attributes (SQS) or user properties (MNS).
        by_attribute: a pointer is marked by the size attribute (SQS); else by its body (MNS).
    """
    marked = any(a in attributes for a in SIZE_ATTRIBUTES)
    if not marked and (by_attribute or not looks_like_pointer(body)):
        return None
    try:
        bucket, key = parse_pointer(body)
    except ValueError:
        return INVALID_REF
    return f"{bucket}/{key}"


def mark_pointer(m: Received, by_attribute: bool) -> Received:
    """Set ``m.payload_ref`` if ``m`` is a payload pointer, and drop the size attribute from its
    attributes, as the Extended Client does (so a sink forwarding attributes does not copy it)."""
    m.payload_ref = payload_ref(m.body, m.message_attributes, by_attribute)
    if m.payload_ref is not None:
        for name in SIZE_ATTRIBUTES:
            m.message_attributes.pop(name, None)
            m.message_attribute_types.pop(name, None)
    return m


def payload_key(prefix: str, source_id: str | None, body: bytes) -> str:
    """The object key a sink writes a record's payload to: the same for a replayed record.

    >>> payload_key("p/", "m-1", b"x")
    'p/m-1/2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881'
    """
    head = source_id.replace("/", "_") if source_id else "no-id"
    return f"{prefix}{head}/{hashlib.sha256(body).hexdigest()}"


@dataclass(slots=True)
class Payload:
    """One offloaded record: where its body goes, and the body itself until it is stored."""

    bucket: str
    key: str
    body: str
    """The record's body (the row's own string: no copy is kept), encoded again when put."""
    size: int
    """The body's UTF-8 length in bytes (the ``ExtendedPayloadSize`` value)."""
    source_id: str | None
    stored: bool = False
    """Put once already: a re-sent entry does not upload it again."""

    @property
    def pointer(self) -> str:
        """The message body sent instead: the Extended Client's pointer to the object."""
        return pointer_body(self.bucket, self.key)


class Offloader:
    """Decides which records go through the bucket and puts their payloads there.

    ``owner`` is the sink's config (credentials and region for the bucket unless
    ``claim_check`` has its own). Picklable: the payload store and the semaphore bounding
    concurrent puts (``fetch_threads`` per writer, whatever the calls in flight) are made in
    the process that uses them.
    """

    def __init__(self, cfg: ClaimCheckConfig, owner: Any) -> None:
        if not cfg.bucket:
            raise ValueError("claim_check.bucket is needed: a sink puts offloaded payloads there")
        self.cfg, self.owner, self.bucket = cfg, owner, cfg.bucket
        self._store: PayloadStore | None = None
        self._slots = threading.BoundedSemaphore(cfg.fetch_threads)

    def __getstate__(self) -> dict[str, Any]:
        return {"cfg": self.cfg, "owner": self.owner}

    def __setstate__(self, state: dict[str, Any]) -> None:
        Offloader.__init__(self, state["cfg"], state["owner"])

    def wanted(self, size: int, default_limit: int) -> bool:
        """Whether a record of ``size`` bytes (as the queue counts them) is offloaded."""
        threshold = self.cfg.threshold
        if threshold == "always":
            return True
        return size > (default_limit if threshold is None else threshold)

    def payload(self, body: str, source_id: str | None) -> Payload:
        """The payload of one record, under a key that a replay of the record derives again.

        Raises ``UnicodeEncodeError`` for a body that is not valid Unicode text (lone surrogates).
        """
        data = body.encode("utf-8")
        key = payload_key(self.cfg.key_prefix, source_id, data)
        return Payload(self.bucket, key, body, len(data), source_id)

    def store(self, payloads: list[Payload]) -> None:
        """Put the payloads not stored yet, up to ``fetch_threads`` at once; raise the first failure.

        ``FatalError`` naming bucket and key when the bucket refuses for good (missing,
        denied); ``TransientError`` when PayloadStore's retries ran out: the batch fails and is
        replayed, its records put again under the same keys.
        """
        todo = [p for p in payloads if not p.stored]
        if len(todo) <= 1:
            for p in todo:
                self._put(p)
            return
        with ThreadPoolExecutor(min(len(todo), self.cfg.fetch_threads), "claim-check-put") as pool:
            futures = [pool.submit(self._put, p) for p in todo]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for f in pending:
                f.cancel()  # the first failure fails the call: puts not started are not made
            for f in done:
                f.result()

    def _put(self, p: Payload) -> None:
        if self._store is None:
            self._store = PayloadStore(self.cfg, self.owner)
        with self._slots:
            try:
                self._store.put(p.bucket, p.key, p.body.encode("utf-8"))
            except FatalError as err:  # PayloadUnavailable included: no retry or replay helps
                where = f"sinks.{self.owner.name}.claim_check"
                raise FatalError(
                    f"sink {self.owner.name}: payload of source message {p.source_id} not stored "
                    f"(check {where}.bucket and the credentials' s3:PutObject permission): {err}"
                ) from err
        p.stored = True
