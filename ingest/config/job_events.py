"""Typed config of the job's ``delivery:`` section: where its job events go, and which.

Identity, message scope, intervals and the channel targets. (Not a sink's delivery guarantee,
``SinkDelivery``: that is what a replayed batch does at the sink's target.)
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, model_validator

from ingest.config.sinks import SinkConfig
from ingest.config.types import NAME, Seconds, Strict

MessageType = Literal["JOB_START_LOG", "JOB_EVENT", "RESOURCE_QUOTA", "JOB_RESOURCE_USAGE"]
ALL_TYPES: tuple[MessageType, ...] = ("JOB_START_LOG", "JOB_EVENT", "RESOURCE_QUOTA", "JOB_RESOURCE_USAGE")


class TargetBase(Strict):
    """Options every delivery target has: its own bounded queue, batching and failure handling."""

    name: str | None = Field(None, pattern=NAME)
    """Name in counters and logs; default ``<type>-<index>``."""
    queue_size: int = Field(10_000, ge=1, le=1_000_000)
    """Messages waiting for this target; more are dropped (and counted), the job never waits."""
    batch_size: int = Field(100, ge=1, le=4096)
    """Most messages per write (one PutLogs call, one sink write, one fsync)."""
    linger: Seconds = Field(0.2, ge=0, le=60)
    """How long the sender waits for more messages to fill a batch."""
    attempts: int = Field(3, ge=1, le=20)
    """Tries per batch (``call_with_retries``); then the batch's messages count as failed."""
    dead_pause: Seconds = Field(30.0, ge=0, le=3600)
    """After a batch failed every attempt the target rests this long; what overflows its queue
    meanwhile is dropped, and at close its queue is dropped at once instead of waited for."""


class FileTarget(TargetBase):
    """A local JSON-lines file, one message per line, appended and fsynced per batch."""

    type: Literal["file"]
    path: str


class SinkTarget(TargetBase):
    """Any sink of the project, fed a one-column DataFrame ``body`` (the message JSON).

    Every write is a small Spark job on the job's own SparkSession; messages wait in the
    queue until the session exists. For queue sinks set ``body_format: raw`` so the body is
    the message JSON itself.
    """

    type: Literal["sink"]
    sink: SinkConfig
    linger: Seconds = Field(2.0, ge=0, le=60)
    batch_size: int = Field(1000, ge=1, le=100_000)


class SlsTarget(TargetBase):
    """An Alibaba Cloud Simple Log Service Logstore (PutLogs via aliyun-log-python-sdk).

    ``authorization`` follows the reference: ``access_key`` (AccessKey pair, any region) or
    ``sts_token``: the AccessKey pair of an STS token plus ``securityToken``, or, with none of the
    three given, Alibaba Cloud's default credential chain (``alibabacloud-credentials``: the
    ``ALIBABA_CLOUD_*`` environment variables, an OIDC role (ACK RRSA), the credentials file, the
    ECS instance's RAM role), refreshed before the token expires. Give ``endpoint``
    (``host[:port]``, ``http://`` or ``https://``) or ``region`` (endpoint
    ``https://<region>.log.aliyuncs.com``). A token given in the config is read at start: a new
    one takes effect on restart.
    """

    type: Literal["sls"]
    project: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
    logstore: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$")
    endpoint: str | None = None
    region: str | None = Field(None, pattern=r"^[a-z0-9-]+$")
    authorization: Literal["access_key", "sts_token"] = Field("access_key", alias="authorizationMode")
    access_key_id: str | None = Field(None, alias="accessKeyId", min_length=1)
    access_key_secret: SecretStr | None = Field(None, alias="accessKeySecret")
    security_token: SecretStr | None = Field(None, alias="securityToken")
    auth_version: Literal["v1", "v4"] = "v1"
    """v4 signing needs ``region``."""
    topic: str = ""
    source: str | None = None
    """The logs' ``__source__``; default this machine's host name."""
    compress: Literal["lz4", "none"] = "lz4"
    timeout: Seconds = Field(10.0, gt=0, le=300)
    """Per request; a dead endpoint costs at most ``attempts`` × this per batch."""

    @model_validator(mode="after")
    def _consistent(self) -> SlsTarget:
        if not self.endpoint and not self.region:
            raise ValueError("sls target needs endpoint or region")
        keys = (self.access_key_id, self.access_key_secret)
        if self.authorization == "access_key" and None in keys:
            raise ValueError("authorizationMode access_key needs accessKeyId and accessKeySecret")
        given = [k is not None for k in (*keys, self.security_token)]
        if self.authorization == "sts_token" and any(given) and not all(given):
            raise ValueError(
                "authorizationMode sts_token needs accessKeyId, accessKeySecret and securityToken, "
                "or none of them (the default credential chain)"
            )
        if self.auth_version == "v4" and not self.region:
            raise ValueError("auth_version v4 needs region")
        return self


DeliveryTarget = Annotated[FileTarget | SinkTarget | SlsTarget, Field(discriminator="type")]


class DeliveryConfig(Strict):
    """The ``delivery:`` section: where the job reports its own life, and what it reports.

    The ids and names go into every message (field names as in the reference message
    delivery feature). Changes to this section in the job's file (or SQL script) take effect
    within 10 s while the job runs: new targets start, the old ones send what they hold and
    close. The ids and names stay as at start; adding or removing the whole section takes a
    restart.
    """

    enabled: bool = True
    deployment_id: str | None = Field(None, alias="deploymentId", min_length=1, max_length=128)
    """Stable across runs; default a UUID derived from the job name."""
    deployment_name: str | None = Field(None, alias="deploymentName", min_length=1, max_length=256)
    """Default the job name."""
    workspace: str = Field("", max_length=128)
    namespace: str = Field("default", max_length=128)
    tag: str = Field("", max_length=256)
    scope: list[MessageType] = Field(default=list(ALL_TYPES), min_length=1)
    """Which message types are delivered (the reference's "delivery scope")."""
    quota_interval: Seconds = Field(30.0, ge=1, le=86400)
    """RESOURCE_QUOTA every this long while the job runs."""
    usage_interval: Seconds = Field(600.0, ge=1, le=86400)
    """JOB_RESOURCE_USAGE every this long while the job streams, and once at close."""
    start_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    start_log_max_chars: int = Field(1_000_000, ge=1024, le=50_000_000)
    """The captured start log is cut here (and says so)."""
    start_log_part_chars: int = Field(16_384, ge=256, le=1_000_000)
    """A longer start log is split into JOB_START_LOG messages of at most this many characters."""
    flush_timeout: Seconds = Field(10.0, ge=0, le=600)
    """At close, wait at most this long for the targets to send what is queued."""
    targets: list[DeliveryTarget] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> DeliveryConfig:
        names = [t.name or f"{t.type}-{i}" for i, t in enumerate(self.targets)]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"delivery targets: duplicate name(s) {sorted(dup)}")
        if len(set(self.scope)) != len(self.scope):
            raise ValueError("delivery scope lists a message type twice")
        return self

    def target_names(self) -> list[str]:
        """Each target's name: its ``name`` or ``<type>-<index>``."""
        return [t.name or f"{t.type}-{i}" for i, t in enumerate(self.targets)]
