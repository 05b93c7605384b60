"""The user's credentials provider (``sqs.credentials.provider.class``): found, checked, made botocore's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ingest.config.aws import PROVIDER_CLASS
from ingest.config.registry import load_object
from ingest.errors import ConfigError, FatalError

_FIELDS = {
    "access_key": ("access_key", "AccessKeyId"),
    "secret_key": ("secret_key", "SecretAccessKey"),
    "token": ("token", "SessionToken", "Token"),
    "expiry_time": ("expiry_time", "Expiration"),
}
"""botocore's credential metadata names ← the names a mapping may use (botocore's, STS's, ECS's)."""
METHOD = "mq-ingest-provider"
"""How botocore names where these credentials came from."""


def load_provider(ref: str, key: str = PROVIDER_CLASS) -> Callable[[], Any]:
    """What gives the credentials ``ref`` (``package.module:attribute``) names: a botocore
    ``CredentialProvider``'s ``load`` (a subclass is made with no arguments), or a function.

    Loaded as a function sink's function is (``load_object``); ``ConfigError`` naming ``key``
    if it cannot be imported or is neither. No credentials are asked for here: ``check`` runs this.
    """
    from botocore.credentials import CredentialProvider

    found = load_object(ref, f"config key {key}")
    if isinstance(found, type) and issubclass(found, CredentialProvider):
        try:
            found = found()
        except TypeError as err:
            raise ConfigError(f"config key {key}: {ref} cannot be made without arguments: {err}") from None
    if isinstance(found, CredentialProvider):
        return found.load
    if callable(found):
        return found
    raise ConfigError(
        f"config key {key}: {ref} is a {type(found).__name__}, not a botocore CredentialProvider "
        "or a function returning credentials"
    )


def custom_session(c: Any) -> Any:
    """A boto3 session with the credentials of ``c``'s provider, which is imported here, where the
    clients are made (lazily, in each process that calls SQS): a config holds only its name."""
    import boto3
    from botocore.session import get_session

    botocore_session = get_session()
    botocore_session._credentials = provided_credentials(c.credentials_class)
    return boto3.session.Session(botocore_session=botocore_session, region_name=c.region)


def provided_credentials(ref: str) -> Any:
    """botocore credentials from the provider ``ref`` names; refreshable when it gives an expiry.

    The provider may give botocore ``Credentials`` (``RefreshableCredentials`` stay so), an object
    with ``access_key``/``secret_key``/``token`` (botocore's frozen credentials), or a mapping with
    botocore's names (``access_key``, ``secret_key``, ``token``, ``expiry_time``) or those of
    STS and the container endpoint (``AccessKeyId``, ``SecretAccessKey``, ``SessionToken`` or
    ``Token``, ``Expiration``); with an expiry, botocore calls the provider again before it.
    Anything else, or nothing, is a ``FatalError`` naming the key.
    """
    from botocore.credentials import Credentials, RefreshableCredentials

    fetch = load_provider(ref)
    given = fetch()
    if isinstance(given, Credentials):
        return given
    if isinstance(given, Mapping):
        first = _metadata(given, ref)
        if first["expiry_time"]:
            return RefreshableCredentials.create_from_metadata(
                metadata=first, refresh_using=lambda: _metadata(fetch(), ref), method=METHOD
            )
        return Credentials(first["access_key"], first["secret_key"], first["token"], METHOD)
    if hasattr(given, "access_key") and hasattr(given, "secret_key"):
        return Credentials(given.access_key, given.secret_key, getattr(given, "token", None), METHOD)
    raise _not_credentials(given, ref)


def _metadata(given: Any, ref: str) -> dict[str, Any]:
    """botocore's credential metadata from a mapping of any of the names ``_FIELDS`` lists."""
    if not isinstance(given, Mapping):
        raise _not_credentials(given, ref)
    out = {ours: next((given[n] for n in names if given.get(n)), None) for ours, names in _FIELDS.items()}
    if not (out["access_key"] and out["secret_key"]):
        raise FatalError(f"{PROVIDER_CLASS} {ref} gave a mapping without access_key and secret_key")
    if isinstance(out["expiry_time"], datetime):
        out["expiry_time"] = out["expiry_time"].isoformat()
    return out


def _not_credentials(given: Any, ref: str) -> FatalError:
    what = "nothing" if given is None else f"a {type(given).__name__}"
    return FatalError(
        f"{PROVIDER_CLASS} {ref} gave {what}, not credentials (botocore Credentials, or a mapping "
        "of access_key, secret_key and token)"
    )
