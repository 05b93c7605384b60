"""The spark-submit bundle: the code zip ships the job's packages, the env archive the runtime only."""

from __future__ import annotations

import zipfile

from ingest.tools.bundle import zip_project
from ingest.tools.bundle_env import _dropped, installed, plan


def test_the_code_zip_leaves_the_emulators_out(tmp_path):
    with zipfile.ZipFile(zip_project(tmp_path / "code.zip")) as zf:
        names = zf.namelist()
    assert "ingest/run.py" in names
    assert "sources/fake/store.py" in names
    assert not [n for n in names if n.startswith("ingest/emulators/")]
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]  # the emulators are in tests/
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_env_archive_leaves_the_test_and_docs_tools_out():
    """What this venv (``make dev``: the dev and docs extras) would pack: the runtime closure
    and the installed connector extras, not the tools for working on the project."""
    kept, _ = plan()
    names = {k.split("==")[0] for k in kept}
    assert {"pyspark", "boto3", "pydantic", "orjson"} <= names
    assert "rocketmq-client-python" in names or "rocketmq-client-python" not in installed()  # an extra
    assert not {"pytest", "moto", "ruff", "mypy", "venv-pack"} & names, "test tools packed"
    assert not {"mkdocs", "mkdocs-material", "babel", "pygments"} & names, "docs tools packed"


def test_the_env_archive_leaves_out_bytecode_an_import_is_writing():
    """``importlib`` writes a ``.pyc`` under a temporary name and renames it: one listed with the venv
    while a test elsewhere first imported the module was gone when venv-pack came to it (five
    cluster tests of a clean run errored so). The finished ``.pyc`` is packed."""
    site = "lib/python3.11/site-packages"
    assert _dropped(f"{site}/boto3/__pycache__/crt.cpython-311.pyc.140514184020736", set())
    assert not _dropped(f"{site}/boto3/__pycache__/crt.cpython-311.pyc", set())
    assert _dropped(f"{site}/pyspark/jars/a.jar", {f"{site}/pyspark/jars"})
