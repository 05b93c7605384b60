"""AWS SQS source (standard and FIFO) over boto3: long polling, batched deletes and visibility changes."""

from __future__ import annotations

import base64
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ingest.config.aws import PROVIDER_CLASS
from ingest.connector import BINARY_PREFIX, AckResult, Received, Source
from ingest.connector.claim_check import mark_pointer
from ingest.errors import FatalError, TransientError, call_with_retries, error_code
from sources.calls import CallPool
from sources.sqs.client import ClientFactory, resolve_region
from sources.sqs.config import SqsSourceConfig
from sources.sqs.credentials import load_provider
from sources.sqs.errors import classify, entry_is_final

T = TypeVar("T")
BATCH = 10
"""SQS's limit on entries in every ``*Batch`` call."""
_PROBE_HANDLE = "mq-ingest-delete-permission-probe"
"""A receipt handle no queue ever issued: deleting it tests the permission and deletes nothing."""
log = logging.getLogger(__name__)
MAX_VISIBILITY = 43200
_CRT_METHODS = frozenset({"receive_message", "delete_message_batch", "change_message_visibility_batch"})
"""The per-message calls ``sqs.client: crt`` sends through awscrt; the rest go through boto3."""


def message_attributes(raw: dict[str, Any]) -> dict[str, str]:
    """Message attributes as text: String and Number (and custom) types as sent, Binary ``binary:<b64>``.

    The staged envelope holds a string map, so bytes cannot pass as such; the prefix keeps
    Binary values apart (in Spark: ``unbase64(substr(v, 8))`` gives the bytes). A String
    value that itself starts with ``binary:`` is told apart by ``message_attribute_types``,
    which keeps each attribute's data type.

    >>> message_attributes({"n": {"DataType": "Number", "StringValue": "4"},
    ...                     "b": {"DataType": "Binary", "BinaryValue": b"\\x00\\x01"}})
    {'n': '4', 'b': 'binary:AAE='}
    """
    out = {}
    for name, value in raw.items():
        if value.get("DataType", "").startswith("Binary") or "BinaryValue" in value:
            data = value.get("BinaryValue", b"")  # awscrt's replies keep it base64 text
            text = data if isinstance(data, str) else base64.b64encode(data).decode("ascii")
            out[name] = BINARY_PREFIX + text
        else:
            out[name] = value.get("StringValue", "")
    return out


def _int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


