"""The staged envelope's columns: what a source's ``Received`` fills and a sink finds in ``_meta``."""

from __future__ import annotations

FIELDS: list[tuple[str, str]] = [
    ("source", "string"),
    ("queue", "string"),
    ("message_id", "string"),
    ("receipt_handle", "string"),
    ("body", "string"),
    ("body_base64", "boolean"),
    ("md5", "string"),
    ("sent_ts", "bigint"),
    ("first_receive_ts", "bigint"),
    ("receive_count", "int"),
    ("enqueue_ts", "bigint"),
    ("sender_id", "string"),
    ("group_id", "string"),
    ("dedup_id", "string"),
    ("sequence_number", "string"),
    ("priority", "int"),
    ("attributes", "map<string,string>"),
    ("message_attributes", "map<string,string>"),
    ("message_attribute_types", "map<string,string>"),
    ("payload_ref", "string"),
    ("received_at", "bigint"),
    ("arrival", "bigint"),
    ("receiver", "string"),
]
"""Envelope columns and their Spark SQL types (readers take them by name: a line's key order is
free). Each field of ``Received`` is one of them; the receiver adds ``source``, ``queue``,
``received_at``, ``arrival`` and ``receiver``."""

FILE_COLUMN = "_file"
"""The staged file a row came from (``_metadata.file_path``), kept for error messages."""

META = "_meta"
"""Name of the struct column carrying the staged envelope (message id, queue, timestamps...)."""

BINARY_PREFIX = "binary:"
"""Marks a binary message attribute's value in ``Received.message_attributes``: this prefix, then
the bytes in base64 (an SQS ``Binary`` attribute); the Confluent record layout decodes it back."""

STAGING_FIELDS = ("receipt_handle", "body", "body_base64", "receiver", "arrival", FILE_COLUMN)
"""``_meta`` fields that serve the job, not the output: the handle that deletes the message
(valid until its visibility runs out), the raw body (decoded into the row's columns), how it
was staged, the receiver thread, its arrival order and the staged file (``FILE_COLUMN``). The
files sink leaves them out of what it writes; transforms, dead letters and the other sinks still
see them."""
