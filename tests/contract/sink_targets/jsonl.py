"""The example plugin's ``jsonl`` sink's target (``tests/plugins/mq_ingest_example``), registered
in code for the test: its batch files, read as JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support import plugins
from tests.support.sink_contract import Target


def jsonl(request: Any, tmp_path: Path) -> Iterator[Target]:
    from tests.support.jobs import read_jsonl_dir

    with plugins.registered():
        out = tmp_path / "out"
        cfg = {"type": "jsonl", "path": str(out), "max_record_bytes": 1000}
        yield Target(cfg, lambda: [json.dumps(r) for r in read_jsonl_dir(out)])


TARGETS = {"jsonl": jsonl}
