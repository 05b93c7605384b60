"""Sinks: one folder per target (config, sink) behind the protocol in ``sinks.base``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.config.sinks import SinkConfig
    from sinks.base import Sink


def build_sink(cfg: SinkConfig) -> Sink:
    """Make the sink a config describes; its clients are created lazily."""
    from ingest.config.registry import load_object

    return load_object(cfg.implementation, f"sinks.{cfg.name} ({cfg.type})")(cfg)
