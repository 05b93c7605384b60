"""Flattens OSS event notifications (as MNS delivers them) into the reference connector's flat columns.

An OSS event notification body is JSON ``{"events": [{...}]}``, often base64-encoded; like
the reference SMQ connector, only the first element of ``events`` is read. Two equivalent
forms: ``flatten_oss_event`` in plain Python, and ``oss_event_columns`` as native Spark
expressions (one ``from_json`` per row, no Python UDF) for the decoder.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column

OSS_EVENT_FIELDS: list[tuple[str, str, str]] = [
    ("eventName", "eventName", "STRING"),
    ("eventSource", "eventSource", "STRING"),
    ("eventTime", "eventTime", "TIMESTAMP"),
    ("eventVersion", "eventVersion", "STRING"),
    ("region", "region", "STRING"),
    ("ossBucketArn", "oss.bucket.arn", "STRING"),
    ("ossBucketName", "oss.bucket.name", "STRING"),
    ("ossBucketOwnerIdentity", "oss.bucket.ownerIdentity", "STRING"),
    ("ossObjectKey", "oss.object.key", "STRING"),
    ("ossObjectSize", "oss.object.size", "BIGINT"),
    ("ossObjectETag", "oss.object.eTag", "STRING"),
    ("ossObjectDeltaSize", "oss.object.deltaSize", "BIGINT"),
    ("ossObjectReadFrom", "oss.object.readFrom", "BIGINT"),
    ("ossObjectReadTo", "oss.object.readTo", "BIGINT"),
    ("ossOssSchemaVersion", "oss.ossSchemaVersion", "STRING"),
    ("ossRuleId", "oss.ruleId", "STRING"),
    ("requestParametersSourceIPAddress", "requestParameters.sourceIPAddress", "STRING"),
    ("responseElementsRequestId", "responseElements.requestId", "STRING"),
    ("userIdentityPrincipalId", "userIdentity.principalId", "STRING"),
]
"""(column, JSON path inside ``events[0]``, Spark type): the reference connector's mapping."""

OSS_EVENT_COLUMNS = [name for name, _, _ in OSS_EVENT_FIELDS]
"""The column names in their canonical spelling (matching is case-insensitive)."""

OSS_EVENT_DDL = ", ".join(f"`{name}` {kind}" for name, _, kind in OSS_EVENT_FIELDS)
"""Spark DDL of the flattened columns."""


def _json_text(body: str | bytes) -> str:
    """The JSON text of a body: as it is if it looks like JSON, else base64-decoded."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    text = text.strip()
    if text.startswith("{"):
        return text
    try:
        return base64.b64decode("".join(text.split()), validate=True).decode("utf-8").strip()
    except (binascii.Error, ValueError) as err:
        raise ValueError(f"not JSON and not base64 JSON: {err}") from None


def flatten_oss_event(body: str | bytes) -> dict[str, Any]:
    """The first event of an OSS notification as ``{column: value}`` for every ``OSS_EVENT_COLUMNS``.

    Values are as the JSON has them (``eventTime`` an ISO-8601 string, sizes numbers); a path
    missing from the event gives None. Raises ``ValueError`` for a body that is not an OSS
    event notification (no JSON object with a non-empty ``events`` list).

    >>> flatten_oss_event('{"events": [{"eventName": "ObjectCreated:PutObject"}]}')["eventName"]
    'ObjectCreated:PutObject'
    """
    try:
        doc = json.loads(_json_text(body))
    except json.JSONDecodeError as err:
        raise ValueError(f"not an OSS event notification: {err}") from None
    events = doc.get("events") if isinstance(doc, dict) else None
    if not isinstance(events, list) or not events or not isinstance(events[0], dict):
        raise ValueError("not an OSS event notification: no events")
    out: dict[str, Any] = {}
    for name, path, _ in OSS_EVENT_FIELDS:
        node: Any = events[0]
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        out[name] = node
    return out


def _parse_schema() -> str:
    """DDL of ``{events: [{...}]}`` with every leaf a STRING (typed casts come after, null on failure)."""
    tree: dict[str, Any] = {}
    for _, path, _ in OSS_EVENT_FIELDS:
        node = tree
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = None

    def ddl(node: dict[str, Any]) -> str:
        return ", ".join(f"`{k}`: {'STRING' if v is None else f'STRUCT<{ddl(v)}>'}" for k, v in node.items())

    return f"events ARRAY<STRUCT<{ddl(tree)}>>"


def oss_event_columns(body_col: Column | str, typed: bool = True) -> dict[str, Column]:
    """Spark expressions flattening the notification in ``body_col``: ``{lower-case name: Column}``.

    Does what ``flatten_oss_event`` does, natively: a body not starting with ``{`` is
    base64-decoded first; columns are typed as in ``OSS_EVENT_DDL`` (``eventTime`` a
    TIMESTAMP, sizes BIGINT), null where the body is not an event notification or a value
    does not parse; with ``typed`` false every column is the value's JSON text, for the caller
    to type. Keys are lower-case so callers match requested names case-insensitively.
    """
    from pyspark.sql import functions as F

    text = F.trim(F.col(body_col) if isinstance(body_col, str) else body_col)
    decoded = F.try_to_binary(F.regexp_replace(text, r"\s", ""), F.lit("base64")).cast("string")
    json_text = F.when(text.startswith("{"), text).otherwise(decoded)
    event = F.try_element_at(F.from_json(json_text, _parse_schema()).getField("events"), F.lit(1))
    out = {}
    for name, path, kind in OSS_EVENT_FIELDS:
        value = event
        for key in path.split("."):
            value = value.getField(key)
        if not typed:
            pass
        elif kind == "TIMESTAMP":
            value = F.try_to_timestamp(value)
        elif kind != "STRING":
            value = value.try_cast(kind.lower())
        out[name.lower()] = value
    return out
