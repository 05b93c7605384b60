"""Typed sink configs (files, console, fake queue, SQS, RocketMQ, MNS, Delta), a union keyed on ``type``."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.config.claim_check import ClaimCheckConfig
from ingest.config.sink_base import SinkBase
from ingest.config.sources import NAME
from ingest.config.types import Bytes, Seconds, Strict
from sinks.delta.config import DeltaSinkConfig


def _claim_check_has_bucket(cfg: ClaimCheckConfig | None) -> None:
    if cfg is not None and not cfg.bucket:
        raise ValueError("claim_check.bucket is needed: a sink puts offloaded payloads there")


class FilesSinkConfig(SinkBase):
    """JSON-lines or Parquet files, one directory per batch: a replayed batch overwrites its own."""

    implementation: ClassVar[str] = "sinks.files.sink:FilesSink"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["files"]
    path: str
    """The output directory: one ``batch_id=N`` directory per micro-batch."""
    format: Literal["jsonl", "parquet"] = "jsonl"
    include_meta: bool = True
    """Keep the ``_meta`` struct (message id, queue, timestamps, attributes...) in the output, without
    the staging fields (receipt handle, raw body, staged file)."""


class ConsoleSinkConfig(SinkBase):
    """Prints rows to standard output (at-least-once: a replayed batch prints again)."""

    implementation: ClassVar[str] = "sinks.console.sink:ConsoleSink"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["console"]
    max_rows: int = Field(20, ge=1)
    truncate: bool = False


class Serialization(Strict):
    """How a row becomes a message body."""

    body_format: Literal["json", "csv", "raw"] = "json"
    """How a row becomes a message body (the row minus ``_meta``)."""
    body_column: str | None = None
    """Send this column as the body (raw); otherwise the row (minus ``_meta``) is serialized."""


class FakeSinkConfig(SinkBase, Serialization):
    """Sends rows to a file-backed fake queue."""

    implementation: ClassVar[str] = "sinks.fake.sink:FakeSink"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["fake"]
    path: str
    """Directory of the fake queue's durable file."""
    queue: str = Field("default", pattern=NAME)
    fifo: bool = False
    group_column: str | None = None
    batch_size: int = Field(100, ge=1, le=1000)


