"""The source class a config names (``implementation``), made in this process."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.config.sources import SourceConfig
    from sources.base import Source


def make_source(cfg: SourceConfig) -> Source:
    """The source a config describes, in this process. Clients inside it are created lazily."""
    from ingest.config.registry import load_object

    return load_object(cfg.implementation, f"sources.{cfg.name} ({cfg.type})")(cfg)
