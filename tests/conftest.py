"""Shared pytest fixtures: one SparkSession per test session, free ports, moto SQS, the MNS emulator."""

from __future__ import annotations

import os
import socket
import sys
import uuid

import pytest

pytest_plugins = ["tests.support.cost_report"]  # the heaviest modules by CPU, printed at the end

# Spark's Python workers must use this interpreter (the venv), not whatever python3 is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The suite's JVMs (its sessions, every job it starts, a cluster's daemons and executors) compile
with C1 only: they live seconds to minutes, and C2's compilations of Spark's code were a third of
their CPU (tests/spark/test_console_errors.py, quiet machine, twice each: 95 / 105 s of CPU with
C2, 61 / 70 s without). What a test checks does not depend on the JIT; benchmarks never set it.
Spark's launcher adds ``SPARK_SUBMIT_OPTS`` to the driver JVM's command line, its daemons
``SPARK_DAEMON_JAVA_OPTS``; ``tests.support.cluster`` gives the executors the same options."""
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    if TEST_JVM_OPTIONS not in os.environ.get(_var, ""):  # xdist's workers inherit the controller's
        os.environ[_var] = f"{os.environ.get(_var, '')} {TEST_JVM_OPTIONS}".strip()


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by the whole test session (cold start is ~10 s)."""
    from ingest.runtime import s3a
    from ingest.runtime.spark import make_session
    from tests.support import mariadb, postgres

    # PostgreSQL's and MariaDB's JDBC drivers, where installed, for the sinks that write through
    # Spark's JDBC writer; S3A's jars from the cache `make dev` fills, for tests on s3a:// paths
    # (tests/spark/test_s3a_spark.py: +1 s of start-up, no resident memory until used).
    jars = [jar for jar in (postgres.jdbc_jar(), mariadb.jdbc_jar()) if jar] + (s3a.cached_jars() or [])
    conf = {"spark.jars": ",".join(jars)} if jars else {}
    session = make_session(master="local[2]", app_name="mq-ingest-tests", conf=conf, log_level="ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _secrets_of_this_test_only():
    """Each test starts with no registered secrets: a job's secrets are process-wide, and a
    pytest worker runs many jobs, so LocalStack's key ``test`` from one test would mask every
    ``test`` in the next test's paths."""
    from ingest.errors import redact

    redact.clear()


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# gRPC's fork handlers crash a child forked while other threads are in gRPC (SIGSEGV/SIGBUS before
# its exec): a worker that ran a RocketMQ 5.x (gRPC) test then started MariaDB as its OS user (a
# fork, not a vfork, under ``Popen(user=...)``) and the server "exited" at once with -7. Measured
# with a gRPC server and four client threads: 176 of 200 such forks died; with this off, none.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def moto_url():
    """moto in server mode (real HTTP, the SQS wire protocol), bound to 127.0.0.1."""
    from tests.support.sqs_server import moto_server

    with moto_server() as url:
        yield url


@pytest.fixture(scope="session")
def localstack_url(tmp_path_factory):
    """One LocalStack (SQS only) for the session, on a free port of 127.0.0.1; stopped by its PID. Its
    modules skip where it is not built (``tests.support.localstack_server.available``) and share one
    xdist worker (``xdist_group("localstack")``), so the suite starts it once."""
    from tests.support.localstack_server import localstack_server

    with localstack_server(tmp_path_factory.mktemp("localstack")) as url:
        yield url


@pytest.fixture
def sqs(moto_url):
    import boto3

    return boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")


@pytest.fixture
def make_queue(sqs):
    """Create a fresh queue (``fifo=True`` for FIFO); deleted after the test."""
    urls = []

    def make(fifo: bool = False, **attributes: str) -> str:
        name = f"q-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")
        if fifo:
            attributes.setdefault("FifoQueue", "true")
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        urls.append(url)
        return url

    yield make
    for url in urls:
        sqs.delete_queue(QueueUrl=url)


@pytest.fixture
def s3(moto_url):
    import boto3

    return boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1")


@pytest.fixture
def bucket(s3) -> str:
    """A fresh S3 bucket on moto (claim-check payloads)."""
    name = f"pay-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def mns():
    """The MNS emulator on 127.0.0.1, signing with the test AccessKey (one per test module)."""
    from tests.emulators.mns import start_emulator
    from tests.support.mns_server import AK_ID, AK_SECRET

    with start_emulator(AK_ID, AK_SECRET) as emulator:
        yield emulator


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's) on 127.0.0.1 for the session; `make test` installs it."""
    from tests.support import postgres as pg

    _require(pg.bin_dir() is not None and pg.jdbc_jar() is not None, "PostgreSQL", "postgres")
    with pg.running() as server:
        yield server


@pytest.fixture
def pg_database(postgres) -> str:
    """A fresh database on the session's PostgreSQL server, for one test."""
    return postgres.create_database()


@pytest.fixture(scope="session")
def mariadb():
    """A real MariaDB server (Debian's ``mariadbd``) on 127.0.0.1 for the session; `make test`
    installs it with MariaDB Connector/J."""
    from tests.support import mariadb as maria

    _require(maria.installed(), "MariaDB", "mariadb")
    with maria.running() as server:
        yield server


@pytest.fixture
def maria_database(mariadb) -> str:
    """A fresh database on the session's MariaDB server, for one test."""
    return mariadb.create_database()


def _require(installed: bool, server: str, target: str) -> None:
    """Skip where ``server`` or its JDBC driver is missing; fail in CI, where `make test` installs them."""
    if installed:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{server} or its JDBC driver is missing: `make {target}` installs them")
    pytest.skip(f"no {server} server or JDBC driver here: `make {target}` installs them")
