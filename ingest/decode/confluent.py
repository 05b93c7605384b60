"""The Confluent SQS source's record layout (``record_schema: confluent``): key, value, headers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.connector.envelope import BINARY_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import Column

KEY_FIELDS = (("QueueUrl", "queue"), ("MessageId", "message_id"), ("MessageGroupId", "group_id"))
"""The record key's fields, as the Confluent page names them, and the envelope field each is."""

VALUE_FIELDS = (
    ("ApproximateFirstReceiveTimestamp", "first_receive_ts"),
    ("ApproximateReceiveCount", "receive_count"),
    ("SenderId", "sender_id"),
    ("SentTimestamp", "sent_ts"),
    ("MessageDeduplicationId", "dedup_id"),
    ("MessageGroupId", "group_id"),
    ("SequenceNumber", "sequence_number"),
)
"""The record value's fields after ``Body``, and the envelope field each is."""


def confluent_columns(body_text: Column) -> list[Column]:
    """``key`` and ``value`` structs and ``headers`` (``array<struct<key string, value binary>>``,
    the layout of Spark's Kafka source): String and Number attributes as their UTF-8 bytes,
    Binary ones as their bytes."""
    from pyspark.sql import functions as F

    key = F.struct(*[F.col(field).alias(name) for name, field in KEY_FIELDS]).alias("key")
    value = F.struct(
        body_text.alias("Body"), *[F.col(field).alias(name) for name, field in VALUE_FIELDS]
    ).alias("value")

    def header(entry: Column) -> Column:
        text = entry["value"]
        binary = F.coalesce(F.col("message_attribute_types")[entry["key"]], F.lit("")).startswith("Binary")
        raw = F.when(binary, F.unbase64(F.substring(text, len(BINARY_PREFIX) + 1, 1 << 30)))
        return F.struct(entry["key"].alias("key"), raw.otherwise(F.encode(text, "UTF-8")).alias("value"))

    entries = F.map_entries(F.coalesce(F.col("message_attributes"), F.create_map()))
    headers = F.transform(entries, header).alias("headers")
    return [key, value, headers]
