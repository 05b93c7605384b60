"""``mq-ingest run|check|fakeq``: the console command takes the module entry points' flags and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import yaml

from ingest import cli
from tests.support.jobconfig import fake_source, job_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project runs 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_declares_the_console_command():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"] == {"mq-ingest": "ingest.cli:main"}


def test_help_lists_the_commands_and_an_unknown_one_exits_2(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("run", "check", "fakeq"):
        assert f"\n  {command} " in out
    assert cli.main(["launch"]) == 2
    assert "unknown command 'launch'" in capsys.readouterr().err
    assert cli.main([]) == 2


def test_fakeq_sends_and_counts_through_the_console_command(tmp_path, capsys):
    events = tmp_path / "events.jsonl"
    events.write_text("".join(orjson.dumps({"event_id": i}).decode() + "\n" for i in range(3)))
    queue = ["fakeq", "--path", str(tmp_path / "queues"), "--queue", "events"]
    assert cli.main([*queue, "send", "--file", str(events)]) == 0
    capsys.readouterr()
    assert cli.main([*queue, "count"]) == 0
    assert orjson.loads(capsys.readouterr().out)["visible"] == 3
    assert cli.main(["fakeq", "--path", str(tmp_path / "queues"), "--queue", "nope", "count"]) == 2
    assert "queue nope does not exist" in capsys.readouterr().err


def _bad_job(tmp_path: Path) -> Path:
    cfg = job_config(fake_source(tmp_path), tmp_path)
    cfg["staging"]["max_in_flight"] = 0
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_run_and_check_exit_2_naming_the_key_of_an_invalid_config(tmp_path, capsys):
    path = _bad_job(tmp_path)
    assert cli.main(["run", "--config", str(path)]) == 2
    assert "staging.max_in_flight" in capsys.readouterr().err
    assert cli.main(["check", "--config", str(path)]) == 2
    assert "staging.max_in_flight" in capsys.readouterr().err


def test_run_help_names_the_console_command_and_keeps_every_flag(capsys):
    try:
        cli.main(["run", "--help"])
    except SystemExit as stop:
        assert stop.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mq-ingest run")
    for flag in ("--config", "--sql", "--settings", "--print-config", "--log-level", "--check"):
        assert flag in out


def _error_line(stderr: str) -> str:
    [line] = [x for x in stderr.splitlines() if x.startswith("error:")]
    return line


def test_a_job_name_too_long_exits_2_naming_the_key_from_run_and_check(tmp_path, capsys):
    cfg = job_config(fake_source(tmp_path), tmp_path)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**cfg, "name": "n" * 140_000}))
    for command in ("run", "check"):
        assert cli.main([command, "--config", str(path)]) == 2
        line = _error_line(capsys.readouterr().err)
        assert line == f"error: {path}: name: String should have at most 100 characters", line[:300]


def test_intake_refuses_a_driver_job_and_a_bad_worker_id_with_one_error_line_exit_2(tmp_path, capsys):
    """``mq-ingest intake`` starts a worker only for a job whose ``intake.mode`` is ``workers``, and
    only under a worker id it can name its files and folder after."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job_config(fake_source(tmp_path), tmp_path)))
    assert cli.main(["intake", "--config", str(path)]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line == "error: config key intake.mode: is 'driver'; workers need 'workers'"
    path.write_text(yaml.safe_dump(job_config(fake_source(tmp_path), tmp_path, intake={"mode": "workers"})))
    assert cli.main(["intake", "--config", str(path), "--worker-id", "w 1/.."]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line == "error: worker id 'w 1/..': use 1-80 letters, digits, '.', '_' or '-'"
    assert not (tmp_path / "staging" / "_workers").exists(), "no worker folder was made"


def test_check_reports_an_error_it_did_not_raise_on_purpose_on_one_line_exit_2(tmp_path):
    """A JVM that cannot start (``JAVA_HOME`` names no Java), in a child process: the check's
    Spark session is the process's own."""
    cfg = job_config(fake_source(tmp_path), tmp_path)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    (tmp_path / "no-java").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "ingest.cli", "check", "--config", str(path)],
        cwd=ROOT,
        env={**os.environ, "JAVA_HOME": str(tmp_path / "no-java")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    exited = "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."
    assert _error_line(done.stderr) == f"error: PySparkRuntimeError: {exited}"
