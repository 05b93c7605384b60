"""Body decoding on Spark: json/csv/raw, json options, base64 bodies, the _meta struct and _error."""

from __future__ import annotations

import pytest

from ingest.decode.rows import ERROR, decode
from tests.support.decode_helpers import collect, envelopes, opts

pytestmark = pytest.mark.spark


def test_json_good_bad_and_types(spark):
    df = envelopes(spark, ['{"a": 1, "ts": "2026-01-02T03:04:05.678Z"}', '{"a": "x"}', "nope", None])
    rows = collect(decode(df, opts(format="json"), "a BIGINT, ts TIMESTAMP"))
    assert rows[0]["a"] == 1 and rows[0]["ts"].microsecond == 678000 and rows[0][ERROR] is None
    assert "malformed JSON" in rows[1][ERROR]
    assert "malformed JSON" in rows[2][ERROR]
    assert rows[3][ERROR] == "empty body"
    assert rows[0]["_meta"]["message_id"] == "m0" and rows[0]["_meta"]["receipt_handle"] == "h0"


def test_json_nested_past_the_parsers_limit_says_so(spark):
    """Spark's parser refuses JSON nested deeper than 1000 levels: the error names that limit,
    not a malformed body; brackets inside strings are not nesting."""

    def nested(levels: int) -> str:  # an object holding levels - 1 arrays
        return '{"a": 1, "b": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"

    bodies = [nested(1000), nested(1001), nested(10_000), "[" * 10_000 + "]" * 10_000]
    bodies += ['{"a": "' + "[" * 5000 + '", "b": ' + "{" * 5, '{"a": "x"}', "{not json"]
    rows = collect(decode(envelopes(spark, bodies), opts(format="json"), "a INT, b STRING"))
    deep = "JSON nested deeper than 1000 levels (the parser's limit)"
    assert [r[ERROR] for r in rows] == [None, deep, deep, deep] + [
        "malformed JSON or a value of the wrong type"
    ] * 3
    assert rows[0]["a"] == 1


@pytest.mark.parametrize("offset", ["Z", "+08:00", "+0800", "+08"])
def test_iso_8601_timestamps_take_any_fraction_and_each_offset_form(spark, offset):
    from datetime import datetime, timedelta, timezone

    fractions = {"": 0, ".1": 100_000, ".123": 123_000, ".123456": 123_456, ".123456789": 123_456}
    bodies = [f'{{"ts": "2026-01-02T03:04:05{f}{offset}"}}' for f in fractions]
    df = decode(envelopes(spark, bodies), opts(format="json"), "ts TIMESTAMP")
    rows = sorted(df.selectExpr("_meta.message_id AS id", "unix_micros(ts) AS us", ERROR).collect())
    shift = timedelta(hours=0 if offset == "Z" else 8)
    base = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc) - shift
    want = [int(base.timestamp()) * 1_000_000 + us for us in fractions.values()]
    assert [(r["us"], r[ERROR]) for r in rows] == [(us, None) for us in want]


def test_json_sql_timestamp_standard_and_pattern(spark):
    df = envelopes(spark, ['{"ts": "2026-01-02 03:04:05.5"}'])
    rows = collect(
        decode(df, opts(format="json", **{"json.timestamp-format.standard": "SQL"}), "ts TIMESTAMP")
    )
    assert rows[0][ERROR] is None and rows[0]["ts"].second == 5
    df = envelopes(spark, ['{"ts": "02/01/2026 03:04"}'])
    o = opts(format="json", **{"json.timestamp-format.pattern": "dd/MM/yyyy HH:mm"})
    rows = collect(decode(df, o, "ts TIMESTAMP"))
    assert rows[0][ERROR] is None and (rows[0]["ts"].month, rows[0]["ts"].day) == (1, 2)


def test_fail_on_missing_field(spark):
    df = envelopes(spark, ['{"a": 1, "b": null}', '{"a": 1}'])
    rows = collect(decode(df, opts(format="json", **{"json.fail-on-missing-field": True}), "a INT, b STRING"))
    assert rows[0][ERROR] is None  # present but null is not missing
    assert rows[1][ERROR] == "missing field 'b'"


def test_ignore_parse_errors_nulls_fields(spark):
    df = envelopes(spark, ['{"a": "x", "b": "ok"}'])
    rows = collect(decode(df, opts(format="json", **{"json.ignore-parse-errors": True}), "a INT, b STRING"))
    assert rows[0][ERROR] is None and rows[0]["a"] is None


def test_base64_bodies(spark):
    df = envelopes(spark, ['{"a": 7}'], b64=True)
    rows = collect(decode(df, opts(format="json"), "a INT"))
    assert rows[0]["a"] == 7 and rows[0][ERROR] is None


