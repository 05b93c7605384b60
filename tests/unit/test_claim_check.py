"""Claim-check without Spark: pointers, payload keys, fetching in Arrow batches, the store.

Acks and the ack journal's entries: ``test_claim_check_acks.py``.
"""

from __future__ import annotations

import base64
import uuid

import orjson
import pyarrow as pa
import pytest
from pydantic import SecretStr

from ingest.config.claim_check import ClaimCheckConfig
from ingest.connector import Received
from ingest.connector.claim_check import (
    INVALID_REF,
    LEGACY_POINTER_CLASS,
    POINTER_CLASS,
    mark_pointer,
    parse_pointer,
    payload_key,
    pointer_body,
)
from ingest.connector.payload_store import PayloadStore, PayloadUnavailable
from ingest.decode.payloads import PAYLOAD_ERROR, _resolve
from ingest.errors import TransientError, redact
from tests.support.sqs_server import object_keys, source_cfg, store_for

# --- the pointer format ------------------------------------------------------------------


@pytest.mark.parametrize("cls", [POINTER_CLASS, LEGACY_POINTER_CLASS])
def test_parse_pointer_reads_both_classes(cls):
    body = orjson.dumps([cls, {"s3BucketName": "bkt", "s3Key": "a/b-1"}]).decode()
    assert parse_pointer(body) == ("bkt", "a/b-1")


def test_parse_pointer_reads_what_pointer_body_writes():
    assert parse_pointer(pointer_body("bkt", "k/1")) == ("bkt", "k/1")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("not json {", "not JSON"),
        ('{"s3BucketName": "b", "s3Key": "k"}', "not a [class, {s3BucketName, s3Key}] pointer"),
        (f'["{POINTER_CLASS}", {{"s3BucketName": "b", "s3Key": "k"}}, 3]', "not a [class"),
        (f'["{POINTER_CLASS}", "b/k"]', "not a [class"),
        ('["com.example.Pointer", {"s3BucketName": "b", "s3Key": "k"}]', "unknown pointer class"),
        (f'["{POINTER_CLASS}", {{"s3BucketName": "b"}}]', "lacks s3BucketName or s3Key"),
        (f'["{POINTER_CLASS}", {{"s3BucketName": "", "s3Key": "k"}}]', "lacks s3BucketName or s3Key"),
        (f'["{POINTER_CLASS}", {{"s3BucketName": "b", "s3Key": 7}}]', "lacks s3BucketName or s3Key"),
    ],
)
def test_parse_pointer_says_why_a_body_is_not_a_pointer(body, why):
    with pytest.raises(ValueError) as err:
        parse_pointer(body)
    assert why in str(err.value)


def received(body: str, attributes: dict[str, str] | None = None, types: dict[str, str] | None = None):
    return Received(
        message_id="m-1",
        receipt_handle="h-1",
        body=body,
        message_attributes=dict(attributes or {}),
        message_attribute_types=dict(types or {}),
    )


@pytest.mark.parametrize("size_attribute", ["ExtendedPayloadSize", "SQSLargePayloadSize"])
def test_an_sqs_pointer_is_marked_by_its_size_attribute_which_is_dropped(size_attribute):
    m = received(
        pointer_body("bkt", "k/1"),
        {size_attribute: "2097152", "tenant": "t1"},
        {size_attribute: "Number", "tenant": "String"},
    )
    mark_pointer(m, by_attribute=True)
    assert m.payload_ref == "bkt/k/1"
    assert m.message_attributes == {"tenant": "t1"}
    assert m.message_attribute_types == {"tenant": "String"}


def test_an_sqs_pointer_body_without_the_size_attribute_is_an_ordinary_message():
    body = pointer_body("bkt", "k")
    m = mark_pointer(received(body, {"tenant": "t1"}, {"tenant": "String"}), by_attribute=True)
    assert m.payload_ref is None and m.body == body
    assert m.message_attributes == {"tenant": "t1"}


