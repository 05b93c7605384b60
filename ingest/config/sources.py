"""The source registry: each source connector's config class, in a union keyed on ``type``.

Registering a source is its folder (``sources/<name>/``: ``config``, ``source``) and one line
here. The options every source shares are in ``ingest.config.source_base``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ingest.config.source_base import DecodeOptions, ReceiveOptions
from ingest.config.types import NAME
from sources.datagen.config import DatagenField, DatagenSourceConfig
from sources.fake.config import FakeSeed, FakeSourceConfig
from sources.mns.config import MnsSourceConfig
from sources.sqs.config import SqsSourceConfig

__all__ = [
    "NAME",
    "DatagenField",
    "DatagenSourceConfig",
    "DecodeOptions",
    "FakeSeed",
    "FakeSourceConfig",
    "MnsSourceConfig",
    "ReceiveOptions",
    "SourceConfig",
    "SqsSourceConfig",
]

SourceConfig = Annotated[
    FakeSourceConfig | SqsSourceConfig | MnsSourceConfig | DatagenSourceConfig,
    Field(discriminator="type"),
]
