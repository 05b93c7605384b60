"""The Spark writer sink into a real PostgreSQL through JDBC (Debian's server and driver jar), read
back with psycopg: each batch appended (at-least-once), ``_meta`` left out, a refused login one
error naming the sink."""

from __future__ import annotations

import pytest

from ingest.config import parse_config
from ingest.errors import FatalError
from sinks import build_sink
from sinks.base import WriteReport
from tests.support.jobconfig import fake_source, job_config

pytestmark = pytest.mark.spark


def jdbc_sink(tmp_path, postgres, database: str, password: str):
    options = {"url": postgres.jdbc_url(database), "dbtable": "public.events", "user": postgres.user}
    options |= {"password": password, "driver": "org.postgresql.Driver"}
    sink = {"type": "spark_writer", "name": "pg", "format": "jdbc", "options": options}
    return build_sink(parse_config(job_config(fake_source(tmp_path), tmp_path, [sink])).sinks[0])


def test_each_batch_is_appended_to_the_table_and_a_refused_login_fails_naming_the_sink(
    tmp_path, spark, postgres, pg_database
):
    df = spark.createDataFrame(
        [(i, f"a{i}", (f"m{i}",)) for i in range(5)],
        "id BIGINT, action STRING, _meta STRUCT<message_id: STRING>",
    )
    sink = jdbc_sink(tmp_path, postgres, pg_database, postgres.password)
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
    wrong = "not-the-password-81"
    with pytest.raises(FatalError) as refused:
        jdbc_sink(tmp_path, postgres, pg_database, wrong).write(df, 1)
    text = str(refused.value)
    assert text.startswith("sink pg: writing batch 1 as jdbc failed: ") and "password authentication" in text
    assert wrong not in text and "\n" not in text
