"""The driver JVM's settings go in a private properties file that Java reads back exactly, not on argv."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from ingest.runtime.launch import settings_file, warn_of_visible_secrets

READ_BACK = """
import java.io.*; import java.util.*; import java.nio.charset.StandardCharsets;
public class ReadBack { public static void main(String[] a) throws Exception {
  Properties p = new Properties();
  p.load(new InputStreamReader(new FileInputStream(a[0]), StandardCharsets.UTF_8));
  for (String k : new TreeSet<>(p.stringPropertyNames()))
    System.out.print(k + "\\0" + p.getProperty(k) + "\\0");
} }
"""
"""What Spark does with a ``--properties-file`` (``Utils.getPropertiesFromFile``), but its trim."""


def _file_flag(args: str) -> str:
    words = shlex.split(args)
    return words[words.index("--properties-file") + 1]


def test_the_file_is_private_and_gone_after_the_block_and_java_reads_every_value_back(tmp_path, monkeypatch):
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    conf = {"spark.hadoop.fs.s3a.secret.key": "pw=1:2 #x!\\y\né😀", "a b=c": "v", "spark.x": "x" * 200_000}
    with settings_file(conf) as path:
        assert _file_flag(os.environ["PYSPARK_SUBMIT_ARGS"]) == path
        assert os.environ["PYSPARK_SUBMIT_ARGS"].endswith("--load-spark-defaults pyspark-shell")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        (tmp_path / "ReadBack.java").write_text(READ_BACK)
        java = subprocess.run(
            ["java", str(tmp_path / "ReadBack.java"), path], capture_output=True, timeout=120, check=True
        )
    words = java.stdout.decode("utf-8").split("\0")[:-1]
    assert dict(zip(words[::2], words[1::2], strict=True)) == conf
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    assert "PYSPARK_SUBMIT_ARGS" not in os.environ


def test_a_properties_file_the_user_named_is_read_under_the_jobs_settings(tmp_path, monkeypatch):
    theirs = tmp_path / "their.properties"
    theirs.write_text("spark.theirs=1\nspark.both=theirs\n")
    given = f"--packages a:b:1 --properties-file {theirs} pyspark-shell"
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", given)
    with settings_file({"spark.both": "ours"}) as path:
        args = os.environ["PYSPARK_SUBMIT_ARGS"]
        assert _file_flag(args) == path and str(theirs) not in args and "--load-spark-defaults" not in args
        assert args.endswith("--packages a:b:1 pyspark-shell")
        lines = Path(path).read_text().split()
    assert lines == ["spark.theirs=1", "spark.both=theirs", "spark.both=ours"]  # the last line of a key wins
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == given


def test_the_variable_is_put_back_when_the_launch_fails(monkeypatch):
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    with pytest.raises(RuntimeError), settings_file({"k": "v"}):
        raise RuntimeError("the JVM did not start")
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == "pyspark-shell"


def test_a_secret_in_the_drivers_java_options_is_a_warning_naming_the_key(caplog):
    from ingest.errors import redact

    redact.add(["proxy-pw-1234"])
    conf = {"spark.driver.extraJavaOptions": "-Dhttp.proxyPassword=proxy-pw-1234", "spark.x": "proxy-pw-1234"}
    with caplog.at_level("WARNING", logger="ingest.runtime.launch"):
        warn_of_visible_secrets(conf)
    [record] = caplog.records
    assert "spark.conf.spark.driver.extraJavaOptions holds a secret" in record.getMessage()
    assert "proxy-pw-1234" not in caplog.text