def test_csv(spark):
    df = envelopes(spark, ["1,alice,2.5", "x,bob,1", "3;carol;4"])
    rows = collect(decode(df, opts(format="csv"), "id INT, name STRING, score DOUBLE"))
    assert (rows[0]["id"], rows[0]["name"], rows[0]["score"], rows[0][ERROR]) == (1, "alice", 2.5, None)
    assert "malformed CSV" in rows[1][ERROR]
    rows = collect(
        decode(df, opts(format="csv", **{"csv.field-delimiter": ";"}), "id INT, name STRING, score DOUBLE")
    )
    assert rows[2]["name"] == "carol" and rows[2][ERROR] is None


def test_raw_named_and_default_column(spark):
    df = envelopes(spark, ["anything at all"])
    assert collect(decode(df, opts(format="raw"), "data STRING"))[0]["data"] == "anything at all"
    assert collect(decode(df, opts(format="raw"), None))[0]["body"] == "anything at all"


def test_blank_bodies_and_json_values_that_are_not_objects_are_errors(spark):
    # Spark flags a non-object as a corrupt record; a blank body it parses to nulls silently.
    bodies = ["", "   ", "\n\t ", "123", '"text"', "[1, 2]", "null", '  {"event_id": 1}']
    rows = collect(decode(envelopes(spark, bodies), opts(format="json"), "event_id BIGINT"))
    errors = [r[ERROR] for r in rows]
    assert errors[:3] == ["empty body"] * 3
    assert errors[3:7] == ["malformed JSON or a value of the wrong type"] * 4
    assert errors[7] is None and rows[7]["event_id"] == 1
    # json.ignore-parse-errors still lets a non-object through as nulls, but never a blank body.
    lenient = collect(
        decode(
            envelopes(spark, bodies),
            opts(format="json", **{"json.ignore-parse-errors": True}),
            "event_id BIGINT",
        )
    )
    assert [r[ERROR] for r in lenient] == ["empty body"] * 3 + [None] * 5


def test_null_in_a_not_null_schema_field_is_an_error(spark):
    bodies = ['{"event_id": 1, "action": "a"}', '{"action": "b"}', "{}", '{"event_id": null}']
    rows = collect(
        decode(envelopes(spark, bodies), opts(format="json"), "event_id BIGINT NOT NULL, action STRING")
    )
    assert [r[ERROR] for r in rows] == [None] + ["field 'event_id' is null"] * 3
    csv = collect(
        decode(
            envelopes(spark, ["", "1,a", ",b"]), opts(format="csv"), "event_id BIGINT NOT NULL, action STRING"
        )
    )
    assert [r[ERROR] for r in csv] == ["empty body", None, "field 'event_id' is null"]


def test_oss_notifications_take_the_schema_types_and_the_json_options(spark):
    import json

    from tests.support.oss_notifications import notification

    good = notification(key="a.jpg", size=1000)
    bad_size = notification(key="b.jpg", size="big")
    no_size = notification(key="c.jpg")
    del no_size["events"][0]["oss"]["object"]["size"]
    micros = notification(key="d.jpg")
    micros["events"][0]["eventTime"] = "2026-03-01T11:43:06.123456+08:00"
    bodies = [json.dumps(n) for n in (good, bad_size, no_size, micros)]
    ddl = (
        "ossObjectKey STRING, ossObjectSize BIGINT, eventTime TIMESTAMP, ossBucketName STRING, region STRING"
    )

    def run(**options):
        o = opts(format="json", messageType="OSS", **options)
        df = decode(envelopes(spark, bodies), o, ddl)
        return collect(df.selectExpr("*", "unix_micros(eventTime) AS us"))

    rows = run()
    assert [(r["ossObjectKey"], r["ossObjectSize"], r[ERROR]) for r in rows] == [
        ("a.jpg", 1000, None),
        ("b.jpg", None, "field 'ossObjectSize' is not a bigint"),
        ("c.jpg", None, None),
        ("d.jpg", 122539, None),
    ]
    assert rows[3]["us"] - rows[0]["us"] == -8 * 3600 * 1_000_000 + 123_456  # any fraction, any offset
    lenient = run(**{"json.ignore-parse-errors": True})
    assert [(r["ossObjectSize"], r[ERROR]) for r in lenient][:2] == [(1000, None), (None, None)]
    strict = run(**{"json.fail-on-missing-field": True})
    assert strict[2][ERROR] == "missing field 'ossObjectSize'"
    as_text = collect(
        decode(
            envelopes(spark, bodies[:1]),
            opts(format="json", messageType="OSS"),
            "ossObjectSize STRING, eventTime STRING",
        )
    )
    assert (as_text[0]["ossObjectSize"], as_text[0]["eventTime"]) == ("1000", "2026-03-01T11:43:06.000Z")


@pytest.mark.parametrize(
    ("ddl", "columns"),
    [
        ("EventName STRING, OssObjectSize BIGINT", ["EventName", "OssObjectSize"]),
        ("eventname STRING, ossobjectsize BIGINT", ["eventname", "ossobjectsize"]),
    ],
)
def test_oss_event_columns_are_matched_in_any_case_and_keep_the_schemas_spelling(spark, ddl, columns):
    import json

    from tests.support.oss_notifications import notification

    bodies = [json.dumps(notification("ObjectRemoved:DeleteObject", size=7)), '{"userId": 1}']
    df = decode(envelopes(spark, bodies), opts(format="json", messageType="OSS"), ddl)
    assert df.columns[:2] == columns
    rows = collect(df)
    assert [(r[columns[0]], r[columns[1]], r[ERROR]) for r in rows] == [
        ("ObjectRemoved:DeleteObject", 7, None),
        (None, None, "not an OSS event notification"),
    ]


