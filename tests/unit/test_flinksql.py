"""Flink SQL scripts → job configs, without Spark: types, options, placeholders, refusals with positions."""

from __future__ import annotations

import pytest
import yaml

from ingest.config import parse_config
from ingest.flinksql import ScriptError, load_sql, load_sql_text
from tests.support.jobs import run_cli

MNS = """CREATE TEMPORARY TABLE src (
  `userId` BIGINT,
  `action` STRING,
  `ts` TIMESTAMP(3)
) WITH (
  'connector' = 'mns',
  'endpoint' = 'http://127.0.0.1:1',
  'queueName' = 'q',
  'accessKeyId' = '${secret_values.ak_id}',
  'accessKeySecret' = '${secret_values.ak_secret}',
  'format' = 'json',
  'batchSize' = '16'
);
"""
PRINT = "CREATE TABLE out (`userId` BIGINT, `action` STRING) WITH ('connector' = 'print');\n"
TAIL = PRINT + "INSERT INTO out SELECT userId, action FROM src;"


def job(text: str, **settings):
    return load_sql_text(text, "job.sql", settings).config


def refused(text: str) -> str:
    with pytest.raises(ScriptError) as err:
        load_sql_text(text, "job.sql", {})
    return str(err.value)


def test_reference_example_becomes_the_yaml_job(monkeypatch):
    monkeypatch.setenv("ak_id", "AK")
    monkeypatch.setenv("ak_secret", "SK-very-secret")
    cfg = job(MNS + PRINT + "INSERT INTO out SELECT userId, action FROM src WHERE action LIKE 'c%';")
    assert cfg["schema"] == "`userId` BIGINT, `action` STRING, `ts` TIMESTAMP"
    source = cfg["sources"][0]
    assert source | {"type": "mns", "name": "src", "queueName": "q", "batchSize": "16"} == source
    assert source["accessKeySecret"] == "${env:ak_secret}"
    sink = cfg["sinks"][0]
    assert (sink["type"], sink["name"]) == ("console", "out")
    assert sink["transform"] == (
        "SELECT CAST(`userId` AS BIGINT) AS `userId`, CAST(`action` AS STRING) AS `action` "
        "FROM `source` AS `src` WHERE `action` LIKE 'c%'"
    )
    assert (cfg["checkpoint"], cfg["staging"]) == ("data/job/checkpoint", {"dir": "data/job/staging"})
    valid = parse_config(cfg, "job.sql")
    assert valid.sources[0].access_key_secret.get_secret_value() == "SK-very-secret"
    assert valid.sources[0].batch_size == 16 and valid.sinks[0].transform == sink["transform"]


@pytest.mark.parametrize(
    ("flink", "spark"),
    [
        ("VARCHAR", "STRING"),
        ("VARCHAR(20)", "STRING"),
        ("STRING", "STRING"),
        ("BIGINT", "BIGINT"),
        ("INT", "INT"),
        ("INTEGER", "INT"),
        ("DOUBLE", "DOUBLE"),
        ("DECIMAL(12, 3)", "DECIMAL(12, 3)"),
        ("DECIMAL", "DECIMAL(10, 0)"),
        ("BOOLEAN", "BOOLEAN"),
        ("TIMESTAMP(3)", "TIMESTAMP"),
        ("TIMESTAMP_LTZ(3)", "TIMESTAMP"),
        ("VARBINARY", "BINARY"),
        ("BYTES", "BINARY"),
        ("ARRAY<BIGINT>", "ARRAY<BIGINT>"),
        ("MAP<STRING, DOUBLE>", "MAP<STRING, DOUBLE>"),
        ("ROW<a INT, `b c` ARRAY<STRING>>", "STRUCT<`a`: INT, `b c`: ARRAY<STRING>>"),
    ],
)
def test_column_types_map_to_spark(flink, spark):
    text = f"CREATE TABLE g (c {flink}) WITH ('connector' = 'datagen');\n" + (
        f"CREATE TABLE o (c {flink}) WITH ('connector' = 'print');\nINSERT INTO o SELECT c FROM g;"
    )
    cfg = job(text)
    assert cfg["schema"] == f"`c` {spark}"
    assert cfg["sinks"][0]["transform"].startswith(f"SELECT CAST(`c` AS {spark}) AS `c`")


