"""flatten_oss_event on realistic OSS event notifications: created and removed objects, plain and base64."""

from __future__ import annotations

import base64
import json

import pytest

from ingest.decode.oss_events import OSS_EVENT_COLUMNS, OSS_EVENT_DDL, flatten_oss_event
from tests.support.oss_notifications import notification


def test_put_object_maps_every_reference_column():
    row = flatten_oss_event(json.dumps(notification()))
    assert list(row) == OSS_EVENT_COLUMNS
    assert row == {
        "eventName": "ObjectCreated:PutObject",
        "eventSource": "acs:oss",
        "eventTime": "2026-03-01T11:43:06.000Z",
        "eventVersion": "1.0",
        "region": "cn-hangzhou",
        "ossBucketArn": "acs:oss:cn-hangzhou:1148930107246818:media-in",
        "ossBucketName": "media-in",
        "ossBucketOwnerIdentity": "1148930107246818",
        "ossObjectKey": "photos/cat.jpg",
        "ossObjectSize": 122539,
        "ossObjectETag": "688A7BF4F233DC9C88A80BF985AB7329",
        "ossObjectDeltaSize": 122539,
        "ossObjectReadFrom": None,
        "ossObjectReadTo": None,
        "ossOssSchemaVersion": "1.0",
        "ossRuleId": "new-photos",
        "requestParametersSourceIPAddress": "203.0.113.7",
        "responseElementsRequestId": "5799F3A6C7DBE5E5234BEAC1",
        "userIdentityPrincipalId": "1148930107246818",
    }


def test_delete_object_in_base64_as_mns_delivers_it():
    doc = notification("ObjectRemoved:DeleteObject", key="old/report.pdf", size=0, deltaSize=-5120)
    body = base64.b64encode(json.dumps(doc).encode()).decode()
    row = flatten_oss_event(body)
    assert row["eventName"] == "ObjectRemoved:DeleteObject"
    assert (row["ossObjectKey"], row["ossObjectSize"], row["ossObjectDeltaSize"]) == (
        "old/report.pdf",
        0,
        -5120,
    )
    assert flatten_oss_event(body.encode()) == row  # bytes too


def test_only_the_first_event_is_read_and_ranges_are_kept():
    doc = notification("ObjectDownloaded:GetObject", readFrom=0, readTo=1023)
    doc["events"].append(notification("ObjectRemoved:DeleteObject")["events"][0])
    row = flatten_oss_event(json.dumps(doc))
    assert (row["eventName"], row["ossObjectReadFrom"], row["ossObjectReadTo"]) == (
        "ObjectDownloaded:GetObject",
        0,
        1023,
    )


def test_unicode_keys_survive_base64():
    doc = notification(key="фото/東京 1.png")
    body = base64.b64encode(json.dumps(doc, ensure_ascii=False).encode()).decode()
    assert flatten_oss_event(body)["ossObjectKey"] == "фото/東京 1.png"


@pytest.mark.parametrize(
    "body", ['{"userId": 1}', '{"events": []}', "[1, 2]", "not json, not base64!", "e30="]
)
def test_other_bodies_are_rejected(body):
    with pytest.raises(ValueError, match="not"):
        flatten_oss_event(body)


def test_ddl_types_the_columns():
    assert OSS_EVENT_DDL.startswith("`eventName` STRING, `eventSource` STRING, `eventTime` TIMESTAMP")
    assert "`ossObjectSize` BIGINT" in OSS_EVENT_DDL and OSS_EVENT_DDL.count("`") == 2 * len(
        OSS_EVENT_COLUMNS
    )
