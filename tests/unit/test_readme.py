"""The README a newcomer reads: short, the two set-up commands CI runs, and links that lead somewhere."""

from __future__ import annotations

import re

from tests.support.jobs import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_short_and_keeps_no_copy_of_the_options():
    assert len(README.splitlines()) <= 250
    assert "| option | type | default |" not in README


def test_the_two_set_up_commands_are_there_and_ci_runs_the_test_one():
    assert "make demo   # run the main job on the embedded default" in README
    assert "make test   # install dev dependencies and run the whole test suite" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_local_link_of_the_readme_names_a_file_that_exists():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into docs/"
    assert [link for link in local if not (ROOT / link).is_file()] == []


def test_the_mns_page_exports_every_variable_the_sql_script_reads():
    """docs/getting-started/mns.md runs conf/mns_json_console.sql: its ``export`` lines set each
    ``${name}`` / ``${secret_values.name}`` the script reads (else the run exits 2)."""
    from ingest.flinksql.connectors import _PLACEHOLDER

    page = (ROOT / "docs" / "getting-started" / "mns.md").read_text(encoding="utf-8")
    script = (ROOT / "conf" / "mns_json_console.sql").read_text(encoding="utf-8")
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    wanted = set(_PLACEHOLDER.findall(code))
    assert wanted == {"mns_endpoint", "ak_id", "ak_secret"}
    sql_part = page[page.index("--sql conf/mns_json_console.sql") - 300 :]
    exported = set(re.findall(r"(?:export |\s)([A-Za-z_]\w*)=", sql_part.split("--sql")[0]))
    assert wanted <= exported, (wanted, exported)


def test_the_sqs_page_installs_moto_before_it_starts_it():
    """docs/getting-started/sqs.md follows the demo page: ``make demo`` does not install moto."""
    page = (ROOT / "docs" / "getting-started" / "sqs.md").read_text(encoding="utf-8")
    assert page.index("make dev") < page.index(".venv/bin/moto_server")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    dev = re.search(r"^dev:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert dev and "'.[dev" in dev.group(1)
    extras = (ROOT / "pyproject.toml").read_text(encoding="utf-8").split("[project.optional")[1]
    assert "moto[server]" in extras


def test_the_fake_queue_page_shows_the_info_lines_its_job_logs(tmp_path, monkeypatch, caplog):
    """The page's "What the console shows" has the config line and the state table's line every run
    logs before Spark starts, as its job logs them (its YAML taken from the page)."""
    from argparse import Namespace

    from checkpoints.state import StateTable
    from ingest.run import _load

    page = (ROOT / "docs" / "getting-started" / "fake-queue.md").read_text(encoding="utf-8")
    job = re.search(r"Write `job.yaml`:\n\n```yaml\n(.*?)```", page, re.DOTALL)
    assert job, "the page writes job.yaml"
    (tmp_path / "job.yaml").write_text(job.group(1))
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("INFO"):
        cfg, _ = _load(Namespace(config="job.yaml", sql=None, settings=None, print_config=False))
        StateTable(cfg.state.path, cfg.name, cfg.state.dedup_window).open()
    logged = [f"INFO {r.name}: {r.getMessage()}" for r in caplog.records if r.levelname == "INFO"]
    assert len(logged) == 2, logged  # loading config, the state table
    shown = page[page.index("## What the console shows") :]
    assert [line for line in logged if line not in shown] == []
