"""A Spark standalone cluster on 127.0.0.1 for the tests, the spark-submit bundle, and job submission.

The cluster is started from the pyspark installation's own ``bin/spark-class`` (Master, then
Workers), each process in its own session with its log in a temp dir, and stopped by PID
(with whatever executors a worker left behind). ``bench/scale.py`` uses the same helpers.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from ingest.tools import bundle
from tests.support.local_http import LocalHTTPServer

SPARK_HOME = Path(bundle.spark_submit_path()).parents[1]
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_ENV_DROP = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "SPARK_CONF_DIR", "MASTER")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment minus the Python/Spark settings the tests set for local Spark."""
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP and not k.startswith("MQ_INGEST_")}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", **extra)
    return env


def _wait_for(path: Path, pattern: re.Pattern[str], proc: subprocess.Popen, timeout: float) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = pattern.search(path.read_text(errors="replace")) if path.exists() else None
        if m:
            return m
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[1]} exited with {proc.returncode}:\n{path.read_text()[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"no {pattern.pattern!r} in {path} after {timeout:.0f}s:\n{path.read_text()[-3000:]}")


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores, ``memory`` each) bound to 127.0.0.1.

    Args:
        root: a temp dir for the conf, logs and the workers' work dirs.
        workers: how many worker processes.
        cores: cores each worker offers.
        memory: memory each worker offers (executors take ``spark.executor.memory`` of it).
    """

    def __init__(self, root: Path, workers: int = 1, cores: int = 1, memory: str = "1g") -> None:
        self.root = Path(root)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.url = ""
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        self.work_dirs: list[Path] = []

    def _spawn(self, name: str, args: list[str]) -> tuple[subprocess.Popen, Path]:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=clean_env(
                    SPARK_CONF_DIR=str(self.root / "conf"),
                    SPARK_DAEMON_MEMORY="384m",
                    SPARK_LOCAL_DIRS=str(self.root / "local"),
                ),
                start_new_session=True,
            )
        self.procs.append(proc)
        self.logs.append(log)
        return proc, log

    def start(self, timeout: float = 120) -> StandaloneCluster:
        """Start the master, then the workers; return once every worker has registered."""
        (self.root / "conf").mkdir(parents=True, exist_ok=True)
        props = self.root / "conf" / "spark-defaults.conf"
        props.write_text("spark.master.rest.enabled false\nspark.worker.cleanup.enabled false\n")
        common = ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--properties-file", str(props)]
        try:
            master, log = self._spawn("master", ["org.apache.spark.deploy.master.Master", *common])
            self.url = _wait_for(log, _MASTER_URL, master, timeout).group(1)
            started = []
            for i in range(self.workers):
                work = self.root / f"work-{i}"
                work.mkdir()
                self.work_dirs.append(work)
                args = ["org.apache.spark.deploy.worker.Worker", *common, "--cores", str(self.cores)]
                args += ["--memory", self.memory, "--work-dir", str(work), self.url]
                started.append(self._spawn(f"worker-{i}", args))
            for proc, log in started:
                _wait_for(log, re.compile("Successfully registered with master"), proc, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the workers, then the master, by PID: SIGTERM, then SIGKILL; executors left too."""
        for proc in reversed(self.procs):
            try:
                leftovers = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                leftovers = []
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            for child in leftovers:  # executors the worker did not take down
                with contextlib.suppress(psutil.Error):
                    child.kill()
        self.procs.clear()

    def app_dirs(self) -> list[Path]:
        """Executor dirs of every application run on the workers (``app-*/<executor id>``)."""
        return sorted(p for w in self.work_dirs for p in w.glob("app-*/*") if p.is_dir())

    def submit(
        self,
        bundle_: Bundle,
        config: Path,
        log: Path,
        env: dict | None = None,
        s3a: bool = False,
        **conf: str,
    ):
        """spark-submit ``ingest/run.py --config <config>`` with the bundle, in its own session.

        stdout+stderr go to ``log``; the driver binds to 127.0.0.1 and keeps its scratch space
        (Spark unpacks ``--archives`` on the driver too) under this cluster's root. ``s3a``: with
        S3A's jars (``--packages`` from the jar cache).
        """
        settings = {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.local.dir": str(self.root / "driver-local"),
            "spark.executor.memory": "640m",
            # the suite's JVM options (tests/conftest.py), which the worker does not pass on
            "spark.executor.extraJavaOptions": os.environ.get("SPARK_DAEMON_JAVA_OPTS", ""),
            **conf,
        }
        cmd = bundle.submit_command(
            bundle_.env_archive, bundle_.code_zip, str(config), self.url, conf=settings, s3a=s3a
        )
        with open(log, "wb") as out:
            return subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=clean_env(**(env or {})),
                cwd=log.parent,
                start_new_session=True,
            )

    def run(self, bundle_: Bundle, config: Path, log: Path, timeout: float = 600, **kw) -> tuple[int, str]:
        """``submit`` and wait for the end; returns (exit code, output). Kills what is left after.

        ``timeout`` guards against a hang only: at a load of ~12 on 2 cores a run that had done its
        work passed 300 s in the JVM's exit (Spark's shutdown hooks, deleting the unpacked env
        archive, each timed out after their 30 s), was killed, and its exit code was lost."""
        proc = self.submit(bundle_, config, log, **kw)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            stop_session(proc)
        return proc.returncode, log.read_text(errors="replace")

    def log_text(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in self.logs)


class DeletesUnavailable(LocalHTTPServer):
    """An HTTP endpoint on 127.0.0.1 that forwards SQS calls to moto but fails every batch delete.

    ``DeleteMessageBatch`` gets ``503 ServiceUnavailable`` (retried, then counted failed);
    receives, visibility changes and the start-up probe's ``DeleteMessage`` go through.
    ``denied`` counts the refused calls. Use ``url`` as the source's ``sqs.endpoint.url``.
    (A delete refused for good, AccessDenied, stops the job instead: tests/integration.)
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.denied = 0
        super().__init__()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        data = h.rfile.read(int(h.headers.get("Content-Length", 0)))
        action = (h.headers.get("X-Amz-Target") or ".").rsplit(".", 1)[-1]
        if action == "DeleteMessageBatch":
            self.denied += 1
            status = 503
            body = json.dumps(
                {"__type": "com.amazonaws.sqs#ServiceUnavailable", "message": "deletes are unavailable"}
            ).encode()
            headers = {"Content-Type": "application/x-amz-json-1.0"}
        else:
            conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
            try:
                skip = ("host", "content-length", "connection")
                conn.request(
                    "POST",
                    h.path,
                    body=data,
                    headers={k: v for k, v in h.headers.items() if k.lower() not in skip},
                )
                resp = conn.getresponse()
                status, body = resp.status, resp.read()
                headers = {
                    k: v for k, v in resp.getheaders() if k.lower() in ("content-type", "x-amzn-requestid")
                }
            finally:
                conn.close()
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


class Bundle:
    """The env archive and code zip built by ``ingest.tools.bundle``."""

    def __init__(self, env_archive: Path, code_zip: Path) -> None:
        self.env_archive = env_archive
        self.code_zip = code_zip


def stop_session(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of a spark-submit we started (its JVM, its Python driver), by PID."""
    try:
        procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.Error:
        procs = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def build_bundle(cache: Path, out: Path) -> Bundle:
    """Pack the venv into ``cache`` (reused while the packages stay the same); zip the code into ``out``."""
    env, _ = bundle.pack_env(cache / bundle.ENV_ARCHIVE)
    return Bundle(env, bundle.zip_project(out / bundle.CODE_ZIP))
