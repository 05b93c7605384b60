"""The claim-check object store: payloads got, put and deleted over the S3 API (S3, OSS, moto, LocalStack)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import SecretStr

from ingest.config.claim_check import ClaimCheckConfig, ClaimCheckOwner
from ingest.config.registry import load_object
from ingest.errors import FatalError, TransientError, call_with_retries, error_code, redact

_MISSING = frozenset({"NoSuchKey", "NoSuchBucket", "404", "AccessDenied", "403", "InvalidObjectState"})
"""Answers that no retry changes: the message is bad (its payload cannot be had)."""


class PayloadUnavailable(FatalError):
    """A pointer's object cannot be read (missing, denied, too large): its message is bad."""


def split_ref(ref: str) -> tuple[str, str]:
    """(bucket, key) of a ``payload_ref`` (bucket names hold no ``/``)."""
    bucket, _, key = ref.partition("/")
    return bucket, key


class PayloadStore:
    """Gets, puts and deletes payload objects over the S3 API (AWS S3, OSS, moto, LocalStack).

    ``owner`` is the queue's connector config (``ClaimCheckOwner``), whose credentials are used
    unless the claim-check config has its own. The boto3 client is made on first use, one per
    process, and is not pickled: a store can be shipped to Spark executors.
    """

    _clients: dict[str, Any] = {}
    _lock = threading.Lock()

    def __init__(self, cfg: ClaimCheckConfig, owner: ClaimCheckOwner) -> None:
        self.cfg = cfg
        self.owner = owner

    def _client(self) -> Any:
        # repr masks SecretStr values: without them, configs differing only in a secret would
        # share the first one's client (and sign with its secret).
        secrets = [
            v.get_secret_value()
            for o in (self.cfg, self.owner)
            for v in _fields(o)
            if isinstance(v, SecretStr)
        ]
        key = hashlib.sha256(repr((self.cfg, self.owner, secrets)).encode()).hexdigest()
        with PayloadStore._lock:
            client = PayloadStore._clients.get(key)
            if client is None:
                client = PayloadStore._clients[key] = self._make()
        return client

    def _make(self) -> Any:
        import boto3
        from botocore.config import Config

        c, o = self.cfg, self.owner
        region = c.region or getattr(o, "region", None) or "us-east-1"
        # The queue's own way to the bucket (its connector declares it): its credentials, and its
        # proxy, which carries the bucket's calls too.
        queue_session, proxy = load_object(o.claim_check_access, f"{o.name}: claim_check_access")(o)
        if c.access_key_id:
            redact.add([_secret(c.access_key_secret) or ""])
            session = boto3.session.Session(
                aws_access_key_id=c.access_key_id, aws_secret_access_key=_secret(c.access_key_secret)
            )
        else:
            session = queue_session()
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            s3={"addressing_style": c.addressing_style},
            **proxy,
            connect_timeout=10,
            read_timeout=60,
            max_pool_connections=max(10, c.fetch_threads * 2),
        )
        return session.client("s3", region_name=region, endpoint_url=c.endpoint_url, config=config)

    def _call(self, action: str, bucket: str, key: str, fn: Any) -> Any:
        def attempt() -> Any:
            try:
                return fn(self._client())
            except Exception as err:
                raise self._classify(err, action, bucket, key) from err

        what = f"{action} of object {key!r} in bucket {bucket!r}"
        return call_with_retries(attempt, what=what, attempts=self.cfg.max_retries + 1)

    @staticmethod
    def _classify(err: Exception, action: str, bucket: str, key: str) -> Exception:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ParamValidationError

        where = f"{action} of object {key!r} in bucket {bucket!r}"
        if isinstance(err, NoCredentialsError):
            return FatalError(redact(f"{where}: credentials: {err}"))
        if isinstance(err, ParamValidationError):  # an invalid bucket name: no retry changes it
            return PayloadUnavailable(redact(f"{where}: {err}"))
        if isinstance(err, ClientError):
            code, message, status = error_code(err)
            text = redact(f"{where} failed: {code or status} (HTTP {status}): {message}")
            if code in _MISSING or status in (403, 404):
                return PayloadUnavailable(text)
            if status >= 500 or status in (408, 429) or code in ("SlowDown", "RequestTimeout"):
                return TransientError(text)
            return FatalError(text)
        if isinstance(err, BotoCoreError | OSError):
            return TransientError(redact(f"{where}: {type(err).__name__}: {err}"))
        return err

    def get(self, bucket: str, key: str, cap: str = "max_payload_bytes") -> bytes:
        """The object's bytes. ``PayloadUnavailable`` if missing, denied or over the ``cap`` option
        (``max_payload_bytes``, or ``fetch_content_max_bytes`` for the SQL function);
        ``TransientError`` once the retries for throttling, 5xx and network errors run out."""
        limit = getattr(self.cfg, cap)

        def fetch(client: Any) -> bytes:
            resp = client.get_object(Bucket=bucket, Key=key)
            if int(resp.get("ContentLength", 0)) > limit:
                resp["Body"].close()
                raise PayloadUnavailable(
                    f"object {key!r} in bucket {bucket!r} is {resp['ContentLength']} bytes, over "
                    f"claim_check.{cap} ({limit})"
                )
            return resp["Body"].read()

        return self._call("GetObject", bucket, key, fetch)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Write the object (a replay overwrites it with the same bytes)."""
        self._call("PutObject", bucket, key, lambda c: c.put_object(Bucket=bucket, Key=key, Body=data))

    def delete(self, refs: Sequence[str]) -> dict[str, str]:
        """Delete ``bucket/key`` objects (DeleteObjects, ≤1000 a call); return the refs that failed, with why.

        An object already gone counts as deleted (S3 answers so).
        """
        by_bucket: dict[str, list[str]] = {}
        for ref in dict.fromkeys(refs):
            bucket, key = split_ref(ref)
            by_bucket.setdefault(bucket, []).append(key)
        failed: dict[str, str] = {}
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), 1000):
                chunk = keys[start : start + 1000]
                objects = {"Objects": [{"Key": k} for k in chunk], "Quiet": True}

                def call(c: Any, b: str = bucket, o: dict = objects) -> Any:
                    return c.delete_objects(Bucket=b, Delete=o)

                try:
                    resp = self._call("DeleteObjects", bucket, chunk[0], call)
                except (FatalError, TransientError) as err:
                    failed.update(dict.fromkeys((f"{bucket}/{k}" for k in chunk), str(err)))
                    continue
                for bad in resp.get("Errors", []):
                    failed[f"{bucket}/{bad.get('Key')}"] = f"{bad.get('Code')}: {bad.get('Message', '')}"
        return failed


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def _fields(model: Any) -> list[Any]:
    return list(vars(model).values()) if hasattr(model, "__dict__") else []


def payload_stores(sources: Mapping[str, Any]) -> dict[str, PayloadStore]:
    """The claim-check store of each source (by name) whose config has ``claim_check``.

    The source's own config is the owner, as the source resolved it (an SQS queue's region);
    a source config given instead of a source (nothing built, as ``check`` does) is its own.
    """
    out = {}
    for name, source in sources.items():
        cfg = getattr(source, "cfg", source)
        claim_check = getattr(cfg, "claim_check", None)
        if claim_check is not None:
            out[name] = PayloadStore(claim_check, cfg)
    return out
