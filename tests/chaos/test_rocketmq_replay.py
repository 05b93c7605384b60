"""Chaos: kill the CLI job between the RocketMQ sends and the state commit, restart, check the replay."""

from __future__ import annotations

import collections
import signal
import time
import warnings
from pathlib import Path

import orjson
import pytest

from checkpoints.journal import committed_batches
from checkpoints.state import StateTable
from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir, run_cli, wait_all_visible, write_config
from tests.support.rocketmq_servers import AK_ID, AK_SECRET, emulator, installed, messages, sink_cfg

TRANSPORTS = [t for t in ("remoting", "grpc") if installed(t)]
pytestmark = [
    pytest.mark.chaos,
    pytest.mark.spark,
    pytest.mark.skipif(not TRANSPORTS, reason="neither RocketMQ client (remoting, grpc) is installed"),
    pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning"),
]
N = 100
VISIBILITY = 3.0
CRASH = {"MQ_INGEST_CRASH_AT": "after_sink", "MQ_INGEST_CRASH_AFTER": "2"}
"""Every sink has written the second batch, its keys are not in the state table, Spark has not committed."""


def event_id(m) -> int:
    """The source row a message carries (the sink's csv payload starts with ``event_id``)."""
    return int(m.body.split(b",", 1)[0])


def state_keys(tmp: Path) -> list[str]:
    """The message ids committed to the job's state table."""
    st = StateTable(str(tmp / "state"), "t-job", 86400)
    st.open()
    try:
        return st.keys()
    finally:
        st.close()


def batch_output(tmp: Path, batch_id: int) -> list[int]:
    """The event ids the files sink wrote for ``batch_id`` (written before the crash point)."""
    rows = []
    for f in sorted((tmp / "out" / f"batch_id={batch_id}").glob("part-*")):
        rows += [orjson.loads(line)["event_id"] for line in f.read_bytes().splitlines() if line.strip()]
    return rows


def setup_job(tmp: Path, servers: dict) -> tuple[FakeQueue, list[str], Path]:
    """A fake queue of ``N`` messages drained into every emulator and a files sink, ~50 rows a batch."""
    queue = FakeQueue(str(tmp / "queues"), "in")
    ids = queue.send_batch([{"body": body(i)} for i in range(N)])
    sinks = []
    for t, srv in servers.items():
        sink = sink_cfg(t, srv.address, str(tmp / "client-logs"), tag="TagReplay").model_dump(by_alias=True)
        sink |= {"name": f"mq_{t}", "accessKey": "${env:RMQ_REPLAY_SECRET}", "send_timeout": 5.0}
        sinks.append(sink)
    sinks.append({"type": "files", "name": "out", "path": str(tmp / "out"), "format": "jsonl"})
    cfg = job_config(
        tmp,
        sinks=sinks,
        source={"visibility_timeout": VISIBILITY, "batch_size": 25},
        staging={"dir": str(tmp / "staging"), "roll_messages": 25, "roll_interval": "100ms"}
        | {"max_files_per_trigger": 2},
        transform="SELECT event_id, user_id, action, _meta FROM source",
    )
    return queue, ids, write_config(tmp, cfg)


def test_kill_after_rocketmq_send_replays_the_batch_under_the_same_keys(tmp_path):
    """SIGKILL at ``after_sink``: the restart resends exactly the killed batch, under the same keys."""
    for t in {"remoting", "grpc"} - set(TRANSPORTS):
        warnings.warn(f"the {t} RocketMQ client is not installed: only {TRANSPORTS} tested", stacklevel=1)
    log_dir = str(tmp_path / "client-logs")
    servers = {t: emulator(t, log_dir, credentials={AK_ID: AK_SECRET}) for t in TRANSPORTS}
    env = {"RMQ_REPLAY_SECRET": AK_SECRET}
    try:
        queue, ids, cfg_path = setup_job(tmp_path, servers)
        key_of = dict(enumerate(ids))  # event_id → source message id

        started = time.monotonic()
        crashed = run_cli(cfg_path, env=env | CRASH, timeout=120)
        print(f"crashed run: {time.monotonic() - started:.1f}s")
        assert crashed.returncode == -signal.SIGKILL, (
            f"the job did not die at after_sink: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"
        )
        # The killed batch: planned by Spark (offsets/N), never committed, already in every sink.
        checkpoint = tmp_path / "checkpoint"
        planned = {int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()}
        killed = max(planned)
        assert killed not in committed_batches(str(checkpoint)) and killed >= 1
        killed_rows = batch_output(tmp_path, killed)
        assert killed_rows, f"batch {killed} wrote nothing before the crash"
        killed_keys = {key_of[i] for i in killed_rows}
        committed_before = set(state_keys(tmp_path))
        assert committed_before and not committed_before & killed_keys
        first_sends = {t: messages(srv) for t, srv in servers.items()}
        for t, sent in first_sends.items():
            keys = [k for m in sent for k in m.keys]
            assert len(keys) == len(set(keys)), f"{t}: a key sent twice before the crash"
            assert set(keys) == committed_before | killed_keys, (
                f"{t}: sent other rows than batches 0..{killed}"
            )

        logs = crashed.stdout + crashed.stderr
        for _ in range(2):  # as a scheduled run would: again if the queue is not empty yet
            wait_all_visible(queue)  # the killed job's messages become visible again
            started = time.monotonic()
            drained = run_cli(cfg_path, env=env, timeout=120)
            print(f"restart: {time.monotonic() - started:.1f}s\n{drained.stdout}")
            assert drained.returncode == 0, drained.stdout[-2000:] + drained.stderr[-3000:]
            logs += drained.stdout + drained.stderr
            if queue.count()["total"] == 0:
                break
        assert AK_SECRET not in logs

        for t, srv in servers.items():
            got = messages(srv)
            # Every message's keys are its source message id: a replay reuses the first send's key.
            assert all(m.keys == [key_of[event_id(m)]] for m in got), t
            counts = collections.Counter(m.keys[0] for m in got)
            assert set(counts) == set(ids), f"{t}: lost {set(ids) - set(counts)}"
            dups = {k for k, c in counts.items() if c > 1}
            assert dups == killed_keys and max(counts.values()) == 2, f"{t}: duplicates {len(dups)}"
            # The restart sent the killed batch once more and the messages not sent yet: each once.
            resent = collections.Counter(m.keys[0] for m in got[len(first_sends[t]) :])
            assert resent == collections.Counter(set(ids) - committed_before), t
            # The replayed copies are the first sends, byte for byte, with the same tag.
            first = {m.keys[0]: m for m in first_sends[t]}
            for m in got[len(first_sends[t]) :]:
                if m.keys[0] in killed_keys:
                    assert m.body == first[m.keys[0]].body
            assert {getattr(m, "tags", None) or getattr(m, "tag", None) for m in got} == {"TagReplay"}
            # A consumer deduplicating on keys sees each source message exactly once.
            seen = {m.keys[0]: m.body for m in got}
            assert sorted(seen.values()) == sorted(f"{i},{i % 7},click".encode() for i in range(N))

        assert queue.count()["total"] == 0, queue.count()
        keys = state_keys(tmp_path)
        assert len(keys) == len(set(keys)) and set(keys) == set(ids)
        out = sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out"))
        assert out == list(range(N)), "the files sink holds a row twice or lost one"
        assert sorted(batch_output(tmp_path, killed)) == sorted(killed_rows)  # replaced by its replay
    finally:
        for srv in servers.values():
            srv.stop()
