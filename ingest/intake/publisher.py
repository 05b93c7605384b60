"""A workers job's side of the acks: hands each intake worker the acks of its committed messages, and
deletes those of workers that are gone."""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checkpoints.journal import AckJournal, is_committed
from checkpoints.lease import PREFIX, Lease
from ingest.config import JobConfig
from ingest.connector import Source
from ingest.connector.payload_store import PayloadStore
from ingest.errors import ConfigError, redact
from ingest.faults import crash_point
from ingest.intake.acker import Acker
from ingest.intake.leases import InFlight
from ingest.intake.owners import TAKING_OVER, WORKERS, by_owner, flat, worker_dir
from ingest.intake.staged_files import HELD_DIR, TMP_DIR
from ingest.metrics import Metrics
from ingest.storage import Store, is_object_url, store_for

log = logging.getLogger(__name__)


class Publisher(Acker):
    """The job's acker in a workers job (``intake.mode: workers``), on its thread ``publisher``.

    Each batch's journal (``<checkpoint>/mq_ingest/acks/N.json``, written at the start of the
    batch) holds its messages by the worker that staged them. Once ``commits/N`` exists, each
    live worker's share is written to ``<staging>/_workers/<id>/acks/N.json``; the worker deletes
    those messages with their newest receipt handles and removes the file. Then the journal goes.

    A worker is live while it renews its lease (``<staging>/_workers/<id>/lock.<n>``,
    ``checkpoints.lease.Lease``). One whose lease is released (it stopped), stale (no renewal for
    ``intake.stale_after``) or held by a process of this host that has ended (a ``kill -9``) is
    gone: the job takes its lease over (a paused worker that resumes then finds it lost and
    stops) and deletes its committed messages itself with the handles they were staged with: the
    acks waiting in its folder, and its share of later batches. Only while the gone worker's
    leases are sure to hold (``held_until`` in its last renewal, less the lease margin); after
    that the messages are visible again, so they are counted in ``expiredHandles`` and come back
    to a live worker, which drops them as duplicates and deletes them. A refused handle is
    counted in ``staleHandles``, never in ``failedDeletes``. Then its folder is removed (a paused
    worker that resumes finds its lease unrenewed too long and stops: ``Lease.fence``), and on a
    local staging dir its unpublished files too.
    """

    def __init__(
        self,
        cfg: JobConfig,
        journal: AckJournal,
        sources: Mapping[str, Source],
        metrics: Metrics,
        retries: Mapping[str, int],
        keep: frozenset[str] = frozenset(),
        payloads: Mapping[str, PayloadStore] | None = None,
        poll_interval: float = 0.05,
    ) -> None:
        """``retries`` … ``poll_interval``: the ``Acker``'s (``ingest.intake.parts.ack_options``)."""
        # Its in-flight table stays empty: it deletes only gone workers' messages, with their staged handles.
        super().__init__(
            cfg.checkpoint, journal, sources, retries, InFlight(), metrics, poll_interval, keep, payloads
        )
        self.name, self.title = "publisher", "publisher thread"
        self.cfg = cfg
        self.staging = cfg.staging.dir
        self.live: dict[str, dict[str, Any]] = {}
        """Workers whose lease held at the last sweep → their lease's record."""
        self.seen: set[str] = set()
        """The workers found live in this run, and those found gone once they had finished a drain:
        not the leftovers of a worker killed or stopped before (a drain's workers may start after it)."""
        self.gone: dict[str, float] = {}
        """Gone workers → until when (epoch seconds) their messages' leases surely held."""
        self._swept = 0.0
        self.swept = False
        """A sweep has run: ``live`` is known."""

    def reconcile(self) -> int:
        """Hand out the acks of every journaled batch Spark has committed; return how many."""
        with self._lock:
            if time.monotonic() - self._swept >= self.cfg.intake.heartbeat:
                self.sweep()
            done = 0
            for batch_id in self.journal.pending():
                if is_committed(self.cfg.checkpoint, batch_id):
                    self._publish(batch_id)
                    done += 1
            return done

    def workers_done(self) -> bool:
        """Whether workers were seen in this run (``seen``) and none is live any more (a drain's end)."""
        return bool(self.seen) and not self.live

    def _publish(self, batch_id: int) -> None:
        crash_point("before_ack")
        owned = by_owner(self.journal.read(batch_id))
        if any(o is not None and o not in self.live for o in owned):
            self.sweep()  # a worker started since the last sweep, perhaps under a gone one's id
        for owner, entries in owned.items():
            if owner is not None and owner in self.live:
                AckJournal(worker_dir(self.staging, owner)).write(batch_id, entries)
                self.metrics.inc("publishedAcks", len(entries), worker=owner)
            else:  # staged by a driver (an embedded run before), or by a worker that is gone
                self._delete_now(owner, batch_id, entries)
        self.journal.done(batch_id)
        self.acked_batches.append(batch_id)

    def _delete_now(self, owner: str | None, batch_id: int, entries: list) -> None:
        # A worker never found (its folder gone): nothing says its leases hold.
        held_until = self.gone.get(owner, 0.0) if owner is not None else float("inf")
        if time.time() >= held_until:
            for source, n in Counter(e[0] for e in entries).items():
                self.metrics.inc("expiredHandles", n, source=source)
            log.warning(
                "batch %d: %d message(s) of gone intake worker %s are past their visibility timeout: "
                "not deleted; they come back, are dropped as duplicates and deleted",
                batch_id,
                len(entries),
                owner,
            )
            return
        self.delete_entries(batch_id, entries)

    def sweep(self) -> None:
        """Find the workers; take over and clean up after each one that is gone."""
        self._swept = time.monotonic()
        live: dict[str, dict[str, Any]] = {}
        for worker in store_for(f"{self.staging.rstrip('/')}/{WORKERS}").folders():
            store = store_for(worker_dir(self.staging, worker))
            if worker in self.gone and not any(name.startswith(PREFIX) for name in store.list()):
                continue  # taken over already, and no worker has started under its id since
            lease = Lease(
                store,
                self.cfg.intake.heartbeat,
                self.cfg.intake.stale_after,
                details=lambda: {TAKING_OVER: True},
                what="intake worker",
            )
            try:
                lease.acquire()
            except ConfigError:  # live; perhaps a restart under the id of a worker taken over before
                live[worker] = lease.previous
                self.seen.add(worker)
                self.gone.pop(worker, None)
                continue
            try:
                if lease.previous.get("state") == "drained":
                    self.seen.add(worker)
                self._adopt(worker, lease.previous)
            except BaseException:  # released, not removed: the next sweep takes it over again
                self.gone.pop(worker, None)
                lease.release()
                raise
            retire(lease, worker_dir(self.staging, worker))
        self.live = live
        self.swept = True
        self.metrics.set("intakeWorkers", len(live))

    def _adopt(self, worker: str, record: dict[str, Any]) -> None:
        """Delete the committed messages waiting for gone ``worker`` and its unpublished files."""
        margin = self.cfg.lease_margin * min((s.visibility_timeout for s in self.cfg.sources), default=0)
        held_until = float(record.get("held_until") or 0) - margin
        self.gone[worker] = held_until
        how = "stopped" if record.get("released") else "gone (lease not renewed, or its process ended)"
        log.info("intake worker %s %s: the job deletes its committed messages", worker, how)
        acks = AckJournal(worker_dir(self.staging, worker), shared=True)
        for batch_id in acks.pending():
            try:
                entries = list(flat(acks.read(batch_id)))
            except FileNotFoundError:
                continue
            self._delete_now(worker, batch_id, entries)
            acks.done(batch_id)
        if not is_object_url(self.staging):
            _remove_unpublished(Path(self.staging), worker)


