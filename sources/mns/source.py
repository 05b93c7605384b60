"""Alibaba Cloud MNS (SMQ) source on aliyun-mns-sdk: long polls, batch deletes, new handles."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

from ingest.connector import AckResult, Received, Source
from ingest.connector.claim_check import mark_pointer
from ingest.errors import FatalError, TransientError, call_with_retries
from sources.calls import CallPool
from sources.mns.client import BATCH, PER_HANDLE_CODES, QueueClients, Renewals, classify, error_code
from sources.mns.config import MnsSourceConfig
from sources.mns.messages import received

log = logging.getLogger(__name__)
MIN_VISIBILITY, MAX_VISIBILITY = 1, 43200
"""ChangeMessageVisibility's range in seconds (MNS API reference: 1 to 43200)."""
_SHORT_VISIBILITY = (
    "MNS queue %s hides received messages for %.0fs, shorter than the configured visibility_timeout "
    "%.0fs: using %.0fs, so in-flight messages are extended more often (raise the queue's "
    "VisibilityTimeout to avoid that)"
)


class MnsSource(Source):
    """Long-polls one MNS queue with BatchReceiveMessage; the pipeline deletes after Spark commits.

    Guarantee: at-least-once from MNS (an unacked message comes back after its visibility
    timeout, with a new receipt handle and a higher DequeueCount); the pipeline's dedup makes
    the effect exactly-once. MNS standard queues are not FIFO.

    Calls: BatchReceiveMessage (``batchSize`` ≤ 16, ``pollingWaitTime``; an empty queue's
    ``MessageNotExist`` is an empty list), BatchDeleteMessage (chunks of 16, each handle once,
    only failed retryable handles re-sent), ChangeMessageVisibility per handle (MNS issues a
    new handle each time; ``extend`` returns it, and the old one stops working at MNS); up to
    ``maxInFlightRequests`` of these calls run at once. An ack
    that crosses this source's own extend (the lease keeper renewing a handle the acker already
    took) is retried with the successor handle instead of failing. The hide time is the
    queue's ``VisibilityTimeout`` attribute (a receive cannot set it): it is read once, and
    ``visibility_timeout`` becomes the smaller of it and the configured value (a warning
    when the queue's is shorter: extensions then come more often).
    Errors: a wrong AccessKey, a missing queue or a bad parameter raise ``FatalError`` naming
    the queue and the MNS code; 5xx, throttling, timeouts and connection errors are retried
    (``max_retries``, deletes ``deleteMaxRetries``) and then raise ``TransientError`` (receive)
    or are reported per handle. One SDK Account per calling thread.
    """

    can_probe = True
    reports_lag = True

    def __init__(self, cfg: MnsSourceConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.queue = cfg.queue_name
        self.max_batch = cfg.batch_size
        self.visibility_timeout = float(
            min(MAX_VISIBILITY, max(MIN_VISIBILITY, math.ceil(cfg.visibility_timeout)))
        )
        self._clients = QueueClients(cfg, timeout=cfg.request_timeout)
        self._lock = threading.Lock()
        self._checked = False
        # Apart, so a batch's deletes never queue behind a lease-keeper round of extends.
        self._deletes = CallPool(f"mns-delete-{cfg.name}", cfg.ack_calls)
        self._extends = CallPool(f"mns-extend-{cfg.name}", cfg.ack_calls)
        self._renewals = Renewals()

    def _attributes(self) -> Any:
        """The queue's attributes (the low-level call: Queue.get_attributes warns)."""
        from mns.mns_request import GetQueueAttributesRequest, GetQueueAttributesResponse

        try:
            q, resp = self._clients.queue(), GetQueueAttributesResponse()
            q.mns_client.get_queue_attributes(GetQueueAttributesRequest(q.queue_name), resp)
            return resp
        except Exception as err:
            raise classify(err, self.queue, self.cfg.endpoint, "GetQueueAttributes") from err

    def _queue_visibility(self) -> float:
        return float(self._attributes().visibility_timeout)

    def lag(self) -> int | None:
        """Messages waiting on the queue (active + delayed), or None where MNS no longer reports them."""
        attrs = self._attributes()
        if attrs.active_messages < 0:
            return None
        return int(attrs.active_messages) + max(0, int(attrs.delay_messages))

    def probe(self) -> None:
        """At start, fail fast on wrong keys, a missing queue or a denied delete, before anything is read.

        Network errors, throttling and 5xx are retried as any call is (``max_retries``); then
        ``TransientError`` names the queue and the endpoint.
        """
        try:
            self._check_queue()
            if self.cfg.delete_message:
                call_with_retries(
                    self._clients.probe_delete,
                    what=f"probing deletes on MNS queue {self.queue}",
                    attempts=self.cfg.max_retries + 1,
                )
        except TransientError as err:
            where = f"MNS queue {self.queue} at {self.cfg.endpoint} (max_retries: {self.cfg.max_retries})"
            raise TransientError(f"cannot reach {where}: {err}") from err

    def _check_queue(self) -> None:
        """Read the queue's VisibilityTimeout once (also surfaces wrong keys and a missing queue early)."""
        with self._lock:
            if self._checked:
                return
            try:
                actual = call_with_retries(
                    self._queue_visibility,
                    what=f"GetQueueAttributes of MNS queue {self.queue}",
                    attempts=self.cfg.max_retries + 1,
                )
                if actual < self.visibility_timeout:
                    log.warning(_SHORT_VISIBILITY, self.queue, actual, self.visibility_timeout, actual)
                elif actual > self.visibility_timeout:
                    msg = "MNS queue %s hides received messages for %.0fs: using the configured %.0fs"
                    log.info(msg, self.queue, actual, self.visibility_timeout)
                self.visibility_timeout = min(actual, self.visibility_timeout)
            except FatalError as err:
                if error_code(err.__cause__) != "AccessDenied":  # a RAM policy may allow receive only
                    raise
                log.warning(
                    "cannot read %s's attributes (%s): assuming the configured visibility", self.queue, err
                )
            self._checked = True

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
        """Up to ``max_messages`` (≤ ``batchSize``), long-polling up to ``wait_seconds`` (whole, ≤ 30)."""
        if not self._checked:
            self._check_queue()
        n = max(1, min(int(max_messages), self.max_batch))
        wait = max(0, math.ceil(min(wait_seconds, self.cfg.poll_wait)))

        def attempt() -> list[Any]:
            try:
                return self._clients.queue().batch_receive_message(n, wait)
            except Exception as err:
                if error_code(err) == "MessageNotExist":  # the queue is empty
                    return []
                self.receive_failed_at = time.monotonic()
                raise classify(err, self.queue, self.cfg.endpoint, "BatchReceiveMessage") from err

        messages = [
            received(m, self.cfg.base64_body)
            for m in call_with_retries(
                attempt,
                what=f"BatchReceiveMessage on MNS queue {self.queue}",
                attempts=self.cfg.max_retries + 1,
            )
        ]
        return [mark_pointer(m, by_attribute=False) for m in messages] if self.cfg.claim_check else messages

    def ack(self, handles: Sequence[str]) -> AckResult:
        """Delete; ``AckResult.deleted`` holds the handles MNS accepted, ``failed`` the others with why.

        A handle that ``extend`` replaced while this ack ran is deleted with its successor and
        reported under the handle given here.
        """
        result = AckResult()
        self._delete_all(list(dict.fromkeys(h for h in handles if h)), result)
        for _ in range(3):
            # The lease keeper may have extended (so replaced) a handle just before its delete.
            stale = [h for h, why in result.failed.items() if why.startswith("ReceiptHandleError")]
            successors = {self._renewals.newest(h, self.cfg.request_timeout): h for h in stale}
            retry = {new: old for new, old in successors.items() if new != old}
            if not retry:
                break
            again = AckResult()
            self._delete_all(list(retry), again)
            for new in again.deleted:
                del result.failed[retry[new]]
                result.deleted.append(retry[new])
        for handle in result.deleted:
            self._renewals.forget(handle)
        return result

    def _delete_all(self, handles: list[str], result: AckResult) -> None:
        chunks = [handles[start : start + BATCH] for start in range(0, len(handles), BATCH)]
        self._deletes.map(lambda chunk: self._delete(chunk, result), chunks)

    def _delete(self, chunk: list[str], result: AckResult) -> None:
        """BatchDeleteMessage ``chunk``, re-sending only the handles that failed for a retryable reason."""
        pending = list(chunk)
        tries = 0

        def attempt() -> None:
            nonlocal pending, tries
            tries += 1
            try:
                self._clients.queue().batch_delete_message(pending)
            except Exception as err:
                code, subs = error_code(err), getattr(err, "sub_errors", None) or []
                if not subs and code in PER_HANDLE_CODES and len(pending) > 1:
                    for handle in pending:  # one bad handle failed the whole call: find it
                        self._delete([handle], result)
                    pending = []
                    return
                if not subs and code in PER_HANDLE_CODES:
                    why = getattr(err, "message", str(err))
                    subs = [{"ReceiptHandle": pending[0], "ErrorCode": code, "ErrorMessage": why}]
                if not subs:
                    raise classify(err, self.queue, self.cfg.endpoint, "BatchDeleteMessage") from err
                failures = {e.get("ReceiptHandle"): e for e in subs}
                retry = []
                for handle in pending:
                    e = failures.get(handle)
                    if e is None or (tries > 1 and e.get("ErrorCode") == "MessageNotExist"):
                        # A retry after an unanswered call may find its messages already deleted.
                        result.deleted.append(handle)
                    elif e.get("ErrorCode") in PER_HANDLE_CODES:
                        result.failed[handle] = f"{e['ErrorCode']}: {e.get('ErrorMessage', '')}"
                    else:
                        retry.append(handle)
                pending = retry
                if pending:
                    what = f"MNS BatchDeleteMessage on queue {self.queue}: {len(pending)} handles failed"
                    raise TransientError(f"{what}, e.g. {failures[pending[0]].get('ErrorCode')}") from err
                return
            result.deleted.extend(pending)
            pending = []

        try:
            call_with_retries(
                attempt,
                what=f"BatchDeleteMessage on MNS queue {self.queue}",
                attempts=self.cfg.delete_max_retries + 1,
            )
        except TransientError as err:
            result.failed.update(dict.fromkeys(pending, str(err)))

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        """Hide for ``seconds`` from now (whole, 1–43200); ``{old: new}`` for the handles extended."""
        secs = int(min(MAX_VISIBILITY, max(MIN_VISIBILITY, math.ceil(seconds))))
        unique = list(dict.fromkeys(h for h in handles if h))
        renewed = self._extends.map(lambda h: self._change(h, secs), unique)
        return {old: new for old, new in zip(unique, renewed, strict=True) if new}

    def _change(self, handle: str, secs: int) -> str | None:
        """ChangeMessageVisibility with retries; the new handle, or None if this handle is stale."""

        def attempt() -> str | None:
            try:
                return self._clients.queue().change_message_visibility(handle, secs).receipt_handle
            except Exception as err:
                if error_code(err) in PER_HANDLE_CODES:
                    return None
                raise classify(err, self.queue, self.cfg.endpoint, "ChangeMessageVisibility") from err

        new = None
        self._renewals.begin(handle)
        try:
            new = call_with_retries(
                attempt,
                what=f"ChangeMessageVisibility on MNS queue {self.queue}",
                attempts=self.cfg.max_retries + 1,
            )
        except TransientError as err:
            log.warning("could not change the visibility of a message on %s: %s", self.queue, err)
        finally:
            self._renewals.end(handle, new)
        return new

    def release(self, handles: Sequence[str]) -> None:
        """Visible again after 1 s, the shortest visibility MNS accepts; stale handles simply time out."""
        self.extend(handles, MIN_VISIBILITY)

    def close(self) -> None:
        self._deletes.close()
        self._extends.close()
        self._clients.close()
