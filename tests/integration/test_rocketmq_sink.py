"""RocketMqSink over the real RocketMQ clients against the emulators on 127.0.0.1, once per transport."""

from __future__ import annotations

import pytest

from ingest.connector import WriteReport
from ingest.errors import ConfigError, FatalError, TransientError
from sinks.rocketmq.sink import RocketMqPartitionWriter, RocketMqSink
from tests.support.rocketmq_servers import (
    AK_ID,
    AK_SECRET,
    GROUP,
    TOPIC,
    SilentListener,
    emulator,
    installed,
    messages,
    sink_cfg,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(
        "ignore:The 'warn' method is deprecated:DeprecationWarning"
    ),  # the 5.x client's
]
WRONG_SECRET = "wrong-secret-5a5a9c"
META = "_meta STRUCT<message_id: STRING, queue: STRING>"


@pytest.fixture(
    params=[
        pytest.param(t, marks=pytest.mark.skipif(not installed(t), reason=f"the {t} client is not installed"))
        for t in ("remoting", "grpc")
    ]
)
def transport(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory) -> str:
    """Where the clients write their own logs, in this process and in Spark's workers."""
    return str(tmp_path_factory.mktemp("rocketmq-client-logs"))


@pytest.fixture
def server(transport, log_dir):
    srv = emulator(transport, log_dir, credentials={AK_ID: AK_SECRET})
    yield srv
    srv.stop()


@pytest.fixture
def cfg(transport, server, log_dir):
    """Sink configs for this transport's emulator."""

    def make(**options):
        return sink_cfg(transport, options.pop("endpoint", server.address), log_dir, **options)

    return make


def tag_of(m) -> str | None:
    return getattr(m, "tags", None) or getattr(m, "tag", None)


def props_of(m) -> dict[str, str]:
    return m.user_properties if hasattr(m, "user_properties") else m.properties


def rows_(n: int, start: int = 0) -> list[dict]:
    return [
        {"body": f"{i},row", "key": f"src-{i}", "source_id": f"src-{i}", "props": None}
        for i in range(start, start + n)
    ]


@pytest.mark.spark
def test_csv_batch_arrives_once_with_topic_tag_keys_properties_and_encoding(spark, transport, server, cfg):
    texts = ["你好", "plain", "a,b", "消息队列", None]
    data = [(i, len(t or ""), t, (f"src-{i}", "orders-in")) for i, t in enumerate(texts * 4)]
    df = spark.createDataFrame(data, f"id INT, len BIGINT, content STRING, {META}")
    options = {"tag": "TagA", "encoding": "gbk", "instanceID": "MQ_INST_demo", "property_columns": ["id"]}
    sink = RocketMqSink(cfg(**options))
    assert sink.write(df, 0) == WriteReport(20, [])

    got = {m.keys[0]: m for m in messages(server)}
    assert sorted(got) == sorted(f"src-{i}" for i in range(20)) and len(messages(server)) == 20
    assert got["src-0"].body == "0,2,你好".encode("gbk")
    assert got["src-2"].body == b'2,3,"a,b"' and got["src-4"].body == b"4,0,"
    for i, (_, length, text, _) in enumerate(data):
        m = got[f"src-{i}"]
        assert m.body.decode("gbk").split(",", 2)[:2] == [str(i), str(length)]
        assert tag_of(m) == "TagA" and props_of(m) == {"id": str(i)}
        if transport == "remoting":
            assert (m.topic, m.producer_group) == (f"MQ_INST_demo%{TOPIC}", f"MQ_INST_demo%{GROUP}")
        else:
            assert (m.topic, m.namespace) == (TOPIC, "MQ_INST_demo")
        assert text is None or text.encode("gbk") in m.body

    assert sink.write(df, 0).written == 20  # a replayed batch: sent again, under the same keys
    replay = messages(server)[20:]
    assert sorted(m.keys[0] for m in replay) == sorted(got)
    assert {m.keys[0]: m.body for m in replay} == {k: m.body for k, m in got.items()}


@pytest.mark.spark
def test_binary_payload_is_sent_byte_for_byte(spark, server, cfg):
    blobs = [b"\x00\x01\x02", b"\xff\xfe\x00tail", bytes(range(256)), b"comma,and\nnewline"]
    df = spark.createDataFrame([(b, (f"bin-{i}", "q")) for i, b in enumerate(blobs)], f"mess BINARY, {META}")
    assert RocketMqSink(cfg(payload="binary")).write(df, 7).written == 4
    assert {m.keys[0]: m.body for m in messages(server)} == {f"bin-{i}": b for i, b in enumerate(blobs)}
    with pytest.raises(ConfigError, match=r"sinks\.mq\.payload binary needs exactly one binary column"):
        RocketMqSink(cfg(payload="binary")).write(df.selectExpr("'text' AS mess", "_meta"), 8)