def test_statement_set_writes_several_sinks_each_with_its_select():
    text = (
        "CREATE TABLE g (id BIGINT, name STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '10',"
        " 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '10');\n"
        "CREATE TABLE files (id BIGINT, n STRING) WITH ('connector' = 'filesystem', 'path' = 'file:///tmp/x',"
        " 'format' = 'json');\n"
        "CREATE TABLE p (name STRING, id BIGINT) WITH ('connector' = 'print');\n"
        "EXECUTE STATEMENT SET BEGIN\n"
        "INSERT INTO files SELECT * FROM g;\n"
        "INSERT INTO p (id) SELECT g.id FROM g WHERE g.id > 5;\n"
        "END;"
    )
    cfg = job(text)
    files, printed = cfg["sinks"]
    assert (files["type"], files["path"], files["format"], files["include_meta"]) == (
        "files",
        "/tmp/x",
        "jsonl",
        False,
    )
    assert files["transform"] == (
        "SELECT CAST(`id` AS BIGINT) AS `id`, CAST(`name` AS STRING) AS `n`, `_meta` FROM `source` AS `g`"
    )
    assert printed["transform"] == (
        "SELECT CAST(NULL AS STRING) AS `name`, CAST(`g`.`id` AS BIGINT) AS `id` FROM `source` AS `g` "
        "WHERE `g`.`id` > 5"
    )
    source = cfg["sources"][0]
    assert source["fields"] == {"id": {"kind": "sequence", "start": "1", "end": "10"}}
    assert parse_config(cfg).sources[0].fields["id"].end == 10
    # The older form of a statement set says the same.
    older = text.replace("EXECUTE STATEMENT SET BEGIN\n", "BEGIN STATEMENT SET;\n")
    assert job(older)["sinks"] == cfg["sinks"]


