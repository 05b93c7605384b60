"""The Delta sink's target: a table on disk, read with deltalake (not the sink's code)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target


def _rows(table: Path) -> list[str]:
    from deltalake import DeltaTable

    return [json.dumps({"id": r["id"]}) for r in DeltaTable(str(table)).to_pyarrow_table().to_pylist()]


def delta(request: Any, tmp_path: Path) -> Iterator[Target]:
    yield Target({"type": "delta", "path": str(tmp_path / "table")}, lambda: _rows(tmp_path / "table"))


TARGETS = {"delta": delta}
