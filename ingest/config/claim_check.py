"""Claim-check settings: payloads too large for a queue travel through S3 or OSS (Extended Client format)."""

from __future__ import annotations

from typing import ClassVar, Literal, Protocol

from pydantic import Field, SecretStr

from ingest.config.types import Bytes, Strict


class ClaimCheckConfig(Strict):
    """Large payloads through object storage, as the Amazon SQS Extended Client Library does.

    A message whose body is a payload pointer, ``["software.amazon.payloadoffloading.
    PayloadS3Pointer", {"s3BucketName": B, "s3Key": K}]`` (or the legacy class
    ``com.amazon.sqs.javamessaging.MessageS3Pointer``), is read as the object's content.
    SQS: a message is a pointer when it carries the ``ExtendedPayloadSize`` (or legacy
    ``SQSLargePayloadSize``) message attribute, as for the Extended Client. MNS (OSS): when
    its body is a pointer, since MNS messages sent by the MNS sink have no attributes.

    Source: the object is fetched in the executors before decoding; a missing or unreadable
    object is a bad message (``on_bad_message``) naming bucket and key. With
    ``delete_payload`` the object is deleted after the message is acked, never before (a
    crash in between leaves the object: at most an orphan, never a lost payload).

    Sink: a record larger than ``threshold`` (default: the queue's maximum message size) is
    put to ``bucket`` under ``key_prefix`` + a key derived from the source message id and the
    record, and the pointer is sent instead, with ``ExtendedPayloadSize`` (SQS). A replayed
    batch writes the same keys, so replays leave no orphans.

    Transforms: the SQL function ``fetch_content(bucket, key)`` (or ``fetch_content(uri)``,
    ``oss://bucket/key`` or ``s3://bucket/key``) downloads objects through this store.

    Credentials are the queue's own (SQS: the ``aws.*``/``sqs.*`` settings; MNS: its
    AccessKey, which OSS accepts), unless ``access_key_id`` and its secret are given here.

    Example (YAML, under an SQS source or sink)::

        claim_check:
          bucket: my-payloads        # sinks: where offloaded payloads go
          delete_payload: true       # sources: delete after the message is acked
    """

    bucket: str | None = Field(None, min_length=3, max_length=63)
    """The bucket a sink puts payloads in (sources read the bucket each pointer names)."""
    key_prefix: str = ""
    """Prepended to every key a sink writes (``payloads/`` puts them in a folder)."""
    endpoint_url: str | None = None
    """The S3 API endpoint: unset is AWS S3 in the queue's region; OSS is
    ``https://oss-<region>.aliyuncs.com``; moto or LocalStack for tests."""
    region: str | None = None
    """The signing region. Default: the queue's region (SQS), ``us-east-1`` otherwise."""
    addressing_style: Literal["auto", "path", "virtual"] = "auto"
    """``virtual`` for OSS (it serves buckets as host names); ``auto``: path style on a custom endpoint."""
    access_key_id: str | None = None
    """Other credentials for the bucket (with ``access_key_secret``); default: the queue's."""
    access_key_secret: SecretStr | None = None
    threshold: Bytes | Literal["always"] | None = None
    """Sink: offload a record whose size (body and attributes, as the queue counts it) is over
    this; ``always`` offloads every record. Default: the queue's maximum message size."""
    delete_payload: bool = False
    """Source: delete each payload object after its message is acked."""
    max_payload_bytes: Bytes = Field(256 * 1024**2, gt=0, le=2**31 - 1)
    """Source: a larger object is a bad message (it would not fit a Spark string)."""
    fetch_content_max_bytes: Bytes = Field(64 * 1024**2, gt=0, le=2**31 - 1)
    """The SQL function ``fetch_content``: a larger object is that row's error, not its content
    (each object travels whole in one Spark row, with the rest of its Arrow batch)."""
    fetch_threads: int = Field(8, ge=1, le=64)
    """Objects fetched or put at once by each Spark task (or sink call)."""
    max_retries: int = Field(3, ge=0, le=100)
    """Retries of a get, put or delete on throttling, 5xx and network errors."""


def require_bucket(cfg: ClaimCheckConfig | None) -> None:
    """A sink's claim check needs its bucket (a source reads the bucket each pointer names)."""
    if cfg is not None and not cfg.bucket:
        raise ValueError("claim_check.bucket is needed: a sink puts offloaded payloads there")


class ClaimCheckOwner(Protocol):
    """A connector config with a ``claim_check`` option (an SQS or MNS source or sink)."""

    name: str
    claim_check: ClaimCheckConfig | None
    claim_check_access: ClassVar[str]
    """``"module:function"``: how the connector reaches its bucket, ``function(cfg)`` → (a maker
    of a boto3 session with the queue's credentials, used unless ``claim_check`` has keys of its
    own; botocore ``Config`` arguments, the queue's proxy); it registers the secrets it uses with
    ``redact``. The claim-check store (``ingest.connector.payload_store``) calls it."""
