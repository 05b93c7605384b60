"""boto3 SQS clients for sources and sinks: credentials, proxies, and the error classifier."""

from __future__ import annotations

import threading
from typing import Any

from ingest.errors import FatalError, TransientError, redact

FATAL_CODES = {
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "ExpiredToken",
    "QueueDoesNotExist",
    "AWS.SimpleQueueService.NonExistentQueue",
    "InvalidAddress",
    "InvalidParameterValue",
    "UnsupportedOperation",
}
THROTTLING_CODES = {"Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequestsException"}


def classify(err: Exception, queue_url: str, action: str) -> Exception:
    """Map a botocore error to FatalError (stop, say why) or TransientError (retry).

    The message names the queue and the AWS error code, never a credential.
    """
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    if isinstance(err, NoCredentialsError):
        return FatalError(f"SQS {action} on {queue_url}: no AWS credentials found")
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        text = redact(
            f"SQS {action} on {queue_url} failed: {code}: {err.response.get('Error', {}).get('Message', '')}"
        )
        if code in THROTTLING_CODES or status >= 500 or status == 429:
            return TransientError(text)
        if code in FATAL_CODES or status in (400, 401, 403, 404):
            return FatalError(text)
        return TransientError(text)
    if isinstance(err, BotoCoreError):
        return TransientError(redact(f"SQS {action} on {queue_url}: {type(err).__name__}: {err}"))
    return err


class ClientFactory:
    """Makes one boto3 SQS client per thread (sessions are not thread-safe), lazily.

    Credentials: ``default`` (boto3's chain: env, shared profile, container/instance role),
    ``static`` keys, a named ``profile``, or ``assume_role`` with credentials refreshed
    before they expire. botocore's own retries are off: ``call_with_retries`` owns them.
    """

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self._local = threading.local()
        self._lock = threading.Lock()
        self._session = None

    def __getstate__(self) -> dict[str, Any]:
        return {"cfg": self.cfg}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cfg"])

    def client(self):
        client = getattr(self._local, "client", None)
        if client is None:
            from botocore.config import Config

            c = self.cfg
            proxies = None
            if getattr(c, "proxy_url", None):
                proxies = {"http": c.proxy_url, "https": c.proxy_url}
            config = Config(
                retries={"max_attempts": 1, "mode": "standard"},
                proxies=proxies,
                proxies_config=self._proxy_auth(),
                connect_timeout=10,
                read_timeout=max(30, int(getattr(c, "wait_time_seconds", 0)) + 10),
                max_pool_connections=max(10, int(getattr(c, "max_in_flight_requests", 10))),
            )
            client = self._boto_session().client(
                "sqs", region_name=c.region, endpoint_url=c.endpoint_url, config=config
            )
            self._local.client = client
        return client

    def _proxy_auth(self) -> dict[str, Any] | None:
        user = getattr(self.cfg, "proxy_user", None)
        if not user:
            return None
        password = self.cfg.proxy_password.get_secret_value() if self.cfg.proxy_password else ""
        return {"proxy_headers": _basic_auth(user, password)} if user else None

    def _boto_session(self):
        with self._lock:
            if self._session is None:
                self._session = _make_session(self.cfg)
            return self._session


def _basic_auth(user: str, password: str) -> dict[str, str]:
    import base64

    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Proxy-Authorization": f"Basic {token}"}


def _make_session(c: Any):
    import boto3

    provider = getattr(c, "credentials_provider", "default")
    secret = c.secret_access_key.get_secret_value() if c.secret_access_key else None
    token = getattr(c, "session_token", None)
    token = token.get_secret_value() if token else None
    if provider == "static" or (provider == "default" and c.access_key_id and secret):
        return boto3.session.Session(
            aws_access_key_id=c.access_key_id, aws_secret_access_key=secret, aws_session_token=token
        )
    if provider == "profile":
        return boto3.session.Session(profile_name=getattr(c, "profile", None))
    if provider == "assume_role":
        return _assume_role_session(c)
    return boto3.session.Session()


def _assume_role_session(c: Any):
    """A session whose credentials come from STS AssumeRole and refresh before they expire."""
    import boto3
    from botocore.credentials import RefreshableCredentials
    from botocore.session import get_session

    base = boto3.session.Session()
    sts = base.client("sts", region_name=c.region, endpoint_url=getattr(c, "sts_endpoint_url", None))

    def refresh() -> dict[str, str]:
        kwargs = {"RoleArn": c.role_arn, "RoleSessionName": c.role_session_name}
        if c.role_external_id:
            kwargs["ExternalId"] = c.role_external_id
        creds = sts.assume_role(**kwargs)["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    botocore_session = get_session()
    botocore_session._credentials = RefreshableCredentials.create_from_metadata(
        metadata=refresh(), refresh_using=refresh, method="sts-assume-role"
    )
    return boto3.session.Session(botocore_session=botocore_session, region_name=c.region)
