"""boto3 SQS clients for the SQS source and sink: credentials, proxies, regions (errors: ``errors``)."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

from ingest.errors import ConfigError, redact, url_passwords
from sources.sqs.errors import classify

if TYPE_CHECKING:
    from sources.sqs.crt import CrtSqs


class SqsApi(Protocol):
    """The slice of the boto3 SQS client mq-ingest calls (keyword arguments as in boto3)."""

    meta: Any
    """botocore's client metadata; ``meta.endpoint_url`` is where the calls go."""

    def receive_message(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_message(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_message_batch(self, **kwargs: Any) -> dict[str, Any]: ...

    def change_message_visibility_batch(self, **kwargs: Any) -> dict[str, Any]: ...

    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_queue_attributes(self, **kwargs: Any) -> dict[str, Any]: ...

    def close(self) -> None: ...


class ClientFactory:
    """Creates boto3 SQS clients lazily: one per thread, or one per process (``shared``).

    Nothing is created in ``__init__`` and pickling drops the clients, so an owner can be
    shipped to Spark executors. boto3 clients are thread-safe, but sessions are not:
    sessions and clients are only made under a lock. botocore's own retries are off;
    ``ingest.errors.call_with_retries`` owns retrying.
    """

    _shared: dict[str, Any] = {}
    _shared_crt: dict[str, CrtSqs] = {}
    _shared_lock = threading.Lock()

    def __init__(self, cfg: Any, *, shared: bool = False, read_timeout: float = 30) -> None:
        self.cfg = cfg
        self.shared = shared
        self.read_timeout = read_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._session: Any = None
        self._made: list[Any] = []
        self._crt: CrtSqs | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"cfg": self.cfg, "shared": self.shared, "read_timeout": self.read_timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ClientFactory.__init__(self, state["cfg"], shared=state["shared"], read_timeout=state["read_timeout"])

    def client(self) -> SqsApi:
        """This thread's client (or the process-wide one when ``shared``)."""
        if self.shared:
            key = _fingerprint(self.cfg)
            with ClientFactory._shared_lock:
                client = ClientFactory._shared.get(key)
                if client is None:
                    client = ClientFactory._shared[key] = self._make()
            return client
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._make()
        return client

    def crt(self) -> CrtSqs:
        """The awscrt client (thread-safe: one per factory, or one per process when ``shared``),
        with the endpoint, region, credentials and proxy of the boto3 clients."""
        if self.shared:
            key = _fingerprint(self.cfg)
            with ClientFactory._shared_lock:
                crt = ClientFactory._shared_crt.get(key)
            if crt is None:
                made = self._make_crt()
                with ClientFactory._shared_lock:
                    crt = ClientFactory._shared_crt.setdefault(key, made)
            return crt
        with self._lock:
            crt = self._crt
        if crt is None:
            made = self._make_crt()
            with self._lock:
                crt = self._crt = self._crt or made
        return crt

    def _make_crt(self) -> CrtSqs:
        from botocore.exceptions import NoCredentialsError

        from sources.sqs.crt import CrtSqs

        c = self.cfg
        meta = self.client().meta  # the endpoint and region as boto3 resolves them
        with self._lock:
            if self._session is None:
                self._session = _session(c)
            credentials = self._session.get_credentials()
        if credentials is None:
            raise NoCredentialsError()
        proxy = _proxy(c) if c.proxy_url else None
        return CrtSqs(meta.endpoint_url, meta.region_name, credentials, proxy, self.read_timeout)

    def close(self) -> None:
        """Close the per-thread clients this factory made (shared ones live with the process)."""
        with self._lock:
            made, self._made = self._made, []
            crt, self._crt = self._crt, None
        for client in made:
            client.close()
        if crt is not None:
            crt.close()
        self._local = threading.local()

    def _make(self) -> Any:
        from botocore.config import Config

        c = self.cfg
        _register_secrets(c)
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            **proxy_config(c),
            connect_timeout=10,
            read_timeout=self.read_timeout,
            max_pool_connections=max(10, getattr(c, "max_in_flight_requests", None) or 10),
        )
        with self._lock:
            if self._session is None:
                self._session = _session(c)
            client = self._session.client(
                "sqs", region_name=c.region, endpoint_url=c.endpoint_url, config=config
            )
            if not self.shared:
                self._made.append(client)
        return client


_URL_REGION = re.compile(
    r"^(?:sqs[.-]|vpce-[a-z0-9-]+\.sqs\.)?(?P<region>[a-z]{2}(?:-gov|-iso[a-z]*)?-[a-z]+-\d+)\."
    r"(?:queue\.amazonaws\.com|amazonaws\.com|vpce\.amazonaws\.com|localhost\.localstack\.cloud)"
)


def resolve_region(url: str, configured: str | None, profile: str | None, key: str) -> str:
    """The queue's region: from the URL's host, else ``configured``, else ``AWS_REGION`` (or
    ``AWS_DEFAULT_REGION``), else the AWS profile's; a URL and a setting that disagree are an error.

    Args:
        url: the queue URL (``https://sqs.eu-west-1.amazonaws.com/…``, the legacy
            ``https://eu-west-1.queue.amazonaws.com/…``, a VPC endpoint, LocalStack's).
        configured: the region option, if set.
        profile: the named AWS profile, if any (else the default profile).
        key: the region option's name, for errors.

    >>> resolve_region("https://sqs.eu-west-1.amazonaws.com/1/q", None, None, "sqs.region")
    'eu-west-1'
    """
    import os

    host = (urlsplit(url).hostname or "").lower()
    m = _URL_REGION.match(host)
    if m:
        if configured and configured != m["region"]:
            raise ConfigError(
                f"config key {key}: {configured} is not the region of queue {url} ({m['region']})"
            )
        return m["region"]
    if configured:
        return configured
    env = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if env:
        return env
    import boto3
    import botocore.exceptions

    try:
        region = boto3.session.Session(profile_name=profile).region_name
    except botocore.exceptions.ProfileNotFound:
        region = None
    if region:
        return region
    raise ConfigError(
        f"config key {key}: no region for queue {url}: the URL names none; set {key}, "
        "AWS_REGION, or a region in the AWS profile"
    )


def _fingerprint(c: Any) -> str:
    """Identifies a client configuration, secrets included (hashed), for the process-wide cache."""
    parts = [c.region, c.endpoint_url, c.credentials_provider, c.access_key_id, c.profile, c.role_arn]
    parts += [_secret(c.secret_access_key), _secret(c.session_token), c.proxy_url, c.proxy_user]
    parts += [_secret(c.proxy_password), c.role_session_name, c.role_external_id, c.sts_endpoint_url]
    parts += [getattr(c, "credentials_class", None)]  # the source's custom provider
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def _register_secrets(c: Any) -> None:
    # Executors never saw the driver's config parsing: register the secrets here too.
    redact.add([s for s in map(_secret, (c.secret_access_key, c.session_token, c.proxy_password)) if s])
    redact.add(url_passwords(c.proxy_url))


def _proxy(c: Any) -> str:
    """The proxy URL with ``proxy_user``/``proxy_password`` as userinfo (botocore sends Basic auth)."""
    if not c.proxy_user:
        return c.proxy_url
    parts = urlsplit(c.proxy_url)
    userinfo = quote(c.proxy_user, safe="") + ":" + quote(_secret(c.proxy_password) or "", safe="")
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, parts.fragment))


