"""Deletes each batch's messages from their queues once Spark has committed the batch."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from checkpoints.journal import AckJournal, is_committed
from ingest.connector import AckResult, Source
from ingest.connector.payload_store import PayloadStore
from ingest.errors import FatalError, IngestError, TransientError, call_with_retries, redact
from ingest.faults import crash_point
from ingest.intake.leases import InFlight, Taken
from ingest.intake.owners import flat
from ingest.metrics import Metrics
from ingest.runtime.memory import release_free_memory
from ingest.worker import Worker

log = logging.getLogger(__name__)


class Acker(Worker):
    """Acks journaled batches after ``<checkpoint>/commits/N`` appears.

    Deletes use each message's newest receipt handle (from the lease keeper), are
    retried on transient errors up to the source's ``deleteMaxRetries``: a handle that
    still fails is counted in ``failedDeletes``; its message comes back later and is
    dropped as a duplicate, then deleted; it stays in ``unresolved`` until that copy is
    deleted. A refused handle of a message the same call deleted through another (one
    message handed out twice at once) is counted in ``staleHandles``. A handle whose lease
    deadline has passed is not sent at all (``expiredHandles``): its message is visible again
    and comes back the same way (a drain polls until the queues are empty, so it deletes that
    copy before it ends). A fatal error (access denied, a deleted queue) would fail every later
    delete the same way: it is kept in ``error`` for the job to stop on, rather than logged
    once a batch for ever.
    Its thread (``acker``) acks as batches finish (``notify``) and every ``poll_interval``.
    """

    def __init__(
        self,
        checkpoint: str | None,
        journal: AckJournal,
        sources: Mapping[str, Source],
        retries: Mapping[str, int],
        inflight: InFlight,
        metrics: Metrics,
        poll_interval: float = 0.05,
        keep: frozenset[str] = frozenset(),
        payloads: Mapping[str, PayloadStore] | None = None,
    ) -> None:
        super().__init__("acker")
        self.checkpoint = checkpoint
        """Where ``commits/N`` says a batch committed; None: every journal is of a committed batch
        (an intake worker's, which the job writes once the batch has committed)."""
        self.journal = journal
        self.sources = sources
        self.retries = retries
        self.inflight = inflight
        self.metrics = metrics
        self.poll_interval = poll_interval
        self.keep = keep
        """Sources whose messages are never deleted (``delete_message: false``): another consumer does."""
        self.payloads = dict(payloads or {})
        """Sources with ``claim_check.delete_payload``: payload objects go once their message is deleted."""
        self._woken = threading.Event()
        self._lock = threading.Lock()
        self.acked_batches: list[int] = []
        self.unresolved: dict[tuple[str, str], str] = {}
        """(source, message id) → why its delete failed, for messages received by this process
        whose delete failed and that were not deleted since (as a redelivered duplicate)."""

    def notify(self) -> None:
        """Wake the acker (a batch finished); it checks ``commits/`` at once."""
        self._woken.set()

    def _wake(self) -> None:
        self._woken.set()

    def reconcile(self) -> int:
        """Ack every journaled batch that Spark has committed; return how many were acked."""
        with self._lock:
            done = 0
            for batch_id in self.journal.pending():
                if self.checkpoint is None or is_committed(self.checkpoint, batch_id):
                    self._ack_batch(batch_id)
                    done += 1
            return done

    def unacked(self) -> list[int]:
        """Journaled batches still waiting for their acks."""
        return self.journal.pending()

    def _ack_batch(self, batch_id: int) -> None:
        crash_point("before_ack")
        self.delete_entries(batch_id, flat(self.journal.read(batch_id)))
        self.journal.done(batch_id)
        self.acked_batches.append(batch_id)

    def delete_entries(self, batch_id: int, entries: Iterable[Sequence[str]]) -> None:
        """Delete the messages of journal ``entries`` of ``batch_id`` (counted, see the class docstring)."""
        started = time.monotonic()
        by_source: dict[str, list[str]] = defaultdict(list)
        payload_refs: dict[str, dict[str, str]] = defaultdict(dict)
        for name, handle, *ref in entries:
            by_source[name].append(handle)
            if ref:
                payload_refs[name][handle] = ref[0]
        for name, handles in by_source.items():
            taken = self.inflight.pop_with_ids(name, handles)  # in the order of ``handles``
            ids = {t.handle: t.message_id for t in taken if t.message_id is not None}
            received = {t.handle: t.received for t in taken if t.received is not None}
            source = self.sources.get(name)
            if name in self.keep:
                self.metrics.inc("keptMessages", len(taken), source=name)
                continue
            if source is None:
                log.error(
                    "batch %d: source %r is no longer configured; %d acks skipped",
                    batch_id,
                    name,
                    len(taken),
                )
                self.metrics.inc("failedDeletes", len(taken))
                continue
            expired = self._expired(batch_id, name, taken)
            newest = [t.handle for t in taken if t.handle not in expired]
            result, call_failed = self._delete(source, list(dict.fromkeys(newest)))
            deleted_ids = {ids[h] for h in result.deleted if h in ids}
            for mid in deleted_ids:
                self.unresolved.pop((name, mid), None)
            failed, stale = {}, 0
            for h, reason in result.failed.items():
                if ids.get(h) in deleted_ids:
                    # A second delivery of a message this call deleted through its other handle
                    # (one message handed out twice at once): it is gone, the refusal is expected.
                    stale += 1
                elif h in ids:
                    self.unresolved[(name, ids[h])] = reason
                    failed[h] = reason
                elif h in call_failed:
                    failed[h] = reason
                else:
                    # A handle from a previous run (a batch replayed after a crash) that the
                    # queue refused: its message was redelivered since and is tracked, and
                    # deleted, through its new handle. Expected, so not a failure.
                    stale += 1
            # Per journaled row, as received counts them: one delivery handed out twice (one
            # handle, two rows, one dropped as a repeat) is deleted by one call.
            rows = Counter(newest)
            self.metrics.inc("deletedMessages", sum(rows[h] for h in result.deleted), source=name)
            if name in self.payloads and payload_refs[name]:
                refs = {t.handle: payload_refs[name].get(h) for h, t in zip(handles, taken, strict=True)}
                self._delete_payloads(batch_id, name, [r for h in result.deleted if (r := refs.get(h))])
            self._latency(name, [received[h] for h in result.deleted if h in received])
            self.metrics.inc("staleHandles", stale, source=name)
            if stale:
                log.info(
                    "batch %d: %d handle(s) refused on %s were stale (their messages deleted through "
                    "another handle: a previous run's, or a second delivery's)",
                    batch_id,
                    stale,
                    name,
                )
            if failed:
                self.metrics.inc("failedDeletes", len(failed), source=name)
                sample = next(iter(failed.values()))
                log.warning(
                    "batch %d: %d deletes failed on %s (e.g. %s)", batch_id, len(failed), name, sample
                )
        self.metrics.inc("phaseSeconds", time.monotonic() - started, phase="ack")

    def _expired(self, batch_id: int, source: str, taken: list[Taken]) -> set[str]:
        """Handles whose visibility ended before their delete: not sent, only counted.

        SQS answers success to a delete with a handle that is no longer the message's latest
        without always deleting it, so sending it would count a delete that may not have
        happened. The message is visible again: its copy comes back (or already came back, was
        dropped as a duplicate and deleted). It is not held as ``unresolved``, since a copy
        deleted before this ack would leave it so for good.
        """
        now = time.monotonic()
        expired = {t.handle for t in taken if t.deadline is not None and t.deadline <= now}
        if expired:
            self.metrics.inc("expiredHandles", len(expired), source=source)
            log.warning(
                "batch %d: %d handle(s) on %s were past their visibility timeout (the lease keeper "
                "could not extend them in time): not deleted; the messages come back, are dropped "
                "as duplicates and deleted",
                batch_id,
                len(expired),
                source,
            )
        return expired

    def _delete_payloads(self, batch_id: int, source: str, refs: list[str]) -> None:
        """Delete the payload objects of messages just deleted from the queue (never before).

        A failure leaves an orphan object, never a lost payload: it is counted and logged.
        """
        if not refs:
            return
        crash_point("before_payload_delete")
        failed = self.payloads[source].delete(refs)
        self.metrics.inc("deletedPayloads", len(refs) - len(failed), source=source)
        if failed:
            self.metrics.inc("failedPayloadDeletes", len(failed), source=source)
            ref, why = next(iter(failed.items()))
            log.warning(
                "batch %d: %d payload object(s) of %s left in the bucket after their messages were "
                "deleted (e.g. %s: %s)",
                batch_id,
                len(failed),
                source,
                ref,
                why,
            )

    def _latency(self, source: str, received: list[float]) -> None:
        """Receive → delete times of the messages one ack pass deleted."""
        if received:
            now = time.monotonic()
            self.metrics.inc("ackLatencySeconds", sum(now - at for at in received), source=source)
            self.metrics.set("ackLatencyMaxSeconds", now - min(received), source=source)

    def _delete(self, source: Source, handles: list[str]) -> tuple[AckResult, set[str]]:
        """Delete in chunks; return the result and the handles whose whole call failed."""
        total = AckResult()
        call_failed: set[str] = set()
        for start in range(0, len(handles), 1000):
            chunk = handles[start : start + 1000]
            try:
                res = call_with_retries(
                    functools.partial(source.ack, chunk),
                    what=f"deleting {len(chunk)} message(s) from source {source.name}",
                    attempts=self.retries.get(source.name, 3) + 1,
                )
            except (TransientError, IngestError) as err:
                if isinstance(err, FatalError):  # the first one is the acker's error
                    why = f"deleting messages from source {source.name} failed for good: {err}"
                    self.fail(FatalError(why))
                reason = redact(str(err))
                log.error("deleting %d messages from %s failed: %s", len(chunk), source.name, reason)
                res = AckResult(failed=dict.fromkeys(chunk, reason))
                call_failed.update(chunk)
            total.deleted += res.deleted
            total.failed.update(res.failed)
        return total, call_failed

    def work(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            # After a failure, a pause that doubles up to 5 s: the checkpoint's store may be down.
            self._woken.wait(self.poll_interval if not failures else min(5.0, 0.1 * 2**failures))
            self._woken.clear()
            try:
                if self.reconcile():
                    release_free_memory()  # the acked batches' messages are garbage now
            except OSError as err:  # the checkpoint's store (an S3 outage): tried again
                failures += 1
                if failures == 1 or failures % 10 == 0:
                    log.warning("acker: cannot read the checkpoint (%s); retrying", redact(str(err)))
                continue
            except Exception:
                failures += 1
                log.exception("acker pass failed; will retry")
                continue
            if failures:
                log.info("acker: the checkpoint is readable again")
            failures = 0
