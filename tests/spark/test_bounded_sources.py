"""A job whose sources are all bounded ends by itself (exit 0), from YAML and from a ``--sql`` script."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.jobconfig import job_config as build
from tests.support.jobs import read_jsonl_dir, start_cli, summary, write_config

pytestmark = pytest.mark.spark

ROWS = 300
DEADLINE = 240
"""Seconds the job gets to end on its own: a JVM start, a few batches, well under it."""
ENDED = "all sources are bounded and finished: stopping"


def finish(args: Path | list[str]) -> tuple[int, str]:
    """Run the CLI until it exits on its own; kill its process group if the deadline passes."""
    proc = start_cli(args)
    try:
        out, _ = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the job did not end on its own within {DEADLINE}s:\n{out[-4000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


@pytest.mark.parametrize("mode", ["processing_time", "available_now"])
def test_a_yaml_job_on_a_bounded_datagen_writes_every_row_once_and_exits_0(tmp_path, mode):
    source = {
        "type": "datagen",
        "name": "gen",
        "number-of-rows": ROWS,
        "rows-per-second": 2000,
        "batch_size": 100,
        "fields": {"id": {"kind": "sequence", "start": 0, "end": 10_000}},
    }
    cfg = build(
        source, tmp_path, schema="id BIGINT, name STRING", trigger={"mode": mode, "interval": "500ms"}
    )
    code, out = finish(write_config(tmp_path, cfg))
    assert code == 0, out[-4000:]
    assert sorted(r["id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(ROWS))
    assert summary(out)["written"] == ROWS
    if mode == "processing_time":
        assert ENDED in out


def test_a_sql_script_with_a_bounded_datagen_source_writes_every_row_and_exits_0(tmp_path):
    script = tmp_path / "gen.sql"
    out_dir = tmp_path / "out"
    script.write_text(
        "CREATE TEMPORARY TABLE gen (id BIGINT, note VARCHAR) WITH (\n"
        f"  'connector' = 'datagen', 'number-of-rows' = '{ROWS}', 'rows-per-second' = '2000',\n"
        "  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100000',\n"
        "  'fields.note.length' = '8');\n"
        "CREATE TABLE out (id BIGINT, note VARCHAR) WITH (\n"
        f"  'connector' = 'filesystem', 'path' = 'file://{out_dir}', 'format' = 'json');\n"
        "INSERT INTO out SELECT id, note FROM gen;\n"
    )
    # No trigger in the settings: a script runs with the default, processing_time.
    settings = tmp_path / "gen.settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "work_dir": str(tmp_path / "work"),
                "staging": {"roll_messages": 200, "roll_interval": "200ms"},
                "spark": {"master": "local[2]", "log_level": "ERROR"},
            }
        )
    )
    code, out = finish(["--sql", str(script), "--settings", str(settings)])
    assert code == 0, out[-4000:]
    assert ENDED in out
    rows = read_jsonl_dir(out_dir)
    assert sorted(r["id"] for r in rows) == list(range(1, ROWS + 1))
    assert all(len(r["note"]) == 8 for r in rows)
    assert summary(out)["written"] == ROWS
