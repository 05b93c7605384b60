"""Hadoop's S3A for a job with ``s3a://`` paths: its jars (fetched once into a cache) and its settings.

S3A is ``org.apache.hadoop:hadoop-aws`` at the Hadoop version of the installed PySpark, and the AWS
SDK it needs. The SDK's ``bundle`` is 686 MB; five of its modules (``SDK_MODULES``, 18.5 MB with
their dependencies) serve S3A, so the bundle is excluded (DESIGN.md, "S3 through S3A and delta-rs").
``fetch`` resolves them once with Spark's own Ivy into ``jar_dir()``; a job then puts the resolved
jars in ``spark.jars``: no network at start.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ingest.config.paths import job_dirs
from ingest.errors import redact
from ingest.runtime.cds_archive import cache_dir
from ingest.runtime.spark import launched_by_spark_submit
from ingest.storage.aws import s3a_conf
from ingest.storage.location import scheme

HADOOP_AWS = "org.apache.hadoop:hadoop-aws"
SDK_VERSION = "2.35.4"
"""The SDK ``bundle`` version hadoop-aws 3.5.0 declares; its modules are taken at the same."""
SDK_MODULES = ("s3", "s3-transfer-manager", "sts", "apache-client", "netty-nio-client")
EXCLUDES = "software.amazon.awssdk:bundle"
S3A_SCHEMES = ("s3a", "s3", "s3n")
JAR_KEYS = ("spark.jars", "spark.jars.packages")
UPLOAD_BUFFER = {"spark.hadoop.fs.s3a.fast.upload.buffer": "array"}
"""S3A buffers an upload in the heap, growing with what is written (at most
``fs.s3a.multipart.size`` a block, ``fs.s3a.fast.upload.active.blocks`` blocks a stream). Its
default, ``disk``, goes through Hadoop's ``LocalFileSystem``, which the session's raw local
file system (``ingest.runtime.spark``, ``fs.file.impl``) is not: every S3A write failed with a
``ClassCastException``; and a cluster node may have no disk to spare."""
_MANIFEST = "jars.txt"
_HADOOP_JAR = re.compile(r"^hadoop-client-(?:api|runtime)-(\d[\w.-]*)\.jar$")


def spark_jars_dir() -> Path:
    """The running Spark's ``jars`` directory: ``$SPARK_HOME/jars`` (spark-submit sets it; its
    driver imports pyspark from ``python/lib/pyspark.zip``), else the installed PySpark's."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def hadoop_version() -> str:
    """The Hadoop version of the installed PySpark, read from its ``hadoop-client-*`` jar names."""
    for path in sorted(spark_jars_dir().glob("hadoop-client-*.jar")):
        if found := _HADOOP_JAR.match(path.name):
            return found.group(1)
    raise RuntimeError(f"no hadoop-client jar in {spark_jars_dir()}: cannot tell the Hadoop version")


def hadoop_aws() -> str:
    """The hadoop-aws coordinate at this PySpark's Hadoop version."""
    return f"{HADOOP_AWS}:{hadoop_version()}"


def packages() -> list[str]:
    """The Maven coordinates S3A needs (with ``EXCLUDES`` excluded)."""
    return [hadoop_aws(), *(f"software.amazon.awssdk:{m}:{SDK_VERSION}" for m in SDK_MODULES)]


def jar_dir() -> Path:
    """The Ivy home the jars are resolved into (``spark.jars.ivy``), one per Hadoop version."""
    return cache_dir() / "s3a" / f"hadoop-{hadoop_version()}"


def cached_jars() -> list[str] | None:
    """The resolved jars of a complete ``fetch``, or None (never fetched, or a jar is gone)."""
    manifest = jar_dir() / _MANIFEST
    if not manifest.is_file():
        return None
    jars = [line for line in manifest.read_text().splitlines() if line.strip()]
    return jars if jars and all(os.path.isfile(j) for j in jars) else None


def submit_args() -> list[str]:
    """spark-submit's arguments that resolve S3A's jars (offline from the cache once fetched)."""
    return [
        "--packages",
        ",".join(packages()),
        "--exclude-packages",
        EXCLUDES,
        "--conf",
        f"spark.jars.ivy={jar_dir()}",
    ]


def fetch(quiet: bool = False) -> list[str]:
    """Resolve S3A's jars from Maven Central into ``jar_dir()`` (once: a complete cache is kept).

    spark-submit's own Ivy resolves them while it starts a Python program that does nothing; the
    jars it retrieves are listed in a manifest written last, so an interrupted fetch is redone.
    """
    if (have := cached_jars()) is not None:
        return have
    home = jar_dir()
    shutil.rmtree(home / "jars", ignore_errors=True)  # holds exactly this resolution's jars
    home.mkdir(parents=True, exist_ok=True)
    submit = str(spark_jars_dir().parent / "bin" / "spark-submit")
    with tempfile.TemporaryDirectory() as tmp:
        noop = os.path.join(tmp, "noop.py")
        Path(noop).write_text("")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        done = subprocess.run(
            [submit, "--master", "local[1]", *submit_args(), noop], env=env, capture_output=True, text=True
        )
    jars = sorted(glob.glob(str(home / "jars" / "*.jar")))
    if done.returncode != 0 or not any(Path(j).name.startswith("org.apache.hadoop_hadoop-aws") for j in jars):
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-20:])
        raise RuntimeError(f"could not fetch {hadoop_aws()} (exit {done.returncode}):\n{tail}")
    (home / _MANIFEST).write_text("".join(f"{j}\n" for j in jars))
    return jars


