"""The Spark-writer sink's target: the JSON files Spark's writer leaves in a directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target, lines


def spark_writer(request: Any, tmp_path: Path) -> Iterator[Target]:
    cfg = {"type": "spark_writer", "format": "json", "path": str(tmp_path / "out")}
    yield Target(cfg, lambda: lines(tmp_path / "out", "part-*"))


TARGETS = {"spark_writer": spark_writer}
