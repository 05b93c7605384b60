"""A job's intake, built alike in the job's process and in an intake worker: in-flight table, stager,
backpressure, lease keeper, receivers, and the options of the acker that ends it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ingest.config import JobConfig
from ingest.connector import Source
from ingest.connector.payload_store import PayloadStore
from ingest.intake.acker import Acker
from ingest.intake.leases import InFlight, LeaseKeeper
from ingest.intake.receiver import Backpressure, ReceiverPool, hold_limit
from ingest.intake.staging import Stager
from ingest.metrics import Metrics
from ingest.storage import is_object_url


class Intake:
    """Receivers that stage into ``staging.dir`` under the job's caps, and the leases of what they hold.

    Nothing runs until its parts are started (the job starts them under its supervisor: the
    keeper, then the acker, the stager, the receivers).
    """

    def __init__(
        self,
        cfg: JobConfig,
        sources: Mapping[str, Source],
        metrics: Metrics,
        on_event: Callable[[str, str], None],
        owner: str | None = None,
        on_file: Callable[[str, bytes], None] = lambda path, data: None,
        reclaimable: Callable[[], Iterable[str]] = lambda: (),
    ) -> None:
        """``owner``: the intake worker whose files these are (``ingest.intake.owners``); ``on_file``
        and ``reclaimable``: see ``Stager``."""
        self.inflight = InFlight()
        self.stager = Stager(
            cfg.staging.dir,
            cfg.staging.roll_messages,
            cfg.staging.roll_bytes,
            cfg.staging.roll_interval,
            cfg.staging.give_up_after,
            on_staged=lambda lines: metrics.inc("staged", lines),
            on_file=on_file,
            reclaimable=reclaimable,
            batch_messages=cfg.staging.batch_messages,
            batch_wait=cfg.staging.batch_wait,
            owner=owner,
        )
        self.backpressure = Backpressure(
            self.inflight,
            cfg.staging.max_in_flight,
            cfg.staging.max_staged_bytes,
            self.stager,
            {s.name: s.max_outstanding_messages for s in cfg.sources if s.max_outstanding_messages},
            {n: hold_limit(src.visibility_timeout, cfg.lease_margin) for n, src in sources.items()},
        )
        extended = functools.partial(metrics.inc, "extended")
        self.keeper = LeaseKeeper(self.inflight, list(sources.values()), cfg.lease_margin, extended)
        self.receivers = ReceiverPool(
            cfg, sources, self.stager, self.inflight, self.backpressure, metrics, on_event
        )


def ack_options(cfg: JobConfig, payloads: Mapping[str, PayloadStore], polled: str) -> dict[str, Any]:
    """The ``Acker`` options a job's config gives: delete retries, the sources never deleted from,
    the claim-check stores whose payloads go with their messages, and how often to look at
    ``polled`` (where its journals or commits appear): on S3 each look is a request, so 5 a
    second, not 20 (acks up to 0.2 s later)."""
    return {
        "retries": {s.name: s.delete_max_retries for s in cfg.sources},
        "keep": frozenset(s.name for s in cfg.sources if not s.delete_message),
        "payloads": {n: p for n, p in payloads.items() if p.cfg.delete_payload},
        "poll_interval": 0.2 if is_object_url(polled) else 0.05,
    }


def holds_messages(inflight: InFlight, acker: Acker, stager: Stager) -> bool:
    """Whether messages are in flight, staged but unflushed, or committed but not yet acked."""
    # The acker forgets a batch's in-flight entries before its deletes finish,
    # so its journals count as in flight too.
    return bool(inflight.count or acker.unacked() or stager.buffered)