class SqsSinkConfig(SinkBase, Serialization):
    """AWS SQS, standard or FIFO (Flink SQS sink option names and defaults).

    Unset ``maxBatchSizeInBytes`` and ``maxRecordSizeInBytes`` mean the queue's own
    ``MaximumMessageSize``, read once. ``failOnError`` true fails the batch on the first
    entry SQS refuses for a retryable reason; false (the default) re-sends such entries
    up to ``max_retries`` times first. Either way the batch then fails and is replayed.
    Credentials: as for the SQS source, under Flink's ``aws.*`` option names.
    """

    implementation: ClassVar[str] = "sinks.sqs.sink:SqsSink"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["sqs"]
    url: str = Field(alias="sqsUrl")
    """The target queue URL (standard or ``.fifo``)."""
    region: str | None = Field(None, alias="aws.region")
    """Default: the queue URL's, else ``AWS_REGION``, else the AWS profile's."""
    endpoint_url: str | None = Field(None, alias="aws.endpoint")
    client: Literal["crt", "boto3"] = "crt"
    """What makes the SendMessageBatch calls: ``crt`` signs and sends them in C (awscrt), at a
    fraction of boto3's CPU a message; ``boto3`` is the plain SDK. Both use boto3's credentials
    chain, proxies and error codes."""
    credentials_provider: Literal["default", "static", "profile", "assume_role"] = Field(
        "default", alias="aws.credentials.provider"
    )
    access_key_id: str | None = Field(None, alias="aws.credentials.provider.basic.accesskeyid")
    secret_access_key: SecretStr | None = Field(None, alias="aws.credentials.provider.basic.secretkey")
    session_token: SecretStr | None = None
    profile: str | None = Field(None, alias="aws.credentials.provider.profile.name")
    role_arn: str | None = Field(None, alias="aws.credentials.provider.role.arn")
    role_session_name: str = Field(
        "mq-ingest", alias="aws.credentials.provider.role.sessionName", min_length=2, max_length=64
    )
    role_external_id: str | None = Field(None, alias="aws.credentials.provider.role.externalId")
    sts_endpoint_url: str | None = None
    proxy_url: str | None = None
    proxy_user: str | None = None
    proxy_password: SecretStr | None = None
    fail_on_error: bool = Field(False, alias="failOnError")
    max_batch_size: int = Field(10, alias="maxBatchSize", ge=1, le=10)
    max_in_flight_requests: int = Field(50, alias="maxInFlightRequests", ge=1, le=1000)
    max_buffered_requests: int = Field(5000, alias="maxBufferedRequests", ge=1)
    max_batch_size_in_bytes: Bytes | None = Field(None, alias="maxBatchSizeInBytes", gt=0, le=1024**2)
    max_time_in_buffer_ms: int = Field(5000, alias="maxTimeInBufferMS", ge=0)
    max_record_size_in_bytes: Bytes | None = Field(None, alias="maxRecordSizeInBytes", gt=0, le=1024**2)
    max_retries: int = Field(5, ge=0, le=100)
    """Re-sends of failed retryable entries (throttling, 5xx) before the batch fails."""
    delay_seconds: int = Field(0, ge=0, le=900)
    """DelaySeconds of every message (standard queues only; FIFO delays are per queue)."""
    group_column: str | None = None
    """FIFO: the MessageGroupId column (default: the source's ``_meta.group_id``, else "default")."""
    dedup_id_column: str | None = None
    """FIFO: the MessageDeduplicationId column (default: sha256 of the source message id)."""
    attribute_columns: list[str] = []
    """Columns sent as String message attributes (null values are left out)."""
    forward_attributes: bool = False
    """Send the source message's attributes (``_meta.message_attributes``, with their data types)
    as message attributes too, after ``attribute_columns``, up to SQS's 10 per message."""
    forward_exclude_prefixes: list[str] = []
    """Forwarded attributes whose name starts with one of these are left out."""
    delay_column: str | None = None
    """Standard queues: a row's DelaySeconds (0-900) from this column (null: ``delay_seconds``)."""
    queue_url_column: str | None = None
    """A row's target queue URL from this column (null: ``sqsUrl``); same region and credentials.
    Rows to a FIFO queue keep their group's order only when ``sqsUrl`` is FIFO too."""
    backoff_initial_interval: Seconds = Field(0.1, alias="backoff.initial_interval", gt=0, le=60)
    """The first wait before re-sending failed retryable entries; it doubles (with jitter) up to..."""
    backoff_max_interval: Seconds = Field(5.0, alias="backoff.max_interval", gt=0, le=600)
    backoff_max_elapsed_time: Seconds | None = Field(None, alias="backoff.max_elapsed_time", gt=0, le=86400)
    """Stop re-sending a batch after this long (with ``max_retries``, whichever comes first)."""
    claim_check: ClaimCheckConfig | None = None
    """Offload records over ``claim_check.threshold`` to S3, sending Extended Client pointers."""

    @field_validator("credentials_provider", mode="before")
    @classmethod
    def _flink_provider_names(cls, value: object) -> object:
        names = {"AUTO": "default", "ENV_VAR": "default", "BASIC": "static"}
        names |= {"PROFILE": "profile", "ASSUME_ROLE": "assume_role"}
        return names.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> SqsSinkConfig:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("the access key id and secret key go together")
        if self.credentials_provider == "static" and self.access_key_id is None:
            raise ValueError("aws.credentials.provider BASIC/static needs an access key id and secret key")
        if self.credentials_provider == "profile" and not self.profile:
            raise ValueError("aws.credentials.provider PROFILE needs aws.credentials.provider.profile.name")
        if self.credentials_provider == "assume_role" and not self.role_arn:
            raise ValueError("aws.credentials.provider ASSUME_ROLE needs aws.credentials.provider.role.arn")
        if self.proxy_user and not self.proxy_url:
            raise ValueError("proxy_user needs proxy_url")
        record, batch = self.max_record_size_in_bytes, self.max_batch_size_in_bytes
        if record and batch and record > batch:
            raise ValueError("maxRecordSizeInBytes must not exceed maxBatchSizeInBytes")
        if self.url.endswith(".fifo") and (self.delay_seconds or self.delay_column):
            raise ValueError("delays apply to standard queues only (FIFO delays are per queue)")
        if self.backoff_max_interval < self.backoff_initial_interval:
            raise ValueError("backoff.max_interval must not be below backoff.initial_interval")
        _claim_check_has_bucket(self.claim_check)
        if self.claim_check and len(self.attribute_columns) > 9:
            raise ValueError("with claim_check at most 9 attribute_columns (it reserves 1 of SQS's 10)")
        return self


