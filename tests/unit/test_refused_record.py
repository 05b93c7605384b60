"""A record a sink refused is a ``RefusedRecord``; the dead-letter rows written for it keep their shape."""

from __future__ import annotations

import doctest
import pickle
from types import SimpleNamespace

import orjson
import pytest

from ingest.batch.deadletter import DeadLetter
from ingest.connector import RefusedRecord, refused_record


def _refuse(policy: str, body: object) -> RefusedRecord:
    return refused_record(SimpleNamespace(name="out", on_bad_record=policy), "queue q", "m1", "too big", body)


def test_a_skipped_record_carries_no_body():
    record = _refuse("skip", "x" * 10)
    assert isinstance(record, RefusedRecord) and record.action == "skip"
    assert dict(record) == {"sink": "out", "source_id": "m1", "error": "too big", "action": "skip"}
    assert "body" not in record and record.get("body_encoding") is None


@pytest.mark.parametrize(
    ("body", "extra"),
    [
        ("text", {"body": "text"}),
        (b"\x00ab", {"body": "AGFi", "body_encoding": "base64"}),
        (None, {"body": None}),
    ],
)
def test_a_dead_lettered_record_carries_its_body_as_before(body, extra):
    record = _refuse("dead_letter", body)
    expected = {"sink": "out", "source_id": "m1", "error": "too big", "action": "dead_letter", **extra}
    assert record == expected and expected == record
    assert list(record) == list(expected)  # the key order the dead-letter file keeps
    assert pickle.loads(pickle.dumps(record)) == record  # sent back from the executors


def test_a_failing_policy_raises_and_returns_nothing():
    from ingest.errors import FatalError

    with pytest.raises(FatalError, match=r"source message m1 refused by queue q.*on_bad_record is fail"):
        _refuse("fail", "x")


def test_the_dead_letter_file_keeps_the_same_rows(tmp_path):
    records = [_refuse("dead_letter", b"\x00ab"), _refuse("dead_letter", "text")]
    DeadLetter(str(tmp_path), None).write_records(records, 4, "out")
    lines = (tmp_path / "batch_id=4-out.jsonl").read_bytes().splitlines()
    row = {"batch_id": 4, "sink": "out", "source_id": "m1", "error": "too big", "action": "dead_letter"}
    assert [orjson.loads(line) for line in lines] == [
        {**row, "body": "AGFi", "body_encoding": "base64"},
        {**row, "body": "text"},
    ]


def test_the_docstring_examples_hold():
    import ingest.batch.info

    for module in (ingest.connector.sink, ingest.batch.info):
        failed, tried = doctest.testmod(module)
        assert tried and not failed, module.__name__


def test_refused_records_are_counted_by_action_and_the_dead_letter_ones_kept(tmp_path):
    from ingest.batch.bad_rows import BadRows
    from ingest.metrics import Metrics

    metrics = Metrics("t")
    records = [_refuse("skip", "a"), _refuse("dead_letter", "b"), _refuse("dead_letter", "c")]
    BadRows({}, DeadLetter(str(tmp_path), None), metrics).refused("out", records, 3)
    assert metrics.by_label("rejectedRecords", "action") == {"skip": 1, "dead_letter": 2}
    assert metrics.total("deadLettered") == 2
    lines = (tmp_path / "batch_id=3-out.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["body"] for line in lines] == ["b", "c"]
