"""S3A for a job with s3a:// paths: its settings under the user's spark.conf, its jars, check's warning.

No Spark and no server: the settings are read from the standard AWS environment variables, and the
jar cache is a temporary directory (``MQ_INGEST_CACHE``) holding a manifest of stand-in jars.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.config import parse_config
from ingest.errors import redact
from ingest.runtime import s3a
from tests.support.jobs import job_config
from tests.support.s3_server import aws_env

P = "spark.hadoop.fs.s3a."
SECRET = "s3a-test-secret-value"


@pytest.fixture
def aws(monkeypatch, tmp_path):
    """The standard settings of a local S3-compatible server, and an empty jar cache."""
    env = aws_env("http://127.0.0.1:9000") | {"AWS_SECRET_ACCESS_KEY": SECRET}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("MQ_INGEST_CACHE", str(tmp_path / "cache"))
    return env


def fetched(tmp_path: Path) -> list[str]:
    """Stand-in jars listed in the cache's manifest, as ``s3a.fetch`` leaves them."""
    jars = s3a.jar_dir() / "jars"
    jars.mkdir(parents=True)
    names = [jars / "org.apache.hadoop_hadoop-aws-3.5.0.jar", jars / "software.amazon.awssdk_s3-2.35.4.jar"]
    for jar in names:
        jar.write_bytes(b"PK")
    (s3a.jar_dir() / "jars.txt").write_text("".join(f"{j}\n" for j in names))
    return [str(j) for j in names]


def test_hadoop_version_is_read_from_pysparks_jars():
    version = s3a.hadoop_version()
    assert any(s3a.spark_jars_dir().glob(f"hadoop-client-api-{version}.jar"))
    assert s3a.packages()[0] == f"org.apache.hadoop:hadoop-aws:{version}"


def test_s3_settings_go_under_the_users_spark_conf_key_by_key(aws, tmp_path):
    jars = fetched(tmp_path)
    users = {P + "endpoint": "http://minio.internal:9000", "spark.jars": "/opt/own.jar"}

    conf = s3a.session_conf(users, ["/local/checkpoint", "s3a://lake/jobs/orders"], submitted=False)

    assert conf[P + "endpoint"] == "http://minio.internal:9000"  # the user's wins
    assert conf[P + "path.style.access"] == "true"  # the standard settings fill the rest
    assert conf[P + "endpoint.region"] == "us-east-1"
    assert conf[P + "access.key"] == "testing"
    assert conf[P + "secret.key"] == SECRET
    assert conf["spark.jars"].split(",") == ["/opt/own.jar", *jars]  # the cache, offline
    assert "spark.jars.packages" not in conf
    assert redact(f"key {SECRET}") == "key ***"  # masked in every log line and error from now on


def test_a_job_without_s3_paths_is_left_alone(aws, tmp_path):
    fetched(tmp_path)
    conf = {"spark.jars": "/opt/own.jar"}
    assert s3a.session_conf(conf, ["/data/checkpoint", "gs://b/out", None], submitted=False) == conf


def test_without_the_cache_the_coordinates_are_resolved_at_start(aws):
    conf = s3a.session_conf({}, ["s3://lake/out"], submitted=False)

    assert conf["spark.jars.packages"].split(",")[0] == s3a.hadoop_aws()
    assert conf["spark.jars.excludes"] == "software.amazon.awssdk:bundle"
    assert conf["spark.jars.ivy"] == str(s3a.jar_dir())
    assert "spark.jars" not in conf


def test_jars_the_user_names_or_spark_submit_gives_are_not_added_again(aws, tmp_path):
    fetched(tmp_path)
    users = {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0"}
    assert s3a.session_conf(users, ["s3a://lake/x"], submitted=False).keys() == {
        *users,
        *(k for k in s3a.session_conf({}, ["s3a://lake/x"], submitted=True) if k.startswith(P)),
    }
    assert "spark.jars" not in s3a.session_conf({}, ["s3a://lake/x"], submitted=True)


def test_check_warns_naming_the_key_and_the_jar_when_s3a_is_missing(aws, tmp_path):
    cfg = parse_config(job_config(tmp_path, checkpoint="s3a://lake/jobs/orders/checkpoint"))

    warning = s3a.missing(cfg, {}, submitted=False)

    assert warning is not None
    assert warning.startswith("checkpoint: s3a://lake/jobs/orders/checkpoint is read through Hadoop's S3A")
    assert f"hadoop-aws-{s3a.hadoop_version()}.jar" in warning
    assert "python -m ingest.runtime.s3a" in warning
    under_submit = s3a.missing(cfg, {}, submitted=True)
    assert under_submit is not None and "--packages" in under_submit


def test_check_is_quiet_when_s3a_is_there_or_unneeded(aws, tmp_path):
    cfg = parse_config(job_config(tmp_path, checkpoint="s3a://lake/jobs/orders/checkpoint"))
    assert s3a.missing(cfg, {"spark.jars": "/x/hadoop-aws-3.5.0.jar"}, submitted=True) is None
    assert s3a.missing(parse_config(job_config(tmp_path)), {}, submitted=False) is None
    fetched(tmp_path)
    assert s3a.missing(cfg, {}, submitted=False) is None
    assert s3a.missing(cfg, {}, submitted=True) is not None  # the cache is not spark-submit's classpath


def test_the_bundles_submit_command_carries_s3a_resolved_from_the_cache(aws, tmp_path):
    from ingest.tools.bundle import submit_command

    plain = submit_command(tmp_path / "env.tar.gz", tmp_path / "code.zip", "job.yaml")
    cmd = submit_command(tmp_path / "env.tar.gz", tmp_path / "code.zip", "job.yaml", s3a=True)

    assert "--packages" not in plain
    packages = cmd[cmd.index("--packages") + 1].split(",")
    assert packages[0] == s3a.hadoop_aws() and "software.amazon.awssdk:s3:2.35.4" in packages
    assert cmd[cmd.index("--exclude-packages") + 1] == "software.amazon.awssdk:bundle"
    assert f"spark.jars.ivy={s3a.jar_dir()}" in cmd
    assert cmd[-3:] == [cmd[-3], "--config", "job.yaml"]  # before the application
