"""Job events: what the pipeline reports of its life (``JobEvents``), and nothing when ``delivery:`` is off.

The messages (``messages``), the resource figures (``resources``), their delivery to the
configured targets (``delivery``: a bounded queue and a sender thread per target, ``sender``,
over ``channels``). It imports and is imported as the rest of ``ingest.ops``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ingest.config import JobConfig
from ingest.errors import redact
from ingest.worker import Worker

if TYPE_CHECKING:
    from ingest.ops.job_events.messages import StartLogCapture


log = logging.getLogger(__name__)


class JobEvents:
    """Reports the job's life to ``cfg.delivery``'s targets; every call is a no-op without one.

    Never raises and never waits, except ``close``, which flushes for at most the delivery's
    ``flush_timeout``.
    """

    def __init__(
        self,
        cfg: JobConfig,
        metrics: Any,
        spark: Callable[[], Any],
        sources: dict[str, Any],
        start_log: StartLogCapture | None = None,
        reload: Callable[[], JobConfig] | None = None,
        reload_interval: float = 10.0,
        worker: str | None = None,
    ) -> None:
        """``reload`` re-reads the job's config (its file): while the job runs, delivery settings
        changed there take effect within ``reload_interval`` seconds, as the reference's do.
        ``worker``: the intake worker's id, when one reports (each of its events names it)."""
        self.delivery = None
        self._reload, self._reload_interval = reload, reload_interval
        self._watcher = Worker("delivery-settings", target=self._watch)
        if cfg.delivery is not None:
            from ingest.ops.job_events.delivery import Delivery

            streaming = cfg.trigger.mode == "processing_time"
            self.delivery = Delivery(
                cfg.delivery,
                cfg.name,
                metrics,
                spark,
                sources,
                capture=start_log,
                streaming=streaming,
                worker=worker,
            )

    def start(self) -> None:
        if self.delivery is not None:
            self.delivery.start()
            if self._reload is not None:
                self._watcher.start()

    def _watch(self) -> None:
        """Re-read the config every ``reload_interval``; a changed ``delivery`` section is applied."""
        assert self._reload is not None and self.delivery is not None
        while not self._watcher.stopping.wait(self._reload_interval):
            try:
                cfg = self._reload()
            except Exception as err:  # an edit in progress, or a bad one: keep what runs
                log.warning("delivery settings not reloaded: %s", redact(str(err)))
                continue
            try:
                if cfg.delivery is not None and self.delivery.reconfigure(cfg.delivery):
                    self.event("DELIVERY_CHANGED", "delivery settings changed; new targets in use")
            except Exception:
                log.exception("delivery settings could not be applied; the old ones stay")

    def started(self) -> None:
        """The query runs: RUNNING and the start log, once."""
        if self.delivery is not None:
            self.delivery.started()

    def event(self, name: str, content: str) -> None:
        if self.delivery is not None:
            self.delivery.event(name, content)

    def batch_failed(self, batch_id: int, err: BaseException) -> None:
        self.event("BATCH_FAILED", redact(f"batch {batch_id} failed: {type(err).__name__}: {err}"))

    def batch_replayed(self, batch_id: int, rows: int) -> None:
        self.event("BATCH_REPLAYED", f"batch {batch_id}: {rows} rows replayed; state already committed")

    def close(self, state: str, error: str | None = None) -> None:
        """The final state (FINISHED, FAILED) with the error; stops capturing the start log."""
        self._watcher.stop(5.0)
        if self.delivery is not None:
            self.delivery.close(state, error)
            logging.getLogger().removeHandler(self.delivery.log_handler())
