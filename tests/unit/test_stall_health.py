"""``/healthz`` on a stall: intake paused by a staging fault, or receives failing, for longer than
``metrics.health_stall_limit`` answers 503 with the reason; 200 again once intake goes on.

The job's intake parts run for real (fake-queue receivers, the stager on a real directory, the
endpoint on 127.0.0.1), without Spark: no micro-batch runs, so nothing here is acked.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from ingest.config import parse_config
from ingest.errors import TransientError
from ingest.intake.leases import InFlight
from ingest.intake.receiver import Backpressure, ReceiverPool
from ingest.intake.staging import Stager
from ingest.metrics import Metrics
from ingest.ops.health import Endpoint
from ingest.ops.job_health import Liveness
from ingest.supervisor import Supervisor
from sources.fake.config import FakeSourceConfig
from sources.fake.source import FakeSource
from tests.support.jobconfig import fake_source, job_config
from tests.support.mounts import immutable
from tests.support.polling import wait_for

LIMIT = 1.0
"""The stall limit of these tests (60 s by default)."""


class OutageSource(FakeSource):
    """The fake queue with an outage switch: its receives fail (transient) while ``down`` is set.
    The fake queue has no server to stop; a real server going away is in
    tests/integration/test_queue_outage.py."""

    down = False

    def receive(self, max_messages, wait_seconds):
        if self.down:
            raise TransientError("connection refused by 127.0.0.1")
        return super().receive(max_messages, wait_seconds)


class Intake:
    """A job's intake, wired as ``ingest.pipeline.Job`` wires it, with ``/healthz`` on a free port."""

    def __init__(self, tmp: Path, max_in_flight: int = 100_000) -> None:
        staging = {"roll_messages": 10, "roll_interval": "50ms", "max_in_flight": max_in_flight}
        self.cfg = parse_config(job_config(fake_source(tmp, wait_time="100ms"), tmp, staging=staging))
        src = self.cfg.sources[0]
        assert isinstance(src, FakeSourceConfig)
        self.source = OutageSource(src)  # type: ignore[abstract]  # Source.probe: a default, not abstract
        self.dir = Path(self.cfg.staging.dir)
        self.stager = Stager(str(self.dir), 10, 10**9, 0.05)
        self.inflight = InFlight()
        pressure = Backpressure(self.inflight, max_in_flight, 10**9, self.stager)
        metrics = Metrics("t")
        sources = {self.source.name: self.source}
        self.receivers = ReceiverPool(
            self.cfg, sources, self.stager, self.inflight, pressure, metrics, lambda name, text: None
        )
        self.supervisor = Supervisor()
        stop, workers = threading.Event(), self.receivers.workers
        self.liveness = Liveness(self.supervisor, self.stager, self.inflight, 600.0, stop, workers, LIMIT)
        self.endpoint = Endpoint(metrics.registry, self.liveness.reason, "127.0.0.1", 0)

    def start(self) -> None:
        for part in (self.stager, self.receivers):
            self.supervisor.start(part)
        self.port = self.endpoint.start()

    def stop(self) -> None:
        self.endpoint.stop()
        self.supervisor.stop()

    def healthz(self) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def staged(self) -> list[int]:
        """The event ids in the files Spark would list."""
        return sorted(
            orjson.loads(orjson.loads(line)["body"])["i"]
            for f in self.dir.glob("*.jsonl")
            for line in f.read_bytes().splitlines()
        )

    def send(self, ids: range) -> None:
        self.source.store.send_batch([{"body": orjson.dumps({"i": i}).decode()} for i in ids])


@pytest.fixture
def intake(tmp_path) -> Iterator[Intake]:
    job = Intake(tmp_path)
    job.start()
    yield job
    job.stop()


def test_a_staging_dir_unwritable_past_the_stall_limit_is_503_then_200_once_writable(intake):
    intake.send(range(10))
    wait_for(lambda: intake.staged() == list(range(10)))  # a running job: _held/ is there already
    assert intake.healthz() == (200, "ok\n")
    with immutable(intake.dir):
        intake.send(range(10, 30))
        wait_for(lambda: intake.stager.failing)
        wait_for(lambda: intake.healthz()[0] == 503, what="503 once paused past the stall limit")
        status, text = intake.healthz()
        assert status == 503
        assert text.startswith(f"unhealthy: intake paused (staging writes to {intake.dir} are failing: ")
        assert "Operation not permitted" in text and "nothing received and no micro-batch finished" in text
    wait_for(lambda: intake.healthz() == (200, "ok\n"), what="200 once the dir is writable again")
    wait_for(lambda: intake.staged() == list(range(30)), what="every message staged once")


def test_receives_failing_past_the_stall_limit_are_503_naming_the_receiver_then_200(intake):
    intake.source.down = True
    wait_for(lambda: intake.healthz()[0] == 503, what="503 once receives failed past the stall limit")
    status, text = intake.healthz()
    assert status == 503 and text.startswith("unhealthy: receiver src#") and "receives failing for" in text
    assert text.rstrip().endswith(": connection refused by 127.0.0.1")
    intake.source.down = False
    intake.send(range(5))
    wait_for(lambda: intake.healthz() == (200, "ok\n"), what="200 once receives work again")
    wait_for(lambda: intake.staged() == list(range(5)))


def test_caps_pause_a_stall_only_while_no_micro_batch_runs_or_finishes(tmp_path):
    intake = Intake(tmp_path, max_in_flight=10)
    intake.start()
    try:
        intake.send(range(20))
        wait_for(lambda: any(r.paused_since is not None for r in intake.receivers.workers()))
        live = intake.liveness
        wait_for(lambda: live.reason() is not None, what="a pause past the limit with no batch")
        assert str(live.reason()).startswith("intake paused (in-flight/staged caps reached): nothing")
        # A StreamingQuery in the middle of a batch (Spark is not started in unit tests): the
        # batch frees room when it commits; one that lasts is health_max_batch_age's to judge.
        running = SimpleNamespace(isActive=True, status={"isTriggerActive": True})
        assert live.reason(running) is None
        live.progressed()  # a batch finished: the pause is counted from now
        assert live.reason() is None
    finally:
        intake.stop()
