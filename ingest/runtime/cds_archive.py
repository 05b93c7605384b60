"""Where the driver JVM's class archive lives (per Spark and Java), and the options that map it.

The archive itself is built by :mod:`ingest.tools.cds`; :mod:`ingest.runtime.spark` maps it into
the driver JVM.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a refused archive is not worth a console line


def cache_dir() -> Path:
    """``$MQ_INGEST_CACHE``, else ``$XDG_CACHE_HOME/mq-ingest``, else ``~/.cache/mq-ingest``."""
    if os.environ.get("MQ_INGEST_CACHE"):
        return Path(os.environ["MQ_INGEST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mq-ingest"


def archive_path() -> Path | None:
    """Where this Spark and this Java's archive lives, or None if no ``java`` is found."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    real = os.path.realpath(java)
    key = f"{pyspark.__version__}|{os.path.dirname(pyspark.__file__)}|{real}|{os.stat(real).st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / "cds" / f"spark-{pyspark.__version__}-{digest}.jsa"


def java_options() -> str:
    """The driver JVM options that map the archive, or ``""`` when there is none yet."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}"