def test_without_a_schema_json_bodies_are_captured_schemaless(spark):
    bodies = ['{"a": 1, "b": {"c": [1, 2]}, "s": "x"}', "[1, 2]", "42", "{broken", "   "]
    rows = collect(decode(envelopes(spark, bodies), opts(format="json"), None))
    assert [r["body"] for r in rows] == bodies
    assert rows[0]["fields"] == {"a": "1", "b": '{"c":[1,2]}', "s": "x"}
    assert [r["fields"] for r in rows[1:4]] == [None, None, None]
    assert [r[ERROR] for r in rows] == [None, None, None, None, "empty body"]


NOT_UTF8_BYTES = b'{"a": 1, "s": "\xff\xfe\xfa"}'
"""A JSON object whose string holds bytes that are not UTF-8 (Spark would read them as U+FFFD)."""


@pytest.mark.parametrize(
    ("options", "schema"),
    [
        ({"format": "json"}, "a INT, s STRING"),
        ({"format": "json", "json.ignore-parse-errors": True}, "a INT, s STRING"),
        ({"format": "json"}, None),
        ({"format": "csv"}, "a STRING, s STRING"),
        ({"format": "raw"}, "data STRING"),
        ({"format": "raw"}, None),
        ({"format": "json", "messageType": "OSS"}, None),
    ],
)
def test_a_base64_body_that_is_not_utf8_is_a_bad_message_not_replacement_chars(spark, options, schema):
    from ingest.decode.rows import NOT_UTF8

    bodies = [NOT_UTF8_BYTES, '{"a": 2, "s": "é ok"}'.encode()]
    rows = collect(decode(envelopes(spark, bodies, b64=True), opts(**options), schema))
    assert rows[0][ERROR] == NOT_UTF8
    assert rows[1][ERROR] in (None, "not an OSS event notification")  # UTF-8 decodes as before
    assert not any("\ufffd" in str(v) for v in rows[1].values())


def test_raw_binary_takes_any_bytes(spark):
    rows = collect(decode(envelopes(spark, [NOT_UTF8_BYTES], b64=True), opts(format="raw"), "data BINARY"))
    assert rows[0]["data"] == bytearray(NOT_UTF8_BYTES) and rows[0][ERROR] is None


@pytest.mark.parametrize("policy", ["dead_letter", "skip", "fail"])
def test_an_mns_body_that_is_not_utf8_follows_on_bad_message_with_its_bytes_kept(spark, tmp_path, policy):
    """The MNS source base64-decodes a body and finds bytes that are not UTF-8 (``decode_body``):
    the message is a bad one under ``on_bad_message``; the dead letter holds its exact bytes."""
    import base64

    import orjson

    from ingest.batch.bad_rows import BadRows
    from ingest.batch.deadletter import DeadLetter
    from ingest.errors import FatalError
    from ingest.metrics import Metrics
    from sources.mns.config import MnsSourceConfig
    from sources.mns.messages import decode_body

    body, flagged = decode_body(base64.b64encode(NOT_UTF8_BYTES).decode(), base64_body=True)
    df = envelopes(spark, [body, '{"a": 2, "s": "fine"}'])
    df = df.withColumn("body_base64", df.message_id == "m0").withColumn("_file", df.message_id)
    source = MnsSourceConfig.model_validate(
        {"type": "mns", "name": "s", "endpoint": "http://127.0.0.1:1", "queueName": "q"}
        | {"accessKeyId": "id", "accessKeySecret": "k", "on_bad_message": policy}
    )
    metrics = Metrics("job")
    bad_rows = BadRows({"s": source}, DeadLetter(str(tmp_path / "dlq"), None), metrics)
    decoded = decode(df, opts(format="json"), "a INT, s STRING")
    if policy == "fail":
        with pytest.raises(FatalError, match=r"message m0 from source s .* not UTF-8 text"):
            bad_rows.undecodable(decoded, 3)
        return
    assert flagged and bad_rows.undecodable(decoded, 3) == 1
    assert metrics.total("deserializationErrors") == 1
    good = decoded.filter(decoded[ERROR].isNull()).select("a").collect()
    assert [r.a for r in good] == [2]
    dead = tmp_path / "dlq" / "batch_id=3.jsonl"
    if policy == "skip":
        assert not dead.exists()
        return
    [record] = [orjson.loads(line) for line in dead.read_bytes().splitlines()]
    assert record["message_id"] == "m0" and record["body_base64"] is True
    assert base64.b64decode(record["body"]) == NOT_UTF8_BYTES
