"""The plugins page (``docs/extending/plugins.md``) shows the example package the tests build,
install and run (``tests/spark/test_wheel.py``, the contract suite): its files, as they are."""

from __future__ import annotations

from tests.support.jobs import ROOT
from tests.support.plugins import page_examples


def test_the_page_shows_the_example_packages_files_as_they_are():
    """Its entry points, its config classes, its sink and its source: each whole, inline."""
    files = {label: code for label, code in page_examples().items() if label.startswith("tests/")}
    package = "tests/plugins/mq_ingest_example/mq_ingest_example"
    assert sorted(files) == sorted(
        ["tests/plugins/mq_ingest_example/pyproject.toml"]
        + [f"{package}/{name}.py" for name in ("config", "sink", "source")]
    )
    for path, code in files.items():
        assert code == (ROOT / path).read_text(encoding="utf-8"), f"{path} differs from the page's copy"


def test_the_public_api_table_lists_every_public_name():
    import ingest

    page = (ROOT / "docs" / "extending" / "plugins.md").read_text(encoding="utf-8")
    table = page[page.index("## The public API") :]
    for name in ingest.__all__:
        assert f"`{name}`" in table or f"`ingest.{name}`" in table, name
        assert getattr(ingest, name) is not None
