"""Queue sources: one folder per queue (config, source, client) behind the protocol in ``sources.base``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.config.sources import SourceConfig
    from sources.base import Source


def build_source(cfg: SourceConfig) -> Source:
    """Make the source a config describes. Clients inside it are created lazily."""
    import importlib

    module, cls = cfg.implementation.split(":")
    return getattr(importlib.import_module(module), cls)(cfg)
