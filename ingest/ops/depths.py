"""Each source's queue depth, asked at most every so often: the ``queueDepth`` gauge and the drain line."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from ingest.connector import Source
from ingest.errors import redact
from ingest.metrics import Metrics

log = logging.getLogger(__name__)


class QueueDepths:
    """Asks the sources that report a backlog (``reports_lag``) for it, every ``every`` seconds at most.

    A depth the queue cannot tell right now is None, never an error: it is a figure to show,
    not a reason to stop.
    """

    def __init__(self, sources: Mapping[str, Source], metrics: Metrics, every: float) -> None:
        self.sources, self.metrics, self.every = sources, metrics, every
        self._at: float | None = None
        self._depths: dict[str, int | None] = {}

    def get(self, now: bool = False) -> dict[str, int | None]:
        """Each source's depth as last asked; asked again when ``every`` has passed (0: never), or ``now``."""
        due = bool(self.every) and (self._at is None or time.monotonic() >= self._at + self.every)
        if now or due:
            self._at = time.monotonic()
            for name, source in self.sources.items():
                try:
                    depth = source.lag() if source.reports_lag else None
                except Exception as err:
                    log.debug("depth of %s unavailable: %s", name, redact(str(err)))
                    depth = None
                if depth is not None:
                    self.metrics.set("queueDepth", depth, source=name)
                self._depths[name] = depth
        return {name: self._depths.get(name) for name in self.sources}
