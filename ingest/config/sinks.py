"""The sink registry: each sink connector's config class, in a union keyed on ``type``.

Registering a sink is its folder (``sinks/<name>/``: ``config``, ``sink``) and one line here.
The options every sink shares are in ``ingest.config.sink_base``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ingest.config.sink_base import Serialization, SinkBase
from sinks.console.config import ConsoleSinkConfig
from sinks.delta.config import DeltaSinkConfig
from sinks.fake.config import FakeSinkConfig
from sinks.files.config import FilesSinkConfig
from sinks.mns.config import MnsSinkConfig
from sinks.python.config import PythonSinkConfig
from sinks.rocketmq.config import RocketMqSinkConfig
from sinks.spark_writer.config import SparkWriterSinkConfig
from sinks.sqs.config import SqsSinkConfig

__all__ = [
    "ConsoleSinkConfig",
    "DeltaSinkConfig",
    "FakeSinkConfig",
    "FilesSinkConfig",
    "MnsSinkConfig",
    "PythonSinkConfig",
    "RocketMqSinkConfig",
    "Serialization",
    "SinkBase",
    "SinkConfig",
    "SparkWriterSinkConfig",
    "SqsSinkConfig",
]

SinkConfig = Annotated[
    FilesSinkConfig
    | ConsoleSinkConfig
    | FakeSinkConfig
    | SqsSinkConfig
    | RocketMqSinkConfig
    | MnsSinkConfig
    | DeltaSinkConfig
    | PythonSinkConfig
    | SparkWriterSinkConfig,
    Field(discriminator="type"),
]
