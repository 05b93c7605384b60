"""The sink config union, keyed on ``type``: every sink the registry (``ingest.config.registry``) holds.

A sink is its folder (``sinks/<name>/``: ``config``, ``sink``) and one entry point, in
``ingest/connectors.ini`` for a built-in or in a plugin package's ``pyproject.toml``. The options
every sink shares are in ``ingest.config.sink_base``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ingest.config.registry as registry
from ingest.config.sink_base import Serialization, SinkBase

__all__ = ["Serialization", "SinkBase", "SinkConfig"]

if TYPE_CHECKING:
    SinkConfig = SinkBase
else:
    SinkConfig = registry.union("sinks")


def rebuilt() -> Any:
    """The union again, after ``registry.register`` changed the sinks (also kept as ``SinkConfig``)."""
    global SinkConfig
    SinkConfig = registry.union("sinks")
    return SinkConfig