def test_connector_option_names_of_the_references_map_to_the_typed_configs():
    mq = (
        "CREATE TABLE g (mess VARBINARY) WITH ('connector' = 'datagen');\n"
        "CREATE TABLE mq_sink (mess VARBINARY) WITH ('connector'='mq', 'endpoint'='127.0.0.1:9876',"
        " 'accessId'='id', 'accessKey'='${secret_values.k}', 'topic'='t', 'producerGroup'='G', 'tag'='A',"
        " 'retryTimes'='5', 'sleepTimeMs'='500', 'property_columns' = 'a, b');\n"
        "INSERT INTO mq_sink SELECT mess FROM g;"
    )
    sink = job(mq)["sinks"][0]
    assert (
        sink | {"type": "rocketmq", "payload": "binary", "retryTimes": "5", "property_columns": ["a", "b"]}
        == sink
    )
    sqs = (
        "CREATE TABLE s (a STRING) WITH ('connector' = 'sqs', 'sqs.url' = 'http://127.0.0.1:1/1/q',"
        " 'tasks.max' = '3', 'sqs.region' = 'eu-west-1');\n"
        "CREATE TABLE t (a STRING) WITH ('connector' = 'sqs', 'sqsUrl' = 'http://127.0.0.1:1/1/t',"
        " 'aws.region' = 'eu-west-1', 'format' = 'csv', 'maxBatchSize' = '5');\n"
        "INSERT INTO t SELECT a FROM s;"
    )
    cfg = parse_config(job(sqs))
    assert (cfg.sources[0].receivers, cfg.sources[0].region) == (3, "eu-west-1")
    assert (cfg.sinks[0].body_format, cfg.sinks[0].max_batch_size) == ("csv", 5)
    mns_sink = (
        "CREATE TABLE s (a STRING) WITH ('connector' = 'sqs', 'sqs.url' = 'http://127.0.0.1:1/1/q');\n"
        "CREATE TABLE m (a STRING) WITH ('connector' = 'mns', 'endpoint' = 'http://127.0.0.1:2',"
        " 'region' = 'cn-hangzhou', 'queueName' = 'out', 'accessKeyId' = 'id', 'accessKeySecret' = 'sk',"
        " 'format' = 'raw', 'body_column' = 'a');\n"
        "INSERT INTO m SELECT a FROM s;"
    )
    sink = parse_config(job(mns_sink)).sinks[0]
    assert (sink.type, sink.queue_name, sink.body_format, sink.body_column) == ("mns", "out", "raw", "a")


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        (
            MNS.replace("'batchSize' = '16'", "'batchSize' = '99'") + TAIL,
            "line 12, column 3",
            "option 'batchSize'",
        ),
        (MNS.replace("'format'", "'formatt'") + TAIL, "line 11, column 3", "did you mean 'format'?"),
        (MNS.replace("'mns'", "'kafka'") + TAIL, "line 6, column 3", "connector 'kafka' cannot be a source"),
        (
            MNS.replace("`ts` TIMESTAMP(3)", "`ts` TIME") + TAIL,
            "line 4, column 3",
            "type TIME is not supported",
        ),
        (
            MNS
            + PRINT
            + "INSERT INTO out SELECT a.userId, b.action FROM src a JOIN src b ON a.userId = b.userId;",
            "line 15",
            "joins are not supported",
        ),
        (
            MNS + PRINT + "INSERT INTO out SELECT userId, COUNT(*) FROM src GROUP BY userId;",
            "line 15",
            "GROUP BY",
        ),
        (
            MNS + PRINT + "INSERT INTO out SELECT userId FROM src;",
            "line 15",
            "gives 1 value(s) for 2 column(s)",
        ),
        (
            MNS + PRINT + "INSERT INTO nowhere SELECT userId, action FROM src;",
            "line 15",
            "table nowhere is not created",
        ),
        (
            MNS + PRINT + "SET 'parallelism.default' = '2';\nINSERT INTO out SELECT userId, action FROM src;",
            "line 15, column 1",
            "SET statements are not supported",
        ),
        (MNS + TAIL.replace("src;", "src WHERE;"), "line 15", "Required keyword"),
        (
            MNS + "CREATE TABLE out (a INT, WATERMARK FOR a AS a) WITH ('connector' = 'print');",
            "line 14, column 26",
            "watermarks (WATERMARK FOR) are not supported",
        ),
    ],
)
def test_what_cannot_run_is_refused_with_line_and_column(text, where, what):
    message = refused(text)
    assert message.startswith(f"job.sql, {where}"), message
    assert what in message


def test_an_unclosed_string_is_placed_where_it_starts():
    message = refused(MNS + PRINT + "INSERT INTO out SELECT userId, action FROM src\nWHERE action = 'c;")
    assert message == "job.sql, line 16, column 16: the string is not closed (no ')", message


def test_inserts_reading_two_tables_are_refused_at_the_second_one():
    text = MNS + MNS.replace("src", "other") + PRINT + PRINT.replace("out", "out2")
    text += (
        "INSERT INTO out SELECT userId, action FROM src;\nINSERT INTO out2 SELECT userId, action FROM other;"
    )
    message = refused(text)
    assert message.startswith("job.sql, line 30, column 45: INSERT INTO out2 reads other, but"), message
    assert "INSERT INTO out on line 29 reads src; a job reads one source table" in message