def test_a_marked_sqs_message_whose_body_is_not_a_pointer_is_invalid():
    m = mark_pointer(received('{"event_id": 1}', {"ExtendedPayloadSize": "10"}), by_attribute=True)
    assert m.payload_ref == INVALID_REF
    assert "ExtendedPayloadSize" not in m.message_attributes


def test_an_ordinary_sqs_message_is_untouched():
    m = mark_pointer(received('{"event_id": 1}', {"tenant": "t1"}, {"tenant": "String"}), by_attribute=True)
    assert m.payload_ref is None and m.body == '{"event_id": 1}'
    assert m.message_attributes == {"tenant": "t1"} and m.message_attribute_types == {"tenant": "String"}


@pytest.mark.parametrize("cls", [POINTER_CLASS, LEGACY_POINTER_CLASS])
def test_an_mns_pointer_is_found_by_its_body_alone(cls):
    body = orjson.dumps([cls, {"s3BucketName": "bkt", "s3Key": "k"}]).decode()
    assert mark_pointer(received(body), by_attribute=False).payload_ref == "bkt/k"


@pytest.mark.parametrize(
    "body", ['{"event_id": 1}', '["a", {"s3BucketName": "b", "s3Key": "k"}]', "plain text", "[]"]
)
def test_an_ordinary_mns_body_is_not_a_pointer(body):
    m = mark_pointer(received(body), by_attribute=False)
    assert m.payload_ref is None and m.body == body


# --- payload keys ------------------------------------------------------------------------


def test_payload_key_is_the_same_for_a_replayed_record():
    assert payload_key("p/", "m-1", b"body") == payload_key("p/", "m-1", b"body")


def test_payload_key_differs_per_source_message_and_per_body():
    base = payload_key("", "m-1", b"body")
    assert payload_key("", "m-2", b"body") != base
    assert payload_key("", "m-1", b"other") != base
    assert payload_key("", None, b"body") != payload_key("", None, b"other")


def test_payload_key_starts_with_the_prefix_and_a_source_id_adds_no_folders():
    key = payload_key("payloads/", "a/b/c", b"x")
    assert key.startswith("payloads/")
    assert key.count("/") == 2, key  # the prefix's folder and the id's, not one per "/" in the id
    assert payload_key("payloads/", "a/b", b"x") != payload_key("payloads/", "a", b"x")


# --- fetching in Arrow batches (the executors' side of resolve_payloads) -----------------


def envelopes(rows: list[tuple[str, str | None, str]]) -> pa.RecordBatch:
    """A staged-envelope batch: (source, payload_ref, body) per row, and a passthrough column."""
    return pa.RecordBatch.from_pydict(
        {
            "message_id": [f"m{i}" for i in range(len(rows))],
            "source": [r[0] for r in rows],
            "payload_ref": pa.array([r[1] for r in rows], pa.string()),
            "body": [r[2] for r in rows],
            "body_base64": [False] * len(rows),
        }
    )


def resolved(batch: pa.RecordBatch, stores) -> tuple[list[pa.RecordBatch], list[dict]]:
    out = list(_resolve(batch, stores))
    return out, pa.Table.from_batches(out).to_pylist()


