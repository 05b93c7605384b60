"""Claim-check in the sinks without servers: which records are offloaded, attributes, dedup ids, puts."""

from __future__ import annotations

import base64
import pickle
import threading
import time
from typing import Any

import pytest
from pydantic import ValidationError

from ingest.config.claim_check import ClaimCheckConfig
from ingest.connector.claim_check import Offloader, payload_key, pointer_body
from ingest.connector.payload_store import PayloadUnavailable
from ingest.errors import FatalError, TransientError
from sinks.mns.config import MnsSinkConfig
from sinks.mns.sink import MnsPartitionWriter
from sinks.sqs.config import SqsSinkConfig
from sinks.sqs.sink import SqsPartitionWriter, dedup_id

URL = "https://sqs.us-east-1.amazonaws.com/123456789012/out"
CLAIM = {"bucket": "payloads"}


def sqs(url: str = URL, claim: dict | None = CLAIM, **options) -> SqsPartitionWriter:
    # Both byte limits set: no GetQueueAttributes call.
    base: dict[str, Any] = {"type": "sqs", "name": "out", "sqsUrl": url, "maxRecordSizeInBytes": 1000}
    base |= {"maxBatchSizeInBytes": 1000, "claim_check": claim}
    return SqsPartitionWriter(SqsSinkConfig.model_validate(base | options))


def mns(claim: dict | None = CLAIM, **options) -> MnsPartitionWriter:
    base: dict[str, Any] = {"type": "mns", "name": "out", "endpoint": "http://127.0.0.1:1", "queueName": "q"}
    base |= {"accessKeyId": "id", "accessKeySecret": "secret", "claim_check": claim}
    return MnsPartitionWriter(MnsSinkConfig.model_validate(base | options))