def test_a_table_hint_is_refused_not_dropped():
    message = refused(
        MNS + PRINT + "INSERT INTO out SELECT userId, action\nFROM src /*+ OPTIONS('batchSize'='1') */;"
    )
    assert message.startswith("job.sql, line 16, column 10: hints (/*+ OPTIONS(…) */) are not supported"), (
        message
    )
    assert "give the options in the table's WITH" in message


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        (
            MNS + PRINT + "INSERT INTO out SELECT userId, action\n"
            "FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '1' MINUTES));",
            "line 16, column 12",
            "windows (TUMBLE) are not supported",
        ),
        (
            MNS + PRINT + "INSERT INTO out SELECT userId, action\n"
            "FROM TABLE(HOP(TABLE src, DESCRIPTOR(ts), INTERVAL '1' MINUTES, INTERVAL '5' MINUTES));",
            "line 16, column 12",
            "windows (HOP) are not supported",
        ),
        (
            MNS.replace("`ts` TIMESTAMP(3)", "`ts` TIMESTAMP(3) METADATA FROM 'timestamp'") + TAIL,
            "line 4, column 21",
            "metadata columns (METADATA) are not supported",
        ),
        (
            MNS.replace("`ts` TIMESTAMP(3)", "`ts` MULTISET<STRING>") + TAIL,
            "line 4, column 8",
            "type MULTISET is not supported",
        ),
        (
            MNS.replace("`ts` TIMESTAMP(3)", "`ts` TIMESTAMP(3) NOT NULL") + TAIL,
            "line 4, column 3",
            "column ts: column constraints are not supported",
        ),
    ],
)
def test_flink_constructs_sqlglot_cannot_parse_are_named(text, where, what):
    message = refused(text)
    assert message.startswith(f"job.sql, {where}: "), message
    assert what in message and "Expecting" not in message


@pytest.mark.parametrize(
    ("option", "settings", "policy"),
    [
        ("", {}, "fail"),  # Flink fails the job on a body it cannot parse
        (",\n  'json.ignore-parse-errors' = 'false'", {}, "fail"),
        (",\n  'json.ignore-parse-errors' = 'false'", {"dead_letter": {"path": "dl"}}, "dead_letter"),
        ("", {"dead_letter": {"path": "dl"}}, "dead_letter"),
        (",\n  'json.ignore-parse-errors' = 'true'", {}, "skip"),
        (",\n  'json.ignore-parse-errors' = 'true'", {"dead_letter": {"path": "dl"}}, "skip"),
        (",\n  'on_bad_message' = 'skip'", {}, "skip"),
    ],
)
def test_ignore_parse_errors_is_what_skips_bad_bodies(monkeypatch, option, settings, policy):
    monkeypatch.setenv("ak_id", "AK")
    monkeypatch.setenv("ak_secret", "SK")
    text = MNS.replace("'batchSize' = '16'", "'batchSize' = '16'" + option) + TAIL
    assert parse_config(job(text, **settings), "job.sql").sources[0].on_bad_message == policy


def test_print_config_validates_the_whole_job_first(tmp_path):
    script = tmp_path / "job.sql"
    script.write_text(MNS + TAIL)
    (tmp_path / "job.settings.yaml").write_text("trigger: {mode: bogus}\n")
    done = run_cli(["--sql", str(script), "--print-config"], timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert f"error: {script}: trigger.mode: Input should be" in done.stderr


def test_print_config_gives_yaml_that_runs_the_same_job_with_secrets_masked(tmp_path):
    script = tmp_path / "job.sql"
    script.write_text(
        MNS.replace("${secret_values.ak_id}", "LTAI-literal").replace(
            "${secret_values.ak_secret}", "literal-sk"
        )
        + PRINT
        + "INSERT INTO out SELECT userId, action FROM src;"
    )
    work = tmp_path / "w"
    (tmp_path / "job.settings.yaml").write_text(
        f"name: from-sql\nwork_dir: {work}\n"
        "trigger: {mode: available_now}\nstaging: {roll_messages: 10}\n"
    )
    done = run_cli(["--sql", str(script), "--print-config"], timeout=60)
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout)
    assert "literal-sk" not in done.stdout + done.stderr
    assert printed["sources"][0]["accessKeySecret"] == "******"
    assert printed["sources"][0]["accessKeyId"] == "LTAI-literal"
    assert (printed["name"], printed["checkpoint"], printed["trigger"]) == (
        "from-sql",
        f"{work}/checkpoint",
        {"mode": "available_now"},
    )
    assert printed["staging"] == {"dir": f"{work}/staging", "roll_messages": 10}
    assert load_sql(script).config["sources"][0]["accessKeySecret"] == "literal-sk"


