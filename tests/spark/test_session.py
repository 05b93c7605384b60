"""The driver JVM this process launches: its heap is resident from the start (``ingest.spark``)."""

from __future__ import annotations

import psutil
import pytest

pytestmark = pytest.mark.spark


def test_the_driver_heap_is_resident_from_the_start(spark):
    mx = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    args = [str(a) for a in mx.getRuntimeMXBean().getInputArguments()]
    assert "-Xms512m" in args and "-XX:+AlwaysPreTouch" in args, args
    assert mx.getMemoryMXBean().getHeapMemoryUsage().getCommitted() >= 512 * 2**20
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    assert psutil.Process(pid).memory_info().rss >= 512 * 2**20  # touched, not only reserved
