"""The send buffer's contract (ingest.connector.SendBuffer), on an in-memory target: no service, no Spark."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from ingest.connector import CallRefused, Failed, Limits, RetryPolicy, SendBuffer, write_rows
from ingest.errors import FatalError, TransientError
from tests.support.polling import wait_for

FAST = RetryPolicy(attempts=3, initial_wait=0.001, max_wait=0.001)


class WholeCallError(Exception):
    """What the in-memory target raises for a call it refuses as a whole."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class MemoryTarget:
    """A queue in a list. Bodies in ``flaky`` fail retryably (``flaky[body]`` times), bodies in
    ``bad`` fail for good, a call holding a body in ``poison`` is refused whole, ``down`` calls
    fail whole with that code."""

    def __init__(self, on_bad_record: str = "skip", delay: float = 0.0) -> None:
        self.cfg = SimpleNamespace(name="out", on_bad_record=on_bad_record)
        self.target_name, self.call_name = "memory queue", "Put to memory"
        self.queue: list[str] = []
        self.calls: list[list[str]] = []
        self.flaky: dict[str, int] = {}
        self.bad: set[str] = set()
        self.poison: set[str] = set()
        self.down: list[str] = []
        self.delay, self.running, self.most_running = delay, 0, 0
        self.lock = threading.Lock()

    def entry(self, row: dict[str, Any]) -> dict[str, str] | str:
        body = row["body"]
        return "empty body" if not body else {"body": body}

    def size(self, entry: dict[str, str]) -> int:
        return len(entry["body"].encode())

    def send(self, entries: list[dict[str, str]]) -> list[Failed | None]:
        bodies = [e["body"] for e in entries]
        with self.lock:
            self.calls.append(bodies)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            time.sleep(self.delay)
            if self.down:
                raise WholeCallError(self.down.pop(0))
            if self.poison & set(bodies):
                raise WholeCallError("Refused")
            return [self._one(b) for b in bodies]
        finally:
            with self.lock:
                self.running -= 1

    def _one(self, body: str) -> Failed | None:
        if body in self.bad:
            return Failed(f"Bad: {body}", final=True)
        if self.flaky.get(body, 0) > 0:
            self.flaky[body] -= 1
            return Failed("Busy: try again")
        with self.lock:
            self.queue.append(body)
        return None

    def classify(self, err: Exception) -> BaseException:
        code = getattr(err, "code", "")
        if code == "Refused":
            return CallRefused(f"{code}: one entry is bad")
        return TransientError(code) if code == "Throttled" else FatalError(code or str(err))


def rows(n: int, width: int = 4) -> list[dict[str, Any]]:
    return [{"body": f"b{i:0{width}d}", "source_id": f"s{i}"} for i in range(n)]


def write(target: MemoryTarget, data: Any, retry: RetryPolicy = FAST, **limits: Any) -> tuple[int, list]:
    lim = Limits(**{"max_entries": 10, "max_batch_bytes": 1000, **limits})
    return write_rows(data, lambda _: SendBuffer(target, lim, retry, name="test-sink"))


def test_batches_by_count_and_by_bytes():
    target = MemoryTarget()
    assert write(target, rows(25)) == (25, [])
    assert [len(c) for c in target.calls] == [10, 10, 5]
    target = MemoryTarget()
    assert write(target, rows(7), max_batch_bytes=15) == (7, [])  # 5 bytes each: 3 a call
    assert [len(c) for c in target.calls] == [3, 3, 1]
    assert target.queue == [r["body"] for r in rows(7)]


def test_a_partial_failure_resends_only_the_failed_entries():
    target = MemoryTarget()
    target.flaky = {"b0001": 1, "b0003": 2}
    assert write(target, rows(5)) == (5, [])
    assert target.calls == [["b0000", "b0001", "b0002", "b0003", "b0004"], ["b0001", "b0003"], ["b0003"]]
    assert sorted(target.queue) == [r["body"] for r in rows(5)]  # each exactly once


def test_entries_still_failing_after_the_retries_raise_and_fail_on_error_does_not_retry():
    target = MemoryTarget()
    target.flaky = {"b0002": 9}
    with pytest.raises(TransientError, match=r"Put to memory: 1 entries failed \(source ids s2; Busy"):
        write(target, rows(4))
    assert len(target.calls) == 3
    target = MemoryTarget()
    target.flaky = {"b0002": 9}
    retry = RetryPolicy(attempts=3, initial_wait=0.001, fail_on_error=True)
    with pytest.raises(FatalError, match=r"sinks\.out\.failOnError is true"):
        write(target, rows(4), retry=retry)
    assert len(target.calls) == 1


def test_fail_on_error_false_resends_past_the_attempts_until_taken_and_fatal_errors_still_raise():
    """Flink's failOnError false: no attempt or elapsed limit, the wait capped; taken entries sent once."""
    target = MemoryTarget()
    target.flaky = {"b0002": 12}
    target.down = ["Throttled"] * 3  # whole calls failing for a while, too
    endless = RetryPolicy(
        attempts=2, initial_wait=0.001, max_wait=0.002, max_elapsed=0.001, fail_on_error=False
    )
    assert write(target, rows(4), retry=endless) == (4, [])
    assert sorted(target.queue) == [r["body"] for r in rows(4)]  # each exactly once
    assert target.calls[4:] == [["b0002"]] * 12 and len(target.calls) == 16
    target = MemoryTarget()
    target.down = ["Throttled", "Throttled", "Forbidden"]
    with pytest.raises(FatalError, match="Forbidden"):
        write(target, rows(4), retry=endless)
    assert len(target.calls) == 3


