"""Typed source configs (fake, SQS, MNS), a union keyed on ``type``, and body decoding options."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.config.claim_check import ClaimCheckConfig
from ingest.config.types import Bytes, Seconds, Strict

NAME = r"^[A-Za-z0-9_.-]+$"


class DecodeOptions(Strict):
    """How a source's message bodies decode into the job's schema (reference option names)."""

    format: Literal["json", "csv", "raw", "avro", "parquet", "orc"] = "json"
    """How bodies decode: JSON or CSV into the schema, raw text, or one Avro/Parquet/ORC record set."""
    message_type: Literal["RAW", "OSS"] = Field("RAW", alias="messageType")
    """OSS: bodies are OSS event notifications, flattened to the reference columns."""
    json_fail_on_missing_field: bool = Field(False, alias="json.fail-on-missing-field")
    json_ignore_parse_errors: bool = Field(False, alias="json.ignore-parse-errors")
    json_timestamp_standard: Literal["SQL", "ISO-8601"] = Field(
        "ISO-8601", alias="json.timestamp-format.standard"
    )
    json_timestamp_pattern: str | None = Field(None, alias="json.timestamp-format.pattern")
    csv_delimiter: str = Field(",", alias="csv.field-delimiter", min_length=1, max_length=1)
    max_decoded_rows: int = Field(100_000, ge=1, le=100_000_000)
    """avro, parquet, orc: a body holding more records is a bad message."""
    max_decoded_bytes: Bytes = Field(16 * 1024 * 1024, ge=1024, le=4 * 1024**3)
    """avro, parquet, orc: a body decoding to more bytes is a bad message (a decompression bomb)."""
    on_bad_message: Literal["fail", "skip", "dead_letter"] = "fail"
    """What happens to a body that cannot be decoded: stop the job (the message stays on its
    queue), skip it (counted, acked), or route it to the job's dead-letter target (counted,
    acked). Not given: ``dead_letter`` when the job has a ``dead_letter`` target, else ``fail``;
    ``skip`` when ``json.ignore-parse-errors`` is true (as Flink skips such rows)."""

    @model_validator(mode="after")
    def _oss_needs_json(self) -> DecodeOptions:
        if self.message_type == "OSS" and self.format != "json":
            raise ValueError("messageType OSS requires format json")
        return self


class ReceiveOptions(Strict):
    """Receiver-side options every source has."""

    name: str = Field(pattern=NAME)
    """The source's name (in metrics, the envelope and error messages)."""
    receivers: int = Field(1, ge=1, le=64)
    """Receiver threads polling this source in parallel."""
    visibility_timeout: Seconds = Field(30.0, gt=0, le=43200)
    """Seconds a received message stays hidden; the lease keeper extends it while in flight."""
    delete_max_retries: int = Field(3, alias="deleteMaxRetries", ge=0, le=100)
    start_time_ms: int | None = Field(None, alias="startTimeMs", ge=0)
    """Messages enqueued before this instant are skipped, acked and counted."""
    max_outstanding_messages: int | None = Field(None, ge=1, le=10_000_000)
    """This source's receivers pause while this many of its messages are received and not yet
    acked (the job-wide ``staging.max_in_flight`` applies too)."""
    delete_message: bool = True
    """Delete each message once its batch committed; false leaves it on the queue for another
    consumer to delete (a redelivered copy is dropped as a duplicate, and left again)."""
    reset_visibility: bool = True
    """On a stop, make the messages received and not acked visible again at once; false: they
    come back when their visibility timeout runs out."""

    @property
    def ack_calls(self) -> int:
        """Delete and visibility calls a source runs at once: ``max_in_flight_requests`` where
        the source has it and it is set, else its receivers (at least 4). A receive brings at
        most as many messages as one delete takes, and both cost a round trip: with as many
        deletes as receives in flight, acks are never the cap, however long the round trip."""
        given = getattr(self, "max_in_flight_requests", None)
        return given if given is not None else max(4, self.receivers)


class FakeSeed(Strict):
    """Demo messages put on a fake queue at start (the embedded default job uses this)."""

    messages: int = Field(1000, ge=0)
    duplicates: int = Field(0, ge=0)
    malformed: int = Field(0, ge=0)
    only_if_empty: bool = True


class FakeSourceConfig(ReceiveOptions, DecodeOptions):
    """The file-backed local fake queue."""

    implementation: ClassVar[str] = "sources.fake.source:FakeSource"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["fake"]
    path: str
    """Directory holding the queue's durable file."""
    queue: str = Field("default", pattern=NAME)
    fifo: bool = False
    batch_size: int = Field(100, ge=1, le=1000)
    wait_time: Seconds = Field(1.0, ge=0, le=30)
    seed: FakeSeed | None = None

    @property
    def poll_wait(self) -> float:
        """Seconds a receive long-polls for the first message."""
        return self.wait_time


