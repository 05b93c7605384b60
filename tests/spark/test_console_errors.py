"""A failed job's console: its one error line (naming the key, message id or file) last, no traces
above it; the traces at ``--log-level DEBUG``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sources.fake.store import FakeQueue
from tests.support.jobconfig import files_sink
from tests.support.jobs import body, job_config, run_cli, write_config
from tests.support.mounts import tmpfs

pytestmark = pytest.mark.spark


def _console(r: subprocess.CompletedProcess) -> list[str]:
    return (r.stdout + r.stderr).splitlines()


def _assert_one_error_line(lines: list[str], *named: str) -> None:
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, "\n".join(lines)
    assert all(n in errors[0] for n in named), errors[0]
    for trace in ("Traceback", "\tat ", "Caused by", "SQLQueryContextLogger", "ERROR "):
        assert not any(trace in line for line in lines), (trace, "\n".join(lines))


def _fill(tmp_path: Path, bad: int = 1) -> tuple[FakeQueue, list[str]]:
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(20)])
    return q, [q.send(f"not json {k}") for k in range(bad)]


def test_a_bad_message_under_fail_prints_one_line_naming_it_and_acks_nothing(tmp_path):
    q, bad = _fill(tmp_path)
    cfg = job_config(tmp_path, source={"on_bad_message": "fail"})
    r = run_cli(write_config(tmp_path, cfg))
    assert r.returncode == 1
    _assert_one_error_line(_console(r), bad[0], "staged file", "sources.src.on_bad_message")
    assert q.count()["total"] == 21


def test_a_bad_dedup_key_stops_before_reading_naming_the_key(tmp_path):
    q, _ = _fill(tmp_path, bad=0)
    cfg = job_config(tmp_path, state={"path": str(tmp_path / "state"), "dedup_key": "nosuchcol +"})
    r = run_cli(write_config(tmp_path, cfg))
    assert r.returncode == 2
    _assert_one_error_line(_console(r), "config key state.dedup_key")
    assert q.count()["total"] == 20 and q.count()["visible"] == 20


def test_a_read_only_sink_folder_prints_one_line_naming_it_and_the_trace_only_at_debug(tmp_path):
    q, _ = _fill(tmp_path, bad=0)
    with tmpfs(tmp_path / "ro", "size=1m,ro") as ro:
        cfg = job_config(tmp_path, sinks=[files_sink(tmp_path, path=str(ro / "out"))])
        path = write_config(tmp_path, cfg)
        r = run_cli(path)
        assert r.returncode == 1
        _assert_one_error_line(_console(r), f"file:{ro}/out/batch_id=0")
        assert q.count()["total"] == 20
        debug = run_cli(["--config", str(path), "--log-level", "DEBUG"])
    assert debug.returncode == 1
    console = debug.stdout + debug.stderr
    assert "Traceback" in console and "\tat org.apache" in console
    assert q.count()["total"] == 20