def test_fail_on_error_false_ends_its_resends_when_the_write_stops():
    target = MemoryTarget()
    target.flaky = {"b0001": 10**9}
    endless = RetryPolicy(attempts=2, initial_wait=0.001, max_wait=0.01, fail_on_error=False)
    batcher = SendBuffer(target, Limits(max_entries=10, max_batch_bytes=1000), endless, name="test-sink")
    for row in rows(3):
        batcher.add(row)
    done = threading.Thread(target=batcher.finish, daemon=True)
    done.start()
    wait_for(lambda: len(target.calls) > 5, 10, "re-sends beyond max_retries")
    batcher.stop()  # what a cancelled task's end does; the halt ends the re-sends
    done.join(5)
    assert not done.is_alive() and target.queue == ["b0000", "b0002"]


def test_a_batch_refused_whole_is_split_and_the_bad_entry_follows_the_policy():
    target = MemoryTarget()
    target.poison = {"b0002"}
    sent, rejected = write(target, rows(4))
    assert sent == 3 and [(r["source_id"], r["error"]) for r in rejected] == [
        ("s2", "Refused: one entry is bad")
    ]
    assert target.calls[0] == [r["body"] for r in rows(4)]
    assert target.calls[1:] == [["b0000"], ["b0001"], ["b0002"], ["b0003"]]
    assert sorted(target.queue) == ["b0000", "b0001", "b0003"]


@pytest.mark.parametrize("policy", ["skip", "dead_letter", "fail"])
def test_an_entry_failed_for_good_follows_the_refusal_policy(policy):
    target = MemoryTarget(on_bad_record=policy)
    target.bad = {"b0001"}
    if policy == "fail":
        with pytest.raises(
            FatalError, match=r"source message s1 refused by memory queue.*on_bad_record is fail"
        ):
            write(target, rows(3))
        return
    sent, rejected = write(target, rows(3))
    assert sent == 2 and len(target.calls) == 1  # not re-sent
    expected = {"sink": "out", "source_id": "s1", "error": "Bad: b0001", "action": policy}
    assert rejected == [expected | ({"body": "b0001"} if policy == "dead_letter" else {})]


def test_records_refused_before_sending_never_reach_the_target():
    target = MemoryTarget()
    data = [*rows(2), {"body": "", "source_id": "empty"}, {"body": "x" * 50, "source_id": "big"}]
    sent, rejected = write(target, data, max_record_bytes=20)
    assert sent == 2 and [(r["source_id"], r["error"]) for r in rejected] == [
        ("empty", "empty body"),
        ("big", "50 bytes, over maxRecordSizeInBytes 20"),
    ]
    assert target.calls == [["b0000", "b0001"]]


def test_under_policy_fail_a_refusal_stops_the_write_before_the_buffer_goes_out():
    target = MemoryTarget(on_bad_record="fail")
    with pytest.raises(FatalError, match="source message empty"):
        write(target, [*rows(2), {"body": "", "source_id": "empty"}, *rows(2)])
    assert target.calls == []


@pytest.mark.parametrize("in_flight", [1, 3])
def test_the_in_flight_limit_is_respected(in_flight):
    target = MemoryTarget(delay=0.02)
    assert write(target, rows(12), max_entries=1, max_in_flight=in_flight, max_buffered=100) == (12, [])
    assert target.most_running == in_flight
    assert sorted(target.queue) == [r["body"] for r in rows(12)]


def test_the_buffered_limit_makes_the_row_loop_wait():
    target = MemoryTarget(delay=0.05)
    read: list[float] = []

    def timed() -> Iterator[dict]:
        for row in rows(6):
            read.append(time.monotonic())
            yield row

    assert write(target, timed(), max_entries=1, max_in_flight=10, max_buffered=2) == (6, [])
    assert target.most_running <= 2 and read[-1] - read[0] >= 0.09  # two calls' worth of waiting


def test_a_whole_call_error_is_retried_when_transient_and_raised_at_once_when_fatal():
    target = MemoryTarget()
    target.down = ["Throttled", "Throttled"]
    assert write(target, rows(3)) == (3, [])
    assert len(target.calls) == 3
    target = MemoryTarget()
    target.down = ["AccessDenied"]
    with pytest.raises(FatalError, match="AccessDenied"):
        write(target, rows(3))
    assert len(target.calls) == 1


def test_a_batch_waiting_longer_than_max_wait_goes_out_while_the_rows_wait():
    target = MemoryTarget()
    seen = []

    def slow() -> Iterator[dict]:
        yield from rows(3)
        deadline = time.monotonic() + 5
        while not target.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(list(target.calls))
        yield {"body": "late", "source_id": "late"}

    assert write(target, slow(), max_wait=0.05) == (4, [])
    assert seen == [[["b0000", "b0001", "b0002"]]] and target.calls[1:] == [["late"]]


def test_rows_go_to_their_lane_each_with_its_own_batcher():
    targets = {"a": MemoryTarget(), "b": MemoryTarget()}
    limits = Limits(max_entries=10, max_batch_bytes=1000)
    data = [{**r, "lane": "ab"[i % 2]} for i, r in enumerate(rows(6))]
    sent, rejected = write_rows(
        data, lambda key: SendBuffer(targets[key], limits, FAST), lambda row: row["lane"]
    )
    assert (sent, rejected) == (6, [])
    assert targets["a"].calls == [["b0000", "b0002", "b0004"]]
    assert targets["b"].calls == [["b0001", "b0003", "b0005"]]
    assert write_rows([], lambda key: pytest.fail("an empty partition opens no lane")) == (0, [])
