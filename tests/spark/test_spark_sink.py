"""The Spark writer sink into a real PostgreSQL through JDBC (Debian's server and driver jar), read
back with psycopg: each batch appended (at-least-once), ``_meta`` left out (as ``check`` says), a
refused login one error naming the sink."""

from __future__ import annotations

import pytest

from ingest.batch.check import check_job
from ingest.config import JobConfig, parse_config
from ingest.config.registry import build_sink
from ingest.connector import WriteReport
from ingest.errors import FatalError
from tests.support.jobconfig import fake_source, job_config

pytestmark = pytest.mark.spark


def jdbc_job(tmp_path, postgres, database: str, password: str) -> JobConfig:
    options = {"url": postgres.jdbc_url(database), "dbtable": "public.events", "user": postgres.user}
    options |= {"password": password, "driver": "org.postgresql.Driver"}
    sink = {"type": "spark_writer", "name": "pg", "format": "jdbc", "options": options}
    return parse_config(
        job_config(fake_source(tmp_path), tmp_path, [sink], schema="id BIGINT, action STRING")
    )


def jdbc_sink(tmp_path, postgres, database: str, password: str):
    return build_sink(jdbc_job(tmp_path, postgres, database, password).sinks[0])


def test_each_batch_is_appended_to_the_table_and_a_refused_login_fails_naming_the_sink(
    tmp_path, spark, postgres, pg_database
):
    df = spark.createDataFrame(
        [(i, f"a{i}", (f"m{i}",)) for i in range(5)],
        "id BIGINT, action STRING, _meta STRUCT<message_id: STRING>",
    )
    cfg = jdbc_job(tmp_path, postgres, pg_database, postgres.password)
    sink = build_sink(cfg.sinks[0])
    assert sink.write(df, 0) == WriteReport(5)
    assert sink.write(df.where("id < 2"), 0) == WriteReport(2)  # a replay is written again
    with postgres.connect(pg_database) as conn:
        rows = conn.execute("SELECT id, action FROM public.events ORDER BY id").fetchall()
        columns = [
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'events' ORDER BY ordinal_position"
            )
        ]
    assert rows == sorted([(i, f"a{i}") for i in range(5)] + [(0, "a0"), (1, "a1")])
    assert columns == ["id", "action"], "_meta is left out"
    assert check_job(cfg, spark)["pg"] == columns, "check reports the columns the table gets"
    wrong = "not-the-password-81"
    with pytest.raises(FatalError) as refused:
        jdbc_sink(tmp_path, postgres, pg_database, wrong).write(df, 1)
    text = str(refused.value)
    assert text.startswith("sink pg: writing batch 1 as jdbc failed: ") and "password authentication" in text
    assert wrong not in text and "\n" not in text
