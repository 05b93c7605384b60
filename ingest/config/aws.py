"""What the SQS source and sink configs share: Flink's credential provider names, the credential checks."""

from __future__ import annotations

from typing import NamedTuple, Protocol
from urllib.parse import urlsplit

from pydantic import SecretStr

FLINK_PROVIDERS = {
    "AUTO": "default",
    "ENV_VAR": "default",
    "BASIC": "static",
    "PROFILE": "profile",
    "ASSUME_ROLE": "assume_role",
}
"""Flink's ``aws.credentials.provider`` names → ours."""


JAVA_PROVIDER_CLASSES = {
    # AWS SDK for Java 1.x, as the Confluent SQS source names them (its docs also write com.amazon.auth)
    "com.amazonaws.auth.DefaultAWSCredentialsProviderChain": "default",
    "com.amazon.auth.DefaultAWSCredentialsProviderChain": "default",
    "com.amazonaws.auth.EnvironmentVariableCredentialsProvider": "default",
    "com.amazonaws.auth.profile.ProfileCredentialsProvider": "profile",
    "com.amazonaws.auth.STSAssumeRoleSessionCredentialsProvider": "assume_role",
    "com.amazonaws.auth.AWSStaticCredentialsProvider": "static",
    # AWS SDK for Java 2.x
    "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider": "default",
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider": "default",
    "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider": "profile",
    "software.amazon.awssdk.services.sts.auth.StsAssumeRoleCredentialsProvider": "assume_role",
    "software.amazon.awssdk.auth.credentials.StaticCredentialsProvider": "static",
}
"""The Java credentials provider classes of ``sqs.credentials.provider.class`` → our providers."""

PROVIDER_CLASS = "sqs.credentials.provider.class"


def provider_class(data: object) -> object:
    """Config data with the Confluent source's ``sqs.credentials.provider.class`` made our
    ``sqs.credentials.provider`` (a ``mode="before"`` model validator's body): a Java class
    it maps becomes that provider, a Python ``package.module:attribute`` the ``custom`` one.

    >>> provider_class({PROVIDER_CLASS: "com.amazonaws.auth.profile.ProfileCredentialsProvider"})
    {'sqs.credentials.provider': 'profile'}
    """
    if not isinstance(data, dict) or PROVIDER_CLASS not in data:
        return data
    data = dict(data)
    given = data[PROVIDER_CLASS]
    ours: str | None = "custom"  # a Python module:attribute, kept (a Java name has no colon)
    if not (isinstance(given, str) and ":" in given):
        del data[PROVIDER_CLASS]
        ours = JAVA_PROVIDER_CLASSES.get(given) if isinstance(given, str) else None
    if ours is None:
        known = ", ".join(sorted({k.rsplit(".", 1)[1] for k in JAVA_PROVIDER_CLASSES}))
        raise ValueError(
            f"{PROVIDER_CLASS} {given!r} is not a provider mq-ingest has (it maps {known}, "
            "and takes a Python package.module:attribute)"
        )
    other = provider_name(data.get("sqs.credentials.provider", ours))
    if other != ours:
        raise ValueError(f"{PROVIDER_CLASS} {given} is {ours}, but sqs.credentials.provider says {other}")
    data["sqs.credentials.provider"] = ours
    return data


def provider_name(value: object) -> object:
    """A credentials provider as given, with Flink's names (AUTO, BASIC, ...) made ours."""
    return FLINK_PROVIDERS.get(value, value) if isinstance(value, str) else value


class Credentials(Protocol):
    """The credential fields an SQS config has, whatever its option names."""

    @property
    def credentials_provider(self) -> str: ...
    @property
    def access_key_id(self) -> str | None: ...
    @property
    def secret_access_key(self) -> SecretStr | None: ...
    @property
    def profile(self) -> str | None: ...
    @property
    def role_arn(self) -> str | None: ...
    @property
    def proxy_user(self) -> str | None: ...
    @property
    def proxy_url(self) -> str | None: ...


class CredentialErrors(NamedTuple):
    """What a config says, under its own option names, when its credentials are incomplete."""

    pair: str
    """A key id without its secret, or the other way round."""
    static: str
    """``static`` without keys."""
    profile: str
    """``profile`` without a profile name."""
    role: str
    """``assume_role`` without a role ARN."""
    proxy: str
    """A proxy user without a proxy URL."""


def check_credentials(cfg: Credentials, say: CredentialErrors) -> None:
    """Raise ``ValueError`` with the message of ``say`` for the first thing missing."""
    if (cfg.access_key_id is None) != (cfg.secret_access_key is None):
        raise ValueError(say.pair)
    if cfg.credentials_provider == "static" and cfg.access_key_id is None:
        raise ValueError(say.static)
    if cfg.credentials_provider == "profile" and not cfg.profile:
        raise ValueError(say.profile)
    if cfg.credentials_provider == "assume_role" and not cfg.role_arn:
        raise ValueError(say.role)
    if cfg.proxy_user and not cfg.proxy_url:
        raise ValueError(say.proxy)


PROXY_SCHEMES = ("http", "https")


def check_proxy_url(value: str | None) -> str | None:
    """A proxy URL checked (an ``http://`` or ``https://`` proxy; a bare ``host:port`` is
    ``http://``, as botocore reads it), for a ``field_validator``. The URL is never quoted
    in the error: it may hold a password.

    >>> check_proxy_url("proxy.local:3128")
    'http://proxy.local:3128'
    """
    if value is None:
        return None
    if "://" not in value:
        value = "http:" + value if value.startswith("//") else "http://" + value
    scheme = value.split("://", 1)[0]
    if scheme.lower() not in PROXY_SCHEMES:
        raise ValueError(f"the proxy's scheme {scheme!r} is not http or https (e.g. https://proxy:3128)")
    parts = urlsplit(value)
    if not parts.hostname:
        raise ValueError("the proxy URL names no host (e.g. http://proxy:3128)")
    parts.port  # noqa: B018  (raises ValueError on a port that is not one)
    return value
