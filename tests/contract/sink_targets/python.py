"""The function sink's target: the suite function's JSON-lines store, one file per batch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target, lines


def python(request: Any, tmp_path: Path) -> Iterator[Target]:
    function = "tests.support.user_functions:write_jsonl"
    cfg = {"type": "python", "function": function, "options": {"path": str(tmp_path / "store")}}
    yield Target(cfg, lambda: lines(tmp_path / "store", "*.jsonl"), idempotent=True)


TARGETS = {"python": python}
