"""Typed sink configs (files, console, fake queue, SQS, RocketMQ, MNS), a union keyed on ``type``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr

from ingest.config.sources import NAME
from ingest.config.types import Bytes, Seconds, Strict


class SinkBase(Strict):
    """Options every sink has."""

    name: str = Field(pattern=NAME)
    on_bad_record: Literal["fail", "skip", "dead_letter"] = "fail"
    """What happens to a record the target refuses for good (oversized, invalid)."""


class FilesSinkConfig(SinkBase):
    """JSON-lines or Parquet files, one directory per batch: a replayed batch overwrites its own."""

    type: Literal["files"]
    path: str
    format: Literal["jsonl", "parquet"] = "jsonl"
    include_meta: bool = True
    """Keep the ``_meta`` struct (message id, queue, timestamps...) in the output."""


class ConsoleSinkConfig(SinkBase):
    """Prints rows to standard output (at-least-once: a replayed batch prints again)."""

    type: Literal["console"]
    max_rows: int = Field(20, ge=1)
    truncate: bool = False


class Serialization(Strict):
    """How a row becomes a message body."""

    body_format: Literal["json", "csv", "raw"] = "json"
    body_column: str | None = None
    """Send this column as the body (raw); otherwise the row (minus ``_meta``) is serialized."""


class FakeSinkConfig(SinkBase, Serialization):
    """Sends rows to a file-backed fake queue."""

    type: Literal["fake"]
    path: str
    queue: str = Field("default", pattern=NAME)
    fifo: bool = False
    group_column: str | None = None
    batch_size: int = Field(100, ge=1, le=1000)


class SqsSinkConfig(SinkBase, Serialization):
    """AWS SQS (Flink SQS sink option names and defaults)."""

    type: Literal["sqs"]
    url: str = Field(alias="sqsUrl")
    region: str = "us-east-1"
    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    fail_on_error: bool = Field(False, alias="failOnError")
    max_batch_size: int = Field(10, alias="maxBatchSize", ge=1, le=10)
    max_in_flight_requests: int = Field(50, alias="maxInFlightRequests", ge=1)
    max_buffered_requests: int = Field(5000, alias="maxBufferedRequests", ge=1)
    max_batch_size_in_bytes: Bytes | None = Field(None, alias="maxBatchSizeInBytes", gt=0)
    max_time_in_buffer_ms: int = Field(5000, alias="maxTimeInBufferMS", ge=0)
    max_record_size_in_bytes: Bytes | None = Field(None, alias="maxRecordSizeInBytes", gt=0)
    max_retries: int = Field(5, ge=0, le=100)
    """Re-sends of failed retryable entries (throttling, 5xx) before the batch fails."""
    delay_seconds: int = Field(0, ge=0, le=900)
    group_column: str | None = None
    dedup_id_column: str | None = None
    attribute_columns: list[str] = []


class RocketMqSinkConfig(SinkBase):
    """Apache RocketMQ (reference RocketMQ sink option names and defaults)."""

    type: Literal["rocketmq"]
    topic: str
    endpoint: str
    access_id: str | None = Field(None, alias="accessId")
    access_key: SecretStr | None = Field(None, alias="accessKey")
    producer_group: str = Field(alias="producerGroup")
    tag: str = ""
    encoding: str = "utf-8"
    retry_times: int = Field(10, alias="retryTimes", ge=0)
    sleep_time_ms: int = Field(1000, alias="sleepTimeMs", ge=0)
    instance_id: str | None = Field(None, alias="instanceID")
    payload: Literal["csv", "binary", "json"] = "csv"
    transport: Literal["remoting", "grpc"] = "remoting"
    key_column: str | None = None
    sharding_key_column: str | None = None
    property_columns: list[str] = []
    send_timeout: Seconds = Field(10.0, gt=0)


class MnsSinkConfig(SinkBase, Serialization):
    """Alibaba Cloud MNS queue (BatchSendMessage, 16 per call)."""

    type: Literal["mns"]
    endpoint: str
    queue_name: str = Field(alias="queueName")
    access_key_id: str = Field(alias="accessKeyId")
    access_key_secret: SecretStr = Field(alias="accessKeySecret")
    security_token: SecretStr | None = Field(None, alias="securityToken")
    base64_body: bool = True
    priority_column: str | None = None
    delay_column: str | None = None
    max_retries: int = Field(5, ge=0)


SinkConfig = Annotated[
    FilesSinkConfig | ConsoleSinkConfig | FakeSinkConfig | SqsSinkConfig | RocketMqSinkConfig | MnsSinkConfig,
    Field(discriminator="type"),
]
