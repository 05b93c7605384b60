"""The JDBC sink on a real PostgreSQL: merge upserts, a replay adds nothing, an outage, the table check.

Every table is read back with psycopg (the tests' own client), never with the sink's code.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from ingest.config import parse_config
from ingest.errors import FatalError
from sinks import build_sink
from tests.support.postgres import PASSWORD

pytestmark = [pytest.mark.spark, pytest.mark.integration]
META = "_meta STRUCT<message_id: STRING, received_at: TIMESTAMP, arrival: BIGINT>"


def jdbc_sink(server: Any, database: str, **options: Any):
    sink = {"type": "jdbc", "name": "db", "url": server.jdbc_url(database), "table": "events"}
    sink |= {"user": server.user, "password": PASSWORD, "create_table": True, **options}
    config = {"name": "t", "sources": [{"type": "fake", "name": "s", "path": "unused"}], "schema": "a INT"}
    config |= {"sinks": [sink], "checkpoint": "c", "state": {"path": "s"}, "staging": {"dir": "d"}}
    return build_sink(parse_config(config).sinks[0])


def frame(spark: Any, rows: list[tuple[int, str, int]]):
    """Rows (id, value, receive second): the message id and receive time in ``_meta``."""
    t0 = dt.datetime(2026, 1, 1)
    data = [(i, v, (f"m{i}-{v}", t0 + dt.timedelta(seconds=s), s)) for i, v, s in rows]
    return spark.createDataFrame(data, f"id BIGINT, v STRING, {META}")


def table(server: Any, database: str, sql: str = "SELECT id, v FROM events ORDER BY id, v") -> list[tuple]:
    with server.connect(database) as conn:
        return conn.execute(sql).fetchall()


def staging_tables(server: Any, database: str) -> list[tuple]:
    return table(server, database, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'mq_stage%'")


def test_merge_keeps_the_latest_row_per_key_in_a_batch_and_across_batches(spark, postgres, pg_database):
    sink = jdbc_sink(postgres, pg_database, mode="merge", merge_keys=["id"])
    # id 1 twice in the batch: the later received (second 5) wins although it comes first
    first = frame(spark, [(1, "new", 5), (1, "old", 1), (2, "b", 2)])
    assert sink.write(first, 0).written == 2
    assert table(postgres, pg_database) == [(1, "new"), (2, "b")]
    second = frame(spark, [(2, "b2", 7), (3, "c", 8)])
    assert sink.write(second, 1).written == 2
    assert table(postgres, pg_database) == [(1, "new"), (2, "b2"), (3, "c")]
    assert sink.write(frame(spark, [(3, "replayed", 9)]), 1).written == 0  # the marker holds batch 1
    assert table(postgres, pg_database) == [(1, "new"), (2, "b2"), (3, "c")]
    meta = table(postgres, pg_database, "SELECT _meta FROM events WHERE id = 3")[0][0]
    assert '"message_id":"m3-c"' in meta  # _meta kept as JSON text
    assert table(postgres, pg_database, "SELECT sink_id, batch_id FROM mq_ingest_batches") == [("t.db", 1)]
    with pytest.raises(
        FatalError, match=r"sinks\.db\.marker_table: .* holds batch 1 for t\.db, past this batch 0"
    ):
        sink.write(frame(spark, [(4, "reset", 1)]), 0)  # a reset checkpoint: batch ids start again
    assert table(postgres, pg_database) == [(1, "new"), (2, "b2"), (3, "c")]
    assert staging_tables(postgres, pg_database) == []
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
    assert "(retrying)" in caplog.text  # the write met the outage
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
