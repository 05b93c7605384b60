"""Queue sources: one folder per queue (config, source, client) behind the protocol in ``sources.base``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.config.sources import SourceConfig
    from sources.base import Source


def build_source(cfg: SourceConfig) -> Source:
    """Make the source a config describes. Clients inside it are created lazily; with
    ``processes`` set, they live in child processes (``sources.process``)."""
    from sources.registry import make_source

    if cfg.processes:
        from sources.process import ProcessSource

        return ProcessSource(cfg)
    return make_source(cfg)