class RocketMqSinkConfig(SinkBase):
    """Apache RocketMQ (reference RocketMQ sink option names and defaults).

    ``transport: remoting`` uses the native client (``rocketmq-client-python``, RocketMQ 4 and
    Alibaba Cloud TCP endpoints): ``endpoint`` is the name server ``host:port[;host:port]``.
    ``transport: grpc`` uses ``rocketmq-python-client`` 5.x: ``endpoint`` is a proxy ``host:port``
    and ``producerGroup`` is not sent (RocketMQ 5 has none). ``instanceID`` is the namespace of
    an instance that has one (remoting: ``instanceID%topic``; gRPC: the client's namespace).

    ``payload``: ``csv`` or ``json`` of the row's columns except ``_meta``, encoded with
    ``encoding``; ``binary`` sends the one binary column as is. Message keys are the source
    message id, or ``key_column``; ``sharding_key_column`` sends in order per key;
    ``property_columns`` become user properties. Every send is retried ``retryTimes`` times,
    ``sleepTimeMs`` apart, each try given up after ``send_timeout``; at most ``max_in_flight``
    sends run at once per partition. ``client_log_dir`` moves the clients' own log files
    (``$HOME/logs/rocketmq-cpp``, ``$HOME/logs/rocketmq_python``) under that directory.
    """

    implementation: ClassVar[str] = "sinks.rocketmq.sink:RocketMqSink"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["rocketmq"]
    topic: str = Field(min_length=1)
    """The topic messages go to."""
    endpoint: str = Field(min_length=1)
    access_id: str | None = Field(None, alias="accessId")
    access_key: SecretStr | None = Field(None, alias="accessKey")
    producer_group: str = Field(alias="producerGroup", min_length=1)
    """The producer group (remoting; RocketMQ 5 has none)."""
    tag: str = ""
    encoding: str = "utf-8"
    retry_times: int = Field(10, alias="retryTimes", ge=0, le=1000)
    """Retries of a send (the reference option)."""
    sleep_time_ms: int = Field(1000, alias="sleepTimeMs", ge=0)
    """Milliseconds between retries (the reference option)."""
    instance_id: str | None = Field(None, alias="instanceID")
    payload: Literal["csv", "binary", "json"] = "csv"
    """How a row becomes a message body."""
    transport: Literal["remoting", "grpc"] = "remoting"
    """remoting: the native 4.x client; grpc: the 5.x client through a proxy."""
    key_column: str | None = None
    sharding_key_column: str | None = None
    property_columns: list[str] = []
    send_timeout: Seconds = Field(10.0, gt=0)
    max_in_flight: int = Field(8, ge=1, le=256)
    max_message_size: Bytes = Field(4 * 1024**2, gt=0, le=64 * 1024**2)
    """Larger bodies are refused records (``on_bad_record``); 4 MiB is the usual broker limit."""
    client_log_dir: str | None = None

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        import codecs

        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown encoding {value!r}") from None
        return value

    @field_validator("tag")
    @classmethod
    def _single_tag(cls, value: str) -> str:
        if "|" in value or (value and not value.strip()):
            raise ValueError("a message has one tag: not blank, no '|'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RocketMqSinkConfig:
        if bool(self.access_id) != bool(self.access_key and self.access_key.get_secret_value()):
            raise ValueError("accessId and accessKey go together")
        if len(set(self.property_columns)) != len(self.property_columns):
            raise ValueError("property_columns has a column twice")
        return self


class MnsSinkConfig(SinkBase, Serialization):
    """Alibaba Cloud MNS queue (BatchSendMessage: ≤16 messages and ≤64 KB of bodies per call).

    ``base64_body`` sends bodies base64-encoded (the SDK default; what MNS recommends, and what
    an MNS source with ``base64_body`` decodes); ``max_body_bytes`` is the limit on a body as
    sent (after encoding). ``priority_column`` (1–16) and ``delay_column`` (seconds, 0–604800)
    name optional columns; null means the queue's default.
    """

    implementation: ClassVar[str] = "sinks.mns.sink:MnsSink"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

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
    batch_size: int = Field(16, ge=1, le=16)
    max_body_bytes: Bytes = Field(65536, gt=0, le=65536)
    request_timeout: Seconds = Field(30.0, gt=0)
    claim_check: ClaimCheckConfig | None = None
    """Offload bodies over ``claim_check.threshold`` (default ``max_body_bytes``) to OSS, sending pointers."""

    @model_validator(mode="after")
    def _claim_check_bucket(self) -> MnsSinkConfig:
        _claim_check_has_bucket(self.claim_check)
        return self


SinkConfig = Annotated[
    FilesSinkConfig
    | ConsoleSinkConfig
    | FakeSinkConfig
    | SqsSinkConfig
    | RocketMqSinkConfig
    | MnsSinkConfig
    | DeltaSinkConfig,
    Field(discriminator="type"),
]
