"""Layers run one way: a ground of shared primitives, connectors and state on it, ``ingest`` wiring them.

Read from the source with ``ast`` (every import, at any depth, type-only ones too), so a new
import that breaks the layering fails here, naming the module and what it imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.spark.jobs import ROOT

PACKAGES = ("ingest", "sources", "sinks", "checkpoints")
GROUND = ("ingest.errors", "ingest.faults", "ingest.config")
"""Shared primitives: errors and retries, crash points for the chaos tests, the typed config.
They import nothing of the project but each other."""
CLIENTS = (
    "sources.base",
    "sources.sqs_client",
    "sources.mns_client",
    "sources.fake.store",
    "sources.claim_check",
)
"""A queue's client and wire handling, which its source and its sink share (the claim-check
pointer format and object store too)."""


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            out[name] = path
    return out


def _imported_names(path: Path) -> set[str]:
    """What ``path`` imports (absolute imports, at any depth), project or not: ``from a import b``
    gives ``a`` and ``a.b`` (``b`` may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def _imports() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        graph[name] |= {t for t in _imported_names(path) if t in modules and t != name}
    return graph


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_no_module_imports_itself_back_through_others():
    graph = _imports()
    seen: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            assert seen.get(nxt) != 1, "import cycle: " + " → ".join([*path[path.index(nxt) :], nxt])
            if nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[node] = 2

    for module in sorted(graph):
        if module not in seen:
            visit(module, [module])


def test_the_ground_imports_nothing_but_itself():
    for module, targets in _imports().items():
        if _in(module, GROUND):
            bad = sorted(t for t in targets if not _in(t, GROUND))
            assert not bad, f"{module} (ground) imports {bad}"


def test_connectors_and_state_build_on_the_ground_only():
    for module, targets in _imports().items():
        top = module.split(".")[0]
        if top == "ingest":
            continue
        bad = sorted(t for t in targets if t.startswith("ingest") and not _in(t, GROUND))
        assert not bad, f"{module} imports {bad} from ingest, which wires it (use the ground)"
        if top in ("sinks", "checkpoints"):
            bad = sorted(t for t in targets if t.startswith("sources") and not _in(t, CLIENTS))
            assert not bad, f"{module} imports {bad}: only a queue's shared client modules"


def test_no_runtime_module_imports_test_or_benchmark_code():
    """The emulators are test code (``tests/emulators``), which the wheel and the code zip leave out."""
    modules = _modules()
    assert "ingest.run" in modules and not [m for m in modules if m.startswith(("tests", "bench"))]
    for module, path in modules.items():
        bad = sorted(n for n in _imported_names(path) if _in(n, ("tests", "bench")))
        assert not bad, f"{module} imports {bad}: test and benchmark code is not installed"


def test_each_connector_is_registered_once_by_its_config_class():
    """The config union is the registry: each member names the class that implements it."""
    import importlib

    from ingest.config.reference import connectors
    from ingest.config.sinks import SinkConfig
    from ingest.config.sources import SourceConfig

    for union in (SourceConfig, SinkConfig):
        for model in connectors(union):
            module, cls = model.implementation.split(":")
            assert hasattr(importlib.import_module(module), cls), model.implementation
