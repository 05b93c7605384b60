"""The driver JVM's class archive: where it lives, when it is used; a partial one is never promoted."""

from __future__ import annotations

import sys

import pytest

from ingest.tools import cds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MQ_INGEST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_no_archive_no_options_then_the_archive_is_mapped(cache):
    path = cds.archive_path()
    assert path is not None and path.parent == cache / "cds" and path.name.endswith(".jsa")
    assert cds.java_options() == ""
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert cds.java_options().startswith(f"-XX:SharedArchiveFile={path} -Xshare:auto")


def test_the_archive_is_keyed_by_the_java_it_was_made_for(cache, tmp_path, monkeypatch):
    first = cds.archive_path()
    other = tmp_path / "jdk" / "bin" / "java"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert cds.archive_path() not in (None, first)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert cds.archive_path() is None and cds.java_options() == ""


def fake_child(tmp_path, script: str) -> str:
    """A stand-in for ``python -m ingest.cds --dump-to F`` (the real one starts Spark: tests/spark)."""
    exe = tmp_path / "child"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nto = sys.argv[sys.argv.index('--dump-to') + 1]\n{script}\n"
    )
    exe.chmod(0o755)
    return str(exe)


def test_a_child_that_fails_part_way_leaves_no_archive(cache, tmp_path, monkeypatch, capsys):
    child = fake_child(
        tmp_path, "open(to, 'wb').write(b'half')\nprint('jvm died', file=sys.stderr)\nsys.exit(134)"
    )
    monkeypatch.setattr(sys, "executable", child)
    assert cds.build() is None
    assert "failed (exit 134)" in capsys.readouterr().out
    assert list((cache / "cds").iterdir()) == [], "neither the partial file nor an archive is left"
    assert cds.java_options() == ""


def test_a_clean_child_is_promoted_and_a_second_build_keeps_it(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", fake_child(tmp_path, "open(to, 'wb').write(b'whole')"))
    path = cds.build()
    assert path is not None and path.read_bytes() == b"whole"
    assert [p.name for p in (cache / "cds").iterdir()] == [path.name]
    monkeypatch.setattr(sys, "executable", fake_child(tmp_path, "sys.exit(1)"))
    assert cds.build() == path and path.read_bytes() == b"whole"
