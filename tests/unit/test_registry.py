"""The connector registry: the built-ins wherever the code runs, plugins by entry points or in code,
and every reader (the config union, check's errors, Flink SQL, the reference) seeing them."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from ingest.config import parse_config, registry
from ingest.config.connector import type_name
from ingest.config.sink_base import SinkBase
from ingest.errors import ConfigError
from tests.support import plugins
from tests.support.jobconfig import fake_source, job_config
from tests.support.jobs import ROOT

BUILTIN_SINKS = ["files", "console", "fake", "sqs", "mns", "rocketmq", "delta", "jdbc"]
BUILTIN_SINKS += ["python", "spark_writer"]


def _types(kind: str) -> list[str]:
    return [type_name(m) for m in registry.connectors(kind)]


@pytest.fixture
def fresh_registry():
    """The entry points read again for the test, and again after it."""
    registry.refresh()
    yield
    registry.refresh()


def test_the_builtins_are_found_where_no_package_metadata_declares_them(monkeypatch, fresh_registry):
    """A checkout never installed, or an editable install whose metadata predates a connector."""
    monkeypatch.setattr(metadata, "entry_points", lambda **kw: metadata.EntryPoints(()))
    registry.refresh()
    assert _types("sinks")[: len(BUILTIN_SINKS)] == BUILTIN_SINKS
    assert _types("sources")[:4] == ["fake", "sqs", "mns", "datagen"]


def test_the_installed_entry_points_are_the_builtins_list(fresh_registry):
    """pyproject.toml makes ingest/connectors.ini the package's entry points: the same connectors."""
    for kind in ("sources", "sinks"):
        mine = {(e.name, e.value) for e in registry.installed_entries(kind) if e.package == "mq-ingest"}
        assert mine == {(e.name, e.value) for e in registry.builtin_entries(kind)}, "pip install -e . again"


def test_the_spark_submit_code_zip_finds_the_builtins_without_metadata(tmp_path):
    from ingest.tools.bundle import zip_project

    code = zip_project(tmp_path / "mq_ingest.zip")
    script = (
        f"import sys; sys.path.insert(0, {str(code)!r})\n"
        "from importlib import metadata\n"
        "metadata.entry_points = lambda **kw: metadata.EntryPoints(())  # a node with the zip only\n"
        "import ingest\n"
        f"assert ingest.__file__.startswith({str(code)!r}), ingest.__file__\n"
        "from ingest.config import registry\n"
        "from ingest.config.connector import type_name\n"
        "print(' '.join(type_name(m) for m in registry.connectors('sinks')))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == BUILTIN_SINKS


def _broken_plugin(site: Path) -> None:
    """An installed package (its metadata only) whose sink entry point names a module it lacks."""
    info = site / "mq_ingest_broken-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mq-ingest-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mq_ingest.sinks]\nbroken = mq_ingest_broken.config:Cfg\n")


def test_a_plugin_that_cannot_be_imported_stops_only_the_jobs_that_name_its_type(tmp_path):
    """A job that does not name it runs, with a warning naming the entry point; one that does
    gets one ``error:`` line naming the type and the import error."""
    _broken_plugin(tmp_path / "site")
    unused = job_config(fake_source(tmp_path), tmp_path)
    named = {**unused, "sinks": [{"type": "broken", "name": "out"}]}
    (tmp_path / "unused.yaml").write_text(yaml.safe_dump(unused))
    (tmp_path / "named.yaml").write_text(yaml.safe_dump(named))
    run = {"capture_output": True, "text": True, "timeout": 120, "cwd": tmp_path}
    run["env"] = {"PYTHONPATH": f"{tmp_path / 'site'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    why = (
        "entry point broken = mq_ingest_broken.config:Cfg in mq_ingest.sinks (package "
        "mq-ingest-broken): cannot import mq_ingest_broken.config: ModuleNotFoundError: "
        "No module named 'mq_ingest_broken'"
    )
    script = (  # the CLI's logging and config load; its check would start Spark
        "from ingest.runtime.console import setup_logging; setup_logging('INFO')\n"
        "from ingest.config import load_config\n"
        "cfg = load_config('unused.yaml'); load_config('unused.yaml')\n"
        "print(cfg.sinks[0].type)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], **run)
    assert (done.returncode, done.stdout) == (0, "files\n"), done.stderr
    warnings = [line for line in done.stderr.splitlines() if " WARNING " in line]
    assert [w.split(" WARNING ", 1)[1] for w in warnings] == [
        f"ingest.config.registry: {why}; type 'broken' left out: a job naming it is refused"
    ], done.stderr
    done = subprocess.run([sys.executable, "-m", "ingest.run", "--config", "named.yaml", "--check"], **run)
    assert done.returncode == 2, done.stderr
    assert [line for line in done.stderr.splitlines() if " INFO " not in line] == [
        f"error: named.yaml: sinks.out.type: type 'broken' cannot be loaded: {why}"
    ]


def test_a_connector_registered_in_code_is_in_the_union_and_every_reader(tmp_path):
    from ingest.config.reference import reference
    from ingest.flinksql.connectors import by_connector

    job = job_config(fake_source(tmp_path), tmp_path, [{"type": "jsonl", "name": "out", "path": "p"}])
    job["sources"] = [{"type": "counter", "name": "in", "messages": 3}]
    with pytest.raises(ConfigError, match=r"sinks\.out: Input tag 'jsonl' found"):
        parse_config(job)
    with plugins.registered():
        cfg = parse_config(job)
        assert (cfg.sources[0].type, cfg.sinks[0].type, cfg.sinks[0].guarantee) == (
            "counter",
            "jsonl",
            "idempotent_per_batch",
        )
        job["sinks"][0]["max_record_byte"] = 5  # a bad option: named, as for a built-in
        with pytest.raises(ConfigError, match=r"sinks\.out\.max_record_byte: Extra inputs"):
            parse_config(job)
        assert "example-jsonl" in by_connector("sinks")
        text = reference(plugins=True)
        assert "### sinks[] type: jsonl" in text and "| `max_record_bytes` |" in text
        assert "`type: " + " \\| ".join([*BUILTIN_SINKS, "jsonl"]) + "`" in text
        assert registry.package_of("sinks", "jsonl") == registry.IN_CODE
    assert "jsonl" not in _types("sinks") and "counter" not in _types("sources")


def test_a_class_that_is_no_connector_or_takes_a_type_that_is_taken_is_refused():
    from sinks.files.config import FilesSinkConfig

    class Untyped(SinkBase):
        implementation: ClassVar[str] = "nowhere:Sink"
        type: str

    with pytest.raises(ConfigError, match=r"Untyped has no field type: Literal\['<its type>'\]"):
        registry.register("sinks", Untyped)

    class Copy(FilesSinkConfig):
        pass

    with pytest.raises(ConfigError, match="type 'files' is mq-ingest's"):
        registry.register("sinks", Copy)
    assert registry.connectors("sinks")[0] is FilesSinkConfig


def test_an_editable_install_whose_metadata_predates_a_connector_keeps_every_builtin(
    monkeypatch, fresh_registry
):
    """mq-ingest's own metadata naming a built-in that moved (or lacking a new one) is not read."""
    stale = registry.Entry("sinks", "files", "sinks.files.old_config:FilesSinkConfig", "mq_ingest")
    monkeypatch.setattr(registry, "installed_entries", lambda kind: [stale] if kind == "sinks" else [])
    registry.refresh()
    assert _types("sinks")[: len(BUILTIN_SINKS)] == BUILTIN_SINKS
