"""The spark-submit code zip ships the job's packages and leaves the development emulators out."""

from __future__ import annotations

import zipfile

from ingest.tools.bundle import zip_project


def test_the_code_zip_leaves_the_emulators_out(tmp_path):
    with zipfile.ZipFile(zip_project(tmp_path / "code.zip")) as zf:
        names = zf.namelist()
    assert "ingest/run.py" in names
    assert "sources/fake/store.py" in names
    assert not [n for n in names if n.startswith("ingest/emulators/")]
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]  # the emulators are in tests/
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
