"""Sink-side claim-check: offload large records to S3 or OSS and send Extended Client pointers instead."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ingest.config.claim_check import ClaimCheckConfig
from ingest.errors import FatalError
from sources.claim_check import PayloadStore, payload_key, pointer_body


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
