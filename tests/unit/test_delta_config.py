"""The Delta sink's config: checks, the default app id, masked secrets, Flink SQL's 'delta' connector."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ingest.config import parse_config
from ingest.config.registry import build_sink
from ingest.errors import ConfigError, redact
from ingest.flinksql import ScriptError, load_sql_text
from sinks.delta.config import DeltaSinkConfig
from tests.support.jobconfig import fake_source, job_config


def delta(**over) -> dict:
    return {"type": "delta", "name": "lake", "path": "lake"} | over  # validated only, never opened


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "merge"}, "mode merge needs merge_keys"),
        ({"merge_keys": ["id"]}, "merge_keys go with mode merge"),
        ({"partition_by": ["a", "a"]}, "partition_by names a column twice"),
        ({"target_file_size": "1KiB"}, "target_file_size"),
        (
            {"mode": "merge", "merge_keys": ["id"], "configuration": {"delta.appendOnly": "true"}},
            "appendOnly",
        ),
        ({"vacuum_retention": "-1s"}, "vacuum_retention"),
        ({"partitionBy": ["a"]}, "partitionBy"),
    ],
)
def test_bad_options_are_refused_naming_them(options, message):
    with pytest.raises(ValidationError, match=message):
        DeltaSinkConfig.model_validate(delta(**options))


def test_the_app_id_defaults_to_the_job_and_sink_names(tmp_path):
    cfg = parse_config(
        job_config(fake_source(tmp_path), tmp_path, [delta(), delta(name="other", app_id="mine")])
    )
    assert [s.app_id for s in cfg.sinks] == ["t-job.lake", "mine"]


def test_storage_credentials_are_masked_and_a_delta_dead_letter_sink_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LAKE_SECRET", "lake-secret-from-env")
    options = {"AWS_SECRET_ACCESS_KEY": "${env:LAKE_SECRET}", "AZURE_STORAGE_SAS_TOKEN": "sas-written-inline"}
    parse_config(job_config(fake_source(tmp_path), tmp_path, [delta(storage_options=options)]))
    assert redact("lake-secret-from-env and sas-written-inline") == "*** and ***"
    bad = job_config(
        fake_source(tmp_path), tmp_path, [delta(), delta(name="dlq")], dead_letter={"sink": "dlq"}
    )
    with pytest.raises(ConfigError, match=r"dead_letter\.sink: a delta sink"):
        parse_config(bad)


def test_a_plain_directory_with_files_is_refused_naming_the_path_key(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.csv").write_text("1\n")
    with pytest.raises(ConfigError, match=r"config key sinks\.lake\.path: .* no _delta_log"):
        build_sink(DeltaSinkConfig.model_validate(delta(path=str(tmp_path / "plain"))))
    (tmp_path / "empty").mkdir()
    build_sink(DeltaSinkConfig.model_validate(delta(path=str(tmp_path / "empty"))))  # a new table goes there


SCRIPT = """
CREATE TABLE gen (id BIGINT, day STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TABLE lake (id BIGINT, day STRING) WITH ('connector' = 'delta', {options});
INSERT INTO lake SELECT id, day FROM gen;
"""


def test_flink_sql_delta_connector_becomes_a_delta_sink():
    options = "'table-path' = 's3://bucket/lake', 'partition_by' = 'day', 'storage_options.x' = 'y'"
    with pytest.raises(ScriptError, match=r"storage_options\.x"):
        load_sql_text(SCRIPT.format(options=options), "job.sql", {})
    options = (
        "'table-path' = 'file:///data/lake', 'partition_by' = 'day', 'mode' = 'merge', 'merge_keys' = 'id'"
    )
    sink = load_sql_text(SCRIPT.format(options=options), "job.sql", {}).config["sinks"][0]
    assert sink | {"transform": None} == {
        "name": "lake",
        "type": "delta",
        "path": "file:///data/lake",
        "partition_by": ["day"],
        "mode": "merge",
        "merge_keys": ["id"],
        "include_meta": False,
        "transform": None,
    }
    with pytest.raises(ScriptError, match="'table-name' needs a catalog"):
        load_sql_text(SCRIPT.format(options="'path' = '/x', 'table-name' = 'db.t'"), "job.sql", {})
    with pytest.raises(ScriptError, match="needs 'table-path'"):
        load_sql_text(SCRIPT.format(options="'mode' = 'append'"), "job.sql", {})
