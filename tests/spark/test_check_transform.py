"""``check``: a transform must be a query over ``source``; a command is refused, and never run."""

from __future__ import annotations

import pytest

from ingest.batch.check import check_job
from ingest.config import parse_config
from ingest.errors import ConfigError
from tests.support.jobconfig import fake_source, job_config

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    "transform", ["DROP TABLE source", "DROP VIEW keep", "SHOW TABLES", "SET spark.sql.x = 1; SELECT 1"]
)
def test_a_transform_that_is_not_a_query_is_refused_and_never_run(spark, tmp_path, transform):
    spark.sql("CREATE OR REPLACE TEMP VIEW keep AS SELECT 1 AS one")
    cfg = parse_config(job_config(fake_source(tmp_path), tmp_path, transform=transform))
    with pytest.raises(ConfigError, match=r"^config key transform: not a query \(SELECT … FROM source …\): "):
        check_job(cfg, spark)
    assert spark.catalog.tableExists("keep"), "the command was run"


def test_queries_of_every_shape_pass(spark, tmp_path):
    for transform in (
        "SELECT event_id FROM source -- a trailing comment",
        "WITH s AS (SELECT event_id FROM source) SELECT event_id AS id FROM s;",
        "FROM source SELECT event_id WHERE event_id > 1",
        "TABLE source",
    ):
        cfg = parse_config(job_config(fake_source(tmp_path), tmp_path, transform=transform))
        columns = check_job(cfg, spark)["out"]
        assert columns and set(columns) <= {"event_id", "id", "user_id", "action", "amount", "ts", "_meta"}
