"""ingest.batch.dedup.select: which messages of a batch are new, checked against a per-row reference."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ingest.batch.dedup import KEY, select


def _meta(rows: list[dict]) -> pa.Table:
    schema = pa.schema(
        [
            ("source", pa.string()),
            ("receipt_handle", pa.string()),
            ("received_at", pa.int64()),
            ("arrival", pa.int64()),
            ("enqueue_ts", pa.int64()),
            ("sent_ts", pa.int64()),
            (KEY, pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _reference(rows: list[dict], committed: set[str], starts: dict[str, int]):
    """The rule written row by row: receive order; early first; then committed or repeated keys."""
    drops, new, dup, early, seen = [], [], Counter(), Counter(), set()
    for r in sorted(rows, key=lambda r: (r["received_at"], r["arrival"], r["receipt_handle"])):
        ts = r["enqueue_ts"] if r["enqueue_ts"] is not None else r["sent_ts"]
        if r["source"] in starts and ts is not None and ts < starts[r["source"]]:
            drops.append(r["receipt_handle"])
            early[r["source"]] += 1
        elif r[KEY] in committed or r[KEY] in seen:
            drops.append(r["receipt_handle"])
            dup[r["source"]] += 1
        else:
            seen.add(r[KEY])
            new.append(r[KEY])
    return drops, new, dict(dup), dict(early)


def _unseen(committed: set[str]):
    return lambda keys: pc.invert(pc.is_in(keys, value_set=pa.array(sorted(committed), pa.string())))


@pytest.mark.parametrize("seed", range(20))
def test_select_matches_the_row_by_row_rule(seed: int) -> None:
    rng = random.Random(seed)
    rows = [
        {
            "source": rng.choice(["a", "b", "c"]),
            "receipt_handle": f"h{i}",
            "received_at": rng.randint(0, 3),
            "arrival": rng.randint(0, 50),
            "enqueue_ts": rng.choice([None, rng.randint(0, 100)]),
            "sent_ts": rng.choice([None, rng.randint(0, 100)]),
            KEY: f"k{rng.randint(0, 30)}",
        }
        for i in range(rng.randint(1, 120))
    ]
    committed = {f"k{rng.randint(0, 30)}" for _ in range(8)}
    starts = rng.choice([{}, {"a": 50}, {"a": 30, "c": 70}])
    got = select(_meta(rows), _unseen(committed), starts)
    drops, new, dup, early = _reference(rows, committed, starts)
    assert got.drops == drops
    assert got.new_keys.to_pylist() == new
    assert got.duplicates == dup
    assert got.early == early


def test_an_early_copy_does_not_hide_a_later_one_and_the_first_received_is_kept() -> None:
    rows = [
        {
            "source": "s",
            "receipt_handle": "late",
            "received_at": 2,
            "arrival": 0,
            "enqueue_ts": 90,
            "sent_ts": None,
            KEY: "x",
        },
        {
            "source": "s",
            "receipt_handle": "old",
            "received_at": 1,
            "arrival": 0,
            "enqueue_ts": 10,
            "sent_ts": None,
            KEY: "x",
        },
        {
            "source": "s",
            "receipt_handle": "again",
            "received_at": 3,
            "arrival": 0,
            "enqueue_ts": 95,
            "sent_ts": None,
            KEY: "x",
        },
    ]
    got = select(_meta(rows), _unseen(set()), {"s": 50})
    assert got.new_keys.to_pylist() == ["x"]
    assert got.drops == ["old", "again"]
    assert got.early == {"s": 1} and got.duplicates == {"s": 1}


def test_an_empty_selection_and_all_duplicates() -> None:
    rows = [
        {
            "source": "s",
            "receipt_handle": f"h{i}",
            "received_at": 1,
            "arrival": i,
            "enqueue_ts": 1,
            "sent_ts": None,
            KEY: "k",
        }
        for i in range(3)
    ]
    got = select(_meta(rows), _unseen({"k"}), {})
    assert got.new_keys.to_pylist() == [] and got.drops == ["h0", "h1", "h2"]
    assert got.duplicates == {"s": 3} and got.early == {}