def retire(lease: Lease, folder: str) -> None:
    """Release the lease the job took a gone worker's ``folder`` over with, then remove it
    (``remove_taken``). A paused worker that resumes finds its lease unrenewed too long and stops
    (``Lease.fence``)."""
    taken = lease.generation
    lease.release()
    remove_taken(lease.store, taken, folder)


def remove_taken(store: Store, generation: int | None, folder: str) -> None:
    """Remove a takeover's lease ``generation`` from a gone worker's ``folder``, and the folder (local)
    once empty: nothing else, as a worker starting under the same id may have taken the next
    generation meanwhile (``acquire`` removed the older ones, ``_adopt`` the acks).

    Locally a ``kill -9`` mid-write leaves a write's temporary file (``LocalStore.write``): a gone
    holder's renewal of a generation up to ``generation`` (not a newer one's) or an earlier job's ack
    file. They go too, or the folder would stay for ever (a sweep skips a taken-over folder)."""
    store.delete([f"{PREFIX}{generation}"])
    if not is_object_url(folder):
        for path in [*Path(folder).glob(f".{PREFIX}*.tmp"), *Path(folder).glob("acks/.*.tmp")]:
            g = path.name[len(PREFIX) + 1 : -len(".tmp")]
            if path.parent.name == "acks" or (
                g.isdigit() and generation is not None and int(g) <= generation
            ):
                with contextlib.suppress(OSError):  # then the folder stays, as any other leftover would
                    path.unlink()
        for path in (Path(folder) / "acks", Path(folder)):
            try:
                path.rmdir()
            except OSError:
                return


def _remove_unpublished(staging: Path, worker: str) -> None:
    """A gone worker's files under ``_tmp/`` and ``_held/``: never published, so never read; their
    messages are still on their queues."""
    for folder in (TMP_DIR, HELD_DIR):
        for path in (staging / folder).glob(f"{worker}~*"):
            try:
                path.unlink()
            except OSError as err:
                log.warning("cannot remove %s: %s", path, redact(str(err)))
