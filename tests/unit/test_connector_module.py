"""A connector author reads one module (``ingest.connector``) and one page (``docs/extending/plugins.md``);
a plugin written against the old homes of the contracts still gets the same objects."""

from __future__ import annotations

import importlib

import pytest

import ingest.connector
from tests.support.jobs import ROOT

OLD_HOMES = {
    "sources.base": {"Source": "Source", "Received": "Received", "AckResult": "AckResult"},
    "sinks.base": {
        "Sink": "Sink",
        "WriteReport": "WriteReport",
        "RefusedRecord": "RefusedRecord",
        "refused_record": "refused_record",
        "META": "META",
        "STAGING_FIELDS": "STAGING_FIELDS",
    },
    "sinks.frame": {
        name: name for name in ("send_frame", "body_column", "write_partitions", "executor_errors")
    },
    "sinks.batch_target": {
        "BatchTarget": "SendTarget",
        "BatchRefused": "CallRefused",
        "Failed": "Failed",
        "Limits": "Limits",
        "RetryPolicy": "RetryPolicy",
    },
    "sinks.batching": {"Batcher": "SendBuffer", "BatchRefused": "CallRefused", "write_rows": "write_rows"},
}
"""Each module kept for one release → its old name → the name in ``ingest.connector``."""


@pytest.mark.parametrize("module", sorted(OLD_HOMES))
def test_the_old_homes_re_export_the_same_objects(module):
    old = importlib.import_module(module)
    for old_name, name in OLD_HOMES[module].items():
        assert getattr(old, old_name) is getattr(ingest.connector, name), f"{module}.{old_name}"


def test_the_plugins_page_lists_everything_the_module_exports():
    page = (ROOT / "docs" / "extending" / "plugins.md").read_text(encoding="utf-8")
    section = page[page.index("## The connector module") : page.index("## A plugin package")]
    missing = [name for name in ingest.connector.__all__ if f"`{name}`" not in section]
    assert not missing, f"docs/extending/plugins.md does not list {missing}"
    assert all(getattr(ingest.connector, name) is not None for name in ingest.connector.__all__)


def test_the_public_api_takes_the_contracts_from_the_connector_module():
    import ingest

    for name in ("Source", "Received", "AckResult", "Sink", "WriteReport", "RefusedRecord", "SinkBase"):
        assert getattr(ingest, name) is getattr(ingest.connector, name), name
