"""The RocketMQ side of ``ingest.connector.SendBuffer``: a message a call, with a deadline; the producer."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ingest.connector import Failed
from ingest.errors import TransientError, redact
from sinks.rocketmq.config import RocketMqSinkConfig
from sinks.rocketmq.transports import OutMessage, Transport

log = logging.getLogger(__name__)


class _Caller:
    """A daemon thread making blocking client calls, so the caller can give up on one that hangs."""

    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        box: Future = Future()
        self.jobs.put((fn, box))
        return box.result(timeout)

    def _loop(self) -> None:
        while True:
            fn, box = self.jobs.get()
            if fn is None:
                return
            try:
                box.set_result(fn())
            except BaseException as err:
                box.set_exception(err)

    def close(self) -> None:
        self.jobs.put((None, None))


class Producer:
    """One ``write`` call's producer, as the ``SendTarget`` its lanes (one ``SendBuffer`` each) send on.

    The producer starts at the first send and is shared by the lanes. Every client call runs
    on the calling lane's own thread with ``send_timeout`` as its deadline; a call that hangs
    past it is abandoned (its thread replaced) and fails as transient. :meth:`close` shuts the
    producer down, after the abandoned calls return: freeing it under one crashes the process.
    """

    def __init__(self, cfg: RocketMqSinkConfig, make_transport: Callable[[RocketMqSinkConfig], Transport]):
        self.cfg, self.make_transport = cfg, make_transport
        self.target_name = f"RocketMQ topic {cfg.topic}"
        self.call_name = f"send to RocketMQ topic {cfg.topic}"
        self.lock, self.starting = threading.Lock(), threading.Lock()
        self.transport: Transport | None = None
        """The started producer."""
        self.made: Transport | None = None
        """The last producer made (started or not): it classifies errors."""
        self.callers: list[_Caller] = []
        self.abandoned: list[_Caller] = []
        self.local = threading.local()

    def entry(self, row: dict[str, Any]) -> OutMessage | str:
        """The message for one frame row, or why RocketMQ would refuse it."""
        body = row.get("body")
        if isinstance(body, str):
            try:
                body = body.encode(self.cfg.encoding)
            except UnicodeEncodeError as err:
                return f"not encodable as {self.cfg.encoding}: {err.reason} at {err.start}"
        body = bytes(body or b"")
        if not body:
            return "empty body (RocketMQ refuses empty messages)"
        if len(body) > self.cfg.max_message_size:
            return f"{len(body)} bytes, over max_message_size {self.cfg.max_message_size}"
        props = {k: v for k, v in (row.get("props") or {}).items() if v is not None and v.strip()}
        return OutMessage(body, row.get("key") or None, row.get("sharding_key"), props, row.get("source_id"))

    @staticmethod
    def size(entry: OutMessage) -> int:
        return len(entry.body)

    def send(self, entries: list[OutMessage]) -> list[Failed | None]:
        """Send the one message (calls carry one), on the started producer, within the deadline."""
        (msg,) = entries
        transport = self._started()
        self._call(lambda: transport.send(msg), f"sending message {msg.source_id}")
        return [None]

    def classify(self, err: Exception) -> BaseException:
        """The transport's verdict: fatal (credentials, topic), ``CallRefused`` (this message), transient."""
        return (self.made or self.make_transport(self.cfg)).classify(err)

    def _started(self) -> Transport:
        """The started producer; the first lane to need it starts it (with the same deadline)."""
        with self.starting:
            if self.transport is None:
                transport = self.made = self.make_transport(self.cfg)
                self._call(transport.start, "starting the producer")
                self.transport = transport
            return self.transport

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        """``fn()`` on this lane's caller thread; past ``send_timeout``, abandon it: transient."""
        caller = getattr(self.local, "caller", None)
        if caller is None:
            caller = self.local.caller = _Caller("rocketmq-call")
            with self.lock:
                self.callers.append(caller)
        try:
            return caller.call(fn, self.cfg.send_timeout)
        except FutureTimeout:
            with self.lock:
                self.abandoned.append(caller)
            self.local.caller = None
            cfg = self.cfg
            raise TransientError(
                f"{what}: no answer from RocketMQ {cfg.endpoint} within send_timeout {cfg.send_timeout:g}s"
            ) from None

    def close(self) -> None:
        """Shut the producer down (after the lanes stopped); after hung calls, only once they return."""
        for c in self.callers:
            c.close()  # an abandoned caller's thread ends once its hung call returns
        transport, self.transport = self.transport, None
        if transport is None:
            return
        stuck = [c for c in self.abandoned if c.thread.is_alive()]
        if stuck:
            # Freeing the native producer under a running call would crash the process.
            def reap() -> None:
                for c in stuck:
                    c.thread.join()
                _shutdown(transport)

            threading.Thread(target=reap, name="rocketmq-reaper", daemon=True).start()
            return
        done = threading.Thread(target=_shutdown, args=(transport,), name="rocketmq-shutdown", daemon=True)
        done.start()
        done.join(self.cfg.send_timeout)
        if done.is_alive():
            log.warning(
                "RocketMQ producer for %s still shutting down after %gs",
                self.cfg.topic,
                self.cfg.send_timeout,
            )


def _shutdown(transport: Transport) -> None:
    try:
        transport.shutdown()
    except Exception as err:
        log.warning("RocketMQ producer shutdown: %s", redact(str(err)))
