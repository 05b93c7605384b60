"""Queue sources: one module per queue behind the protocol in ``sources.base``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.config.sources import SourceConfig
    from sources.base import Source


def build_source(cfg: SourceConfig) -> Source:
    """Make the source a config describes. Clients inside it are created lazily."""
    if cfg.type == "fake":
        from sources.fake import FakeSource

        return FakeSource(cfg)
    if cfg.type == "sqs":
        from sources.sqs import SqsSource

        return SqsSource(cfg)
    if cfg.type == "mns":
        from sources.mns import MnsSource

        return MnsSource(cfg)
    raise ValueError(f"unknown source type {cfg.type!r}")
