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