def test_sqs_offloads_records_over_the_record_limit_by_default():
    w = sqs()
    at_limit = w.entry({"body": "x" * 1000, "source_id": "a"})
    assert at_limit == {"MessageBody": "x" * 1000}
    over = w.entry({"body": "x" * 1001, "source_id": "b"})
    assert isinstance(over, dict)
    key = payload_key("", "b", b"x" * 1001)
    assert over["MessageBody"] == pointer_body("payloads", key)
    assert over["MessageAttributes"] == {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": "1001"}}
    assert w.size(over) < 1000  # only the pointer message counts toward the limits


def test_sqs_size_counts_attributes_toward_the_threshold():
    w = sqs(attribute_columns=["tag"], claim={"bucket": "payloads", "threshold": 100})
    plain = w.entry({"body": "x" * 95, "source_id": "a"})
    tagged = w.entry({"body": "x" * 95, "source_id": "a", "attr_tag": "vv"})  # 95 + 3 + 6 + 2
    assert isinstance(plain, dict) and plain["MessageBody"] == "x" * 95
    assert isinstance(tagged, dict) and "ExtendedPayloadSize" in tagged["MessageAttributes"]
    assert tagged["MessageAttributes"]["tag"] == {"DataType": "String", "StringValue": "vv"}


def test_sqs_without_claim_check_never_offloads():
    w = sqs(claim=None, maxRecordSizeInBytes=None, maxBatchSizeInBytes=None)
    assert w.offload is None
    assert w.entry({"body": "x" * 5000, "source_id": "a"}) == {"MessageBody": "x" * 5000}


def test_sqs_reserves_one_attribute_and_does_not_forward_a_size_attribute():
    forward = {f"a{i:02d}": str(i) for i in range(12)} | {"ExtendedPayloadSize": "7"}
    row = {"body": "x", "source_id": "a", "forward": forward}
    plain = sqs(claim=None, forward_attributes=True).entry(row)
    assert isinstance(plain, dict) and len(plain["MessageAttributes"]) == 10
    always = sqs(forward_attributes=True, claim={"bucket": "payloads", "threshold": "always"}).entry(row)
    assert isinstance(always, dict)
    names = list(always["MessageAttributes"])
    assert names == [f"a{i:02d}" for i in range(9)] + ["ExtendedPayloadSize"]
    assert always["MessageAttributes"]["ExtendedPayloadSize"]["StringValue"] == "1"
    small = sqs(forward_attributes=True).entry(row)  # not offloaded: still 9, none named so
    assert isinstance(small, dict) and list(small["MessageAttributes"]) == names[:9]


def test_sqs_config_refuses_ten_attribute_columns_with_claim_check():
    with pytest.raises(ValidationError, match="at most 9 attribute_columns"):
        sqs(attribute_columns=[f"c{i}" for i in range(10)])
    assert sqs(claim=None, attribute_columns=[f"c{i}" for i in range(10)]).offload is None


def test_fifo_dedup_id_is_derived_from_the_original_body():
    w = sqs(url=URL + ".fifo", claim={"bucket": "payloads", "threshold": "always"})
    entry = w.entry({"body": "original", "source_id": "m-1"})
    assert isinstance(entry, dict) and entry["MessageBody"].startswith('["software.amazon')
    assert entry["MessageDeduplicationId"] == dedup_id("m-1", "original")


@pytest.mark.parametrize("base64_body", [True, False])
def test_mns_offloads_on_the_size_as_sent(base64_body):
    w = mns(claim={"bucket": "payloads", "threshold": 400}, base64_body=base64_body)
    body = "y" * (300 if base64_body else 400)  # 400 bytes as sent either way
    kept = w.entry({"body": body, "source_id": "s"})
    assert kept.payload is None  # type: ignore[union-attr]
    over = w.entry({"body": body + "y", "source_id": "s"})
    pointer = pointer_body("payloads", payload_key("", "s", (body + "y").encode()))
    assert not isinstance(over, str) and over.payload is not None
    assert over.wire == (base64.b64encode(pointer.encode()).decode() if base64_body else pointer)
    assert not base64_body or kept.wire == base64.b64encode(body.encode()).decode()  # type: ignore[union-attr]


def test_mns_default_threshold_is_max_body_bytes_and_empty_bodies_stay_refused():
    w = mns(base64_body=False)
    assert w.entry({"body": "z" * 65536, "source_id": "s"}).payload is None  # type: ignore[union-attr]
    assert w.entry({"body": "z" * 65537, "source_id": "s"}).payload is not None  # type: ignore[union-attr]
    assert w.entry({"body": "", "source_id": "s"}) == "empty body (MNS needs at least 1 byte)"


class FakeStore:
    """Records puts and the most running at once; fails keys in ``fail``."""

    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.puts: list[str] = []
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.fail = fail or {}

    def put(self, bucket: str, key: str, data: bytes) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
            self.puts.append(key)
        if key in self.fail:
            raise self.fail[key]


def offloader(fetch_threads: int = 2) -> Offloader:
    owner = SqsSinkConfig.model_validate({"type": "sqs", "name": "out", "sqsUrl": URL, "claim_check": CLAIM})
    return Offloader(ClaimCheckConfig(bucket="payloads", fetch_threads=fetch_threads), owner)


def test_puts_run_concurrently_up_to_fetch_threads_and_once_per_payload():
    o, store = offloader(fetch_threads=2), FakeStore()
    o._store = store  # type: ignore[assignment]
    payloads = [o.payload(f"body {i}", f"m-{i}") for i in range(6)]
    o.store(payloads)
    assert sorted(store.puts) == sorted(p.key for p in payloads) and store.most == 2
    o.store(payloads)  # a re-sent entry: already stored
    assert len(store.puts) == 6


def test_a_put_refused_for_good_fails_naming_bucket_and_key():
    o = offloader()
    p = o.payload("body", "m-1")
    why = PayloadUnavailable(f"PutObject of object {p.key!r} in bucket 'payloads' failed: NoSuchBucket")
    o._store = FakeStore({p.key: why})  # type: ignore[assignment]
    with pytest.raises(FatalError, match=rf"source message m-1.*{p.key}.*'payloads'.*NoSuchBucket"):
        o.store([p, o.payload("other", "m-2")])
    assert not p.stored


def test_a_transient_put_failure_stays_transient():
    o = offloader()
    p = o.payload("body", "m-1")
    o._store = FakeStore({p.key: TransientError("PutObject: SlowDown")})  # type: ignore[assignment]
    with pytest.raises(TransientError, match="SlowDown"):
        o.store([p])


def test_writers_with_claim_check_pickle_after_use():
    o = offloader()
    o._store = FakeStore()  # type: ignore[assignment]
    o.store([o.payload("body", "m-1")])
    copy = pickle.loads(pickle.dumps(o))
    assert copy._store is None and copy.bucket == "payloads"
    w = pickle.loads(pickle.dumps(sqs(claim={"bucket": "payloads", "threshold": "always"})))
    assert w.offload is not None and w.offload.wanted(0, 1000)


@pytest.mark.parametrize("base64_body", [True, False])
@pytest.mark.parametrize("claim", [None, {"bucket": "payloads", "threshold": 10}])
def test_mns_refuses_a_lone_surrogate_body_as_a_bad_record(base64_body, claim):
    """No UTF-8 for it: a reason for ``on_bad_record``, not an exception failing the write
    (it was one unless the body was offloaded)."""
    w = mns(claim=claim, base64_body=base64_body)
    reason = w.entry({"body": "lone \ud800 surrogate", "source_id": "s"})
    assert reason == "body is not valid Unicode text (surrogates not allowed at 5)"
