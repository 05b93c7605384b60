"""What the sink contract suite (``tests/contract/test_sink_contract.py``) writes to: a target, and
how each sink type's targets are found (a module per type, ``tests/contract/sink_targets/<type>.py``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TARGETS = "tests.contract.sink_targets"
"""The package of the targets' modules: one per sink type, named after its ``type``."""


@dataclass
class Target:
    """One sink's config and a way to read what its target holds, set up for one test."""

    config: dict[str, Any]
    """The sink's config (without ``name``); a record over ~1000 bytes is refused where it can be."""
    read: Callable[[], list[str]]
    """What the target holds: one text per message or row."""
    idempotent: bool = False
    """This test's target is idempotent per batch although its type promises less (the function
    sink's suite function replaces its batch's file)."""


Factory = Callable[[Any, Path], Iterator[Target]]
"""Sets up a target for a test (``request``, ``tmp_path``), yields it, then takes it down."""


def targets(types: list[str]) -> dict[str, tuple[str, Factory]]:
    """Each target of the sink ``types``: its name → (its sink type, its factory), from each type's
    module ``TARGETS.<type>`` (its ``TARGETS``: the type's own, and second ones such as a FIFO
    queue); a type with no module has none (the suite's last test names it)."""
    found: dict[str, tuple[str, Factory]] = {}
    for kind in types:
        try:
            module = importlib.import_module(f"{TARGETS}.{kind}")
        except ModuleNotFoundError as err:
            if err.name != f"{TARGETS}.{kind}":
                raise
            continue
        found |= {name: (kind, factory) for name, factory in module.TARGETS.items()}
    return found


def lines(directory: Path, pattern: str) -> list[str]:
    """The JSON lines of the files under ``directory`` matching ``pattern``, read as text."""
    return [line for f in sorted(directory.glob(pattern)) for line in f.read_text().splitlines() if line]
