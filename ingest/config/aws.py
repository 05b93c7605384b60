"""What the SQS source and sink configs share: Flink's credential provider names, the credential checks."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from pydantic import SecretStr

FLINK_PROVIDERS = {
    "AUTO": "default",
    "ENV_VAR": "default",
    "BASIC": "static",
    "PROFILE": "profile",
    "ASSUME_ROLE": "assume_role",
}
"""Flink's ``aws.credentials.provider`` names → ours."""


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