def test_pointers_are_replaced_by_their_objects_and_failures_named(moto_url, s3, bucket):
    text = "é" + "x" * 5000
    binary = b"\xff\xfe\x00payload"
    s3.put_object(Bucket=bucket, Key="ok/text", Body=text.encode())
    s3.put_object(Bucket=bucket, Key="ok/binary", Body=binary)
    ptr = {k: pointer_body(bucket, k) for k in ("ok/text", "ok/binary", "gone/nowhere")}
    batch = envelopes(
        [
            ("src", None, '{"ordinary": 1}'),
            ("src", f"{bucket}/ok/text", ptr["ok/text"]),
            ("src", f"{bucket}/ok/binary", ptr["ok/binary"]),
            ("src", f"{bucket}/gone/nowhere", ptr["gone/nowhere"]),
            ("src", INVALID_REF, '{"not": "a pointer"}'),
            ("other", f"{bucket}/ok/text", ptr["ok/text"]),
        ]
    )
    _, rows = resolved(batch, {"src": store_for(moto_url)})

    assert [r["message_id"] for r in rows] == [f"m{i}" for i in range(6)]
    ordinary, text_row, binary_row, missing, invalid, no_store = rows
    assert ordinary == {
        "message_id": "m0",
        "source": "src",
        "payload_ref": None,
        "body": '{"ordinary": 1}',
        "body_base64": False,
        PAYLOAD_ERROR: None,
    }
    assert (text_row["body"], text_row["body_base64"], text_row[PAYLOAD_ERROR]) == (text, False, None)
    assert binary_row["body_base64"] is True and binary_row[PAYLOAD_ERROR] is None
    assert base64.b64decode(binary_row["body"]) == binary
    # A missing object: the pointer stays the body (the dead letter shows it), the error names it.
    assert missing["body"] == ptr["gone/nowhere"]
    assert bucket in missing[PAYLOAD_ERROR] and "gone/nowhere" in missing[PAYLOAD_ERROR]
    assert "ExtendedPayloadSize" in invalid[PAYLOAD_ERROR] and invalid["body"] == '{"not": "a pointer"}'
    assert "no claim_check" in no_store[PAYLOAD_ERROR] and no_store["body"] == ptr["ok/text"]


def test_a_batch_without_pointers_passes_through_with_no_errors(moto_url):
    batch = envelopes([("src", None, "a"), ("src", None, "b")])
    out, rows = resolved(batch, {"src": store_for(moto_url)})
    assert len(out) == 1
    assert [(r["body"], r[PAYLOAD_ERROR]) for r in rows] == [("a", None), ("b", None)]


def test_many_pointers_come_back_in_bounded_batches_in_order(moto_url, s3, bucket):
    """Payloads are handed to Spark a few at a time (strings of a batch must stay under 2 GiB)."""
    rows_in: list[tuple[str, str | None, str]] = []
    for i in range(23):
        if i % 3 == 0:
            rows_in.append(("src", None, f"plain-{i}"))
        else:
            s3.put_object(Bucket=bucket, Key=f"k{i}", Body=f"payload-{i}".encode())
            rows_in.append(("src", f"{bucket}/k{i}", pointer_body(bucket, f"k{i}")))
    store = store_for(moto_url, fetch_threads=2)  # at most 2 pointers a batch
    out, rows = resolved(envelopes(rows_in), {"src": store})

    assert len(out) > 1
    assert all(sum(r is not None for r in b.column("payload_ref").to_pylist()) <= 2 for b in out)
    assert [r["message_id"] for r in rows] == [f"m{i}" for i in range(23)]
    assert [r["body"] for r in rows] == [f"plain-{i}" if i % 3 == 0 else f"payload-{i}" for i in range(23)]
    assert all(r[PAYLOAD_ERROR] is None for r in rows)


# --- the store ---------------------------------------------------------------------------


def test_get_refuses_an_object_over_max_payload_bytes_naming_it(moto_url, s3, bucket):
    s3.put_object(Bucket=bucket, Key="big", Body=b"x" * 2048)
    store = store_for(moto_url, max_payload_bytes=1024)
    with pytest.raises(PayloadUnavailable) as err:
        store.get(bucket, "big")
    assert bucket in str(err.value) and "'big'" in str(err.value) and "1024" in str(err.value)
    assert store_for(moto_url, max_payload_bytes=2048).get(bucket, "big") == b"x" * 2048


def test_get_with_another_cap_names_that_option(moto_url, s3, bucket):
    s3.put_object(Bucket=bucket, Key="big", Body=b"x" * 2048)
    store = store_for(moto_url, fetch_content_max_bytes=1024)
    with pytest.raises(PayloadUnavailable, match=r"over claim_check\.fetch_content_max_bytes \(1024\)"):
        store.get(bucket, "big", "fetch_content_max_bytes")
    assert store.get(bucket, "big") == b"x" * 2048  # under max_payload_bytes


