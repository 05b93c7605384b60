"""The Alibaba Cloud MNS sink's typed config (BatchSendMessage limits, body encoding, columns)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, model_validator

from ingest.config.claim_check import ClaimCheckConfig, require_bucket
from ingest.config.connector import FlinkSql, SinkDelivery
from ingest.config.sink_base import Serialization, SinkBase
from ingest.config.types import Bytes, Seconds


class MnsSinkConfig(SinkBase, Serialization):
    """Alibaba Cloud MNS queue (BatchSendMessage: ≤16 messages and ≤64 KB of bodies per call).

    ``base64_body`` sends bodies base64-encoded (the SDK default; what MNS recommends, and what
    an MNS source with ``base64_body`` decodes); ``max_body_bytes`` is the limit on a body as
    sent (after encoding). ``priority_column`` (1–16) and ``delay_column`` (seconds, 0–604800)
    name optional columns; null means the queue's default.
    """

    implementation: ClassVar[str] = "sinks.mns.sink:MnsSink"
    claim_check_access: ClassVar[str] = "sources.mns.claim_check:bucket_access"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql(
        "mns",
        ignored=("region",),
        formats={"json": "json", "csv": "csv", "raw": "raw"},
        format_key="body_format",
        formats_refused="a mns sink writes json, csv or raw bodies",
    )
    """``'connector' = 'mns'``; ``format`` is ``body_format``; ``region`` is accepted (the endpoint
    names the region)."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "at_least_once", refuses_records=True, note="MNS has no deduplication."
    )

    type: Literal["mns"]
    endpoint: str
    """The MNS endpoint, ``http(s)://<account>.mns.<region>.aliyuncs.com``."""
    queue_name: str = Field(alias="queueName")
    """The target queue."""
    access_key_id: str = Field(alias="accessKeyId")
    """The AccessKey ID."""
    access_key_secret: SecretStr = Field(alias="accessKeySecret")
    """The AccessKey secret (kept out of every log and error)."""
    security_token: SecretStr | None = Field(None, alias="securityToken")
    """An STS token, with temporary AccessKeys."""
    base64_body: bool = True
    """Send bodies base64-encoded (the SDKs' default)."""
    priority_column: str | None = None
    """A row's message priority (1-16) from this column."""
    delay_column: str | None = None
    """A row's delay in seconds (0-604800) from this column."""
    max_retries: int = Field(5, ge=0)
    """Re-sends of a batch's failed messages before the batch fails."""
    batch_size: int = Field(16, ge=1, le=16)
    """Messages per BatchSendMessage call."""
    max_body_bytes: Bytes = Field(65536, gt=0, le=65536)
    """Larger bodies (as sent, after base64) are refused records (``on_bad_record``), or offloaded with
    ``claim_check``."""
    request_timeout: Seconds = Field(30.0, gt=0)
    """Each HTTP call's timeout."""
    claim_check: ClaimCheckConfig | None = None
    """Offload bodies over ``claim_check.threshold`` (default ``max_body_bytes``) to OSS, sending pointers."""

    @model_validator(mode="after")
    def _claim_check_bucket(self) -> MnsSinkConfig:
        require_bucket(self.claim_check)
        return self
