"""The driver JVM's pre-touched heap (sized from ``spark.driver.memory``, at most that) and collector."""

from __future__ import annotations

import pytest

from ingest.runtime.spark import collector_option, heap_options


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (None, "-Xms512m -XX:+AlwaysPreTouch"),  # Spark's default driver memory, 1g
        ("4g", "-Xms512m -XX:+AlwaysPreTouch"),
        ("2048", "-Xms512m -XX:+AlwaysPreTouch"),  # no unit: MiB, as Spark reads it
        ("384m", "-Xms384m -XX:+AlwaysPreTouch"),  # never an -Xms over the -Xmx Spark sets
        ("300MB", "-Xms300m -XX:+AlwaysPreTouch"),
        ("lots", ""),  # a form this does not read: the JVM's own sizing
    ],
)
def test_the_pretouched_heap_fits_the_driver_memory(monkeypatch, memory, expected):
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    conf = {} if memory is None else {"spark.driver.memory": memory}
    assert heap_options(conf) == expected


def test_the_environment_sets_the_driver_memory_when_the_config_does_not(monkeypatch):
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "256m")
    assert heap_options({}) == "-Xms256m -XX:+AlwaysPreTouch"
    assert heap_options({"spark.driver.memory": "2g"}) == "-Xms512m -XX:+AlwaysPreTouch"


@pytest.mark.parametrize(
    ("conf", "cpus", "expected"),
    [
        ({}, 2, "-XX:+UseSerialGC"),  # Spark's 1g driver on a 2-core machine
        ({"spark.driver.memory": "2g"}, 4, "-XX:+UseSerialGC"),
        ({"spark.driver.memory": "4g"}, 2, ""),  # a larger heap: the JVM's choice (G1)
        ({}, 8, ""),  # more cores: the JVM's choice
        ({"spark.driver.memory": "lots"}, 2, ""),
        ({"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseParallelGC"}, 2, ""),  # theirs is kept
        ({"spark.driver.extraJavaOptions": "-XX:-UseCompressedOops"}, 2, "-XX:+UseSerialGC"),
    ],
)
def test_a_small_driver_gets_the_serial_collector_unless_the_user_picks_one(
    monkeypatch, conf, cpus, expected
):
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    assert collector_option(conf, cpus=cpus) == expected


@pytest.mark.parametrize(
    ("submitted", "master", "on"),
    [
        (True, "", True),  # spark-submit's --master, whatever it is
        (True, "local[2]", True),
        (False, "spark://127.0.0.1:7077", True),  # a cluster's driver started by python -m ingest.run
        (False, "yarn", True),
        (False, "local[2]", False),  # a local run: no port taken
        (False, "local[*]", False),
    ],
)
def test_the_spark_ui_is_on_under_spark_submit_and_on_a_cluster(submitted, master, on):
    from ingest.runtime.spark import ui_enabled

    assert ui_enabled(submitted, master) is on