def proxy_config(c: Any) -> dict[str, Any]:
    """botocore ``Config`` arguments for ``c``'s proxy (none without one): the proxy for HTTP and
    HTTPS endpoints (HTTPS ones through a CONNECT tunnel). An ``https://`` proxy's certificate is
    verified against ``AWS_CA_BUNDLE``, else botocore's bundle: without a bundle named, botocore
    would leave it unverified when the endpoint is plain HTTP."""
    if not c.proxy_url:
        return {}
    url = _proxy(c)
    args: dict[str, Any] = {"proxies": {"http": url, "https": url}}
    if urlsplit(url).scheme.lower() == "https":
        from botocore.httpsession import where

        args["proxies_config"] = {"proxy_ca_bundle": os.environ.get("AWS_CA_BUNDLE") or where()}
    return args


def _session(c: Any) -> Any:
    """A boto3 session for the configured credentials provider."""
    import boto3

    if c.credentials_provider == "profile":
        return boto3.session.Session(profile_name=c.profile, region_name=c.region)
    if c.credentials_provider == "custom":
        from sources.sqs.credentials import custom_session

        return custom_session(c)
    if c.access_key_id and c.credentials_provider != "assume_role":
        return boto3.session.Session(
            aws_access_key_id=c.access_key_id,
            aws_secret_access_key=_secret(c.secret_access_key),
            aws_session_token=_secret(c.session_token),
            region_name=c.region,
        )
    if c.credentials_provider == "assume_role":
        return _assume_role_session(c)
    return boto3.session.Session(region_name=c.region, **_java_env_keys())


def _java_env_keys() -> dict[str, str]:
    """The Java SDK's other environment names, ``AWS_ACCESS_KEY`` and ``AWS_SECRET_KEY``, read as
    its default chain reads them: when the standard ``AWS_ACCESS_KEY_ID`` is not set."""
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") or not (env.get("AWS_ACCESS_KEY") and env.get("AWS_SECRET_KEY")):
        return {}
    keys = {"aws_access_key_id": env["AWS_ACCESS_KEY"], "aws_secret_access_key": env["AWS_SECRET_KEY"]}
    if env.get("AWS_SESSION_TOKEN"):
        keys["aws_session_token"] = env["AWS_SESSION_TOKEN"]
    return keys


def _assume_role_session(c: Any) -> Any:
    """A session whose credentials come from STS AssumeRole and are refreshed before they expire.

    The role is assumed with the static keys if configured, else boto3's default chain.
    """
    import boto3
    from botocore.credentials import RefreshableCredentials
    from botocore.session import get_session

    keys = {
        "aws_access_key_id": c.access_key_id,
        "aws_secret_access_key": _secret(c.secret_access_key),
        "aws_session_token": _secret(c.session_token),
    }
    base = boto3.session.Session(region_name=c.region, **(keys if c.access_key_id else _java_env_keys()))
    sts = base.client("sts", region_name=c.region, endpoint_url=c.sts_endpoint_url)

    def fetch() -> dict[str, str]:
        kwargs = {"RoleArn": c.role_arn, "RoleSessionName": c.role_session_name}
        if c.role_external_id:
            kwargs["ExternalId"] = c.role_external_id
        try:
            creds = sts.assume_role(**kwargs)["Credentials"]
        except Exception as err:
            raise classify(err, c.role_arn, "sts:AssumeRole") from err
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    botocore_session = get_session()
    botocore_session._credentials = RefreshableCredentials.create_from_metadata(
        metadata=fetch(), refresh_using=fetch, method="sts-assume-role"
    )
    return boto3.session.Session(botocore_session=botocore_session, region_name=c.region)
