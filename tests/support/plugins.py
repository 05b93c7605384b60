"""The example plugin package (``tests/plugins/mq_ingest_example``), used in this process without
installing it: its connectors as its ``pyproject.toml`` declares them, registered in code."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import tomllib

from ingest.config import registry
from tests.support.jobs import ROOT

EXAMPLE = ROOT / "tests" / "plugins" / "mq_ingest_example"
"""The plugin package's folder: its ``pyproject.toml`` and its ``mq_ingest_example`` package."""


def declared() -> dict[str, dict[str, str]]:
    """Its entry points, by kind (``sources``, ``sinks``): type → ``module:ConfigClass``."""
    points = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "entry-points"
    ]
    return {kind: dict(points.get(group, {})) for kind, group in registry.GROUPS.items()}


def configs() -> dict[str, list[Any]]:
    """Its config classes by kind, imported from the folder (put on ``sys.path`` once)."""
    if str(EXAMPLE) not in sys.path:
        sys.path.append(str(EXAMPLE))
    return {
        kind: [registry.load_object(value, name) for name, value in points.items()]
        for kind, points in declared().items()
    }


@contextmanager
def registered() -> Iterator[dict[str, list[Any]]]:
    """Its connectors in the registry (as ``ingest.register`` adds them), taken out again after."""
    found = configs()
    for kind, classes in found.items():
        for cls in classes:
            registry.register(kind, cls)  # type: ignore[arg-type]
    try:
        yield found
    finally:
        for kind, classes in found.items():
            for cls in classes:
                registry.unregister(kind, cls)  # type: ignore[arg-type]


PAGE = ROOT / "docs" / "extending" / "plugins.md"
_EXAMPLE = re.compile(r"<!-- example: (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)


def page_examples() -> dict[str, str]:
    """The docs page's examples, each marked ``<!-- example: LABEL -->`` before its code block:
    a file of the example package (its path), or a snippet a test runs (``python-api``)."""
    return dict(_EXAMPLE.findall(PAGE.read_text(encoding="utf-8")))
