"""Keeps the driver JVM's optimizing (C2) compiler off Spark's per-batch planning code on small machines."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from fnmatch import fnmatchcase
from typing import Any

log = logging.getLogger(__name__)

PLANNING_CODE = (
    # Catalyst's analyzer, optimizer and planner, and the code generator (not the code it generates).
    "org/apache/spark/sql/catalyst/trees/*",
    "org/apache/spark/sql/catalyst/analysis/*",
    "org/apache/spark/sql/catalyst/plans/*",
    "org/apache/spark/sql/catalyst/planning/*",
    "org/apache/spark/sql/catalyst/rules/*",
    "org/apache/spark/sql/catalyst/optimizer/*",
    "org/apache/spark/sql/catalyst/expressions/codegen/Block*",
    "org/apache/spark/sql/catalyst/expressions/codegen/CodeGenerator*",
    "org/apache/spark/sql/catalyst/expressions/codegen/CodegenContext*",
    "org/apache/spark/sql/catalyst/expressions/codegen/Generate*",
    # The closure cleaner reading class files, task (de)serialization, the Hadoop conf each task
    # reads, class and resource loading, Py4J's reflection.
    "org/apache/xbean/*",
    "java/io/ObjectInputStream*",
    "java/io/ObjectOutputStream*",
    "java/io/ObjectStream*",
    "org/apache/hadoop/io/WritableUtils",
    "org/apache/hadoop/conf/*",
    "jdk/internal/loader/*",
    "java/util/zip/*",
    "java/util/jar/*",
    "java/util/ServiceLoader*",
    "sun/util/locale/*",
    "org/apache/spark/util/SizeEstimator*",
    "py4j/*",
)
"""Classes (JVM names, ``*`` a wildcard) that a micro-batch runs a few times, never once a row."""

MAX_CPUS = 4
_APPLIED = "mq_ingest.jit.planning"
"""A JVM system property set once the directive is in: a reused session does not stack another."""


def directives() -> str:
    """The HotSpot compiler directive: C2 excludes ``PLANNING_CODE`` (C1 still compiles it)."""
    return json.dumps([{"match": [f"{c}.*" for c in PLANNING_CODE], "c2": {"Exclude": True}}], indent=1)


def is_planning_code(jvm_class: str) -> bool:
    """Whether the directive covers a class (``java/io/ObjectInputStream``, slashes)."""
    return any(fnmatchcase(jvm_class, c) for c in PLANNING_CODE)


def apply(spark: Any, cpus: int) -> bool:
    """Add the directive to the driver JVM of ``spark`` if it has at most ``MAX_CPUS`` CPUs.

    Why: Spark plans every micro-batch anew, and HotSpot keeps promoting that planning code to
    C2 for minutes, a steady share of a small driver's CPU; C1 (tier 1) compiles it at a fraction
    of the cost while the per-row code still reaches C2. On more CPUs the JIT has cores of its
    own and the faster C2 code pays off over a long run. The measurements are in
    ``docs/performance-history.md`` ("The JIT on 2 cores").
    Best effort: a JVM that refuses (no ``DiagnosticCommand`` bean) is only logged.

    Returns:
        True if the directive is in force (added now or before).
    """
    if cpus > MAX_CPUS:
        return False
    try:
        jvm = spark.sparkContext._jvm
        if jvm.java.lang.System.getProperty(_APPLIED) is not None:
            return True
        fd, path = tempfile.mkstemp(prefix="mq-ingest-jit-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(directives())
            out = _diagnostic_command(spark, "compilerDirectivesAdd", path)  # read here, then unneeded
        finally:
            os.unlink(path)
        if "added" not in out:
            log.warning("JIT directive for Spark's planning code refused: %s", out.strip())
            return False
        jvm.java.lang.System.setProperty(_APPLIED, "1")
        return True
    except Exception as err:  # a JVM without the bean, or a remote session: run as is
        log.info("JIT directive for Spark's planning code not applied: %s", err)
        return False


def _diagnostic_command(spark: Any, operation: str, *args: str) -> str:
    """Run a ``jcmd`` command in the driver JVM through its ``DiagnosticCommand`` MBean."""
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    lang = jvm.java.lang

    def array(kind: Any, *items: Any) -> Any:
        out = gateway.new_array(kind, len(items))
        for i, item in enumerate(items):
            out[i] = item
        return out

    server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
    bean = jvm.javax.management.ObjectName("com.sun.management:type=DiagnosticCommand")
    # Called through the public interface's Method: the server's own class is not exported, so
    # Py4J cannot call ``invoke`` on it directly.
    kinds = ("javax.management.ObjectName", "java.lang.String", "[Ljava.lang.Object;", "[Ljava.lang.String;")
    invoke = lang.Class.forName("javax.management.MBeanServerConnection").getMethod(
        "invoke", array(lang.Class, *(lang.Class.forName(k) for k in kinds))
    )
    params = array(lang.Object, array(lang.String, *args))
    call = array(lang.Object, bean, operation, params, array(lang.String, "[Ljava.lang.String;"))
    return str(invoke.invoke(server, call))