def test_an_invalid_bucket_name_is_unavailable_at_once_not_retried_as_transient(moto_url):
    """botocore refuses the name before any request (ParamValidationError): no retry changes it."""
    with pytest.raises(PayloadUnavailable, match=r"GetObject of object 'k' in bucket 'no bucket!'"):
        store_for(moto_url).get("no bucket!", "k")


def test_delete_counts_a_missing_key_as_deleted_and_reports_a_missing_bucket(moto_url, s3, bucket):
    s3.put_object(Bucket=bucket, Key="here", Body=b"1")
    nowhere = f"nb-{uuid.uuid4().hex[:12]}"
    failed = store_for(moto_url).delete(
        [f"{bucket}/here", f"{bucket}/already-gone", f"{nowhere}/a", f"{nowhere}/b"]
    )
    assert set(failed) == {f"{nowhere}/a", f"{nowhere}/b"}
    assert all(nowhere in why for why in failed.values()), failed
    assert object_keys(s3, bucket) == set()


def test_the_claim_check_secret_never_appears_in_an_error(moto_url, s3, bucket):
    """The secret is put where an error quotes text (the object's key): only the redactor hides it."""
    secret = f"Cc5ecret{uuid.uuid4().hex}"
    cfg = {"access_key_id": "AKIDCLAIMCHECKTEST", "access_key_secret": secret}
    store = store_for(moto_url, **cfg)
    with pytest.raises(PayloadUnavailable) as err:
        store.get(bucket, f"k-{secret}")
    assert secret not in str(err.value) and bucket in str(err.value) and "NoSuchKey" in str(err.value)

    closed = PayloadStore(
        ClaimCheckConfig(endpoint_url="http://127.0.0.1:9", max_retries=0, **cfg), store.owner
    )
    with pytest.raises(TransientError) as unreachable:
        closed.get(bucket, f"k-{secret}")
    assert secret not in str(unreachable.value) and "127.0.0.1:9" in str(unreachable.value)


def test_stores_differing_only_in_their_secret_do_not_share_a_client():
    """The client cache is keyed on the config, whose repr masks secrets (a rotated secret)."""
    owner = source_cfg("http://127.0.0.1/000000000000/q", "http://127.0.0.1:9")

    def store(secret: str) -> PayloadStore:
        return PayloadStore(ClaimCheckConfig(access_key_id="AKID", access_key_secret=secret), owner)

    old, new = store(f"old-{uuid.uuid4().hex}"), store(f"new-{uuid.uuid4().hex}")
    assert old._client() is not new._client()
    assert store(_secret_of(new))._client() is new._client()  # the same config: one client


def _secret_of(store: PayloadStore) -> str:
    secret = store.cfg.access_key_secret
    assert secret is not None
    return secret.get_secret_value()


@pytest.mark.parametrize("kind", ["source", "sink"])
def test_the_bucket_goes_through_the_queues_http_proxy(kind):
    """The S3 client gets the SQS config's proxy, with its user and password (the calls going
    through a real proxy: tests/integration/test_claim_check_sink.py)."""
    from sinks.sqs.config import SqsSinkConfig

    if kind == "source":
        proxied = {"sqs.proxy.url": "http://127.0.0.1:3128", "sqs.proxy.user": "u@x"}
        owner = source_cfg("http://127.0.0.1/000000000000/q", "http://127.0.0.1:1", **proxied)
        owner = owner.model_copy(update={"proxy_password": SecretStr("pw:s3cret-1")})
    else:
        owner = SqsSinkConfig.model_validate(
            {"type": "sqs", "name": "out", "sqsUrl": "http://127.0.0.1/000000000000/q"}
            | {"proxy_url": "http://127.0.0.1:3128", "proxy_user": "u@x", "proxy_password": "pw:s3cret-1"}
        )
    store = PayloadStore(ClaimCheckConfig(bucket="payloads", endpoint_url="http://127.0.0.1:1"), owner)
    proxy = "http://u%40x:pw%3As3cret-1@127.0.0.1:3128"
    assert store._client()._client_config.proxies == {"http": proxy, "https": proxy}
    assert "s3cret" not in redact("proxy password pw:s3cret-1")