def test_cli_refuses_a_bad_script_with_exit_2_and_the_position(tmp_path):
    script = tmp_path / "bad.sql"
    script.write_text(MNS + PRINT + "INSERT INTO out\nSELECT userId, action FROM src ORDER BY userId;")
    done = run_cli(["--sql", str(script)], timeout=60)
    assert done.returncode == 2
    assert f"error: {script}, line 16, column " in done.stderr
    assert "ORDER BY are not supported" in done.stderr


def test_a_script_of_create_table_only_is_checked_and_exits_0_with_nothing_to_run(tmp_path):
    """Flink's DDL scripts (tables, no INSERT): every table is validated, then nothing runs."""
    script = tmp_path / "ddl.sql"
    script.write_text(MNS + PRINT)
    done = run_cli(["--sql", str(script)], timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"ok: {script}: 2 table(s) valid (src, out);" in done.stdout
    assert "nothing to run" in done.stdout and "error" not in done.stderr
    script.write_text(MNS.replace("'batchSize' = '16'", "'batchSize' = '17'") + PRINT)
    done = run_cli(["--sql", str(script)], timeout=60)
    assert done.returncode == 2
    assert f"error: {script}, line 12, column " in done.stderr
    assert "option 'batchSize'" in done.stderr


def test_a_bad_datagen_option_is_placed_at_its_line():
    text = (
        "CREATE TABLE g (a INT) WITH ('connector' = 'datagen',\n  'rows-per-second' = 'fast');\n"
        "CREATE TABLE o (a INT) WITH ('connector' = 'print');\nINSERT INTO o SELECT a FROM g;"
    )
    message = refused(text)
    assert message.startswith("job.sql, line 2, column 3: table g: option 'rows-per-second'"), message


def test_unknown_settings_keys_and_unused_source_options_are_refused():
    base = MNS + PRINT + "INSERT INTO out SELECT userId, action FROM src;"
    with pytest.raises(ScriptError, match=r"\['sinks'\] cannot be set there"):
        load_sql_text(base, "job.sql", {"sinks": []})
    message = refused(
        base.replace("'connector' = 'print'", "'connector' = 'print', 'print-identifier' = 'x'")
    )
    assert "line 14" in message and "option 'print-identifier' is not an option of the print sink" in message


def test_a_script_whose_settings_say_workers_runs_its_intake_workers(tmp_path):
    """``intake`` is a job setting a script cannot say: the settings file gives it, and
    ``mq-ingest intake --sql job.sql`` runs a worker of that job (no Spark): it stages what its
    datagen source makes into files named after it, and stops on SIGTERM with exit 0."""
    import argparse
    import signal
    import subprocess
    import sys

    from ingest.run import workers_line
    from tests.support.jobs import ROOT
    from tests.support.polling import wait_for

    script = tmp_path / "job.sql"
    script.write_text(
        "CREATE TABLE gen (event_id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '100');\n"
        "CREATE TABLE out (event_id BIGINT) WITH ('connector' = 'print');\n"
        "INSERT INTO out SELECT event_id FROM gen;\n"
    )
    (tmp_path / "job.settings.yaml").write_text(
        f"work_dir: {tmp_path / 'w'}\nintake: {{mode: workers, stop_timeout: 0}}\n"
    )
    cfg = parse_config(load_sql(script).config, str(script))
    assert (cfg.intake.mode, cfg.intake.stop_timeout) == ("workers", 0)
    given = argparse.Namespace(config=None, sql=str(script), settings=None)
    line = workers_line(cfg, given)
    assert line is not None and f"`mq-ingest intake --sql {script}` on nodes that reach staging.dir" in line
    staging = tmp_path / "w" / "staging"
    worker = subprocess.Popen(
        [sys.executable, "-m", "ingest.cli", "intake", "--sql", str(script), "--worker-id", "wsql"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: list(staging.glob("wsql~*.jsonl")) or worker.poll() is not None, 60, "a staged file")
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out
    assert list(staging.glob("wsql~*.jsonl")), out
    assert f"intake worker wsql of job job receiving into {staging}" in out


def test_the_module_example_runs():
    import doctest

    import ingest.flinksql

    assert doctest.testmod(ingest.flinksql).failed == 0
