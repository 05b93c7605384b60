"""Helpers for the OSS event tests: a notification as OSS publishes it to MNS."""

from __future__ import annotations


def notification(name: str = "ObjectCreated:PutObject", key: str = "photos/cat.jpg", **object_fields) -> dict:
    """An OSS event notification as OSS publishes it to MNS (one event)."""
    obj = {"deltaSize": 122539, "eTag": "688A7BF4F233DC9C88A80BF985AB7329", "key": key, "size": 122539}
    return {
        "events": [
            {
                "eventName": name,
                "eventSource": "acs:oss",
                "eventTime": "2026-03-01T11:43:06.000Z",
                "eventVersion": "1.0",
                "oss": {
                    "bucket": {
                        "arn": "acs:oss:cn-hangzhou:1148930107246818:media-in",
                        "name": "media-in",
                        "ownerIdentity": "1148930107246818",
                        "virtualBucket": "",
                    },
                    "object": obj | object_fields,
                    "ossSchemaVersion": "1.0",
                    "ruleId": "new-photos",
                },
                "region": "cn-hangzhou",
                "requestParameters": {"sourceIPAddress": "203.0.113.7"},
                "responseElements": {"requestId": "5799F3A6C7DBE5E5234BEAC1"},
                "userIdentity": {"principalId": "1148930107246818"},
            }
        ]
    }
