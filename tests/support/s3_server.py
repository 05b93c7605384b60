"""An S3 API server on 127.0.0.1 in a process of its own (moto's), and the AWS settings to reach it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.db_process import free_port
from tests.support.polling import wait_for


@dataclass
class S3Server:
    """A running server: its URL, its process, and the environment a job needs to use it."""

    url: str
    proc: subprocess.Popen
    log: Path
    """The server's output: one line a request (``"PUT /bucket/key HTTP/1.1" 200``)."""
    env: dict[str, str] = field(default_factory=dict)
    """The standard AWS settings for this server: endpoint, test credentials, region, no
    instance-metadata lookups. What a user sets for MinIO or any S3-compatible store."""

    def client(self):
        """A boto3 S3 client on this server, as a test reads what the job wrote."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def bucket(self, name: str) -> str:
        """Create bucket ``name``; return it."""
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` in ``bucket``, sorted."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", ()))

    def jsonl_rows(self, bucket: str, prefix: str) -> list[dict]:
        """The rows of a files sink's output under ``prefix``: the ``part-*`` files of each batch
        directory its commit completed (``_SUCCESS``), as Spark's reader takes them. A directory a
        replay is rewriting meanwhile may be missed: poll, and count once the job has ended."""
        import orjson

        client = self.client()
        keys = self.keys(bucket, prefix)
        done = {k.rsplit("/", 1)[0] for k in keys if k.endswith("/_SUCCESS")}
        rows = []
        for key in keys:
            folder, name = key.rsplit("/", 1)
            if folder in done and name.startswith("part-"):
                try:
                    data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                except client.exceptions.NoSuchKey:
                    continue
                rows += [orjson.loads(line) for line in data.splitlines() if line.strip()]
        return rows

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """The server stopped (SIGSTOP: connections are taken by the kernel and never answered)
        for the block, then continued with everything it held."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)


def aws_env(url: str) -> dict[str, str]:
    """The standard AWS settings for an S3-compatible server at ``url`` with moto's test credentials."""
    return {
        "AWS_ENDPOINT_URL_S3": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@contextlib.contextmanager
def s3_server(refuse_credentials: bool = False) -> Iterator[S3Server]:
    """moto's S3 server as a separate OS process on a free port of 127.0.0.1; stopped by PID.
    ``refuse_credentials``: it checks every request's access key against its IAM users (it has
    none), as S3 refuses a wrong key (``InvalidAccessKeyId``)."""
    port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0") if refuse_credentials else None
    log = Path(tempfile.mkstemp(prefix="moto-s3-", suffix=".log")[1])
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"moto server exited: {log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # it answers (refusing an unsigned request)
        except OSError:
            return False

    try:
        wait_for(up, 60, "moto's S3 server answering", every=0.1)
        yield S3Server(url, proc, log, aws_env(url))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.unlink(missing_ok=True)


@contextlib.contextmanager
def s3_server_in_env(*buckets: str) -> Iterator[S3Server]:
    """``s3_server()`` with its AWS settings in this process's environment (as a user sets them
    for the job's S3 clients) and ``buckets`` made; both undone at the end."""
    import pytest

    with s3_server() as server, pytest.MonkeyPatch.context() as env:
        for key, value in server.env.items():
            env.setenv(key, value)
        for name in buckets:
            server.bucket(name)
        yield server


class Relay:
    """A TCP relay on 127.0.0.1 in front of a server: ``down()`` refuses new connections and cuts
    the open ones (a network outage, as clients see one), ``up()`` listens on the same port again.
    The server behind it keeps everything it holds."""

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("://", 1)[1]
        host, port = host_port.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cut = 0
        """Connections cut by ``down()``."""
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="relay-accept", daemon=True).start()

    def down(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            live, self._live = self._live, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self.cut += len(live) // 2

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by down()
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._live |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), name="relay-pipe", daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with self._lock:
                self._live.discard(src)

    def close(self) -> None:
        self.down()
