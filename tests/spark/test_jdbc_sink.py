"""The JDBC sink on a real PostgreSQL and a real MariaDB: merge upserts, a replay adds nothing, an
outage, the table check, quoted and qualified table names.

Every table is read back with psycopg or PyMySQL (the tests' own clients), never with the sink's code.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from ingest.config import parse_config
from ingest.config.registry import build_sink
from ingest.errors import FatalError
from sinks.jdbc.table import staging_prefix
from tests.support.postgres import PASSWORD, PostgresServer

pytestmark = [pytest.mark.spark, pytest.mark.integration]
META = "_meta STRUCT<message_id: STRING, received_at: TIMESTAMP, arrival: BIGINT>"


def jdbc_sink(server: Any, database: str, **options: Any):
    sink = {"type": "jdbc", "name": "db", "url": server.jdbc_url(database), "table": "events"}
    sink |= {"user": server.user, "password": server.password, "create_table": True, **options}
    config = {"name": "t", "sources": [{"type": "fake", "name": "s", "path": "unused"}], "schema": "a INT"}
    config |= {"sinks": [sink], "checkpoint": "c", "state": {"path": "s"}, "staging": {"dir": "d"}}
    return build_sink(parse_config(config).sinks[0])


def frame(spark: Any, rows: list[tuple[int, str, int]]):
    """Rows (id, value, receive second): the message id and receive time in ``_meta``."""
    t0 = dt.datetime(2026, 1, 1)
    data = [(i, v, (f"m{i}-{v}", t0 + dt.timedelta(seconds=s), s)) for i, v, s in rows]
    return spark.createDataFrame(data, f"id BIGINT, v STRING, {META}")


def table(server: Any, database: str, sql: str = "SELECT id, v FROM events ORDER BY id, v") -> list[tuple]:
    return [tuple(row) for row in server.query(database, sql)]


def staging_tables(server: Any, database: str) -> list[tuple]:
    schema = "public" if isinstance(server, PostgresServer) else database
    sql = "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'mq_stage%'"
    return table(server, database, f"{sql} AND table_schema = '{schema}'")


@pytest.fixture(params=["postgres", "mariadb"])
def db(request) -> tuple[Any, str]:
    """(a server, a fresh database on it): PostgreSQL's, then MariaDB's."""
    server = request.getfixturevalue(request.param)
    return server, server.create_database()


def test_merge_keeps_the_latest_row_per_key_in_a_batch_and_across_batches(spark, db):
    server, database = db  # PostgreSQL: DELETE + INSERT; MariaDB: INSERT … ON DUPLICATE KEY UPDATE
    sink = jdbc_sink(server, database, mode="merge", merge_keys=["id"])
    # id 1 twice in the batch: the later received (second 5) wins although it comes first
    first = frame(spark, [(1, "new", 5), (1, "old", 1), (2, "b", 2)])
    assert sink.write(first, 0).written == 2
    assert table(server, database) == [(1, "new"), (2, "b")]
    second = frame(spark, [(2, "b2", 7), (3, "c", 8)])
    assert sink.write(second, 1).written == 2
    assert table(server, database) == [(1, "new"), (2, "b2"), (3, "c")]
    assert sink.write(frame(spark, [(3, "replayed", 9)]), 1).written == 0  # the marker holds batch 1
    assert table(server, database) == [(1, "new"), (2, "b2"), (3, "c")]
    meta = table(server, database, "SELECT _meta FROM events WHERE id = 3")[0][0]
    assert '"message_id":"m3-c"' in meta  # _meta kept as JSON text
    assert table(server, database, "SELECT sink_id, batch_id FROM mq_ingest_batches") == [("t.db", 1)]
    with pytest.raises(
        FatalError, match=r"sinks\.db\.marker_table: .* holds batch 1 for t\.db, past this batch 0"
    ):
        sink.write(frame(spark, [(4, "reset", 1)]), 0)  # a reset checkpoint: batch ids start again
    assert table(server, database) == [(1, "new"), (2, "b2"), (3, "c")]
    assert staging_tables(server, database) == []
    sink.close()


def test_an_outage_of_15_seconds_loses_and_doubles_nothing(spark, postgres, pg_database, caplog):
    """The server stops (its data kept) between two batches and comes back 15 s later, while the
    second batch's write retries; both batches are in the table once."""
    sink = jdbc_sink(postgres, pg_database)
    assert sink.write(frame(spark, [(i, "a", i) for i in range(5)]), 0).written == 5
    postgres.pause()
    back = threading.Timer(15.0, postgres.resume)
    back.start()
    try:
        assert sink.write(frame(spark, [(i, "b", i) for i in range(5, 10)]), 1).written == 5
    finally:
        back.join()
    assert [r[0] for r in table(postgres, pg_database)] == list(range(10))
    assert staging_tables(postgres, pg_database) == []
    assert "retrying sink db: " in caplog.text  # the write met the outage
    assert PASSWORD not in caplog.text
    sink.close()


def test_the_table_check_names_the_column_and_a_missing_table(spark, postgres, pg_database, caplog):
    with postgres.connect(pg_database) as conn:
        conn.execute("CREATE TABLE events (id BIGINT, v INTEGER, _meta TEXT)")
    schema = frame(spark, []).schema
    with pytest.raises(FatalError) as wrong:
        jdbc_sink(postgres, pg_database).check_target(schema)
    assert "sinks.db.url: table events column v is int4" in str(wrong.value)
    with pytest.raises(FatalError, match=r"sinks\.db\.url: table missing does not exist"):
        jdbc_sink(postgres, pg_database, table="missing", create_table=False).check_target(schema)
    jdbc_sink(postgres, pg_database, table="missing").check_target(schema)  # create_table: made at once
    down = jdbc_sink(postgres, pg_database, url="jdbc:postgresql://127.0.0.1:1/x", max_retries=0)
    down.check_target(schema)  # unreachable: a warning, not an error
    assert "not compared" in caplog.text
    assert PASSWORD not in caplog.text