def _named(conf: Mapping[str, str], key: str) -> list[str]:
    return [j.strip() for j in conf.get(key, "").split(",") if j.strip()]


def given(conf: Mapping[str, str]) -> bool:
    """Whether S3A is on a session's classpath without the cache: in pyspark/jars, or named by
    ``conf``'s ``spark.jars`` or ``spark.jars.packages``."""
    if any(spark_jars_dir().glob("hadoop-aws-*.jar")):
        return True
    names = (os.path.basename(j) for j in _named(conf, "spark.jars"))
    if any(n.startswith(("hadoop-aws-", "org.apache.hadoop_hadoop-aws-")) for n in names):
        return True
    return any(p.startswith(HADOOP_AWS + ":") for p in _named(conf, "spark.jars.packages"))


def available(conf: Mapping[str, str]) -> bool:
    """Whether a job with ``conf`` gets S3A: ``given`` it, or the cache holds it."""
    return given(conf) or cached_jars() is not None


def uses_s3(paths: Iterable[str | None]) -> bool:
    """Whether any of ``paths`` is read or written through S3A (``s3a://``, ``s3://``, ``s3n://``)."""
    return any(p and scheme(p) in S3A_SCHEMES for p in paths)


def spark_settings() -> dict[str, str]:
    """S3A's ``spark.hadoop.fs.s3a.*`` settings a session gets: ``s3a_conf()`` (the standard AWS
    settings) and ``UPLOAD_BUFFER``."""
    return {**s3a_conf(), **UPLOAD_BUFFER}


def session_conf(conf: Mapping[str, str], paths: Iterable[str | None], submitted: bool) -> dict[str, str]:
    """``conf`` for a job whose ``paths`` are on S3: S3A's settings (``spark_settings``) under the
    user's ``spark.conf`` (theirs win key by key), and the cached jars added to ``spark.jars``,
    or, not fetched yet, the coordinates to ``spark.jars.packages`` (a network at start). Under
    spark-submit the jars come from its command line (``submit_args``). Unchanged for a job
    without S3 paths. The secrets it adds are masked in logs and errors."""
    out = dict(conf)
    if not uses_s3(paths):
        return out
    ours = spark_settings()
    redact.add(v for k, v in ours.items() if k.endswith(("secret.key", "session.token")))
    out = {**ours, **out}
    if submitted or given(conf):
        return out
    jars = cached_jars()
    if jars is not None:
        out["spark.jars"] = ",".join([*_named(conf, "spark.jars"), *jars])
    else:
        out["spark.jars.packages"] = ",".join([*_named(conf, "spark.jars.packages"), *packages()])
        out.setdefault("spark.jars.excludes", EXCLUDES)
        out.setdefault("spark.jars.ivy", str(jar_dir()))
    return out


def job_conf(cfg: Any, conf: Mapping[str, str]) -> dict[str, str]:
    """``session_conf`` for the job ``cfg``: its checkpoint, state, staging and sink paths."""
    return session_conf(conf, (path for _, path, _ in job_dirs(cfg)), launched_by_spark_submit())


def missing(cfg: Any, conf: Mapping[str, str], submitted: bool) -> str | None:
    """A warning naming the first key on S3 and the jar, if the job's session (started with
    ``conf``) has no S3A; None if it has, or the job has no S3 path. Under spark-submit the cache
    does not count: only what its command line put on the classpath."""
    on_s3 = [(key, path) for key, path, _ in job_dirs(cfg) if uses_s3([path])]
    if not on_s3 or (given(conf) if submitted else available(conf)):
        return None
    key, path = on_s3[0]
    jar = f"hadoop-aws-{hadoop_version()}.jar"
    if submitted:
        how = "add to spark-submit: " + " ".join(submit_args()[:4])
    else:
        how = (
            f"fetch it once with `python -m ingest.runtime.s3a` (make s3a-jars) into {jar_dir()}; "
            "without it the job resolves it from Maven Central at start"
        )
    return (
        f"{key}: {path} is read through Hadoop's S3A, and {jar} ({hadoop_aws()}) is not in "
        f"pyspark/jars, spark.jars or the jar cache: {how}"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m ingest.runtime.s3a``: fetch the jars into the cache; print where they are."""
    del argv
    try:
        jars = fetch()
    except Exception as err:
        print(f"error: S3A jars: {err}", file=sys.stderr)
        return 1
    size = sum(os.path.getsize(j) for j in jars) / 2**20
    print(f"S3A jars: {len(jars)} jars, {size:.1f} MiB in {jar_dir() / 'jars'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
