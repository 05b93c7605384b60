"""The source class a config names (``implementation``), made in this process."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.config.sources import SourceConfig
    from sources.base import Source


def make_source(cfg: SourceConfig) -> Source:
    """The source a config describes, in this process. Clients inside it are created lazily."""
    module, cls = cfg.implementation.split(":")
    return getattr(importlib.import_module(module), cls)(cfg)
