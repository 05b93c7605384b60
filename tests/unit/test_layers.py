"""Layers run one way: a ground of shared primitives, connectors and state on it, ``ingest`` wiring them.

The layers, bottom up:

* The ground: ``ingest.errors`` (errors and retries), ``ingest.faults`` (crash points for the
  chaos tests), ``ingest.storage`` (the job's files, local or on S3), ``ingest.config`` (the
  shared config parts, the registry ``ingest.config.registry``
  and the unions keyed on ``type`` it builds, ``ingest.config.sources`` and ``ingest.config.sinks``),
  the contracts connectors implement (``ingest.connector``; ``ingest.sink`` for a function sink),
  and each connector's config module, ``sources.<name>.config`` or ``sinks.<name>.config``: the
  registry imports them, so they are ground too, and import nothing of the project but the ground. Importing a
  config module runs its packages' ``__init__`` modules, so those import nothing at their top.
* Connectors (``sources``, ``sinks``) and state (``checkpoints``): they build on the ground
  only; sinks take from ``sources`` only a queue's shared client modules (``CLIENTS``), and
  state nothing of a connector.
* ``ingest`` (but the ground) wires them, in subpackages stacked by role (``LAYERS``), each
  importing only the ground, state and the subpackages below it: ``runtime`` (the JVM and
  session), ``intake`` (receiving and staging), ``decode`` (bodies to rows), ``batch`` (one
  micro-batch), ``ops`` (watching a job), then the top (``pipeline``, ``run``, ``cli``,
  ``tools``, ``flinksql``), which may import anything below it. It imports no connector: it
  reaches them through the registry (outside ``ingest.tools``, whose fake-queue command names
  the fake queue). Each subpackage's docstring says so, as this module checks it.

A connector is one folder: ``sources/<name>/`` (``config``, ``source``) or ``sinks/<name>/``
(``config``, ``sink``), registered by one entry-point line (``ingest/connectors.ini``); its
config class declares the module that implements it and its Flink SQL name (``flinksql``), so
``ingest.flinksql`` names no connector.

Read from the source with ``ast`` (every import, at any depth, type-only ones too), so a new
import that breaks the layering fails here, naming the module and what it imported.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.support.jobs import ROOT

PACKAGES = ("ingest", "sources", "sinks", "checkpoints")
GROUND = (
    "ingest.errors",
    "ingest.faults",
    "ingest.config",
    "ingest.storage",
    "ingest.worker",
    "ingest.supervisor",
    "ingest.metrics",
    "ingest.connector",
    "ingest.sink",
)
"""Shared primitives: errors and retries, crash points for the chaos tests, the typed config and
its registries, the stores for the job's own files (local or S3, ``ingest.storage``), the
background thread's lifecycle and its supervisor, the job's metrics, the contracts connectors
implement (``ingest.connector``) and the function sink's (``ingest.sink``).
With the connectors' config modules they import nothing of the project but each other."""
LAYERS = ("ingest.runtime", "ingest.intake", "ingest.decode", "ingest.batch", "ingest.ops")
"""``ingest``'s subpackages bottom up; the rest of ``ingest`` (the top) sits above them all."""
CLIENTS = (
    "sources.sqs.client",
    "sources.sqs.errors",
    "sources.mns.client",
    "sources.fake.store",
)
"""A queue's client and wire handling, which its source and its sink share."""
FRAMEWORK_TOOLS = ("ingest.tools",)
"""The part of ``ingest`` that may name a connector: the fake-queue command drives the fake queue."""


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


def _ground(module: str) -> bool:
    """In the ground: a shared primitive, or a connector's config (``sources.<name>.config``)."""
    parts = module.split(".")
    return _in(module, GROUND) or (
        len(parts) == 3 and parts[0] in ("sources", "sinks") and parts[2] == "config"
    )


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
        if _ground(module):
            bad = sorted(t for t in targets if not _ground(t))
            assert not bad, f"{module} (ground) imports {bad}"


