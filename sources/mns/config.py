"""The Alibaba Cloud MNS source's typed config (reference SMQ connector option names)."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, model_validator

from ingest.config.claim_check import ClaimCheckConfig
from ingest.config.connector import FlinkSql
from ingest.config.source_base import SourceBase
from ingest.config.types import Seconds


class MnsSourceConfig(SourceBase):
    """Alibaba Cloud MNS / Simple Message Queue (reference SMQ connector option names).

    ``base64_body`` (default, as the MNS SDKs send and OSS event notifications arrive): bodies
    are base64-decoded; a body that is not valid base64 is taken as it is. ``max_retries``
    bounds the retries of receive and visibility calls (deletes: ``deleteMaxRetries``);
    ``request_timeout`` bounds each HTTP read and must exceed ``pollingWaitTime``.
    """

    implementation: ClassVar[str] = "sources.mns.source:MnsSource"
    claim_check_access: ClassVar[str] = "sources.mns.claim_check:bucket_access"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql("mns")
    """``'connector' = 'mns'``."""

    type: Literal["mns"]
    endpoint: str
    """The MNS endpoint, ``http(s)://<account>.mns.<region>.aliyuncs.com``."""
    region: str | None = None
    """Checked against the endpoint's host where it names one (the endpoint alone picks the region)."""
    queue_name: str = Field(alias="queueName")
    """The queue to consume."""
    access_key_id: str = Field(alias="accessKeyId")
    """The AccessKey ID."""
    access_key_secret: SecretStr = Field(alias="accessKeySecret")
    """The AccessKey secret (kept out of every log and error)."""
    security_token: SecretStr | None = Field(None, alias="securityToken")
    """An STS token, with temporary AccessKeys."""
    batch_size: int = Field(1, alias="batchSize", ge=1, le=16)
    """Messages per BatchReceiveMessage call (the reference option)."""
    polling_wait_time: Seconds = Field(10.0, alias="pollingWaitTime", ge=0, le=30)
    """Long-polling wait when the queue is empty (the reference option)."""
    request_timeout: Seconds = Field(35.0, gt=0)
    """Each HTTP read's timeout; longer than ``pollingWaitTime``."""
    base64_body: bool = True
    """Bodies are base64 (as the MNS SDKs send them); false: plain text."""
    max_retries: int = Field(3, ge=0, le=100)
    """Retries of receive and visibility calls on throttling, 5xx and network errors."""
    max_in_flight_requests: int | None = Field(None, alias="maxInFlightRequests", ge=1, le=64)
    """Delete (16 handles each) and visibility (one handle each) calls run at once. Default:
    ``receivers`` (at least 4), so acks keep pace with receives at any round trip."""
    claim_check: ClaimCheckConfig | None = None
    """Read payload pointer bodies from OSS (``claim_check.endpoint_url``)."""

    @property
    def poll_wait(self) -> float:
        return self.polling_wait_time

    @model_validator(mode="after")
    def _timeout_covers_poll(self) -> MnsSourceConfig:
        if self.request_timeout <= self.polling_wait_time:
            raise ValueError("request_timeout must be longer than pollingWaitTime, or long polls time out")
        if not self.endpoint.startswith(("http://", "https://")):
            raise ValueError("endpoint must start with http:// or https://")
        named = endpoint_region(self.endpoint)
        if self.region and named and self.region != named:
            raise ValueError(f"region {self.region} is not the region of endpoint {self.endpoint} ({named})")
        return self


_MNS_HOST = re.compile(
    r"^\d+\.mns\.(?P<region>[a-z]+-[a-z0-9-]+?)(?:-internal(?:-vpc)?|-vpc)?\.aliyuncs\.com$"
)


def endpoint_region(endpoint: str) -> str | None:
    """The region an MNS endpoint's host names (``http://<account>.mns.<region>[-internal].aliyuncs.com``).

    >>> endpoint_region("http://1234.mns.cn-hangzhou-internal.aliyuncs.com")
    'cn-hangzhou'
    """
    from urllib.parse import urlsplit

    m = _MNS_HOST.match((urlsplit(endpoint).hostname or "").lower())
    return m["region"] if m else None
