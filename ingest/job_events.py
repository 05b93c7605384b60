"""The job's side of event delivery: what the pipeline reports, and nothing when delivery is off."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ingest.config import JobConfig
from ingest.errors import redact

if TYPE_CHECKING:
    from ingest.delivery.messages import StartLogCapture


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
    ) -> None:
        self.delivery = None
        if cfg.delivery is not None:
            from ingest.delivery import Delivery

            streaming = cfg.trigger.mode == "processing_time"
            self.delivery = Delivery(
                cfg.delivery, cfg.name, metrics, spark, sources, capture=start_log, streaming=streaming
            )

    def start(self) -> None:
        if self.delivery is not None:
            self.delivery.start()

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
        if self.delivery is not None:
            self.delivery.close(state, error)
            logging.getLogger().removeHandler(self.delivery.log_handler())