def test_mariadb_append_adds_each_batch_once_and_merge_needs_a_unique_key(
    spark, mariadb, maria_database, caplog
):
    """On MariaDB: a replayed batch adds no row; a failed run's staging table is dropped;
    ``create_table`` makes MySQL-type columns; merge
    into a table without a unique key on ``merge_keys`` (its upsert matches rows by one) fails
    naming the key before anything is written; a wrong password is fatal, a refused connection not."""
    server, database = mariadb, maria_database
    with server.connect(database) as conn, conn.cursor() as cur:  # a killed run's staging table
        cur.execute(f"CREATE TABLE {staging_prefix('t.db')}7 (id BIGINT)")
    sink = jdbc_sink(server, database)
    rows = [(1, "a", 1), (1, "a", 1), (2, "b", 2)]
    assert sink.write(frame(spark, rows), 0).written == 3
    assert sink.write(frame(spark, rows), 0).written == 0  # replayed: the marker holds batch 0
    assert sink.write(frame(spark, [(3, "c", 3)]), 1).written == 1
    assert table(server, database) == [(1, "a"), (1, "a"), (2, "b"), (3, "c")]
    assert table(server, database, "SELECT sink_id, batch_id FROM mq_ingest_batches") == [("t.db", 1)]
    assert staging_tables(server, database) == []  # batch 7's dropped at the first batch
    columns = "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'events'"
    assert sorted(table(server, database, f"{columns} AND table_schema = '{database}'")) == [
        ("_meta", "longtext"),
        ("id", "bigint"),
        ("v", "longtext"),
    ]
    sink.close()
    merge = jdbc_sink(server, database, mode="merge", merge_keys=["id"], app_id="m")
    with pytest.raises(
        FatalError, match=r"^sinks\.db\.merge_keys: table events has no primary or unique key"
    ):
        merge.write(frame(spark, [(4, "d", 4)]), 0)
    merge.close()
    assert table(server, database) == [(1, "a"), (1, "a"), (2, "b"), (3, "c")]
    schema = frame(spark, []).schema
    with pytest.raises(
        FatalError, match=r"^sinks\.db\.url: cannot read table events: .*Access denied"
    ) as denied:
        jdbc_sink(server, database, password="wrong-7e2b").check_target(schema)
    assert "(SQLState 28000, error 1045)" in str(denied.value)
    assert "wrong-7e2b" not in str(denied.value)
    down = jdbc_sink(server, database, url="jdbc:mariadb://127.0.0.1:1/x", max_retries=0)
    down.check_target(schema)  # refused: transient, so a warning in check
    assert "sinks.db.url: cannot read table events" in caplog.text and "not compared" in caplog.text
    assert server.password not in caplog.text


@pytest.mark.parametrize(
    ("server_name", "table_name", "schema", "marker", "mode"),
    [
        ("postgres", '"My Schema"."Mixed Case"', '"My Schema"', '"mq marks"', "merge"),
        ("postgres", '"ev.ents"', "", "mq_ingest_batches", "append"),
        ("postgres", "public.événements", "public", "public.mq_ingest_batches", "append"),
        ("mariadb", '"Mixed Case"', "", "`mq marks`", "merge"),
    ],
)
def test_quoted_and_qualified_table_names_are_written_as_named(
    request, spark, server_name, table_name, schema, marker, mode
):
    """A table name with a space, a dot or a non-ASCII letter in it, or a schema: the sink creates
    the table, merges or appends batches into it, records them in the marker table (quoted too),
    adds nothing on a replay, and drops its staging tables beside it, a killed run's too
    (``schema``: the table's schema as SQL; MariaDB reads the table's name in backquotes)."""
    server = request.getfixturevalue(server_name)
    database = server.create_database()
    stale = f"{schema}{'.' if schema else ''}{staging_prefix('t.db')}9"
    with server.connect(database) as conn:
        if schema not in ("", "public"):
            conn.execute(f"CREATE SCHEMA {schema}")
        conn.cursor().execute(f"CREATE TABLE {stale} (id BIGINT)")  # a killed run's staging table
    keys = {"merge_keys": ["id"]} if mode == "merge" else {}
    sink = jdbc_sink(server, database, table=table_name, marker_table=marker, mode=mode, **keys)
    assert sink.write(frame(spark, [(1, "a", 1), (2, "b", 2)]), 0).written == 2
    assert sink.write(frame(spark, [(1, "new", 5), (3, "c", 3)]), 1).written == 2
    assert sink.write(frame(spark, [(9, "replayed", 9)]), 1).written == 0
    sink.close()
    kept = [(1, "new"), (2, "b"), (3, "c")] if mode == "merge" else [(1, "a"), (1, "new"), (2, "b"), (3, "c")]
    name = table_name if server_name == "postgres" else table_name.replace('"', "`")
    assert table(server, database, f"SELECT id, v FROM {name} ORDER BY id, v") == kept
    assert table(server, database, f"SELECT sink_id, batch_id FROM {marker}") == [("t.db", 1)]
    staged = "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'mq_stage%'"
    mine = f" AND table_schema = '{database}'" if server_name == "mariadb" else ""  # PG: this database's only
    assert table(server, database, staged + mine) == []
