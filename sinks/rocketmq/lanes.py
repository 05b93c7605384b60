"""One partition's concurrent sends: lanes, a deadline on every client call, retries, the producer's life."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from ingest.config.sinks import RocketMqSinkConfig
from ingest.errors import TransientError, call_with_retries, redact
from sinks.base import refused_record
from sinks.rocketmq.transports import OutMessage, SendRefused, Transport


class _Writer(Protocol):
    """What the lanes take from the partition writer: its config and how it makes a transport."""

    cfg: RocketMqSinkConfig

    def make_transport(self, cfg: RocketMqSinkConfig) -> Transport: ...


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


class Lanes:
    """One ``write`` call: the producer, the lanes sending on it, counts, rejections, the first error."""

    def __init__(self, writer: _Writer) -> None:
        self.writer, self.cfg = writer, writer.cfg
        self.lock = threading.Lock()
        self.transport: Transport | None = None
        self.abandoned: list[_Caller] = []
        self.rejected: list[dict] = []
        self.sent = 0
        self.error: BaseException | None = None
        self.finished = False
        lanes = self.cfg.max_in_flight
        self.queues: list[queue.Queue] = [queue.Queue(maxsize=64) for _ in range(lanes)]
        self.lanes = [threading.Thread(target=self._lane, args=(q,), daemon=True) for q in self.queues]
        for t in self.lanes:
            t.start()

    def put(self, lane: int, msg: OutMessage, row: dict) -> None:
        if self.error is not None:
            raise self.error
        self.queues[lane].put((msg, row))

    def abort(self, err: BaseException) -> None:
        with self.lock:
            self.error = self.error or err

    def finish(self) -> int:
        self._stop_lanes()
        if self.error is not None:
            raise self.error
        return self.sent

    def _stop_lanes(self) -> None:
        if self.finished:
            return
        self.finished = True
        for q in self.queues:
            q.put(None)  # lanes drain their queues, without sending once the batch has failed
        for t in self.lanes:
            t.join()

    def _lane(self, jobs: queue.Queue) -> None:
        caller = _Caller("rocketmq-call")
        try:
            while (job := jobs.get()) is not None:
                if self.error is not None:
                    continue  # the batch has failed: drain without sending
                msg, row = job
                try:
                    caller = self._send(msg, caller)
                    with self.lock:
                        self.sent += 1
                except SendRefused as err:
                    self._guard(self.reject, row, str(err))
                except BaseException as err:
                    with self.lock:
                        self.error = self.error or err
        finally:
            caller.close()

    def _guard(self, fn: Callable, *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as err:
            with self.lock:
                self.error = self.error or err

    def _send(self, msg: OutMessage, caller: _Caller) -> _Caller:
        """Send, retried per retryTimes and sleepTimeMs; return the lane's caller (new if a call hung)."""
        cfg, lane = self.cfg, [caller]

        def once() -> None:
            transport = self._transport(lane[0])
            try:
                lane[0].call(lambda: transport.send(msg), cfg.send_timeout)
            except FutureTimeout:
                with self.lock:
                    self.abandoned.append(lane[0])
                lane[0] = _Caller("rocketmq-call")
                raise TransientError(self._silent(f"sending message {msg.source_id}")) from None
            except Exception as err:
                raise transport.classify(err) from err

        call_with_retries(
            once,
            attempts=cfg.retry_times + 1,
            fixed_wait=cfg.sleep_time_ms / 1000,
            give_up=lambda: self.error is not None,
        )
        return lane[0]

    def _silent(self, what: str) -> str:
        cfg = self.cfg
        return f"{what}: no answer from RocketMQ {cfg.endpoint} within send_timeout {cfg.send_timeout:g}s"

    def _transport(self, caller: _Caller) -> Transport:
        """The started producer; the first lane to need it starts it (with the same deadline)."""
        with self.lock:
            if self.transport is not None:
                return self.transport
            transport = self.writer.make_transport(self.cfg)
            try:
                caller.call(transport.start, self.cfg.send_timeout)
            except FutureTimeout:
                self.abandoned.append(caller)
                raise TransientError(self._silent("starting the producer")) from None
            except Exception as err:
                raise transport.classify(err) from err
            self.transport = transport
            return transport

    def reject(self, row: dict, reason: str) -> None:
        """Apply ``on_bad_record`` to a record RocketMQ will never take."""
        target = f"RocketMQ topic {self.cfg.topic}"
        record = refused_record(self.cfg, target, row.get("source_id"), reason, row.get("body"))
        with self.lock:
            self.rejected.append(record)

    def close(self) -> None:
        """Stop the lanes and shut the producer down; after hung calls, only once they return."""
        self._stop_lanes()
        transport, self.transport = self.transport, None
        if transport is None:
            return
        stuck = [c for c in self.abandoned if c.thread.is_alive()]
        if stuck:
            # Freeing the native producer under a running call would crash the process.
            def reap() -> None:
                for c in stuck:
                    c.close()
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
