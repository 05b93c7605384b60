"""record_schema confluent: a message received from SQS (moto) becomes the Confluent SQS source's
record, key / value / headers under the reference's field names and types."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ingest.decode.rows import decode_sources
from ingest.intake.envelope import encode, spark_schema
from sources.sqs.source import SqsSource
from tests.support.source_contract import receive_n
from tests.support.sqs_server import source_cfg

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_fifo_message_becomes_the_confluent_key_value_and_headers(spark, sqs, make_queue, moto_url):
    url = make_queue(fifo=True)
    sqs.send_message(
        QueueUrl=url,
        MessageBody='{"order": 7}',
        MessageGroupId="g1",
        MessageDeduplicationId="d1",
        MessageAttributes={
            "s": {"DataType": "String", "StringValue": "text"},
            "n": {"DataType": "Number", "StringValue": "-4.5"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        },
    )
    cfg = source_cfg(url, moto_url, record_schema="confluent", visibility_timeout=30)
    received = receive_n(SqsSource(cfg), 1)[0]
    lines = [line.decode() for line in encode(cfg.name, url, "src#0", [received])]
    staged = spark.read.schema(spark_schema()).json(spark.sparkContext.parallelize(lines))
    df = decode_sources(staged, [cfg], None)

    kinds = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert kinds["key"] == "struct<QueueUrl:string,MessageId:string,MessageGroupId:string>"
    assert kinds["value"] == (
        "struct<Body:string,ApproximateFirstReceiveTimestamp:bigint,ApproximateReceiveCount:int,"
        "SenderId:string,SentTimestamp:bigint,MessageDeduplicationId:string,MessageGroupId:string,"
        "SequenceNumber:string>"
    )
    assert kinds["headers"] == "array<struct<key:string,value:binary>>"
    row = df.collect()[0]
    assert row.key.asDict() == {"QueueUrl": url, "MessageId": received.message_id, "MessageGroupId": "g1"}
    value = row.value.asDict()
    assert value["Body"] == '{"order": 7}' and value["ApproximateReceiveCount"] == 1
    assert value["MessageDeduplicationId"] == "d1" and value["MessageGroupId"] == "g1"
    assert value["SentTimestamp"] == received.sent_ts <= value["ApproximateFirstReceiveTimestamp"]
    assert value["SenderId"] and value["SequenceNumber"] == received.sequence_number
    headers = {h.key: bytes(h.value) for h in row.headers}
    assert headers == {"s": b"text", "n": b"-4.5", "b": b"\x00\xff"}
    assert row._meta.message_id == received.message_id and row._error is None


def test_the_confluent_record_keeps_the_body_as_text():
    with pytest.raises(ValidationError, match="record_schema confluent keeps the body as text"):
        source_cfg(
            "http://127.0.0.1:1/000000000000/q",
            "http://127.0.0.1:1",
            record_schema="confluent",
            format="json",
        )
