"""A source in child processes (``processes: N``): errors keep their kind, a killed child is
replaced and loses nothing, a killed driver takes its children with it, secrets stay off argv."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ingest.errors import FatalError, TransientError
from ingest.intake.processes import ProcessSource, make_source
from sources.fake.config import FakeSourceConfig
from sources.fake.source import FakeSource
from tests.support.source_contract import receive_n
from tests.support.sqs_server import source_cfg

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _fake(tmp_path, processes: int = 1, visibility: float = 1.0) -> tuple[ProcessSource, FakeSource]:
    cfg = FakeSourceConfig(
        type="fake", name="p", path=str(tmp_path), queue="q", visibility_timeout=visibility
    ).model_copy(update={"processes": processes})
    source = make_source(cfg)
    assert isinstance(source, ProcessSource)
    return source, FakeSource(cfg.model_copy(update={"processes": 0}))


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_killed_child_fails_the_call_under_way_then_a_new_one_serves_and_nothing_is_lost(tmp_path, caplog):
    source, local = _fake(tmp_path, visibility=3.0)
    try:
        local.store.send_batch([{"body": f"m{i}"} for i in range(5)])
        first = receive_n(source, 5)
        assert sorted(m.body for m in first) == [f"m{i}" for i in range(5)]
        child, dead_dir = source._children[0].proc, source._children[0].dir
        outcome: list[BaseException] = []

        def long_poll() -> None:  # the queue holds nothing visible: this call waits 2 s
            try:
                source.receive(10, 2)
            except BaseException as err:
                outcome.append(err)

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(0.5)
        child.send_signal(signal.SIGKILL)
        poller.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], TransientError), outcome
        ended = r"source p: its process \(pid \d+\) ended with exit code -9; a new one starts"
        assert re.fullmatch(ended, str(outcome[0]))
        # Not acked, so back after the visibility timeout, through a new child.
        with caplog.at_level(logging.WARNING, logger="ingest.intake.processes"):
            again = receive_n(source, 5, timeout=15)
        assert "ended with exit code -9" in caplog.text
        assert source._children[0].proc.pid != child.pid
        assert not os.path.exists(dead_dir), "the dead child's socket directory was left behind"
        assert sorted(m.message_id for m in again) == sorted(m.message_id for m in first)
        result = source.ack([m.receipt_handle for m in again])
        assert sorted(result.deleted) == sorted(m.receipt_handle for m in again) and not result.failed
        assert local.receive(10, 0) == []  # what the queue holds afterwards: nothing
    finally:
        source.close()
        local.close()


def test_the_children_end_when_the_driver_is_killed(tmp_path):
    script = (
        "import sys, time\n"
        "from ingest.intake.processes import make_source\n"
        "from sources.fake.config import FakeSourceConfig\n"
        f"cfg = FakeSourceConfig(type='fake', name='p', path={str(tmp_path)!r}, processes=2)\n"
        "src = make_source(cfg)\n"
        "src.receive(1, 0); src.receive(1, 0)\n"
        "print(*[c.proc.pid for c in src._children], flush=True)\n"
        "time.sleep(60)\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert driver.stdout is not None
    children = [int(pid) for pid in driver.stdout.readline().split()]
    assert len(children) == 2
    driver.send_signal(signal.SIGKILL)
    driver.wait(10)
    assert all(_gone(pid, 10) for pid in children), children


def test_close_stops_the_children(tmp_path):
    source, local = _fake(tmp_path, processes=2)
    assert source.receive(1, 0) == [] and source.receive(1, 0) == []
    pids = [c.proc.pid for c in source._children]
    assert len(pids) == 2
    source.close()
    local.close()
    assert all(_gone(pid, 5) for pid in pids)
    with pytest.raises(TransientError, match="source p: closed"):
        source.receive(1, 0)
    assert source._children == []  # no child started after the close


def test_sqs_errors_keep_their_kind_and_the_secret_stays_off_the_command_line(moto_url):
    url = moto_url + "/123456789012/no-such-queue"
    secret = "wJalrXUtnFEMI/K7MDENG/process-secret"
    cfg = source_cfg(
        url,
        moto_url,
        processes=1,
        **{
            "sqs.credentials.provider": "static",
            "aws.access.key.id": "AKIAEXAMPLE0000001",
            "aws.secret.access.key": secret,
        },
    )
    source = make_source(cfg)
    try:
        with pytest.raises(FatalError) as err:
            source.receive(10, 1)
        assert url in str(err.value) and "NonExistentQueue" in str(err.value)
        assert secret not in str(err.value)
        pid = source._children[0].proc.pid
        assert secret not in Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
        assert secret not in Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
    finally:
        source.close()


def test_an_unreachable_queue_is_transient_through_the_child():
    cfg = source_cfg("http://127.0.0.1:9/000000000000/q", "http://127.0.0.1:9", processes=1)
    source = make_source(cfg.model_copy(update={"max_retries": 0}))
    try:
        with pytest.raises(TransientError, match=r"127\.0\.0\.1:9"):
            source.receive(10, 0)
    finally:
        source.close()
