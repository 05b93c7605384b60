"""The datagen source: the same rows on every run, paced, bounded, and redelivered like a queue."""

from __future__ import annotations

import base64
import time

import orjson
import pytest

from ingest.errors import ConfigError
from sources.datagen.config import DatagenSourceConfig
from sources.datagen.source import DatagenSource
from tests.support.polling import wait_for

SCHEMA = (
    "id BIGINT, name STRING, price DECIMAL(6, 2), ok BOOLEAN, ts TIMESTAMP, raw BINARY, "
    "tags ARRAY<INT>, attrs MAP<STRING, STRING>, pos STRUCT<x: DOUBLE, y: DOUBLE>"
)


def source(**options) -> DatagenSource:
    base = {"type": "datagen", "name": "gen", "schema": SCHEMA, "rows-per-second": 1_000_000}
    return DatagenSource(DatagenSourceConfig.model_validate(base | options))


def bodies(msgs) -> list[dict]:
    return [orjson.loads(m.body) for m in msgs]


def test_rows_follow_the_field_options_and_repeat_on_every_run():
    fields = {
        "id": {"kind": "sequence", "start": 10, "end": 1000},
        "name": {"length": 6},
        "price": {"min": 1, "max": 5},
        "ts": {"max-past": "1h"},
        "raw": {"length": 4},
        "tags": {"length": 2},
        "attrs": {"length": 1},
    }
    first = source(fields=fields).receive(50, 1)
    again = source(fields=fields).receive(50, 1)
    assert [m.message_id for m in first] == [f"gen-{n}" for n in range(50)]
    rows = bodies(first)
    assert [r["id"] for r in rows] == list(range(10, 60))
    assert bodies(again) == [{**r, "ts": b["ts"]} for r, b in zip(rows, bodies(again), strict=True)]
    for r in rows:
        assert len(r["name"]) == 6 and r["name"].isalnum()
        assert 1 <= float(r["price"]) <= 5 and len(r["price"].split(".")[1]) == 2
        assert isinstance(r["ok"], bool) and len(base64.b64decode(r["raw"])) == 4
        assert len(r["tags"]) == 2 and len(r["attrs"]) == 1 and set(r["pos"]) == {"x", "y"}
        assert r["ts"].endswith("Z") and len(r["ts"]) == len("2026-01-01T00:00:00.000Z")
    assert len({r["name"] for r in rows}) > 40  # random, not one value


def test_number_of_rows_and_a_sequence_end_the_source():
    gen = source(**{"number-of-rows": 30})
    got = gen.receive(100, 0) + gen.receive(100, 0)
    assert len(got) == 30 and gen.receive(100, 0.1) == [] and gen.lag() == 30
    gen.ack([m.receipt_handle for m in got])
    assert gen.lag() == 0
    seq = source(fields={"id": {"kind": "sequence", "start": 1, "end": 5}})
    assert [r["id"] for r in bodies(seq.receive(100, 0))] == [1, 2, 3, 4, 5]
    assert seq.receive(100, 0.05) == []


def test_rows_per_second_paces_the_rows():
    gen = source(**{"rows-per-second": 200})
    started = time.monotonic()
    got = []
    while len(got) < 100:
        got += gen.receive(1000, 1)
    assert time.monotonic() - started >= 0.35  # 100 rows at 200 rows/s, 20 of them at once: 0.4 s


def test_unacked_rows_come_back_after_their_visibility_timeout_and_acked_ones_never():
    gen = source(**{"number-of-rows": 4, "visibility_timeout": "300ms"})
    first = gen.receive(10, 0)
    assert gen.ack([first[0].receipt_handle]).deleted == [first[0].receipt_handle]
    assert gen.ack([first[0].receipt_handle]).failed  # a stale handle is reported, not raised
    gen.extend([first[1].receipt_handle], 30)
    gen.release([first[2].receipt_handle])
    released = gen.receive(10, 0)
    assert [m.message_id for m in released] == ["gen-2"]
    gen.ack([released[0].receipt_handle])
    again = []
    wait_for(
        lambda: again.extend(gen.receive(10, 0)) or any(m.message_id == "gen-3" for m in again), 5, "gen-3"
    )
    assert {m.message_id for m in again} == {"gen-3"}
    assert bodies(again)[0]["id"] == bodies(first)[3]["id"]


def test_null_rate_and_bad_options_are_checked():
    rows = bodies(source(fields={"name": {"null-rate": 1.0}}).receive(20, 0))
    assert all(r["name"] is None for r in rows) and all(r["id"] is not None for r in rows)
    with pytest.raises(ConfigError, match=r"\['nope'\] are not columns"):
        source(fields={"nope": {"length": 1}})
    with pytest.raises(ConfigError, match="kind sequence needs a number or string"):
        source(fields={"ok": {"kind": "sequence", "start": 1, "end": 2}})
    with pytest.raises(ValueError, match="needs start and end"):
        source(fields={"id": {"kind": "sequence"}})


def test_a_bounded_source_is_exhausted_only_once_every_row_was_acked():
    gen = source(**{"number-of-rows": 3, "visibility_timeout": "200ms"})
    assert gen.bounded and not gen.exhausted()
    first = gen.receive(10, 0)
    assert len(first) == 3 and not gen.exhausted(), "generated, not acked"
    gen.ack([m.receipt_handle for m in first[:2]])
    assert not gen.exhausted(), "one row unacked: it comes back"
    again: list = []
    wait_for(lambda: again.extend(gen.receive(10, 0)) or again, 5, "the unacked row redelivered")
    assert gen.ack([first[2].receipt_handle]).failed and not gen.exhausted(), "a stale handle acks nothing"
    gen.ack([again[0].receipt_handle])
    assert gen.exhausted() and gen.receive(10, 0) == []


def test_a_sequence_end_bounds_the_source_and_no_limit_leaves_it_unbounded():
    seq = source(fields={"id": {"kind": "sequence", "start": 1, "end": 2}})
    assert seq.bounded
    seq.ack([m.receipt_handle for m in seq.receive(10, 0)])
    assert seq.exhausted()
    endless = source()
    assert not endless.bounded
    endless.ack([m.receipt_handle for m in endless.receive(10, 0)])
    assert not endless.exhausted()
