"""The AWS SQS source's typed config (Confluent SQS source option names accepted)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.config.aws import (
    CredentialErrors,
    check_credentials,
    check_proxy_url,
    provider_class,
    provider_name,
)
from ingest.config.claim_check import ClaimCheckConfig
from ingest.config.connector import FlinkSql
from ingest.config.source_base import SourceBase
from ingest.config.types import nested_options


class SqsSourceConfig(SourceBase):
    """AWS SQS, standard or FIFO (Confluent SQS source option names accepted).

    Credentials (``sqs.credentials.provider``): ``default`` is boto3's chain (environment,
    shared files, container and instance roles), ``static`` the ``aws.*`` keys, ``profile``
    a named profile, ``assume_role`` STS AssumeRole over the default chain (or the static
    keys if given), refreshed before expiry, ``custom`` the user's provider named by
    ``sqs.credentials.provider.class``. Flink's names AUTO, BASIC, PROFILE and ASSUME_ROLE
    are accepted too.
    """

    implementation: ClassVar[str] = "sources.sqs.source:SqsSource"
    claim_check_access: ClassVar[str] = "sources.sqs.claim_check:bucket_access"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql("sqs", aliases={"tasks.max": "receivers"})
    """``'connector' = 'sqs'``; Kafka Connect's ``tasks.max`` is the receiver threads."""

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
    """An ``http://`` or ``https://`` proxy for the SQS (and claim-check S3) calls; HTTPS endpoints through it
    by CONNECT."""
    proxy_user: str | None = Field(None, alias="sqs.proxy.user")
    """The proxy's user name."""
    proxy_password: SecretStr | None = Field(None, alias="sqs.proxy.password")
    """The proxy's password (kept out of every log and error)."""
    credentials_provider: Literal["default", "static", "profile", "assume_role", "custom"] = Field(
        "default", alias="sqs.credentials.provider"
    )
    """Where the AWS credentials come from: boto3's default chain, static keys (``aws.access.key.id``…), a
    named profile, a role to assume, or the user's own provider (``sqs.credentials.provider.class``)."""
    credentials_class: str | None = Field(None, alias="sqs.credentials.provider.class")
    """custom: a Python provider, ``package.module:attribute`` (a botocore ``CredentialProvider``,
    or a function returning credentials), or a Java class the Confluent source names (mapped to
    ``sqs.credentials.provider``)."""
    access_key_id: str | None = Field(None, alias="aws.access.key.id")
    """static: the access key id."""
    secret_access_key: SecretStr | None = Field(None, alias="aws.secret.access.key")
    """static: the secret access key (write it as ``${env:NAME}``)."""
    session_token: SecretStr | None = Field(None, alias="aws.session.token")
    """static: a session token, for temporary keys."""
    profile: str | None = Field(None, alias="aws.profile")
    """profile: the AWS profile's name (``~/.aws/config``)."""
    role_arn: str | None = Field(None, alias="sqs.role.arn")
    """assume_role: the role to assume."""
    role_session_name: str = Field("mq-ingest", alias="sqs.role.session.name", min_length=2, max_length=64)
    """assume_role: the role session's name."""
    role_external_id: str | None = Field(None, alias="sqs.role.external.id")
    """assume_role: the external id the role's trust policy asks for."""
    sts_endpoint_url: str | None = Field(None, alias="sqs.sts.endpoint.url")
    """STS endpoint for ``assume_role`` (default: the regional AWS endpoint)."""
    record_schema: Literal["envelope", "confluent"] = "envelope"
    """confluent: each row is the Confluent SQS source's record, ``key`` (QueueUrl, MessageId,
    MessageGroupId), ``value`` (Body, ApproximateFirstReceiveTimestamp, …, SequenceNumber) and
    ``headers`` (the message attributes; Binary ones as bytes), with ``_meta``; the body is not
    decoded, so ``format`` is ``raw``. envelope: the body decoded by ``format``, the rest in ``_meta``."""
    claim_check: ClaimCheckConfig | None = None
    """Read Extended Client payload pointers (the ``ExtendedPayloadSize`` attribute) from S3."""

    @property
    def poll_wait(self) -> float:
        return float(self.wait_time_seconds)

    _flink_provider_names = field_validator("credentials_provider", mode="before")(provider_name)
    _proxy_url = field_validator("proxy_url")(check_proxy_url)

    @model_validator(mode="before")
    @classmethod
    def _connect_tasks(cls, data: object) -> object:
        """Kafka Connect's ``tasks.max`` (the Confluent SQS source) is our receiver threads; its
        ``sqs.credentials.provider.class`` (a Java class name) is our ``sqs.credentials.provider``
        (read with the options given nested as their dotted keys)."""
        data = provider_class(nested_options(cls, data))
        if isinstance(data, dict) and "tasks.max" in data:
            data = dict(data)
            tasks = data.pop("tasks.max")
            if "receivers" in data:
                raise ValueError("give receivers or tasks.max, not both")
            data["receivers"] = tasks
        return data

    @model_validator(mode="after")
    def _credentials_complete(self) -> SqsSourceConfig:
        check_credentials(self, CREDENTIAL_ERRORS)
        if (self.credentials_provider == "custom") != (self.credentials_class is not None):
            raise ValueError("sqs.credentials.provider custom goes with sqs.credentials.provider.class")
        if self.record_schema == "confluent" and "format" in self.model_fields_set and self.format != "raw":
            raise ValueError("record_schema confluent keeps the body as text (value.Body): format raw")
        return self


CREDENTIAL_ERRORS = CredentialErrors(
    pair="aws.access.key.id and aws.secret.access.key go together",
    static="sqs.credentials.provider static needs aws.access.key.id and its secret",
    profile="sqs.credentials.provider profile needs aws.profile",
    role="sqs.credentials.provider assume_role needs sqs.role.arn",
    proxy="sqs.proxy.user needs sqs.proxy.url",
)
