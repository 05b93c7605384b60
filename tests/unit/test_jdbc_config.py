"""The JDBC sink's config: checks, table names (parsed, quoted per database, or refused), the driver
and its jar, masked secrets, Flink SQL's 'jdbc' connector, how database errors are classified, and
each database's SQL (its dialect)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ingest.config import parse_config
from ingest.errors import ConfigError, FatalError, TransientError, redact
from ingest.flinksql import ScriptError, load_sql_text
from ingest.runtime.spark import connector_conf
from sinks.jdbc.config import JdbcSinkConfig, parse_table_name
from sinks.jdbc.dialect import dialect_for
from sinks.jdbc.errors import classify
from sinks.jdbc.table import JdbcTarget, staging_prefix
from tests.support.jobconfig import fake_source, job_config

PG, MARIA = "jdbc:postgresql://h:5432/d", "jdbc:mariadb://h:3306/d"


def jdbc(**over) -> dict:
    return {"type": "jdbc", "name": "db", "url": PG, "table": "t"} | over


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "merge"}, "mode merge needs merge_keys"),
        ({"merge_keys": ["id"]}, "merge_keys go with mode merge"),
        ({"mode": "merge", "merge_keys": ["a", "a"]}, "merge_keys names a column twice"),
        ({"url": "postgresql://h/d"}, "url"),
        ({"url": "jdbc:sqlserver://h;databaseName=d"}, "no known driver for 'sqlserver' URLs"),
        ({"batch_size": 0}, "batch_size"),
        ({"tableName": "t"}, "tableName"),
    ],
)
def test_bad_options_are_refused_naming_them(options, message):
    with pytest.raises(ValidationError, match=message):
        JdbcSinkConfig.model_validate(jdbc(**options))


def test_the_driver_and_its_jar_come_from_the_url_unless_given(tmp_path, monkeypatch):
    cfg = JdbcSinkConfig.model_validate(jdbc())
    assert cfg.driver_class() == "org.postgresql.Driver"
    jars, packages = cfg.spark_jars()
    assert jars == ["/usr/share/java/postgresql.jar"] or packages == ["org.postgresql:postgresql:42.7.4"]
    monkeypatch.setattr("os.path.exists", lambda p: False)
    assert cfg.spark_jars() == ([], ["org.postgresql:postgresql:42.7.4"])
    own = JdbcSinkConfig.model_validate(jdbc(url="jdbc:sqlserver://h", driver="x.Driver", jars=["/x.jar"]))
    assert own.spark_jars() == (["/x.jar"], [])
    conf = connector_conf({"spark.jars": "/mine.jar"}, [cfg, own, own])
    assert conf == {
        "spark.jars": "/mine.jar,/x.jar",
        "spark.jars.packages": "org.postgresql:postgresql:42.7.4",
    }


def test_passwords_are_masked_and_the_app_id_defaults_to_job_and_sink(tmp_path, monkeypatch):
    monkeypatch.setenv("PG_PW", "pw-from-env-1234")
    sink = jdbc(password="${env:PG_PW}", url="jdbc:postgresql://h/d?user=u&password=in-url-5678")
    sink["properties"] = {"sslpassword": "ssl-pw-9012", "sslmode": "require"}
    cfg = parse_config(job_config(fake_source(tmp_path), tmp_path, [sink]))
    assert cfg.sinks[0].app_id == "t-job.db"
    assert redact("pw-from-env-1234 in-url-5678 ssl-pw-9012 require") == "*** *** *** require"
    assert "pw-from-env" not in repr(cfg.sinks[0])
    assert staging_prefix("t-job.db").startswith("mq_stage_t_job_db_")
    assert len(staging_prefix("x" * 200) + "123456789012") < 63  # PostgreSQL's name limit
    bad = job_config(fake_source(tmp_path), tmp_path, [jdbc(), jdbc(name="dlq")], dead_letter={"sink": "dlq"})
    with pytest.raises(ConfigError, match=r"dead_letter\.sink: a jdbc sink commits once a batch"):
        parse_config(bad)


SCRIPT = """
CREATE TABLE gen (id BIGINT, day STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TABLE pg (id BIGINT, day STRING) WITH ('connector' = 'jdbc', {options});
INSERT INTO pg SELECT id, day FROM gen;
"""


def test_flink_sql_jdbc_connector_takes_flinks_option_names():
    options = (
        "'url' = 'jdbc:postgresql://h:5432/d', 'table-name' = 'events', 'username' = 'u', "
        "'password' = '${secret_values.pg}', 'sink.buffer-flush.max-rows' = '500', "
        "'sink.max-retries' = '3', 'sink.buffer-flush.interval' = '1s', 'mode' = 'merge', 'merge_keys' = 'id'"
    )
    sink = load_sql_text(SCRIPT.format(options=options), "job.sql", {}).config["sinks"][0]
    assert sink | {"transform": None} == {
        "name": "pg",
        "type": "jdbc",
        "url": "jdbc:postgresql://h:5432/d",
        "table": "events",
        "user": "u",
        "password": "${env:pg}",
        "batch_size": "500",
        "max_retries": "3",
        "mode": "merge",
        "merge_keys": ["id"],
        "include_meta": False,
        "transform": None,
    }
    with pytest.raises(ScriptError, match=r"table pg: option 'max_retries': .*less than or equal to 100"):
        load_sql_text(
            SCRIPT.format(
                options="'url' = 'jdbc:postgresql://h/d', 'table-name' = 't', 'sink.max-retries' = '1000'"
            ),
            "job.sql",
            {},
        )


@pytest.mark.parametrize(
    ("state", "classes", "message", "kind"),
    [
        ("08001", "PSQLException", "Connection to 127.0.0.1:1 refused.", TransientError),
        (
            "57P01",
            "PSQLException",
            "FATAL: terminating connection due to administrator command",
            TransientError,
        ),
        ("40001", "PSQLException", "ERROR: could not serialize access", TransientError),
        (None, "SparkException SocketTimeoutException", "Read timed out", TransientError),
        ("28P01", "PSQLException", 'FATAL: password authentication failed for user "u"', FatalError),
        ("42P01", "PSQLException", 'ERROR: relation "t" does not exist', FatalError),
        (
            "23505",
            "PSQLException",
            "ERROR: duplicate key value\n  Detail: Key (id)=(1) already exists.",
            FatalError,
        ),
        (None, "SQLException", "No suitable driver found", FatalError),
    ],
)
def test_database_errors_are_classified(state, classes, message, kind):
    err = classify("sinks.db.url", "commit batch 3 into table t", state, classes, message)
    assert type(err) is kind
    assert str(err).startswith("sinks.db.url: cannot commit batch 3 into table t: ")
    assert "\n" not in str(err)
    if state == "23505":
        assert "Key (id)=(1) already exists." in str(err)


@pytest.mark.parametrize(
    ("state", "code", "message", "kind"),
    [
        ("28000", 1045, "(conn=9) Access denied for user 'mq'@'127.0.0.1' (using password: YES)", FatalError),
        (
            "08000",
            0,
            "Could not connect to address=(host=127.0.0.1)(port=1) : Connection refused",
            TransientError,
        ),
        ("40001", 1213, "Deadlock found when trying to get lock; try restarting transaction", TransientError),
        ("HY000", 1205, "Lock wait timeout exceeded; try restarting transaction", TransientError),
        ("23000", 1062, "Duplicate entry '1' for key 'PRIMARY'", FatalError),
        ("23000", 1048, "Column 'v' cannot be null", FatalError),
        ("22001", 1406, "Data too long for column 'v' at row 1", FatalError),
    ],
)
def test_mariadb_errors_are_classified_by_sqlstate_and_error_code(state, code, message, kind):
    codes = dialect_for("jdbc:mariadb://h/d").transient_codes
    err = classify("sinks.db.url", "commit batch 3 into table t", state, "SQLException", message, code, codes)
    assert type(err) is kind
    assert str(err) == f"sinks.db.url: cannot commit batch 3 into table t: {message} (SQLState {state}" + (
        f", error {code})" if code else ")"
    )


def test_each_database_quotes_and_merges_in_its_own_dialect():
    columns, keys = [("id", "id"), ("v", "v")], [("id", "id")]
    pg = dialect_for("jdbc:postgresql://h/d")
    assert pg.move("t", "s1", columns, {"v": "jsonb"}, keys) == [
        'DELETE FROM t WHERE EXISTS (SELECT 1 FROM s1 s WHERE s."id" = t."id")',
        'INSERT INTO t ("id", "v") SELECT s."id", CAST(s."v" AS jsonb) FROM s1 s',
    ]
    maria = dialect_for("jdbc:mariadb://h:3306/d?useSSL=false")
    assert maria.move("t", "s1", columns, {}, keys) == [
        "INSERT INTO t (`id`, `v`) SELECT s.`id`, s.`v` FROM s1 s "
        "ON DUPLICATE KEY UPDATE t.`id` = VALUES(`id`), t.`v` = VALUES(`v`)"
    ]
    assert maria.move("t", "s1", columns, {}, []) == [
        "INSERT INTO t (`id`, `v`) SELECT s.`id`, s.`v` FROM s1 s"
    ]
    assert maria.quote("a`b") == "`a``b`"
    # Spark keeps its MySQL dialect (backticks, MySQL's types) for jdbc:mysql URLs only
    assert maria.spark_url("jdbc:mariadb://h:3306/d?useSSL=false") == (
        "jdbc:mysql://h:3306/d?useSSL=false&permitMysqlScheme"
    )
    assert maria.spark_url("jdbc:mariadb://h/d") == "jdbc:mysql://h/d?permitMysqlScheme"
    assert dialect_for("jdbc:mysql://h/d").spark_url("jdbc:mysql://h/d") == "jdbc:mysql://h/d"
    assert pg.spark_url("jdbc:postgresql://h/d") == "jdbc:postgresql://h/d"
    assert maria.catalog_schema(["db2"], "db") == ("db2", None)
    assert maria.catalog_schema([], "db") == ("db", None)
    assert pg.catalog_schema(["s"], "db") == (None, "s")
    assert pg.catalog_schema(["c", "s"], "db") == ("c", "s")
    assert dialect_for("jdbc:h2:mem:x").quote("a") == '"a"'


@pytest.mark.parametrize(
    ("url", "name", "sql", "stored"),
    [
        (PG, "events", "events", ["events"]),
        (PG, "Events", "Events", ["events"]),  # bare: PostgreSQL folds it, as it would unquoted
        (PG, "public.events", "public.events", ["public", "events"]),
        (PG, '"Mixed Case"', '"Mixed Case"', ["Mixed Case"]),
        (PG, '"ev.ents"', '"ev.ents"', ["ev.ents"]),
        (PG, "événements", "événements", ["événements"]),
        (PG, "Ünits_2$", "Ünits_2$", ["Ünits_2$"]),  # PostgreSQL folds ASCII letters only
        (PG, '"My Schema"."a""b"', '"My Schema"."a""b"', ["My Schema", 'a"b']),
        (PG, 'db.public."T"', 'db.public."T"', ["db", "public", "T"]),
        (PG, "`x`y", None, None),
        (MARIA, '"Mixed Case"', "`Mixed Case`", ["Mixed Case"]),  # ANSI quotes become backquotes
        (MARIA, "`ev.ents`", "`ev.ents`", ["ev.ents"]),
        (MARIA, '"a`b"', "`a``b`", ["a`b"]),
        (MARIA, "`a``b`.Events", "`a``b`.Events", ["a`b", "Events"]),  # MariaDB keeps the case
    ],
)
def test_table_names_are_parsed_into_parts_and_quoted_per_database(url, name, sql, stored):
    if sql is None:
        with pytest.raises(ValueError, match="is not a table name"):
            parse_table_name(name, url)
        return
    cfg = JdbcSinkConfig.model_validate(jdbc(url=url, table=name, marker_table=name, app_id="j.db"))
    target, dialect = JdbcTarget(cfg), dialect_for(url)
    assert (target.table, target.marker) == (sql, sql)
    assert [dialect.stored(p) for p in cfg.table_name()] == stored
    schema = sql.rpartition(".")[0] if len(stored) > 1 else ""
    assert target.staging(7) == (f"{schema}." if schema else "") + f"{staging_prefix('j.db')}7"


@pytest.mark.parametrize(
    ("option", "name", "url", "says"),
    [
        ("table", "events; DROP TABLE victim; --", PG, "';' at character 7"),
        ("marker_table", "mq_marks; DROP TABLE victim; --", PG, "';' at character 9"),
        ("table", 'events"; DROP TABLE victim; --', PG, """'"' at character 7"""),
        ("table", '"events"; DROP TABLE victim; --', PG, "';' at character 9"),
        ("table", "`events`; DROP TABLE victim; --", MARIA, "';' at character 9"),
        ("table", '"ev""; DROP TABLE victim; --', PG, 'the " at character 1 is not closed'),
        ("table", "events --", PG, "' ' at character 7"),
        ("table", "(SELECT 1)", PG, "'(' at character 1"),
        ("table", "Mixed Case", PG, """a part with a space or sign goes in quotes: '"Mixed Case"'"""),
        ("table", "public.my-events", PG, """goes in quotes: 'public."my-events"'"""),
        ("table", "1events", MARIA, """goes in quotes: '"1events"'"""),
        ("table", "a..b", PG, "an empty part at character 3"),
        ("table", "events.", PG, "an empty part at character 8"),
        ("table", '""', PG, "an empty name at character 1"),
        ("table", '"a\nb"', PG, "a control character (U+000A)"),
        ("table", "c.s.t.x", PG, "4 parts, 3 at most (catalog.schema.table)"),
        ("table", "c.s.t", MARIA, "3 parts, 2 at most (a MariaDB or MySQL table is database.table)"),
        ("table", "`events`", PG, "'`' at character 1"),  # backquotes are MariaDB's and MySQL's
    ],
)
def test_a_name_that_is_no_table_name_is_refused_naming_the_key(tmp_path, option, name, url, says):
    cfg = job_config(fake_source(tmp_path), tmp_path, [jdbc(url=url, **{option: name})])
    with pytest.raises(ConfigError) as refused:
        parse_config(cfg)
    assert str(refused.value).startswith(f"<dict>: sinks.db.{option}: {name!r} is not a table name: ")
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)