@pytest.mark.spark
def test_sharding_key_keeps_each_keys_order(spark, transport, server, cfg):
    data = [(f"user-{i % 3}", i, (f"src-{i}", i)) for i in range(30)]
    meta = "_meta STRUCT<message_id: STRING, arrival: BIGINT>"  # the order the source received them in
    df = spark.createDataFrame(data, f"user STRING, seq INT, {meta}").repartition(3)
    assert RocketMqSink(cfg(payload="json", sharding_key_column="user")).write(df, 0).written == 30
    by_user: dict[str, list] = {}
    for m in messages(server):
        by_user.setdefault(m.body.split(b'"')[3].decode(), []).append(m)
    assert sorted(by_user) == ["user-0", "user-1", "user-2"]
    for user, got in by_user.items():
        seqs = [int(m.body.rsplit(b":", 1)[1].rstrip(b"}")) for m in got]
        assert seqs == sorted(seqs) and len(seqs) == 10
        if transport == "remoting":
            assert len({m.queue_id for m in got}) == 1  # one queue per sharding key
        else:
            assert {m.message_group for m in got} == {user}


def test_broker_errors_are_retried_then_succeed(transport, server, cfg):
    # The native client tries 5 times by itself: fail more often than that so our retries show.
    failures = 7 if transport == "remoting" else 3
    server.fail_next(failures)
    writer = RocketMqPartitionWriter(cfg(retryTimes=3, sleepTimeMs=10, max_in_flight=1))
    assert writer.write(rows_(5)) == (5, [])
    assert len(server.refused) == failures
    assert sorted(m.keys[0] for m in messages(server)) == sorted(r["key"] for r in rows_(5))


def test_silent_endpoint_fails_with_a_clear_error_within_the_deadline(cfg):
    with SilentListener() as silent:
        writer = RocketMqPartitionWriter(cfg(endpoint=silent.address, send_timeout="1s", retryTimes=1))
        with pytest.raises(TransientError, match=r"(no answer from|did not answer).*1s") as err:
            writer.write(rows_(3))
    assert silent.address in str(err.value)


@pytest.mark.spark
def test_wrong_credentials_fail_the_batch_without_the_secret(spark, server, cfg):
    df = spark.createDataFrame([(f"row-{i}", (f"src-{i}", "q")) for i in range(4)], f"v STRING, {META}")
    with pytest.raises(FatalError, match=f"refused the credentials of accessId '{AK_ID}'") as err:
        RocketMqSink(cfg(accessKey=WRONG_SECRET)).write(df, 0)
    for text in (str(err.value), str(err.value.__cause__)):
        assert WRONG_SECRET not in text and AK_SECRET not in text
    assert messages(server) == []


def test_records_refused_for_good_follow_on_bad_record(server, cfg):
    data = [*rows_(2), {"body": "", "source_id": "empty-1"}, {"body": "x" * 100, "source_id": "big-1"}]
    sent, rejected = RocketMqPartitionWriter(cfg(on_bad_record="skip", max_message_size=64)).write(data)
    assert sent == 2 and [(r["source_id"], r["action"]) for r in rejected] == [
        ("empty-1", "skip"),
        ("big-1", "skip"),
    ]
    assert rejected[1]["error"] == "100 bytes, over max_message_size 64"
    _, rejected = RocketMqPartitionWriter(cfg(on_bad_record="dead_letter", max_message_size=64)).write(data)
    assert [r["body"] for r in rejected] == ["", "x" * 100]
    assert len(messages(server)) == 4
    with pytest.raises(FatalError, match=r"empty-1.*on_bad_record is fail"):
        RocketMqPartitionWriter(cfg(max_message_size=64)).write(data)


@pytest.mark.spark
@pytest.mark.skipif(not (installed("remoting") and installed("grpc")), reason="needs both RocketMQ clients")
def test_fake_queue_to_rocketmq_through_the_cli(tmp_path, log_dir):
    """``python -m ingest.run`` drains a fake queue into both transports' emulators, acking every message."""
    from sources.fake.store import FakeQueue
    from tests.support.jobs import body, job_config, run_cli, write_config

    queue = FakeQueue(str(tmp_path / "queues"), "in")
    ids = queue.send_batch([{"body": body(i)} for i in range(40)])
    queue.send(body(0), message_id=ids[0])  # a redelivered duplicate: dropped before the sinks
    servers = {t: emulator(t, log_dir, credentials={AK_ID: AK_SECRET}) for t in ("remoting", "grpc")}
    try:
        sinks = []
        for t, srv in servers.items():
            sink = sink_cfg(t, srv.address, str(tmp_path / "client-logs"), tag="TagE2E").model_dump(
                by_alias=True
            )
            sink |= {"name": f"mq_{t}", "accessKey": "${env:RMQ_E2E_SECRET}", "send_timeout": 5.0}
            sinks.append(sink)
        cfg = job_config(
            tmp_path, sinks=sinks, transform="SELECT event_id, user_id, action, _meta FROM source"
        )
        done = run_cli(write_config(tmp_path, cfg), env={"RMQ_E2E_SECRET": AK_SECRET})
        assert done.returncode == 0, done.stderr[-3000:]
        assert AK_SECRET not in done.stdout + done.stderr
        for srv in servers.values():
            got = messages(srv)
            assert sorted(m.keys[0] for m in got) == sorted(ids)
            assert sorted(m.body for m in got) == sorted(f"{i},{i % 7},click".encode() for i in range(40))
            assert {tag_of(m) for m in got} == {"TagE2E"}
        assert queue.count()["total"] == 0
    finally:
        for srv in servers.values():
            srv.stop()