def test_connectors_and_state_build_on_the_ground_only():
    for module, targets in _imports().items():
        top = module.split(".")[0]
        if top == "ingest":
            continue
        bad = sorted(t for t in targets if t.startswith("ingest") and not _ground(t))
        assert not bad, f"{module} imports {bad} from ingest, which wires it (use the ground)"
        if top == "sinks":
            bad = sorted(
                t for t in targets if t.startswith("sources") and not (_in(t, CLIENTS) or _ground(t))
            )
            assert not bad, f"{module} imports {bad}: only a queue's shared client modules"
        if top in ("sources", "sinks"):
            bad = sorted(t for t in targets if _in(t, ("checkpoints", "sinks" if top == "sources" else "")))
            assert not bad, f"{module} imports {bad}: a connector knows no state, a source no sink"


def test_the_framework_and_state_import_no_connector():
    """``ingest`` reaches connectors through the registry (``ingest.config.registry``, entry
    points) and the contracts in ``ingest.connector``; state (``checkpoints``) knows none either.
    ``ingest.tools`` may name the fake queue (its command drives it)."""
    for module, targets in _imports().items():
        if not _in(module, ("ingest", "checkpoints")) or _in(module, FRAMEWORK_TOOLS):
            continue
        bad = sorted(t for t in targets if _in(t, ("sources", "sinks")))
        assert not bad, f"{module} imports {bad}: build connectors through the registry"


def _named_in(doc: str, heading: str) -> tuple[str, set[str]]:
    """The text of a docstring's ``heading`` line(s) (to the next blank line) and the ``names``
    in double backticks there."""
    assert heading in doc, f"no {heading!r} line"
    text = doc[doc.index(heading) + len(heading) :].split("\n\n")[0]
    if heading == "May import:":
        text = text.split("Must not be imported by:")[0]
    return text, set(re.findall(r"``([\w.<>]+)``", text))


def _rule(package: str) -> tuple[set[str], set[str]]:
    """(what ``package`` may import, what must not import it), as the tests here enforce them:
    names each docstring must give."""
    state_and_connectors = {"sources", "sinks", "checkpoints"}
    if package in LAYERS:
        below = set(LAYERS[: LAYERS.index(package)])
        return {"checkpoints", *below}, state_and_connectors | below
    if package in ("ingest.tools", "ingest.flinksql"):
        return {"checkpoints"}, state_and_connectors | set(LAYERS)
    return {
        "sources": (set(), {"ingest", "checkpoints"}),
        "sinks": (set(), {"ingest", "sources", "checkpoints"}),
        "checkpoints": (set(), {"sources", "sinks"}),
    }.get(package, (set(), set()))


DOCUMENTED = (*LAYERS, "ingest.tools", "ingest.flinksql", "ingest.config", "ingest.connector")
"""Packages whose docstring says what they may import and what must not import them, beside
``sources``, ``sinks`` and ``checkpoints``."""


def test_each_package_says_what_it_may_import_and_what_must_not_import_it():
    """Each subpackage's docstring has a ``May import:`` line and a ``Must not be imported by:``
    line naming what the tests above enforce (the ground, which everything may import, has no
    one it must not be imported by)."""
    modules = _modules()
    for package in (*DOCUMENTED, "sources", "sinks", "checkpoints"):
        doc = ast.get_docstring(ast.parse(modules[package].read_text(encoding="utf-8"))) or ""
        may_text, may = _named_in(doc, "May import:")
        must_not_text, must_not = _named_in(doc, "Must not be imported by:")
        allowed, forbidden = _rule(package)
        assert "the ground" in may_text, f"{package}: may import the ground"
        assert allowed <= may, f"{package}'s docstring: may import {sorted(allowed - may)} too"
        assert forbidden <= must_not, (
            f"{package}'s docstring: must not be imported by {sorted(forbidden - must_not)}"
        )
        connectors = {"sources", "sinks"} - ({"sources"} if package == "sinks" else set())  # its clients
        assert not connectors & may, f"{package}'s docstring: may import a connector"
        if package in ("ingest.config", "ingest.connector"):
            assert "nothing" in must_not_text, f"{package} is the ground: nothing must not import it"
        elif package not in ("sources", "sinks"):  # the registry reads connectors' config modules
            assert "the ground" in must_not_text, f"{package}: the ground must not import it"


def _layer(module: str) -> int:
    """Where ``module`` sits in ``ingest``: its index in ``LAYERS``, or above them all."""
    return next((i for i, pkg in enumerate(LAYERS) if _in(module, (pkg,))), len(LAYERS))


