"""The files sink's target: a directory of JSON-lines batch files, read as the tests read them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target


def files(request: Any, tmp_path: Path) -> Iterator[Target]:
    from tests.support.jobs import read_jsonl_dir

    out = tmp_path / "out"
    yield Target({"type": "files", "path": str(out)}, lambda: [json.dumps(r) for r in read_jsonl_dir(out)])


TARGETS = {"files": files}
