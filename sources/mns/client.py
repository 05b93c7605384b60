"""aliyun-mns-sdk clients for the MNS source and sink: Account per thread, timeouts, errors, handle chains."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from ingest.errors import FatalError, TransientError, redact

log = logging.getLogger(__name__)

BATCH = 16
"""MNS's limit on messages per batch call (receive, send, delete)."""
PER_HANDLE_CODES = frozenset({"ReceiptHandleError", "MessageNotExist"})
"""A stale, invalid or already used receipt handle: that handle failed, the call did not."""
TRANSIENT_CODES = frozenset(
    {"InternalError", "InternalServerError", "ServiceUnavailable", "QpsLimitExceeded", "Throttling"}
)


def classify(err: Exception, queue: str, endpoint: str, action: str) -> Exception:
    """Map an aliyun-mns-sdk error to ``FatalError`` (stop, say why) or ``TransientError`` (retry).

    Transient: network errors, timeouts, unreadable replies (``MNSClientNetworkException``) and
    the server's internal-error and throttling codes. Fatal: every other server code, the
    wrong AccessKey (``AccessDenied``, ``InvalidAccessKeyId``, ``SignatureDoesNotMatch``), a
    missing queue (``QueueNotExist``) or a bad parameter. The message names the queue, the
    endpoint, the action and the MNS code, and is redacted: never a secret. Anything that is not
    an SDK error comes back unchanged.
    """
    from mns.mns_exception import MNSClientNetworkException, MNSExceptionBase, MNSServerException

    if not isinstance(err, MNSExceptionBase):
        return err
    code = getattr(err, "type", "") or type(err).__name__
    text = redact(f"MNS {action} on queue {queue} ({endpoint}) failed: {code}: {err.message}")
    if isinstance(err, MNSClientNetworkException) or code in TRANSIENT_CODES:
        return TransientError(text)
    if isinstance(err, MNSServerException) and code == "AccessDenied":
        text += " (check accessKeyId/accessKeySecret and the RAM policy)"
    elif isinstance(err, MNSServerException) and code in ("InvalidAccessKeyId", "SignatureDoesNotMatch"):
        text += " (check accessKeyId and accessKeySecret)"
    return FatalError(text)


PROBE_HANDLE = "mq-ingest-delete-permission-probe"
"""A receipt handle no queue ever issued: deleting it tests the permission and deletes nothing."""


def error_code(err: BaseException | None) -> str:
    """The MNS error code of an SDK exception ("" for other errors)."""
    return str(getattr(err, "type", "") or "")


class QueueClients:
    """Creates ``mns.queue.Queue`` objects lazily, one ``Account`` (one connection) per thread.

    The SDK is not thread-safe: each Account owns one ``http.client`` connection. Bodies are
    never encoded or decoded by the SDK here (``set_encoding(False)``); callers do base64
    themselves, so they know a body's size on the wire. Every socket read and connect gets
    ``timeout`` seconds (the SDK sets none for https). Nothing is created in ``__init__`` and
    pickling drops the clients, so an owner can be shipped to Spark executors.
    """

    def __init__(self, cfg: Any, timeout: float) -> None:
        self.cfg = cfg
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._made: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"cfg": self.cfg, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        QueueClients.__init__(self, state["cfg"], state["timeout"])

    def queue(self) -> Any:
        """This thread's ``mns.queue.Queue`` for the configured queue."""
        q = getattr(self._local, "queue", None)
        if q is None:
            q = self._local.queue = self._make()
        return q

    def probe_delete(self) -> None:
        """Fail fast where every delete would fail: a BatchDeleteMessage of a handle no queue
        issued answers ReceiptHandleError (or MessageNotExist) where the keys may delete,
        AccessDenied where they may not. A network error, throttling or 5xx raises
        ``TransientError`` (for the caller to retry); anything else only logs a warning: the
        first real delete will tell."""
        name = self.cfg.queue_name
        try:
            self.queue().batch_delete_message([PROBE_HANDLE])
        except Exception as err:
            code = error_code(err)
            if code in PER_HANDLE_CODES:
                return
            classified = classify(err, name, self.cfg.endpoint, "BatchDeleteMessage")
            if code == "AccessDenied":
                raise FatalError(
                    f"MNS queue {name}: these keys may not delete its messages (BatchDeleteMessage "
                    f"denied), so nothing read could ever be acked: {classified}"
                ) from None
            if isinstance(classified, TransientError):
                raise classified from None
            log.warning("could not check the delete permission on MNS queue %s: %s", name, classified)

    def _make(self) -> Any:
        from mns.account import Account

        from sources.mns.wire import FastClient

        c = self.cfg
        secret = c.access_key_secret.get_secret_value()
        token = c.security_token.get_secret_value() if c.security_token else ""
        redact.add([secret, token])  # executors never parsed the config: register here too
        account = Account(c.endpoint.rstrip("/"), c.access_key_id, secret, token)
        client = account.mns_client = FastClient(
            c.endpoint.rstrip("/"), credentials_provider=account.credentials_provider
        )
        client.set_connection_timeout(self.timeout)  # http: replaces the connection with a timed one
        client.http.conn.timeout = self.timeout  # https: http.client's own connect/read timeout
        queue = account.get_queue(c.queue_name)
        queue.set_encoding(False)
        with self._lock:
            self._made.append(client)
        return queue

    def close(self) -> None:
        """Close the connections this object made."""
        with self._lock:
            made, self._made = self._made, []
        for client in made:
            with contextlib.suppress(Exception):  # closing a dead socket is fine
                client.close_connection()
        self._local = threading.local()


class Renewals:
    """The receipt handles a source replaced (MNS invalidates a handle when its visibility changes).

    The lease keeper may extend a message while the acker deletes it with the handle it had, and
    that delete then fails with ReceiptHandleError. ``newest(h)`` follows the chain of
    replacements, waiting at each link for a change still in flight on it, so the delete can be
    retried with the live handle. At most ``cap`` links are kept (the oldest go first): a chain
    only matters for the moment an extend and an ack cross.
    """

    def __init__(self, cap: int = 100_000) -> None:
        self.cap = cap
        self._cond = threading.Condition()
        self._next: OrderedDict[str, str] = OrderedDict()
        self._busy: dict[str, int] = {}

    def begin(self, handle: str) -> None:
        """A visibility change of ``handle`` is about to be sent."""
        with self._cond:
            self._busy[handle] = self._busy.get(handle, 0) + 1

    def end(self, handle: str, new: str | None) -> None:
        """That change is over; ``new`` is the handle MNS issued (None if it failed)."""
        with self._cond:
            self._busy[handle] -= 1
            if not self._busy[handle]:
                del self._busy[handle]
            if new and new != handle:
                self._next[handle] = new
                while len(self._next) > self.cap:
                    self._next.popitem(last=False)
            self._cond.notify_all()

    def newest(self, handle: str, timeout: float) -> str:
        """The live successor of ``handle`` (``handle`` itself if it was never replaced).

        Waits, ``timeout`` seconds in all, for changes in flight on the chain, its last link
        included: the lease keeper may be replacing the newest handle right now.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = {handle}
            while True:
                while handle in self._busy and (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)
                nxt = self._next.get(handle)
                if nxt is None or nxt in seen:
                    return handle
                seen.add(nxt)
                handle = nxt

    def forget(self, handle: str) -> None:
        """Drop the chain that starts at ``handle`` (its message is gone)."""
        with self._cond:
            step: str | None = handle
            while step is not None:
                step = self._next.pop(step, None)
