"""Samples what the job uses: driver process tree (psutil), Spark executors (status store), queue lag.

How the reference's RESOURCE_QUOTA fields map onto a Spark job:

* ``namespace*`` — the machine the driver runs on: ``namespaceTotalCpu`` its logical
  cores, ``namespaceTotalMemory`` its RAM; ``namespaceUsedCpu`` the cores busy machine-wide
  since the last sample, ``namespaceUsedMemory`` RAM in use (total − available).
* ``resourceQueue*`` — the Spark application (``resourceQueueName`` is its application id,
  or the job name before Spark is up):

  - ``resourceQueueTotalCpu``: local mode the cores of ``local[N]``; on a cluster
    ``spark.driver.cores`` plus the cores of the active executors.
  - ``resourceQueueTotalMemory``: the driver JVM's max heap, plus ``spark.executor.memory``
    per executor on a cluster.
  - ``resourceQueueUsedCpu``: the driver process tree (Python driver, its JVM and, in local
    mode, the Python workers) measured since the last sample, plus on a cluster the
    executors' running tasks × ``spark.task.cpus`` (an estimate: executors are not measured).
  - ``resourceQueueUsedMemory``: resident memory of the driver process tree, plus on a
    cluster the storage memory the executors report in use (on and off heap).

* ``*CpuMemory`` — the same in CUs (1 CU = 1 core and 4 GiB; the larger of the two).

JOB_RESOURCE_USAGE's ``jobUsedCpu`` is ``resourceQueueUsedCpu`` over the usage interval and
``jobUsedMemory`` is ``resourceQueueUsedMemory`` at the time of the sample. Source lag is asked of sources
that declare ``reports_lag`` (``ingest.connector.Source``); the others are left out.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import psutil

from ingest.connector import Source
from ingest.errors import redact
from ingest.ops.job_events.messages import cu

log = logging.getLogger(__name__)


class CpuMeter:
    """Cores a process tree used between two `sample` calls (psutil CPU time deltas)."""

    def __init__(self, root: psutil.Process) -> None:
        self.root = root
        self._last: dict[int, float] = {}
        self._last_wall = time.monotonic()
        self.sample()  # the baseline: CPU spent before now is not counted

    def _tree(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return [self.root]

    def sample(self) -> tuple[float, int]:
        """(cores used since the last call, resident bytes now) of the root and its descendants."""
        now = time.monotonic()
        seen: dict[int, float] = {}
        used = 0.0
        rss = 0
        for proc in self._tree():
            try:
                with proc.oneshot():
                    t = proc.cpu_times()
                    total = t.user + t.system
                    rss += proc.memory_info().rss
            except psutil.Error:
                continue  # exited meanwhile
            seen[proc.pid] = total
            used += max(0.0, total - self._last.get(proc.pid, 0.0))
        elapsed = max(now - self._last_wall, 1e-6)
        self._last, self._last_wall = seen, now
        return used / elapsed, rss


class ResourceSampler:
    """Builds the figures of RESOURCE_QUOTA and JOB_RESOURCE_USAGE (see the module docstring).

    Spark is asked through ``spark_provider`` (None until the session exists); any Spark or
    source error leaves that part out and is logged at debug level, never raised.
    """

    def __init__(
        self, spark_provider: Callable[[], Any], sources: Mapping[str, Source], default_queue_name: str
    ) -> None:
        self.spark_provider = spark_provider
        self.sources = sources
        self.default_queue_name = default_queue_name
        me = psutil.Process(os.getpid())
        self._quota_cpu = CpuMeter(me)
        self._usage_cpu = CpuMeter(me)
        psutil.cpu_percent(None)  # starts the machine-wide CPU baseline

    def spark_app(self) -> dict[str, Any] | None:
        """The Spark application's cores, memory and executors, or None before/after the session.

        Executors come from the driver's status store (what the UI and REST API show), read
        over py4j: it works the same in local mode (one ``driver`` entry holding the local
        cores) and on a cluster. Some JVM objects (``SparkEnv``, scheduler backends) are not
        safe to touch over py4j here: reflecting on them loads classes this Spark lacks.
        """
        try:
            spark = self.spark_provider()
            if spark is None:
                return None
            sc = spark.sparkContext
            jsc = sc._jsc.sc()
            conf = sc.getConf()
            listed = sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(
                jsc.statusStore().executorList(True)
            )
            execs = [e for e in listed if e.id() != "driver"]
            driver_cores = sum(int(e.totalCores()) for e in listed if e.id() == "driver")
            per_exec = sc._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(
                conf.get("spark.executor.memory", "1g")
            )
            return {
                "id": sc.applicationId,
                "master": sc.master,
                "version": spark.version,
                "driver_heap_max": int(sc._jvm.java.lang.Runtime.getRuntime().maxMemory()),
                # Local mode runs tasks on the driver, which then lists the local cores.
                "cores": (driver_cores or int(conf.get("spark.driver.cores", "1")))
                + sum(int(e.totalCores()) for e in execs),
                "executors": len(execs),
                "exec_memory": int(per_exec) * len(execs),
                "exec_used": sum(int(e.memoryUsed()) for e in execs),
                "exec_cpu": float(
                    sum(int(e.activeTasks()) for e in execs) * int(conf.get("spark.task.cpus", "1"))
                ),
            }
        except Exception as err:
            log.debug("spark resources unavailable: %s", redact(str(err)))
            return None

    def _job_use(self, meter: CpuMeter, app: dict[str, Any] | None) -> tuple[float, int]:
        cpu, rss = meter.sample()
        if app:
            cpu += app["exec_cpu"]
            rss += app["exec_used"]
        return cpu, rss

    def quota(self) -> tuple[dict[str, float | int], str]:
        """The RESOURCE_QUOTA figures and the queue (application) name."""
        app = self.spark_app()
        cores = psutil.cpu_count() or 1
        mem = psutil.virtual_memory()
        host_cpu = psutil.cpu_percent(None) * cores / 100.0
        host_used = int(mem.total - mem.available)
        q_cpu_used, q_mem_used = self._job_use(self._quota_cpu, app)
        q_cpu_total = float(app["cores"]) if app else 1.0
        q_mem_total = int(app["driver_heap_max"] + app["exec_memory"]) if app else 0
        f: dict[str, float | int] = {
            "namespaceTotalCpu": float(cores),
            "namespaceTotalMemory": int(mem.total),
            "namespaceUsedCpu": round(host_cpu, 3),
            "namespaceUsedMemory": host_used,
            "resourceQueueTotalCpu": q_cpu_total,
            "resourceQueueTotalMemory": q_mem_total,
            "resourceQueueUsedCpu": round(q_cpu_used, 3),
            "resourceQueueUsedMemory": int(q_mem_used),
        }
        for scope in ("namespace", "resourceQueue"):
            for kind in ("Total", "Used"):
                f[f"{scope}{kind}CpuMemory"] = cu(f[f"{scope}{kind}Cpu"], f[f"{scope}{kind}Memory"])
        return f, (app["id"] if app else self.default_queue_name)

    def usage(self, metrics: Any) -> dict[str, Any]:
        """The JOB_RESOURCE_USAGE figures: resources since the last call, counts from ``metrics``."""
        cpu, memory = self._job_use(self._usage_cpu, self.spark_app())
        return {
            "cpu": cpu,
            "memory": memory,
            "messages_in": int(metrics.total("received")),
            "messages_out": int(metrics.total("written")),
            "in_flight": _gauge(metrics, "inFlight"),
            "lag": self.lag(),
        }

    def lag(self) -> dict[str, int]:
        """Messages waiting per source, for the sources that report it."""
        out = {}
        for name, source in self.sources.items():
            if not source.reports_lag:
                continue
            try:
                value = source.lag()
            except Exception as err:
                log.debug("lag of source %s unavailable: %s", name, redact(str(err)))
                continue
            if value is not None:
                out[name] = int(value)
        return out

    def describe_spark(self) -> str | None:
        """One line about the Spark application for the start log, or None before the session."""
        app = self.spark_app()
        if app is None:
            return None
        return (
            f"spark {app['version']} master {app['master']} application {app['id']}: "
            f"{app['cores']} core(s), driver heap {app['driver_heap_max']} bytes, "
            f"{app['executors']} executor(s)"
        )


def _gauge(metrics: Any, name: str) -> int:
    """A gauge's value from the job's Prometheus collector (0 if it has none)."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
    try:
        for family in metrics.collect():
            if family.name == f"mq_ingest_{snake}" and family.samples:
                return int(family.samples[0].value)
    except Exception as err:
        log.debug("gauge %s unavailable: %s", name, redact(str(err)))
    return 0