class SqsSource(Source):
    """Long-polls one SQS queue (standard or FIFO); the pipeline deletes after Spark commits.

    A FIFO receive carries a ``ReceiveRequestAttemptId``, reused when that same receive is
    retried, so SQS returns the same messages instead of locking them away. Receives, deletes
    and visibility changes go through awscrt or boto3 (``sqs.client``); the probe and queue
    attributes through boto3. Its calls, errors and options: ``docs/sources/sqs.md``.
    """

    can_probe = True
    reports_lag = True

    def __init__(self, cfg: SqsSourceConfig) -> None:
        region = resolve_region(cfg.url, cfg.region, cfg.profile, f"sources.{cfg.name}.sqs.region")
        cfg = self.cfg = cfg.model_copy(update={"region": region})
        if cfg.credentials_class:  # found now (``check``), called where the clients are made
            load_provider(cfg.credentials_class, f"sources.{cfg.name}.{PROVIDER_CLASS}")
        self.name = cfg.name
        self.queue = cfg.url
        self.max_batch = cfg.max_messages
        self.visibility_timeout = float(math.ceil(cfg.visibility_timeout))  # SQS takes whole seconds
        self.fifo = cfg.url.endswith(".fifo")
        self._clients = ClientFactory(cfg, read_timeout=cfg.wait_time_seconds + 15)
        # Apart, so a batch's deletes never queue behind a lease-keeper round of extends.
        self._deletes = CallPool(f"sqs-delete-{cfg.name}", cfg.ack_calls)
        self._extends = CallPool(f"sqs-extend-{cfg.name}", cfg.ack_calls)

    def _request(self, action: str, method: str, **kwargs: Any) -> dict[str, Any]:
        """One SQS call, its errors classified; no retries here."""
        try:
            if method in _CRT_METHODS and self.cfg.client == "crt":
                return self._clients.crt().call(action, {"QueueUrl": self.queue, **kwargs})
            return getattr(self._clients.client(), method)(QueueUrl=self.queue, **kwargs)
        except Exception as err:
            raise classify(err, self.queue, action) from err

    def _retried(self, what: str, fn: Callable[[], T]) -> T:
        return call_with_retries(fn, what=f"SQS {what} on {self.queue}", attempts=self.cfg.max_retries + 1)

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
        """Up to ``max_messages`` (≤ ``sqs.messages.max``), long-polling ``wait_seconds`` (whole, capped)."""
        kwargs: dict[str, Any] = {
            "MaxNumberOfMessages": max(1, min(int(max_messages), self.max_batch)),
            "WaitTimeSeconds": max(0, int(min(wait_seconds, self.cfg.wait_time_seconds))),
            "VisibilityTimeout": int(self.visibility_timeout),
            "AttributeNames": ["All"],
            "MessageSystemAttributeNames": ["All"],
            "MessageAttributeNames": ["All"],
        }
        if self.fifo:
            kwargs["ReceiveRequestAttemptId"] = uuid.uuid4().hex  # fixed across this call's retries

        def attempt() -> dict[str, Any]:
            try:
                return self._request("ReceiveMessage", "receive_message", **kwargs)
            except TransientError:
                self.receive_failed_at = time.monotonic()  # moto's 500 after hiding messages
                raise

        resp = self._retried("ReceiveMessage", attempt)
        messages = [self._received(m) for m in resp.get("Messages", [])]
        return [mark_pointer(m, by_attribute=True) for m in messages] if self.cfg.claim_check else messages

    def probe(self) -> None:
        """At start, fail fast where every delete would fail: may these credentials reach the
        queue and delete from it? A DeleteMessage with a handle that cannot exist answers
        ReceiptHandleIsInvalid when they may, AccessDenied when they may not. A source with
        ``delete_message: false`` never deletes, so it only checks it can read the queue.
        Network errors, throttling and 5xx are retried as any call is (``sqs.max.retries``);
        then ``TransientError`` names the queue and the endpoint."""
        try:
            self._retried("probe", self._probe_once)
        except TransientError as err:
            endpoint = self.cfg.endpoint_url or self._clients.client().meta.endpoint_url
            where = f"SQS queue {self.queue} at {endpoint} (sqs.max.retries: {self.cfg.max_retries})"
            raise TransientError(f"cannot reach {where}: {err}") from err

    def _probe_once(self) -> None:
        if not self.cfg.delete_message:
            self.lag()
            return
        try:
            self._clients.client().delete_message(QueueUrl=self.queue, ReceiptHandle=_PROBE_HANDLE)
        except Exception as err:
            code = error_code(err)[0] if hasattr(err, "response") else ""
            if code in ("ReceiptHandleIsInvalid", "InvalidParameterValue", "InvalidReceiptHandle"):
                return
            classified = classify(err, self.queue, "DeleteMessage")
            if code in ("AccessDenied", "AccessDeniedException"):
                raise FatalError(
                    f"SQS queue {self.queue}: these credentials may not delete its messages "
                    f"(sqs:DeleteMessage denied), so nothing read could ever be acked: {classified}"
                ) from None
            if isinstance(classified, (FatalError, TransientError)):
                raise classified from None
            log.warning("could not check the delete permission on %s: %s", self.queue, classified)

    def lag(self) -> int:
        """Messages waiting on the queue (ApproximateNumberOfMessages, visible and delayed)."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
        resp = self._request("GetQueueAttributes", "get_queue_attributes", AttributeNames=names)
        return sum(int(resp.get("Attributes", {}).get(n, 0)) for n in names)

    @staticmethod
    def _received(m: dict[str, Any]) -> Received:
        attrs = {k: str(v) for k, v in m.get("Attributes", {}).items()}
        return Received(
            message_id=m["MessageId"],
            receipt_handle=m["ReceiptHandle"],
            body=m.get("Body", ""),
            md5=m.get("MD5OfBody"),
            sent_ts=_int(attrs.get("SentTimestamp")),
            first_receive_ts=_int(attrs.get("ApproximateFirstReceiveTimestamp")),
            receive_count=_int(attrs.get("ApproximateReceiveCount")) or 1,
            enqueue_ts=_int(attrs.get("SentTimestamp")),
            sender_id=attrs.get("SenderId"),
            group_id=attrs.get("MessageGroupId"),
            dedup_id=attrs.get("MessageDeduplicationId"),
            sequence_number=attrs.get("SequenceNumber"),
            attributes=attrs,
            message_attributes=message_attributes(m.get("MessageAttributes", {})),
            message_attribute_types={
                k: str(v.get("DataType", "")) for k, v in m.get("MessageAttributes", {}).items()
            },
        )

    def _per_handle(
        self, action: str, method: str, handles: Sequence[str], extra: dict[str, Any] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """Run a ``*Batch`` call over ``handles`` in chunks of 10; returns the handles it was done
        for, and the failed ones with why.

        Handles are deduplicated first (SQS rejects a batch naming one twice). A failed entry
        that ``entry_is_final`` (invalid or stale handle) is final; the others, and whole-call
        transient errors, are re-sent — only the still-pending entries — until the retries
        run out (deletes: ``deleteMaxRetries``; visibility: ``sqs.max.retries``), then
        reported as failed. Fatal errors raise.
        """
        deleting = method == "delete_message_batch"
        retries = self.cfg.delete_max_retries if deleting else self.cfg.max_retries
        done: list[str] = []
        failed: dict[str, str] = {}
        unique = list(dict.fromkeys(handles))

        def call(chunk: Sequence[str]) -> None:
            pending = {str(i): h for i, h in enumerate(chunk)}

            def attempt(pending: dict[str, str] = pending) -> None:
                entries = [{"Id": i, "ReceiptHandle": h, **(extra or {})} for i, h in pending.items()]
                resp = self._request(action, method, Entries=entries)
                for ok in resp.get("Successful", []):
                    done.append(pending.pop(ok["Id"]))
                retryable = []
                for bad in resp.get("Failed", []):
                    reason = f"{bad.get('Code')}: {bad.get('Message', '')}"
                    if entry_is_final(bad):
                        failed[pending.pop(bad["Id"])] = reason
                    else:
                        retryable.append(reason)
                if pending:
                    raise TransientError(
                        f"SQS {action} on {self.queue}: {len(pending)} entries failed, e.g. "
                        f"{retryable[0] if retryable else 'no answer for them'}"
                    )

            try:
                call_with_retries(attempt, what=f"SQS {action} on {self.queue}", attempts=retries + 1)
            except TransientError as err:
                failed.update(dict.fromkeys(pending.values(), str(err)))

        pool = self._deletes if deleting else self._extends
        pool.map(call, [unique[start : start + BATCH] for start in range(0, len(unique), BATCH)])
        return done, failed

    def ack(self, handles: Sequence[str]) -> AckResult:
        """Delete; ``AckResult.deleted`` holds the handles SQS accepted, ``failed`` the others with why."""
        deleted, failed = self._per_handle("DeleteMessageBatch", "delete_message_batch", handles)
        return AckResult(deleted, failed)

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        """Hide for ``seconds`` from now (whole seconds, ≤ 12 h); SQS keeps handles: ``{h: h}``."""
        secs = int(min(MAX_VISIBILITY, max(0, math.ceil(seconds))))
        extended, _ = self._per_handle(
            "ChangeMessageVisibilityBatch",
            "change_message_visibility_batch",
            handles,
            {"VisibilityTimeout": secs},
        )
        return {h: h for h in extended}

    def release(self, handles: Sequence[str]) -> None:
        """Make visible again at once (visibility 0); handles that fail simply time out."""
        self.extend(handles, 0)

    def close(self) -> None:
        self._deletes.close()
        self._extends.close()
        self._clients.close()
