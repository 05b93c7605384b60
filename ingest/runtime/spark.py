"""Creates the SparkSession with settings suited to small local and cluster runs."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ingest.runtime import jit
from ingest.runtime.console import jvm_log_properties, traces_shown
from ingest.runtime.launch import launch_driver_jvm
from ingest.runtime.memory import ARENAS, cap_arenas

T = TypeVar("T")
log = logging.getLogger(__name__)
_LOG4J = Path(__file__).parent.parent / "log4j2.properties"
"""The driver JVM's log configuration when this process launches it (quiet start, WARN)."""

_DEFAULTS = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.ui.showConsoleProgress": "false",
    # The status store keeps every finished job, stage and SQL execution up to these counts even
    # with the UI off; a micro-batch adds several, so the defaults (1000) grow the heap for hours.
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
    # Local files without a ``.crc`` beside each: without Hadoop's native library its local file
    # system forks ``chmod`` for every file and directory it creates, the checksum files included
    # (half a micro-batch's forks). Other schemes are not affected.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}
_LOCAL_ONLY = {
    # A driver started by this process talks to executors on this machine only.
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def ui_enabled(submitted: bool, master: str) -> bool:
    """Whether the Spark UI is on by default: for a job under spark-submit or on a cluster (a
    master that is not ``local``), where it is the first place to look at a streaming job;
    off for a local run started by this process, which starts sooner without it and
    takes no port (a machine running many local jobs or tests runs out of Spark's 17 UI
    ports). ``spark.ui.enabled`` in ``spark.conf`` decides either way.

    Example:
        >>> ui_enabled(False, "local[2]"), ui_enabled(False, "spark://h:7077"), ui_enabled(True, "")
        (False, True, True)
    """
    return submitted or not master.startswith("local")


_PRETOUCHED_HEAP_MIB = 512
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)b?\s*$", re.IGNORECASE)


def _driver_mib(conf: dict[str, str]) -> int | None:
    """``spark.driver.memory`` (else ``SPARK_DRIVER_MEMORY``, else Spark's 1g) in MiB; None for a
    form Spark may take and this does not read."""
    given = conf.get("spark.driver.memory") or os.environ.get("SPARK_DRIVER_MEMORY") or "1g"
    size = _SIZE.match(given)
    if not size:
        return None
    scale = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024**2}[size.group(2).lower()]
    return int(int(size.group(1)) * scale)


def heap_options(conf: dict[str, str]) -> str:
    """``-Xms`` and ``-XX:+AlwaysPreTouch`` for the driver JVM this process launches.

    The first 512 MiB of heap (at most ``spark.driver.memory``) are resident from the start, as
    Elasticsearch and Kafka deployments do: the footprint is flat from the first batch instead
    of growing as the collector expands the heap, so a container limit that is too small fails
    at start, not hours in (figures: ``docs/performance-history.md``, "The driver JVM's heap
    and collector"). Options the user gives in ``spark.driver.extraJavaOptions`` come after,
    so ``-XX:-AlwaysPreTouch`` or an ``-Xms`` of theirs wins.

    Example:
        >>> heap_options({"spark.driver.memory": "384m"})
        '-Xms384m -XX:+AlwaysPreTouch'
    """
    mib = _driver_mib(conf)
    if mib is None:
        return ""  # leave the heap to the JVM
    return f"-Xms{min(_PRETOUCHED_HEAP_MIB, mib)}m -XX:+AlwaysPreTouch" if mib >= 16 else ""


_COLLECTOR = re.compile(r"-XX:[+-]Use\w+GC\b")
_SERIAL_MAX_HEAP_MIB = 2048
_SERIAL_MAX_CPUS = 4


