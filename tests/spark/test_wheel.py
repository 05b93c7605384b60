"""The wheel ``python -m build`` makes: runtime packages only, and a drain job runs from it in a new venv,
as does one through the example plugin package (``tests/plugins/mq_ingest_example``) installed beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import orjson
import pytest

from tests.support.jobs import ROOT, body, job_config, read_jsonl_dir, write_config
from tests.support.plugins import EXAMPLE

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


@pytest.fixture(scope="module")
def bindir(wheel, tmp_path_factory) -> Path:
    """The new venv's ``bin``, made once for this module's tests."""
    return _venv_with(wheel, tmp_path_factory.mktemp("wheel") / "venv")


def test_a_drain_job_runs_from_the_installed_wheel(bindir, tmp_path):
    run = {"cwd": tmp_path, "env": _clean_env(), "capture_output": True, "text": True, "timeout": 300}
    where = subprocess.run(
        [str(bindir / "python"), "-c", "import ingest, sinks; print(ingest.__file__, sinks.__file__)"], **run
    )
    assert where.stdout.startswith(str(bindir.parent)), where.stdout + where.stderr
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


def test_a_plugin_package_installed_beside_the_wheel_is_a_connector_like_the_builtins(bindir, tmp_path):
    """Its source and sink by ``type:`` in a job, its options checked and in the reference; no edit here."""
    plugin = shutil.copytree(EXAMPLE, tmp_path / "plugin")  # the build writes into the folder: a copy
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(plugin)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (plugin_wheel,) = (tmp_path / "dist").glob("mq_ingest_example-*.whl")
    run = {"cwd": tmp_path, "env": _clean_env(), "capture_output": True, "text": True, "timeout": 300}
    pip = [str(bindir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    installed = subprocess.run([*pip, str(plugin_wheel)], **run)
    assert installed.returncode == 0, installed.stderr[-3000:]

    source = {"type": "counter", "name": "numbers", "messages": 40, "prefix": "n-"}
    sink = {"type": "jsonl", "name": "out", "path": str(tmp_path / "out")}
    cfg = job_config(tmp_path, sources=[source], sinks=[sink], schema="n BIGINT, text STRING")
    bad = write_config(tmp_path, {**cfg, "sinks": [{**sink, "max_record_byte": 10}]})
    refused = subprocess.run([str(bindir / "mq-ingest"), "check", "--config", str(bad)], **run)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "sinks.out.max_record_byte: Extra inputs are not permitted" in refused.stderr

    reference = subprocess.run([str(bindir / "python"), "-m", "ingest.config.reference"], **run)
    assert reference.returncode == 0, reference.stderr
    for line in (
        "### sources[] type: counter",
        "| `prefix` |",
        "### sinks[] type: jsonl",
        "| `max_record_bytes` |",
    ):
        assert line in reference.stdout, line

    config = write_config(tmp_path, cfg)
    r = subprocess.run(
        [str(bindir / "mq-ingest"), "run", "--config", str(config)], start_new_session=True, **run
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = read_jsonl_dir(tmp_path / "out")
    assert sorted(row["n"] for row in rows) == list(range(40))  # each event once
    assert {row["text"] for row in rows} == {f"n-{i}" for i in range(40)}
