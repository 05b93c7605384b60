"""The start-up probe: each source that can checks its queue once, before anything is received."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ingest.connector import Source
from ingest.errors import FatalError, TransientError, redact

log = logging.getLogger(__name__)


def probe_sources(sources: Iterable[Source], *, drain: bool) -> None:
    """Probe the sources that can (``can_probe``) at start; a drain stops on a queue it cannot reach.

    A drain (``trigger.mode: available_now``) would otherwise poll an unreachable queue forever,
    never able to tell it drained; a streaming job keeps receiving, because its queue may come
    back (its receivers retry with backoff).

    Args:
        sources: the job's sources.
        drain: whether the job drains its queues and stops.

    Raises:
        FatalError: a probe's fatal error, or, when ``drain``, ``source <name>: <why>`` for a
            queue that could not be reached.
    """
    for source in sources:
        if not source.can_probe:
            continue
        try:
            source.probe()
        except TransientError as err:
            if drain:
                raise FatalError(f"source {source.name}: {err}") from err
            log.warning("source %s: %s; its receivers keep retrying", source.name, redact(str(err)))