def collector_option(conf: dict[str, str], cpus: int | None = None) -> str:
    """``-XX:+UseSerialGC`` for a driver JVM with a small heap on a small machine, else nothing.

    The JVM picks G1 on any machine with 2 CPUs and 2 GiB. For a local driver of at most
    2 GiB heap on at most 4 CPUs the serial collector does the same work with less: no
    remembered sets (G1 kept ~60 MiB of native memory for them here), no concurrent refinement
    threads, and a heap it does not grow under a rising allocation rate: a smaller, flatter
    footprint for the same throughput (figures: ``docs/performance-history.md``, "The driver
    JVM's heap and collector").
    A collector the user names in ``spark.driver.extraJavaOptions`` is kept (the JVM refuses
    two).

    Example:
        >>> collector_option({}, cpus=2)
        '-XX:+UseSerialGC'
        >>> collector_option({"spark.driver.extraJavaOptions": "-XX:+UseZGC"}, cpus=2)
        ''
    """
    if _COLLECTOR.search(conf.get("spark.driver.extraJavaOptions", "")):
        return ""
    mib = _driver_mib(conf)
    cpus = usable_cpus() if cpus is None else cpus
    small = mib is not None and mib <= _SERIAL_MAX_HEAP_MIB and cpus <= _SERIAL_MAX_CPUS
    return "-XX:+UseSerialGC" if small else ""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity on Linux, else the machine's)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def launched_by_spark_submit() -> bool:
    """True when the JVM already runs and started this Python (``spark-submit app.py``, pyspark shell)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def make_session(
    master: str | None,
    app_name: str,
    conf: dict[str, str],
    log_level: str = "WARN",
    class_data_sharing: bool = True,
):
    """Build (or reuse) the SparkSession; user ``conf`` overrides the defaults.

    Started as ``python -m ingest.run``, Python launches the JVM: workers use this
    interpreter, the driver binds to 127.0.0.1 and an empty ``master`` means ``local[2]``.
    Launched by ``spark-submit``, the submit command owns those choices (``--master``,
    ``spark.pyspark.python``, the driver host), so only the job's own settings are applied;
    an empty ``master`` leaves spark-submit's ``--master`` in force, a non-empty one
    overrides it (as settings made in application code do in Spark) with a warning.

    Args:
        master: ``spark.master`` from the job config; empty: spark-submit's, else ``local[2]``.
        app_name: the Spark application name.
        conf: ``spark.conf`` from the job config.
        log_level: the SparkContext log level.
        class_data_sharing: map the class archive ``python -m ingest.cds`` built, if there is
            one, into the driver JVM this process launches (see ``ingest.tools.cds``).

    Returns:
        The SparkSession.
    """
    submitted = launched_by_spark_submit()
    cap_arenas()  # this Python process's, before the job's threads start; the JVM's below
    settings = dict(_DEFAULTS)
    settings["spark.ui.enabled"] = str(ui_enabled(submitted, master or "local[2]")).lower()
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # glibc gives every JVM thread its own malloc arena; two cap the driver's RSS
        # (docs/performance-history.md, "The driver JVM's heap and collector").
        os.environ.setdefault("MALLOC_ARENA_MAX", str(ARENAS))
        settings.update(_LOCAL_ONLY)
        master = master or "local[2]"
        jvm = f"{collector_option(conf)} {heap_options(conf)}".strip()
        traces = " ".join(f"-D{k}={v}" for k, v in jvm_log_properties(traces_shown()).items())
        ours = f"{jvm} -Dlog4j2.configurationFile={_LOG4J} {traces}".strip()
        if class_data_sharing:
            from ingest.runtime.cds_archive import java_options

            ours = f"{java_options()} {ours}"
        # The user's own options come after, so theirs win where both set one.
        options = f"{ours} {conf.get('spark.driver.extraJavaOptions', '')}".strip()
        conf = {**conf, "spark.driver.extraJavaOptions": options}
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in {**settings, **conf}.items():
        builder = builder.config(key, value)
    if not submitted:
        launch_driver_jvm(
            {**settings, **conf, "spark.app.name": app_name, "spark.master": master or "local[2]"}
        )
    session = _keeping_sigint(builder.getOrCreate)
    if submitted and master:
        from pyspark import SparkConf

        given = SparkConf().get("spark.master", None)  # what spark-submit was told
        if given and given != master:
            log.warning(
                "spark.master %s from the job config overrides spark-submit's --master %s; "
                "set spark.master to '' in the config to use spark-submit's",
                master,
                given,
            )
    session.sparkContext.setLogLevel(log_level)
    if url := session.sparkContext.uiWebUrl:
        log.info("Spark UI at %s (spark.ui.enabled)", url)
    if local_driver(session):
        jit.apply(session, usable_cpus())
    return session


def connector_conf(conf: dict[str, str], connectors: Iterable[Any]) -> dict[str, str]:
    """``conf`` with the jars and Maven coordinates the connectors need (``spark_jars()``: a JDBC
    sink's driver) added to ``spark.jars`` and ``spark.jars.packages``, after the user's own.

    >>> connector_conf({"spark.jars": "/a.jar"}, [])
    {'spark.jars': '/a.jar'}
    """
    out = dict(conf)
    for key, index in (("spark.jars", 0), ("spark.jars.packages", 1)):
        have = [j for j in out.get(key, "").split(",") if j.strip()]
        for c in connectors:
            have += [j for j in c.spark_jars()[index] if j not in have]
        if have:
            out[key] = ",".join(have)
    return out


def missing_connector_jars(session: Any, connectors: Iterable[Any]) -> dict[str, list[str]]:
    """The jars and Maven coordinates each connector needs (``spark_jars()``) that the running
    session did not start with, by connector name: a session already running (a notebook's, or
    one an earlier job in the process started) keeps its classpath, whatever the config adds."""
    conf = session.sparkContext.getConf()
    have = {
        j.strip() for key in ("spark.jars", "spark.jars.packages") for j in (conf.get(key) or "").split(",")
    }
    names = {os.path.basename(j) for j in have if j}
    out = {}
    for c in connectors:
        jars, packages = c.spark_jars()
        if missing := [j for j in (*jars, *packages) if j not in have and os.path.basename(j) not in names]:
            out[c.name] = missing
    return out


def driver_jvm_pid(session) -> int | None:
    """The pid of the driver JVM if this process launched it (None under spark-submit)."""
    proc = getattr(session.sparkContext._gateway, "proc", None)
    return proc.pid if proc is not None else None


def _keeping_sigint(start: Callable[[], T]) -> T:
    """``start()``, keeping the caller's SIGINT handler: a new SparkContext installs its own
    (cancel every Spark job, raise ``KeyboardInterrupt``) over it, so Ctrl-C would not stop
    the job gracefully as SIGTERM does. Python's default handler is left to PySpark's."""
    main = threading.current_thread() is threading.main_thread()
    ours = signal.getsignal(signal.SIGINT) if main else None
    try:
        return start()
    finally:
        if main and callable(ours) and ours is not signal.default_int_handler:
            signal.signal(signal.SIGINT, ours)


def local_driver(session) -> bool:
    """The executors run inside the driver JVM (``local`` master): the driver does all the work."""
    return str(session.sparkContext.master).startswith("local")
