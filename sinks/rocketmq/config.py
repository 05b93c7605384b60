"""The Apache RocketMQ sink's typed config (reference RocketMQ sink option names and defaults)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.config.connector import FlinkSql, FlinkTable, SinkDelivery
from ingest.config.sink_base import SinkBase
from ingest.config.types import Bytes, Seconds


def _payload(t: FlinkTable) -> None:
    """A table of one BINARY column sends it as is; other tables send CSV unless ``payload`` says."""
    if "payload" not in t.options:
        binary = len(t.columns) == 1 and t.columns[0][1] == "BINARY"
        t.out["payload"] = "binary" if binary else "csv"


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

    flinksql: ClassVar[FlinkSql | None] = FlinkSql("mq", read=_payload)
    """``'connector' = 'mq'``; ``payload`` defaults to ``binary`` for one BINARY column."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "at_least_once",
        refuses_records=True,
        note="Message keys derive from the source message id, so consumers can deduplicate on them.",
    )

    type: Literal["rocketmq"]
    topic: str = Field(min_length=1)
    """The topic messages go to."""
    endpoint: str = Field(min_length=1)
    """The name server (remoting, ``host:9876``) or proxy (grpc, ``host:8081``)."""
    access_id: str | None = Field(None, alias="accessId")
    """The AccessKey ID, for an instance with ACLs."""
    access_key: SecretStr | None = Field(None, alias="accessKey")
    """The AccessKey secret (kept out of every log and error)."""
    producer_group: str = Field(alias="producerGroup", min_length=1)
    """The producer group (remoting; RocketMQ 5 has none)."""
    tag: str = ""
    """The messages' tag (one per message; no ``|``)."""
    encoding: str = "utf-8"
    """payload csv and json: the body's character set."""
    retry_times: int = Field(10, alias="retryTimes", ge=0, le=1000)
    """Retries of a send (the reference option)."""
    sleep_time_ms: int = Field(1000, alias="sleepTimeMs", ge=0)
    """Milliseconds between retries (the reference option)."""
    instance_id: str | None = Field(None, alias="instanceID")
    """The instance's namespace, for an instance that has one."""
    payload: Literal["csv", "binary", "json"] = "csv"
    """How a row becomes a message body."""
    transport: Literal["remoting", "grpc"] = "remoting"
    """remoting: the native 4.x client; grpc: the 5.x client through a proxy."""
    key_column: str | None = None
    """The column sent as the message key (default: the source message id)."""
    sharding_key_column: str | None = None
    """Send in order per value of this column (ordered messages)."""
    property_columns: list[str] = []
    """Columns sent as user properties."""
    send_timeout: Seconds = Field(10.0, gt=0)
    """Deadline of each try of a send (an outer one: the native client can block about a minute on
    a silent name server); a try past it is retried as ``retryTimes`` says, so a send gives up after
    at most ``retryTimes`` + 1 tries of ``send_timeout`` each, ``sleepTimeMs`` apart."""
    max_in_flight: int = Field(8, ge=1, le=256)
    """Sends running at once per writer."""
    max_message_size: Bytes = Field(4 * 1024**2, gt=0, le=64 * 1024**2)
    """Larger bodies are refused records (``on_bad_record``); 4 MiB is the usual broker limit."""
    client_log_dir: str | None = None
    """Where the RocketMQ clients write their own log files."""

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
