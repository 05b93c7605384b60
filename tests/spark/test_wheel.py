"""The wheel ``python -m build`` makes: runtime packages only, and a drain job runs from it in a new venv."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import orjson
import pytest

from tests.support.jobs import ROOT, body, job_config, read_jsonl_dir, write_config

# One worker under xdist: the module's wheel is built once (its build writes into the checkout).
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``python -m build`` of the checkout (sdist, then the wheel from it, as a release is built)."""
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (found,) = out.glob("mq_ingest-*.whl")
    return found


def test_the_wheel_holds_the_runtime_packages_and_no_tests_benchmarks_or_emulators(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        scripts = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    for module in (
        "ingest/run.py",
        "ingest/cli.py",
        "ingest/log4j2.properties",
        "sources/sqs/source.py",
        "sinks/delta/sink.py",
    ):
        assert module in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "conf/", "ingest/emulators/"))]
    assert "mq-ingest = ingest.cli:main" in scripts
    # Ranges, not pins: it installs beside another Spark application's packages.
    assert "Requires-Dist: pyspark<5,>=4.1" in meta or "Requires-Dist: pyspark>=4.1,<5" in meta
    runtime = [
        line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert runtime and not [line for line in runtime if "==" in line], runtime


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _venv_with(wheel: Path, where: Path) -> Path:
    """A new venv holding the wheel; its dependencies are read from this interpreter's site-packages
    (appended to its path by a ``.pth`` line, whose own ``.pth`` files, the checkout's editable
    install among them, Python does not run), so the test needs no index and no download.

    Run outside the checkout, without ``PYTHONPATH``: pip would take the checkout's
    ``mq_ingest.egg-info`` for an installed mq-ingest and install nothing."""
    venv.create(where, with_pip=True, symlinks=True)
    python = where / "bin" / "python"
    run = {"cwd": where, "env": _clean_env(), "capture_output": True, "text": True, "timeout": 300}
    r = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], **run
    )
    assert r.returncode == 0, r.stderr
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True, **run
    ).stdout.strip()
    Path(site, "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return where / "bin"


def test_a_drain_job_runs_from_the_installed_wheel(wheel, tmp_path):
    bindir = _venv_with(wheel, tmp_path / "venv")
    run = {"cwd": tmp_path, "env": _clean_env(), "capture_output": True, "text": True, "timeout": 300}
    where = subprocess.run(
        [str(bindir / "python"), "-c", "import ingest, sinks; print(ingest.__file__, sinks.__file__)"], **run
    )
    assert where.stdout.startswith(str(tmp_path / "venv")), where.stdout + where.stderr
    assert "site-packages" in where.stdout

    events = tmp_path / "events.jsonl"
    events.write_text("".join(body(i) + "\n" for i in range(50)))
    send = [str(bindir / "mq-ingest"), "fakeq", "--path", str(tmp_path / "queues"), "--queue", "in", "send"]
    sent = subprocess.run([*send, "--file", str(events)], **run)
    assert sent.returncode == 0, sent.stderr

    config = write_config(tmp_path, job_config(tmp_path))
    r = subprocess.run(
        [str(bindir / "mq-ingest"), "run", "--config", str(config)], start_new_session=True, **run
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = next(line for line in r.stdout.splitlines() if line.startswith("SUMMARY "))
    figures = orjson.loads(summary.removeprefix("SUMMARY "))
    assert figures["received"] == 50
    assert figures["deletedMessages"] == 50
    assert sorted(row["event_id"] for row in read_jsonl_dir(tmp_path / "out")) == list(range(50))
