"""The console sink's target: the table it prints on stdout, one row a line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target


def _printed(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("|") and "id" not in line.split("|")[1]]


def console(request: Any, tmp_path: Path) -> Iterator[Target]:
    capfd = request.getfixturevalue("capfd")
    yield Target({"type": "console", "max_rows": 1000}, lambda: _printed(capfd.readouterr().out))


TARGETS = {"console": console}
