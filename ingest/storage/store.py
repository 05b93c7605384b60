"""A directory of whole files, local or on S3: write whole, create if absent, read, list, delete."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from ingest.storage.location import is_object_url, split_object_url

_FATAL_CODES = {
    "NoSuchBucket": errno.ENOENT,
    "AccessDenied": errno.EACCES,
    "InvalidAccessKeyId": errno.EACCES,
    "SignatureDoesNotMatch": errno.EACCES,
    "InvalidToken": errno.EACCES,
    "ExpiredToken": errno.EACCES,
    "AllAccessDisabled": errno.EACCES,
}
"""S3 error codes no retry cures, as the errno a local file system would give."""


class StoreError(OSError):
    """A store call failed: ``errno`` EIO for an outage (retry), ENOENT for a missing bucket, EACCES
    for credentials; ``filename`` is the object's URL. An ``OSError``, so callers treat a bucket as a disk."""

    @property
    def fatal(self) -> bool:
        return self.errno in (errno.ENOENT, errno.EACCES)


class Store(Protocol):
    """A directory of whole files. Names are relative (``a/b``); a file appears whole or not at all."""

    root: str

    def url(self, name: str = "") -> str:
        """Where ``name`` is, as Spark is given it (a local path, or ``s3a://bucket/key``)."""
        ...

    def write(self, name: str, data: bytes) -> None:
        """Write ``name`` whole (readers see the old content or the new); owner-only where files
        have modes."""
        ...

    def create(self, name: str, data: bytes) -> bool:
        """Write ``name`` only if it does not exist; False if it did (atomic: of two racing callers,
        one wins)."""
        ...

    def read(self, name: str) -> bytes | None:
        """The content of ``name``, None if it does not exist."""
        ...

    def folders(self, folder: str = "") -> list[str]:
        """The names of the sub-folders directly in ``folder`` (on S3: the key prefixes), in no order."""
        ...

    def list(self, folder: str = "") -> list[str]:
        """The names of the files directly in ``folder`` (not sub-folders), in no order."""
        ...

    def delete(self, names: Iterable[str]) -> int:
        """Delete the files ``names`` (a missing one is no error); return how many were asked."""
        ...

    def probe(self) -> None:
        """Raise ``StoreError`` if the store cannot be reached or read (a missing bucket, refused
        credentials, a server down); one cheap call, no write."""
        ...


class LocalStore:
    """A local directory (``file://`` URLs and plain paths): a file is written under a temporary
    name, fsynced and renamed in (readers see the old file or the new one, whole)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dir = Path(root[len("file://") :] if root.startswith("file://") else root)

    def url(self, name: str = "") -> str:
        return str(self.dir / name) if name else str(self.dir)

    def write(self, name: str, data: bytes) -> None:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def create(self, name: str, data: bytes) -> bool:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return True

    def read(self, name: str) -> bytes | None:
        try:
            return (self.dir / name).read_bytes()
        except FileNotFoundError:
            return None

    def folders(self, folder: str = "") -> list[str]:
        try:
            return [e.name for e in os.scandir(self.dir / folder) if e.is_dir()]
        except FileNotFoundError:
            return []

    def list(self, folder: str = "") -> list[str]:
        try:
            return [e.name for e in os.scandir(self.dir / folder) if e.is_file()]
        except FileNotFoundError:
            return []

    def probe(self) -> None:
        pass  # a local directory is created, and its errors reported, where it is first written

    def delete(self, names: Iterable[str]) -> int:
        n = 0
        for name in names:
            (self.dir / name).unlink(missing_ok=True)
            n += 1
        return n


class S3Store:
    """A key prefix of an S3 bucket (or an S3-compatible store), through boto3.

    A PUT is atomic, so ``write`` is one; ``create`` is a conditional PUT (``If-None-Match: *``),
    which S3 and the S3-compatible servers honour. The client is made on first use and dropped
    when the store is pickled, so a store can travel to Spark's executors.
    """

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self.bucket, self.prefix = split_object_url(root)
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> Any:
        if self._client is None:
            from ingest.storage.aws import s3_client

            self._client = s3_client()
        return self._client

    def key(self, name: str) -> str:
        """The object key of ``name`` (``""``: the prefix as a folder, with its slash)."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def url(self, name: str = "") -> str:
        key = self.key(name) if name else self.prefix
        return f"s3a://{self.bucket}/{key}" if key else f"s3a://{self.bucket}"

    def write(self, name: str, data: bytes) -> None:
        with self._errors(name):
            self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=data)

    def create(self, name: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        try:
            with self._errors(name, passing=("PreconditionFailed", "ConditionalRequestConflict")):
                self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=data, IfNoneMatch="*")
        except ClientError:
            return False
        return True

    def read(self, name: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            with self._errors(name, passing=("NoSuchKey", "404")):
                body = self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"]
                return bytes(body.read())
        except ClientError:
            return None

    def folders(self, folder: str = "") -> list[str]:
        return [name.rstrip("/") for name in self._listing(folder, "CommonPrefixes", "Prefix")]

    def _listing(self, folder: str, kind: str, field: str) -> list[str]:
        """The names directly under ``folder`` of one kind of a listing's entries (objects or prefixes)."""
        prefix = self.key(folder).rstrip("/") + "/" if (folder or self.prefix) else ""
        names: list[str] = []
        with self._errors(folder):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, Delimiter="/"
            )
            for page in pages:
                names += [entry[field][len(prefix) :] for entry in page.get(kind, ())]
        return names

    def list(self, folder: str = "") -> list[str]:
        return self._listing(folder, "Contents", "Key")

    def probe(self) -> None:
        with self._errors(""):
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.key(""), MaxKeys=1)

    def delete(self, names: Iterable[str]) -> int:
        keys = [self.key(n) for n in names]
        for i in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[i : i + 1000]]
            with self._errors(keys[i]):
                reply = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True}
                )
            failed = reply.get("Errors") or []
            if failed:
                first = failed[0]
                why = f"{first.get('Code')}: {first.get('Message')}"
                raise StoreError(errno.EIO, why, self.url(first["Key"][len(self.prefix) + 1 :]))
        return len(keys)

    @contextlib.contextmanager
    def _errors(self, name: str, passing: tuple[str, ...] = ()) -> Any:
        """botocore's errors as ``StoreError`` naming the bucket; the codes in ``passing`` re-raised
        as they are, for the caller to take as an answer."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as err:
            code = str(err.response.get("Error", {}).get("Code", ""))
            if code in passing:
                raise
            message = err.response.get("Error", {}).get("Message") or code
            number = _FATAL_CODES.get(code, errno.EIO)
            if code == "NoSuchBucket":
                message = f"bucket {self.bucket} does not exist"
            elif number == errno.EACCES:
                message = f"access to bucket {self.bucket} refused: {code} ({message})"
            raise StoreError(number, f"{message}", self.url(name)) from None
        except BotoCoreError as err:
            raise StoreError(errno.EIO, f"{type(err).__name__}: {err}", self.url(name)) from None


def store_for(path: str) -> Store:
    """The store for a directory: ``S3Store`` for an S3 URL, ``LocalStore`` otherwise."""
    return S3Store(path) if is_object_url(path) else LocalStore(path)