def test_ingest_subpackages_import_only_those_below_them():
    modules = _modules()
    assert all(pkg in modules for pkg in LAYERS), "a subpackage in LAYERS is missing"
    for module, targets in _imports().items():
        if not module.startswith("ingest.") or _ground(module):
            continue
        bad = sorted(
            t for t in targets if t.startswith("ingest.") and not _ground(t) and _layer(t) > _layer(module)
        )
        assert not bad, f"{module} imports {bad}, which sit above it ({' < '.join(LAYERS)} < the top)"


def test_no_runtime_module_imports_test_or_benchmark_code():
    """The emulators are test code (``tests/emulators``), which the wheel and the code zip leave out."""
    modules = _modules()
    assert "ingest.run" in modules and not [m for m in modules if m.startswith(("tests", "bench"))]
    for module, path in modules.items():
        bad = sorted(n for n in _imported_names(path) if _in(n, ("tests", "bench")))
        assert not bad, f"{module} imports {bad}: test and benchmark code is not installed"


def _test_module(name: str) -> bool:
    """A pytest module: ``test_*`` or ``conftest``, which pytest imports itself (twice, if another
    module imports it too: two copies of its fixtures and globals)."""
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def _absolute_imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports made absolute; ``from a import b`` gives
    ``a`` and ``a.b`` (``b`` may be a module)."""
    package = path.relative_to(ROOT).parent.parts
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names |= {n for n in (module, *(f"{module}.{a.name}" for a in node.names)) if n}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_no_module_imports_a_test_module_or_a_conftest():
    """Helpers several tests share live in helper modules (``tests/support``), never in a test
    module or a ``conftest.py`` that others import."""
    bad = []
    for folder in ("tests", "bench", *PACKAGES):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found = sorted(n for n in _absolute_imports(path) if _test_module(n))
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in found]
    assert not bad, "imports of test modules (move the helper to tests/support):\n" + "\n".join(bad)


def test_each_connector_is_registered_once_by_its_config_class():
    """The registry holds each config class; each names the class that implements it."""
    import importlib

    from ingest.config import registry

    for kind in ("sources", "sinks"):
        for model in registry.connectors(kind):
            module, cls = model.implementation.split(":")
            assert hasattr(importlib.import_module(module), cls), model.implementation


def _registered() -> list[tuple[str, str, type]]:
    """Each built-in connector: its top package, its role there, its config class."""
    from ingest.config import registry

    return [
        *(("sources", "source", m) for m in registry.builtins("sources")),
        *(("sinks", "sink", m) for m in registry.builtins("sinks")),
    ]


def test_each_registered_connector_is_one_folder_with_its_config_and_flink_sql_name():
    """``sources/<type>/`` holds ``config`` and ``source``, ``sinks/<type>/`` ``config`` and ``sink``;
    the config class names the implementation there and declares its Flink SQL name (or None)."""
    from ingest.config.connector import FlinkSql, type_name

    flink_names: dict[str, list[str]] = {"sources": [], "sinks": []}
    for top, role, model in _registered():
        name = type_name(model)
        folder = ROOT / top / name
        assert (folder / "__init__.py").is_file(), f"{model.__name__}: no package {top}/{name}/"
        assert (folder / f"{role}.py").is_file(), f"{model.__name__}: no {top}/{name}/{role}.py"
        assert model.__module__ == f"{top}.{name}.config", f"{model.__name__} lives in {model.__module__}"
        assert model.implementation == f"{top}.{name}.{role}:{model.implementation.split(':')[1]}"
        assert "flinksql" in vars(model), f"{model.__name__} declares no flinksql (None: no Flink SQL name)"
        if model.flinksql is not None:
            assert isinstance(model.flinksql, FlinkSql), model.__name__
            flink_names[top].append(model.flinksql.connector)
    for top, names in flink_names.items():
        assert len(set(names)) == len(names), f"{top}: a Flink SQL connector name twice: {sorted(names)}"
    assert {"sqs", "mns", "datagen"} <= set(flink_names["sources"])
    assert {"filesystem", "print", "mq", "delta"} <= set(flink_names["sinks"])


def test_every_connector_folder_is_registered():
    """A folder with a ``config`` module is a connector: one in its registry, once."""
    registered = [(top, m.__module__.split(".")[1]) for top, _, m in _registered()]
    assert len(set(registered)) == len(registered), registered
    for top in ("sources", "sinks"):
        for config in sorted((ROOT / top).glob("*/config.py")):
            assert (top, config.parent.name) in registered, f"{top}/{config.parent.name}/ is not registered"


def test_importing_a_connector_config_runs_no_connector_code():
    """Packages under ``sources`` and ``sinks`` import nothing at their top (``TYPE_CHECKING``
    aside): importing the registry, which imports every connector's config, loads no client."""
    modules = _modules()
    for name, path in modules.items():
        if path.name != "__init__.py" or name.split(".")[0] not in ("sources", "sinks"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module not in ("__future__", "typing"):
                raise AssertionError(f"{name} imports {node.module} at its top")
            assert not isinstance(node, ast.Import), f"{name} imports {[a.name for a in node.names]}"


def test_flinksql_names_no_connector():
    """``ingest.flinksql`` takes each connector's Flink SQL name and options from its config class:
    no string in it is a connector's ``type`` or Flink SQL name."""
    from ingest.config.connector import type_name

    names = {type_name(m) for _, _, m in _registered()}
    names |= {m.flinksql.connector for _, _, m in _registered() if m.flinksql is not None}
    for path in sorted((ROOT / "ingest" / "flinksql").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in names, f"{path.name} names the connector {node.value!r}"


def _connector_names() -> set[str]:
    """Every built-in connector's ``type`` and Flink SQL name."""
    from ingest.config.connector import type_name

    names = {type_name(m) for _, _, m in _registered()}
    return names | {m.flinksql.connector for _, _, m in _registered() if m.flinksql is not None}


def _named(node: ast.AST, names: set[str]) -> list[str]:
    """The connector names ``node`` spells as literals: a string, or the strings of a tuple, list
    or set literal."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]


def _compared(paths: list[Path]) -> list[str]:
    """Where ``paths`` compare against a connector's ``type`` or Flink SQL name (a comparison or a
    ``case``), or spell a literal collection of them (a set of types that may do something)."""
    names = _connector_names()
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                named = [n for side in (node.left, *node.comparators) for n in _named(side, names)]
            elif isinstance(node, ast.MatchValue):
                named = _named(node.value, names)
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1:
                named = _named(node, names) if len(_named(node, names)) == len(node.elts) else []
            else:
                continue
            found |= {f"{path.relative_to(ROOT)}:{node.lineno} {n!r}" for n in named}
    return sorted(found)


def test_the_framework_compares_no_connector_name():
    """Outside ``ingest/tools`` (the fake-queue command), ``ingest`` asks what a connector declares
    (``delivery.skips_replayed_batch``, ``uses_job_schema``, ``shares_path``…), never which one it is."""
    tools = ROOT / "ingest" / "tools"
    paths = [p for p in sorted((ROOT / "ingest").rglob("*.py")) if not p.is_relative_to(tools)]
    found = _compared(paths)
    assert not found, "the framework names connectors (declare a capability instead):\n" + "\n".join(found)


def test_the_contract_suites_branch_on_no_connector_type():
    """The sink contract suite loops over the registry's sinks, each target set up by its own module
    (``tests/contract/sink_targets/<type>.py``); the source suites are a module per source."""
    paths = sorted((ROOT / "tests" / "contract").glob("*.py"))
    paths += [ROOT / "tests" / "support" / f"{kind}_contract.py" for kind in ("sink", "source")]
    found = _compared(paths)
    assert not found, (
        "a contract suite branches on connector types (a module per type instead):\n" + "\n".join(found)
    )


def test_every_connector_and_config_module_imports_first():
    """Each module of ``sources``, ``sinks``, ``ingest.config`` and the contracts (``ingest.connector``,
    ``ingest.sink``) imports as the first of the project's (a Spark executor unpickling a sink does
    that): no import comes back to a module half-made, through the ``__init__`` of a package it
    imports from."""
    import subprocess
    import sys

    names = sorted(
        n
        for n in _modules()
        if n.split(".")[0] in ("sources", "sinks")
        or _in(n, ("ingest.config", "ingest.connector", "ingest.sink"))
    )
    script = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        f"    for m in [m for m in sys.modules if m.split('.')[0] in {PACKAGES!r}]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as err:\n"
        "        print(f'{name}: {err}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "", done.stdout
