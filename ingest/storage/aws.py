"""The standard AWS settings (the default credential chain, ``AWS_ENDPOINT_URL[_S3]``, the region)
for every S3 client of a job: boto3 here, delta-rs, and Hadoop's S3A in the JVM."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

_lock = threading.Lock()
_clients: dict[int, Any] = {}
_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_REGION")
"""A change to one of these (a test's server, a new profile) makes a new client."""

STATIC_METHODS = ("env", "shared-credentials-file", "config-file", "explicit")
"""botocore's names for credentials that do not refresh: the JVM and delta-rs may be given them.
Others (an instance or container role, SSO, assumed roles) are left to each client's own chain."""


@dataclass(frozen=True)
class AwsSettings:
    """What the default chain resolves, once per process."""

    endpoint_url: str | None
    """An S3-compatible store's address (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL`` or the
    profile's ``endpoint_url``); None for AWS itself."""
    region: str
    access_key: str | None
    secret_key: str | None
    token: str | None
    method: str | None
    """How botocore found the credentials (``env``, ``shared-credentials-file``, ``iam-role``…);
    None if it found none."""

    @property
    def static(self) -> bool:
        """Credentials that may be copied to another client (they do not refresh)."""
        return self.access_key is not None and self.method in STATIC_METHODS


def settings() -> AwsSettings:
    """Resolve the standard AWS settings now (the environment may have changed since the last call)."""
    import boto3

    session = boto3.session.Session()
    endpoint = (
        os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or session._session.get_scoped_config().get("endpoint_url")  # the profile's
    )
    creds = session.get_credentials()
    frozen = creds.get_frozen_credentials() if creds is not None else None
    return AwsSettings(
        endpoint_url=endpoint or None,
        region=session.region_name or "us-east-1",
        access_key=frozen.access_key if frozen else None,
        secret_key=frozen.secret_key if frozen else None,
        token=frozen.token if frozen else None,
        method=getattr(creds, "method", None),
    )


def s3_client() -> Any:
    """This process's boto3 S3 client (thread-safe; made on first use, again after a fork or a
    change of the settings' environment variables).

    Path-style addressing on a custom endpoint (MinIO, a local server); three tries with
    botocore's standard backoff, then the caller's retries take over.
    """
    ident = hash((os.getpid(), *(os.environ.get(k) for k in _ENV)))
    with _lock:
        client = _clients.get(ident)
        if client is None:
            import boto3
            from botocore.config import Config

            s = settings()
            config = Config(
                retries={"mode": "standard", "max_attempts": 3},
                connect_timeout=5,
                read_timeout=30,
                max_pool_connections=32,
                s3={"addressing_style": "path"} if s.endpoint_url else None,
            )
            client = boto3.session.Session().client(
                "s3", endpoint_url=s.endpoint_url, region_name=s.region, config=config
            )
            _clients.clear()
            _clients[ident] = client
        return client


def delta_options(given: dict[str, str] | None = None) -> dict[str, str]:
    """delta-rs storage options from the standard settings, ``given`` (a sink's
    ``storage_options``) winning key by key: the endpoint, ``AWS_ALLOW_HTTP`` for an ``http://``
    one, the region, and static credentials (a role's are left to delta-rs's own chain)."""
    s = settings()
    out: dict[str, str] = {"AWS_REGION": s.region}
    if s.endpoint_url:
        out["AWS_ENDPOINT_URL"] = s.endpoint_url
        if s.endpoint_url.startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
    if s.static:
        out["AWS_ACCESS_KEY_ID"] = s.access_key or ""
        out["AWS_SECRET_ACCESS_KEY"] = s.secret_key or ""
        if s.token:
            out["AWS_SESSION_TOKEN"] = s.token
    out.update(given or {})
    return out


def s3a_conf() -> dict[str, str]:
    """Hadoop S3A settings (``spark.hadoop.fs.s3a.*``) from the standard settings: the endpoint
    (path-style, TLS as its scheme says), the region, and static credentials. A job's own
    ``spark.hadoop.fs.s3a.*`` in ``spark.conf`` wins over each (the caller applies it last)."""
    s = settings()
    p = "spark.hadoop.fs.s3a."
    out = {p + "endpoint.region": s.region}
    if s.endpoint_url:
        out[p + "endpoint"] = s.endpoint_url
        out[p + "path.style.access"] = "true"
        out[p + "connection.ssl.enabled"] = str(s.endpoint_url.startswith("https://")).lower()
    if s.static:
        if s.token:
            out[p + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            out[p + "session.token"] = s.token
        out[p + "access.key"] = s.access_key or ""
        out[p + "secret.key"] = s.secret_key or ""
    return out
