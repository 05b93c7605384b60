"""The AWS SQS sink's typed config (Flink SQS sink option names and defaults)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.config.aws import CredentialErrors, check_credentials, check_proxy_url, provider_name
from ingest.config.claim_check import ClaimCheckConfig, require_bucket
from ingest.config.connector import FlinkSql, Guarantee, SinkDelivery
from ingest.config.sink_base import Serialization, SinkBase
from ingest.config.types import Bytes, Seconds


class SqsSinkConfig(SinkBase, Serialization):
    """AWS SQS, standard or FIFO (Flink SQS sink option names and defaults).

    Unset ``maxBatchSizeInBytes`` and ``maxRecordSizeInBytes`` mean the queue's own
    ``MaximumMessageSize``, read once. ``failOnError`` true fails the batch on the first
    entry SQS refuses for a retryable reason; unset, such entries are re-sent up to
    ``max_retries`` times first, then the batch fails (the job exits 1, the batch is replayed
    at its next start); false (Flink's) re-sends them until SQS takes them, the batch held.
    Credentials: as for the SQS source, under Flink's ``aws.*`` option names.
    """

    implementation: ClassVar[str] = "sinks.sqs.sink:SqsSink"
    claim_check_access: ClassVar[str] = "sources.sqs.claim_check:bucket_access"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql(
        "sqs",
        formats={"json": "json", "csv": "csv", "raw": "raw"},
        format_key="body_format",
        formats_refused="a sqs sink writes json, csv or raw bodies",
    )
    """``'connector' = 'sqs'``; ``format`` is ``body_format``."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "at_least_once",
        refuses_records=True,
        note="On a FIFO queue (a `.fifo` URL) it is idempotent per message id: every message's "
        "deduplication id derives from its source message id, and SQS drops a copy within 5 minutes.",
    )

    type: Literal["sqs"]
    url: str = Field(alias="sqsUrl")
    """The target queue URL (standard or ``.fifo``)."""
    region: str | None = Field(None, alias="aws.region")
    """Default: the queue URL's, else ``AWS_REGION``, else the AWS profile's."""
    endpoint_url: str | None = Field(None, alias="aws.endpoint")
    """Another SQS endpoint (LocalStack, moto, a VPC endpoint)."""
    client: Literal["crt", "boto3"] = "crt"
    """What makes the SendMessageBatch calls: ``crt`` signs and sends them in C (awscrt), at a
    fraction of boto3's CPU a message; ``boto3`` is the plain SDK. Both use boto3's credentials
    chain, proxies and error codes."""
    credentials_provider: Literal["default", "static", "profile", "assume_role"] = Field(
        "default", alias="aws.credentials.provider"
    )
    """Where the AWS credentials come from: boto3's default chain, static keys, a named profile, or a role to
    assume."""
    access_key_id: str | None = Field(None, alias="aws.credentials.provider.basic.accesskeyid")
    """static: the access key id."""
    secret_access_key: SecretStr | None = Field(None, alias="aws.credentials.provider.basic.secretkey")
    """static: the secret access key (write it as ``${env:NAME}``)."""
    session_token: SecretStr | None = None
    """static: a session token, for temporary keys."""
    profile: str | None = Field(None, alias="aws.credentials.provider.profile.name")
    """profile: the AWS profile's name."""
    role_arn: str | None = Field(None, alias="aws.credentials.provider.role.arn")
    """assume_role: the role to assume."""
    role_session_name: str = Field(
        "mq-ingest", alias="aws.credentials.provider.role.sessionName", min_length=2, max_length=64
    )
    """assume_role: the role session's name."""
    role_external_id: str | None = Field(None, alias="aws.credentials.provider.role.externalId")
    """assume_role: the external id the role's trust policy asks for."""
    sts_endpoint_url: str | None = None
    """STS endpoint for ``assume_role`` (default: the regional AWS one)."""
    proxy_url: str | None = None
    """An ``http://`` or ``https://`` proxy for the SQS (and claim-check S3) calls; HTTPS endpoints through it
    by CONNECT."""
    proxy_user: str | None = None
    """The proxy's user name."""
    proxy_password: SecretStr | None = None
    """The proxy's password (kept out of every log and error)."""
    fail_on_error: bool | None = Field(None, alias="failOnError")
    """Unset: re-send an entry that failed for a retryable reason ``max_retries`` times, then fail the batch
    (the job exits 1). ``true``: fail the batch at the first such entry (the reference option). ``false``: as
    Flink, re-send it until SQS takes it, waiting at most ``backoff.max_interval`` between tries
    (``max_retries`` and ``backoff.max_elapsed_time`` do not apply); the batch is held, nothing acked;
    ``/healthz`` names the sink after ``metrics.health_max_batch_age``; a stop cancels the write after
    ``backoff.max_interval``."""
    max_batch_size: int = Field(10, alias="maxBatchSize", ge=1, le=10)
    """Messages per SendMessageBatch call."""
    max_in_flight_requests: int = Field(50, alias="maxInFlightRequests", ge=1, le=1000)
    """SendMessageBatch calls running at once per writer."""
    max_buffered_requests: int = Field(5000, alias="maxBufferedRequests", ge=1)
    """Messages a writer buffers before it waits for sends to finish."""
    max_batch_size_in_bytes: Bytes | None = Field(None, alias="maxBatchSizeInBytes", gt=0, le=1024**2)
    """Bytes per SendMessageBatch call at most (default: the queue's ``MaximumMessageSize``)."""
    max_time_in_buffer_ms: int = Field(5000, alias="maxTimeInBufferMS", ge=0)
    """Milliseconds a buffered message waits for its call to fill."""
    max_record_size_in_bytes: Bytes | None = Field(None, alias="maxRecordSizeInBytes", gt=0, le=1024**2)
    """Larger messages are refused records (``on_bad_record``); default: the queue's
    ``MaximumMessageSize``."""
    max_retries: int = Field(5, ge=0, le=100)
    """Re-sends of failed retryable entries (throttling, 5xx) before the batch fails (not under
    ``failOnError`` false, which re-sends until SQS takes them)."""
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
    """...and waits at most this long between re-sends."""
    backoff_max_elapsed_time: Seconds | None = Field(None, alias="backoff.max_elapsed_time", gt=0, le=86400)
    """Stop re-sending a batch after this long (with ``max_retries``, whichever comes first; not
    under ``failOnError`` false)."""
    claim_check: ClaimCheckConfig | None = None
    """Offload records over ``claim_check.threshold`` to S3, sending Extended Client pointers."""

    _flink_provider_names = field_validator("credentials_provider", mode="before")(provider_name)
    _proxy_url = field_validator("proxy_url")(check_proxy_url)

    @property
    def guarantee(self) -> Guarantee:
        """Idempotent per message id on a FIFO queue (its dedup ids), else at-least-once."""
        return "idempotent_per_message_id" if self.url.endswith(".fifo") else self.delivery.guarantee

    def stop_grace(self) -> float | None:
        """Under ``failOnError`` false a write may never end: a stop waits one longest backoff
        wait for it, then cancels it."""
        return self.backoff_max_interval if self.fail_on_error is False else None

    @model_validator(mode="after")
    def _consistent(self) -> SqsSinkConfig:
        check_credentials(self, CREDENTIAL_ERRORS)
        record, batch = self.max_record_size_in_bytes, self.max_batch_size_in_bytes
        if record and batch and record > batch:
            raise ValueError("maxRecordSizeInBytes must not exceed maxBatchSizeInBytes")
        if self.url.endswith(".fifo") and (self.delay_seconds or self.delay_column):
            raise ValueError("delays apply to standard queues only (FIFO delays are per queue)")
        if self.backoff_max_interval < self.backoff_initial_interval:
            raise ValueError("backoff.max_interval must not be below backoff.initial_interval")
        require_bucket(self.claim_check)
        if self.claim_check and len(self.attribute_columns) > 9:
            raise ValueError("with claim_check at most 9 attribute_columns (it reserves 1 of SQS's 10)")
        return self


CREDENTIAL_ERRORS = CredentialErrors(
    pair="the access key id and secret key go together",
    static="aws.credentials.provider BASIC/static needs an access key id and secret key",
    profile="aws.credentials.provider PROFILE needs aws.credentials.provider.profile.name",
    role="aws.credentials.provider ASSUME_ROLE needs aws.credentials.provider.role.arn",
    proxy="proxy_user needs proxy_url",
)