class SqsSourceConfig(ReceiveOptions, DecodeOptions):
    """AWS SQS, standard or FIFO (Confluent SQS source option names accepted).

    Credentials (``sqs.credentials.provider``): ``default`` is boto3's chain (environment,
    shared files, container and instance roles), ``static`` the ``aws.*`` keys, ``profile``
    a named profile, ``assume_role`` STS AssumeRole over the default chain (or the static
    keys if given), refreshed before expiry. Flink's names AUTO, BASIC, PROFILE and
    ASSUME_ROLE are accepted too.
    """

    implementation: ClassVar[str] = "sources.sqs.source:SqsSource"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["sqs"]
    url: str = Field(alias="sqs.url")
    """The queue URL (its host names the region)."""
    region: str | None = Field(None, alias="sqs.region")
    """Default: the queue URL's, else ``AWS_REGION``, else the AWS profile's."""
    endpoint_url: str | None = Field(None, alias="sqs.endpoint.url")
    """Another SQS endpoint (LocalStack, moto, a VPC endpoint)."""
    wait_time_seconds: int = Field(20, alias="sqs.waittime.seconds", ge=0, le=20)
    """Long polling; 0 is short polling (answers at once, from a subset of the servers)."""
    max_messages: int = Field(10, alias="sqs.messages.max", ge=1, le=10)
    """Messages per ReceiveMessage call."""
    max_retries: int = Field(5, alias="sqs.max.retries", ge=0, le=100)
    """Retries of receive and visibility calls on throttling, 5xx and network errors."""
    max_in_flight_requests: int | None = Field(None, alias="sqs.max.inflight.requests", ge=1, le=64)
    """Delete and visibility calls (10 handles each) run at once; a batch's acks are many calls.
    Default: ``receivers`` (at least 4), so acks keep pace with receives at any round trip."""
    client: Literal["crt", "boto3"] = Field("crt", alias="sqs.client")
    """What makes the receive, delete and visibility calls: ``crt`` signs and sends them in C
    (awscrt, AWS's Common Runtime), at a fifth of boto3's CPU a message; ``boto3`` is the plain
    SDK. Both use boto3's credentials chain, proxies and error codes."""
    proxy_url: str | None = Field(None, alias="sqs.proxy.url")
    proxy_user: str | None = Field(None, alias="sqs.proxy.user")
    proxy_password: SecretStr | None = Field(None, alias="sqs.proxy.password")
    credentials_provider: Literal["default", "static", "profile", "assume_role"] = Field(
        "default", alias="sqs.credentials.provider"
    )
    access_key_id: str | None = Field(None, alias="aws.access.key.id")
    secret_access_key: SecretStr | None = Field(None, alias="aws.secret.access.key")
    session_token: SecretStr | None = Field(None, alias="aws.session.token")
    profile: str | None = Field(None, alias="aws.profile")
    role_arn: str | None = Field(None, alias="sqs.role.arn")
    role_session_name: str = Field("mq-ingest", alias="sqs.role.session.name", min_length=2, max_length=64)
    role_external_id: str | None = Field(None, alias="sqs.role.external.id")
    sts_endpoint_url: str | None = Field(None, alias="sqs.sts.endpoint.url")
    """STS endpoint for ``assume_role`` (default: the regional AWS endpoint)."""
    claim_check: ClaimCheckConfig | None = None
    """Read Extended Client payload pointers (the ``ExtendedPayloadSize`` attribute) from S3."""

    @property
    def poll_wait(self) -> float:
        return float(self.wait_time_seconds)

    @field_validator("credentials_provider", mode="before")
    @classmethod
    def _flink_provider_names(cls, value: object) -> object:
        names = {"AUTO": "default", "ENV_VAR": "default", "BASIC": "static"}
        names |= {"PROFILE": "profile", "ASSUME_ROLE": "assume_role"}
        return names.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _connect_tasks(cls, data: object) -> object:
        """Kafka Connect's ``tasks.max`` (the Confluent SQS source) is our receiver threads."""
        if isinstance(data, dict) and "tasks.max" in data:
            data = dict(data)
            tasks = data.pop("tasks.max")
            if "receivers" in data:
                raise ValueError("give receivers or tasks.max, not both")
            data["receivers"] = tasks
        return data

    @model_validator(mode="after")
    def _credentials_complete(self) -> SqsSourceConfig:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("aws.access.key.id and aws.secret.access.key go together")
        if self.credentials_provider == "static" and self.access_key_id is None:
            raise ValueError("sqs.credentials.provider static needs aws.access.key.id and its secret")
        if self.credentials_provider == "profile" and not self.profile:
            raise ValueError("sqs.credentials.provider profile needs aws.profile")
        if self.credentials_provider == "assume_role" and not self.role_arn:
            raise ValueError("sqs.credentials.provider assume_role needs sqs.role.arn")
        if self.proxy_user and not self.proxy_url:
            raise ValueError("sqs.proxy.user needs sqs.proxy.url")
        return self


