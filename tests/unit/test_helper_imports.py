"""Tests import helpers from helper modules, never from another test module.

Read with ``ast`` (every import, at any depth), so moving a helper into a ``test_*`` module,
or importing one from there, fails here with the importing file and the module it named.
"""

from __future__ import annotations

import ast

from tests.support.jobs import ROOT


def _is_test_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in ("tests", "bench") and any(p.startswith("test_") for p in parts[1:])


def _test_modules_imported(tree: ast.AST) -> list[str]:
    """The project's ``test_*`` modules that ``tree`` imports (``from tests.x import test_y`` too)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = (
                [node.module]
                if _is_test_module(node.module)
                else [f"{node.module}.{a.name}" for a in node.names]
            )
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [n for n in names if _is_test_module(n)]
    return out


def test_no_module_imports_a_test_module():
    bad = []
    for folder in ("tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            bad += [f"{path.relative_to(ROOT)}: {m}" for m in _test_modules_imported(tree)]
    assert not bad, "imports from test modules (move the helper to a helper module):\n" + "\n".join(bad)
