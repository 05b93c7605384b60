"""The background threads' lifecycle (``ingest.worker``) and the job's supervisor (``ingest.supervisor``)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from ingest.errors import FatalError
from ingest.supervisor import Supervisor
from ingest.worker import Worker
from tests.support.polling import wait_for


def test_the_examples():
    import doctest

    import ingest.supervisor
    import ingest.worker

    for module in (ingest.worker, ingest.supervisor):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module.__name__


def boom() -> None:
    raise RuntimeError("boom")


def test_a_thread_that_dies_keeps_its_error_logs_it_once_and_tells_its_watchers_once(caplog):
    seen: list[tuple[str, BaseException]] = []
    w = Worker("crashy", target=boom)
    w.watch(lambda worker, err: seen.append((worker.name, err)))
    with caplog.at_level(logging.ERROR, logger="ingest.worker"):
        w.start()
        assert w.join(5)
        w.fail(FatalError("a later error"))  # not the first: dropped
    assert isinstance(w.error, FatalError)
    assert str(w.error) == "crashy thread failed: RuntimeError: boom"
    assert seen == [("crashy", w.error)]
    assert [r.getMessage() for r in caplog.records] == ["crashy thread failed: RuntimeError: boom"]
    assert caplog.records[0].exc_info is not None, "the traceback is in the log"
    assert w.unhealthy() == "crashy thread failed: RuntimeError: boom" and not w.running


def test_an_error_reported_while_running_is_kept_and_a_late_watcher_still_hears_of_it():
    w = Worker("acker", target=lambda: None)
    w.fail(FatalError("deletes refused for good"))
    w.fail(FatalError("the second one"))
    seen: list[BaseException] = []
    w.watch(lambda worker, err: seen.append(err))
    assert str(w.error) == "deletes refused for good" and [str(e) for e in seen] == [str(w.error)]


def test_stop_with_a_deadline_returns_by_it_even_if_the_thread_does_not_end():
    release = threading.Event()
    w = Worker("stuck", target=lambda: release.wait(30))  # ignores ``stopping``
    w.start()
    started = time.monotonic()
    assert w.stop(timeout=0.2) is False
    assert time.monotonic() - started < 5 and w.running
    assert w.unhealthy() is None, "asked to stop: not a failure"
    release.set()
    assert w.join(5) and not w.running


def test_a_cooperative_thread_stops_at_once_and_starts_again():
    rounds: list[int] = []

    class Ticker(Worker):
        def work(self) -> None:
            while not self.stopping.wait(0.01):
                rounds.append(1)

    w = Ticker("ticker")
    assert not w.started and w.unhealthy() is None
    w.start()
    wait_for(lambda: rounds, timeout=10)
    assert w.stop(timeout=5) and not w.running
    w.start()  # a new thread after stop
    assert w.running
    assert w.stop(5)


def test_names_the_thread_and_its_messages():
    names: list[str] = []
    w = Worker("lease-keeper", target=lambda: names.append(threading.current_thread().name))
    w.start()
    w.join(5)
    assert names == ["lease-keeper"] and w.title == "lease-keeper thread" and not w.stopping.is_set()
    assert w.unhealthy() == "lease-keeper thread is not running", "it ended unasked"


def test_a_receiver_is_a_worker_named_as_the_job_reports_it(tmp_path):
    from ingest.intake.leases import InFlight
    from ingest.intake.receiver import Backpressure, Receiver
    from ingest.intake.staging import Stager
    from ingest.metrics import Metrics

    class Source:
        name, queue = "orders", "q"

    inflight = InFlight()
    stager = Stager(str(tmp_path), roll_messages=10, roll_bytes=10**9, roll_interval=60)
    r = Receiver(Source(), 1, stager, inflight, Backpressure(inflight, 10, 10**9), Metrics("t"), 0.05)
    assert r.name == "receiver-orders-1" and r.title == "receiver thread receiver-orders-1"


class Part(Worker):
    """A worker that records its start and stop in ``log``."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name, target=lambda: self.stopping.wait(30))
        self.log = log

    def start(self) -> None:
        self.log.append(f"start {self.name}")
        super().start()

    def stop(self, timeout: float | None = None) -> bool:
        self.log.append(f"stop {self.name}")
        return super().stop(timeout)


def test_the_supervisor_starts_in_order_and_stops_in_reverse():
    log: list[str] = []
    sup = Supervisor()
    parts = [Part(name, log) for name in ("stager", "keeper", "acker", "receivers")]
    for part in parts:
        sup.start(part)
    assert all(p.running for p in parts) and sup.unhealthy() is None
    sup.stop(timeout=10)
    assert log == [
        "start stager",
        "start keeper",
        "start acker",
        "start receivers",
        "stop receivers",
        "stop acker",
        "stop keeper",
        "stop stager",
    ]
    assert not any(p.running for p in parts) and sup.parts == []


def test_the_first_failure_wins_and_is_what_health_and_check_report():
    sup = Supervisor()
    first, second = Part("stager", []), Part("acker", [])
    sup.start(first)
    sup.start(second)
    assert not sup.failed.is_set()
    first.fail(FatalError("staging dir full for 300s"))
    second.fail(FatalError("deletes refused"))
    assert sup.failed.is_set() and str(sup.failure) == "staging dir full for 300s"
    assert sup.unhealthy() == "staging dir full for 300s"
    with pytest.raises(FatalError, match=r"^staging dir full for 300s$"):
        sup.check()
    sup.stop(timeout=10)


def test_a_part_that_failed_before_it_was_started_is_reported_at_start():
    sup = Supervisor()
    part = Part("acker", [])
    part.fail(FatalError("deletes refused during recovery"))
    sup.start(part)
    assert str(sup.failure) == "deletes refused during recovery"
    sup.stop(timeout=10)


def test_a_thread_that_ended_unasked_makes_the_job_unhealthy_and_a_failing_stop_stops_the_rest():
    sup = Supervisor()
    log: list[str] = []
    keeper = Part("keeper", log)
    quitter = Worker("quitter", target=lambda: None)
    sup.start(keeper)
    sup.start(quitter)
    quitter.join(5)
    assert sup.unhealthy() == "quitter thread is not running" and sup.failure is None

    def broken_stop(timeout: float | None = None) -> bool:
        raise OSError("cannot stop")

    quitter.stop = broken_stop  # type: ignore[method-assign]
    sup.stop(timeout=10)
    assert log[-1] == "stop keeper" and not keeper.running
