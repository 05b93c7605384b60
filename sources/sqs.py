"""AWS SQS source (standard and FIFO) through boto3, with batched deletes and visibility changes."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ingest.config.sources import SqsSourceConfig
from ingest.errors import TransientError, call_with_retries
from sources.base import AckResult, Received
from sources.sqs_client import ClientFactory, classify

T = TypeVar("T")
BATCH = 10  # SQS's limit for every *Batch call


def message_attributes(raw: dict[str, Any]) -> dict[str, str]:
    """String and Number attributes as their text; Binary ones as base64 text."""
    out = {}
    for name, value in raw.items():
        if "BinaryValue" in value:
            out[name] = base64.b64encode(value["BinaryValue"]).decode()
        else:
            out[name] = value.get("StringValue", "")
    return out


def _int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


class SqsSource:
    """Long-polls one SQS queue; the pipeline deletes after Spark commits.

    Guarantee: at-least-once from SQS (messages come back after the visibility timeout until
    deleted); the pipeline's dedup makes the effect exactly-once. FIFO queues: each receive
    carries a ``ReceiveRequestAttemptId`` (reused when the same receive is retried), and
    SQS's group lock means a group yields at most 10 messages per receive-ack round.

    The client interface is narrow: ReceiveMessage, DeleteMessageBatch,
    ChangeMessageVisibilityBatch. Errors: bad credentials, a missing queue or access denied
    are fatal and name the queue; throttling, 5xx and network errors are retried up to
    ``sqs.max.retries`` times with exponential backoff.
    """

    def __init__(self, cfg: SqsSourceConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.queue = cfg.url
        self.max_batch = cfg.max_messages
        self.visibility_timeout = cfg.visibility_timeout
        self.fifo = cfg.url.endswith(".fifo")
        self._clients = ClientFactory(cfg)

    def _call(self, action: str, fn: Callable[[], T]) -> T:
        def attempt() -> T:
            try:
                return fn()
            except Exception as err:
                raise classify(err, self.queue, action) from err

        return call_with_retries(attempt, attempts=self.cfg.max_retries + 1)

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
        kwargs: dict[str, Any] = {
            "QueueUrl": self.queue,
            "MaxNumberOfMessages": max(1, min(max_messages, self.max_batch)),
            "WaitTimeSeconds": int(min(wait_seconds, self.cfg.wait_time_seconds)),
            "VisibilityTimeout": int(self.visibility_timeout),
            "MessageSystemAttributeNames": ["All"],
            "MessageAttributeNames": ["All"],
        }
        if self.fifo:
            kwargs["ReceiveRequestAttemptId"] = uuid.uuid4().hex
        resp = self._call("ReceiveMessage", lambda: self._clients.client().receive_message(**kwargs))
        return [self._received(m) for m in resp.get("Messages", [])]

    def _received(self, m: dict[str, Any]) -> Received:
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
        )

    def _batched(self, action: str, handles: Sequence[str], entry: Callable[[str, str], dict]) -> AckResult:
        """Run a *Batch call over ``handles`` in chunks of 10, retrying only failed retryable entries."""
        result = AckResult()
        unique = list(dict.fromkeys(handles))  # never the same handle twice in one call
        client_call = getattr(self._clients.client(), _METHOD[action])
        for start in range(0, len(unique), BATCH):
            pending = {str(i): h for i, h in enumerate(unique[start : start + BATCH])}

            def attempt(pending: dict[str, str] = pending) -> None:
                resp = self._call(
                    action,
                    lambda: client_call(
                        QueueUrl=self.queue, Entries=[entry(i, h) for i, h in pending.items()]
                    ),
                )
                for ok in resp.get("Successful", []):
                    result.deleted.append(pending.pop(ok["Id"]))
                retry = False
                for bad in resp.get("Failed", []):
                    if bad.get("SenderFault"):
                        result.failed[pending.pop(bad["Id"])] = f"{bad.get('Code')}: {bad.get('Message', '')}"
                    else:
                        retry = True
                if retry and pending:
                    raise TransientError(f"SQS {action} on {self.queue}: {len(pending)} entries failed")

            try:
                call_with_retries(attempt, attempts=self.cfg.max_retries + 1)
            except TransientError as err:
                result.failed.update(dict.fromkeys(pending.values(), str(err)))
        return result

    def ack(self, handles: Sequence[str]) -> AckResult:
        return self._batched("DeleteMessageBatch", handles, lambda i, h: {"Id": i, "ReceiptHandle": h})

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        secs = int(min(43200, max(0, seconds)))
        res = self._batched(
            "ChangeMessageVisibilityBatch",
            handles,
            lambda i, h: {"Id": i, "ReceiptHandle": h, "VisibilityTimeout": secs},
        )
        return {h: h for h in res.deleted}

    def release(self, handles: Sequence[str]) -> None:
        self.extend(handles, 0)

    def lag(self) -> int | None:
        """Messages available on the queue (ApproximateNumberOfMessages)."""
        resp = self._call(
            "GetQueueAttributes",
            lambda: self._clients.client().get_queue_attributes(
                QueueUrl=self.queue, AttributeNames=["ApproximateNumberOfMessages"]
            ),
        )
        return _int(resp.get("Attributes", {}).get("ApproximateNumberOfMessages"))

    def close(self) -> None:
        pass


_METHOD = {
    "DeleteMessageBatch": "delete_message_batch",
    "ChangeMessageVisibilityBatch": "change_message_visibility_batch",
}
