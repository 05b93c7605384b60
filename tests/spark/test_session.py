"""The session the job makes: a resident driver heap, its collector and JIT directive, local files written
with few forks."""

from __future__ import annotations

import psutil
import pytest

from ingest.batch.query import CHECKPOINT_MANAGER as MANAGER
from ingest.batch.query import RENAME_BASED_MANAGER as RENAME_BASED
from ingest.batch.query import use_rename_checkpoints
from ingest.config import parse_config
from ingest.pipeline import Job
from ingest.runtime import jit
from ingest.runtime.spark import collector_option, make_session, usable_cpus
from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir

pytestmark = pytest.mark.spark


def test_the_driver_heap_is_resident_from_the_start(spark):
    mx = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    args = [str(a) for a in mx.getRuntimeMXBean().getInputArguments()]
    assert "-Xms512m" in args and "-XX:+AlwaysPreTouch" in args, args
    heap = mx.getMemoryMXBean().getHeapMemoryUsage()
    # The serial collector counts one survivor space out of "committed"; the heap as set is "init".
    assert heap.getInit() == 512 * 2**20 and heap.getCommitted() >= 480 * 2**20
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    assert psutil.Process(pid).memory_info().rss >= 512 * 2**20  # touched, not only reserved


def test_the_driver_runs_the_collector_chosen_for_its_size(spark):
    """Spark's 1g driver on at most 4 CPUs (this project's machine) runs the serial collector;
    on a larger machine the JVM's own choice. Either way the JVM runs what ``collector_option`` says."""
    mx = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    args = [str(a) for a in mx.getRuntimeMXBean().getInputArguments()]
    collectors = {str(g.getName()) for g in mx.getGarbageCollectorMXBeans()}
    if collector_option({}):
        assert "-XX:+UseSerialGC" in args and collectors == {"Copy", "MarkSweepCompact"}, (args, collectors)
    else:
        assert not any(a.endswith("GC") and a.startswith("-XX:+Use") for a in args), args
        assert "Copy" not in collectors, collectors


def test_the_local_driver_leaves_spark_planning_code_to_c1_on_a_small_machine(spark):
    """On at most 4 CPUs the session's JVM holds the directive, once, however often a session is made."""
    make_session(master="local[2]", app_name="mq-ingest-tests", conf={}, log_level="ERROR")  # reused
    printed = jit._diagnostic_command(spark, "compilerDirectivesPrint")
    if usable_cpus() <= jit.MAX_CPUS:
        assert printed.count("org/apache/xbean/*.*") == 1, printed
        assert "c2" in printed and "Exclude:true" in printed.replace(" ", ""), printed
    else:
        assert "org/apache/xbean" not in printed, printed


def test_local_files_are_written_without_checksum_files_through_renames(spark, tmp_path):
    """Hadoop's local file system forks ``chmod`` per file it creates (no native library), and
    ``FileContext`` forks ``readlink`` per path: the session writes local files without ``.crc``
    files and a local checkpoint through the rename-based manager (``ingest.runtime.spark``,
    ``ingest.batch.query``)."""
    assert spark.sparkContext._jsc.hadoopConfiguration().get("fs.file.impl") == (
        "org.apache.hadoop.fs.RawLocalFileSystem"
    )
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(50)])
    managers = []  # the setting as each batch line is printed (the session's is put back after)
    job = Job(
        parse_config(job_config(tmp_path)), echo=lambda _: managers.append(spark.conf.get(MANAGER, None))
    )
    assert job.run() == 0
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(50))
    assert q.count()["total"] == 0
    assert RENAME_BASED in managers
    commits = [p for p in tmp_path.rglob("commits/*") if p.name.isdigit()]
    assert commits, "the checkpoint has its commits"
    assert [str(p) for p in tmp_path.rglob("*.crc")] == []


def test_the_rename_based_manager_is_for_local_checkpoints_and_never_over_the_users_choice(spark):
    before = spark.conf.get(MANAGER, None)
    try:
        spark.conf.unset(MANAGER)
        use_rename_checkpoints(spark, "hdfs://nn:8020/ckpt")
        assert spark.conf.get(MANAGER, None) is None
        use_rename_checkpoints(spark, "/var/lib/job/ckpt")
        assert spark.conf.get(MANAGER) == RENAME_BASED
        use_rename_checkpoints(spark, "s3a://bucket/ckpt")  # ours, set for an earlier local job
        assert spark.conf.get(MANAGER, None) is None
        spark.conf.set(MANAGER, "com.example.TheirManager")
        use_rename_checkpoints(spark, "file:///var/lib/job/ckpt")
        assert spark.conf.get(MANAGER) == "com.example.TheirManager"
    finally:
        if before is None:
            spark.conf.unset(MANAGER)
        else:
            spark.conf.set(MANAGER, before)


def test_a_sinks_jar_the_running_session_lacks_is_a_warning_naming_the_sink_and_the_jar(
    spark, tmp_path, caplog
):
    """A session already running keeps its classpath: a JDBC sink's driver jar added by the config
    then never reaches it, and the check says so before a batch fails on a missing class."""
    from ingest.batch.check import check_job

    jdbc = {"type": "jdbc", "name": "db", "url": "jdbc:postgresql://127.0.0.1:1/x", "table": "t"}
    jdbc |= {"driver": "org.example.Driver", "jars": ["/opt/drivers/example-jdbc-1.0.jar"]}
    sinks = [jdbc, {"type": "files", "name": "out", "path": str(tmp_path / "out")}]
    cfg = parse_config(job_config(tmp_path, sinks=sinks))
    with caplog.at_level("WARNING", logger="ingest.batch.check"):
        check_job(cfg, spark)
    [warning] = [r.getMessage() for r in caplog.records if r.name == "ingest.batch.check"]
    assert warning.startswith(
        "sinks.db: the Spark session started without /opt/drivers/example-jdbc-1.0.jar"
    ), warning
