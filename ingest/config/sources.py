"""The source config union, keyed on ``type``: every source the registry (``ingest.config.registry``) holds.

A source is its folder (``sources/<name>/``: ``config``, ``source``) and one entry point, in
``ingest/connectors.ini`` for a built-in or in a plugin package's ``pyproject.toml``. The options
every source shares are in ``ingest.config.source_base``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ingest.config.registry as registry
from ingest.config.source_base import DecodeOptions, ReceiveOptions, SourceBase
from ingest.config.types import NAME

__all__ = ["NAME", "DecodeOptions", "ReceiveOptions", "SourceBase", "SourceConfig"]

if TYPE_CHECKING:
    SourceConfig = SourceBase
else:
    SourceConfig = registry.union("sources")


def rebuilt() -> Any:
    """The union again, after ``registry.register`` changed the sources (also kept as ``SourceConfig``)."""
    global SourceConfig
    SourceConfig = registry.union("sources")
    return SourceConfig