class MnsSourceConfig(ReceiveOptions, DecodeOptions):
    """Alibaba Cloud MNS / Simple Message Queue (reference SMQ connector option names).

    ``base64_body`` (default, as the MNS SDKs send and OSS event notifications arrive): bodies
    are base64-decoded; a body that is not valid base64 is taken as it is. ``max_retries``
    bounds the retries of receive and visibility calls (deletes: ``deleteMaxRetries``);
    ``request_timeout`` bounds each HTTP read and must exceed ``pollingWaitTime``.
    """

    implementation: ClassVar[str] = "sources.mns.source:MnsSource"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

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
    batch_size: int = Field(1, alias="batchSize", ge=1, le=16)
    """Messages per BatchReceiveMessage call (the reference option)."""
    polling_wait_time: Seconds = Field(10.0, alias="pollingWaitTime", ge=0, le=30)
    """Long-polling wait when the queue is empty (the reference option)."""
    request_timeout: Seconds = Field(35.0, gt=0)
    base64_body: bool = True
    max_retries: int = Field(3, ge=0, le=100)
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


class DatagenField(Strict):
    """How one column of a datagen source is generated (Flink datagen ``fields.<name>.*`` options)."""

    kind: Literal["random", "sequence"] = "random"
    min: float | None = None
    """random numbers: the smallest value (default: the type's range, or 0 for decimals)."""
    max: float | None = None
    max_past: Seconds = Field(0.0, alias="max-past", ge=0)
    """random timestamps: at most this long before now (0: now)."""
    length: int = Field(100, ge=0, le=1_000_000)
    """random strings and bytes: their length; arrays and maps: their size."""
    var_len: bool = Field(False, alias="var-len")
    """random strings and bytes: a random length up to ``length``."""
    start: int | None = None
    end: int | None = None
    null_rate: float = Field(0.0, alias="null-rate", ge=0, le=1)

    @model_validator(mode="after")
    def _bounds(self) -> DatagenField:
        if self.kind == "sequence" and (self.start is None or self.end is None):
            raise ValueError("kind sequence needs start and end")
        if self.kind == "sequence" and self.start > self.end:  # type: ignore[operator]
            raise ValueError("sequence start must not exceed end")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("min must not exceed max")
        return self


class DatagenSourceConfig(ReceiveOptions, DecodeOptions):
    """Generated rows (Flink's ``datagen`` connector), to try a job with no queue at all.

    Rows are JSON bodies of ``schema`` (the job's schema when not given), ``rows-per-second``
    at most, ``number-of-rows`` in all (a ``sequence`` field ends the source too when its
    sequence does; neither: unbounded). Row ``n`` is the same on every run (seeded by ``seed``
    and ``n``), its message id ``<name>-<n>``: after a restart the source starts again at row
    0 and the state table drops the rows already written.
    """

    implementation: ClassVar[str] = "sources.datagen.source:DatagenSource"
    """The module and class that implement it (registering a connector is its config class
    here and its place in the union below)."""

    type: Literal["datagen"]
    body_schema: str | None = Field(None, alias="schema")
    """Spark DDL of the generated rows; default: the job's ``schema``."""
    rows_per_second: float = Field(10_000, alias="rows-per-second", gt=0, le=10_000_000)
    number_of_rows: int | None = Field(None, alias="number-of-rows", ge=0)
    fields: dict[str, DatagenField] = {}
    seed: int = 0
    batch_size: int = Field(1000, ge=1, le=10_000)

    @property
    def poll_wait(self) -> float:
        return 0.5

    @model_validator(mode="after")
    def _json_bodies(self) -> DatagenSourceConfig:
        if self.format != "json" or self.message_type != "RAW":
            raise ValueError("a datagen source makes JSON bodies: format json, messageType RAW")
        return self


SourceConfig = Annotated[
    FakeSourceConfig | SqsSourceConfig | MnsSourceConfig | DatagenSourceConfig, Field(discriminator="type")
]
