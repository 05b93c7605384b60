"""Every metric name the code uses with the metrics API is declared in ``ingest.metrics`` (read with ``ast``).

``Metrics.inc`` and ``set`` raise ``KeyError`` for an undeclared name only when the line runs; this
finds a misspelt name in a branch no test happens to reach.
"""

from __future__ import annotations

import ast

import pytest

from ingest.metrics import COUNTERS, GAUGES, Metrics
from tests.support.jobs import ROOT

DIRS = ("ingest", "sources", "sinks", "checkpoints", "bench", "tests")
KINDS = {"inc": COUNTERS, "total": COUNTERS, "by_label": COUNTERS, "set": GAUGES, "gauge": GAUGES}
"""The metrics API: the methods that take a metric name first, and the set it must be in."""
DELIVERY = {"deliveryDelivered", "deliveryDropped", "deliveryFailed", "deliveryErrors"}
BUILT = {("ingest/ops/job_events/delivery.py", "inc"): DELIVERY}
"""Call sites that build the name at run time, with every name they can build."""


def _is_metrics(node: ast.expr) -> bool:
    """``metrics``, ``self.metrics``, ``job.metrics``, ``self._metrics`` or the short ``m``."""
    text = ast.unparse(node)
    return text == "m" or text.split(".")[-1] in ("metrics", "_metrics")


def _uses() -> tuple[list[tuple[str, int, str, str]], set[tuple[str, str]]]:
    """(file, line, method, name) of each literal name; (file, method) of each built one."""
    literal, built = [], set()
    for top in DIRS:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "tests/unit/test_metric_names.py":  # misspells names on purpose
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in KINDS
                    and _is_metrics(node.func.value)
                    and node.args
                ):
                    continue
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    literal.append((rel, node.lineno, node.func.attr, first.value))
                else:
                    built.add((rel, node.func.attr))
    return literal, built


def test_every_metric_name_used_is_declared():
    literal, _ = _uses()
    assert len(literal) > 50 and {m for _, _, m, _ in literal} == set(KINDS)  # the scan sees the code
    undeclared = [f"{f}:{line} {m}({name!r})" for f, line, m, name in literal if name not in KINDS[m]]
    assert not undeclared, f"metric names not declared in ingest.metrics COUNTERS/GAUGES: {undeclared}"


def test_names_built_at_run_time_are_known_and_declared():
    _, built = _uses()
    assert built == set(BUILT), "a metric name built at run time: list what it can build in BUILT"
    for (_, method), names in BUILT.items():
        assert names <= set(KINDS[method]), names - set(KINDS[method])


def test_counter_and_gauge_names_are_distinct_and_an_undeclared_name_raises():
    assert not set(COUNTERS) & set(GAUGES)
    metrics = Metrics("t")
    with pytest.raises(KeyError):
        metrics.inc("recieved")
    with pytest.raises(KeyError):
        metrics.set("inflight", 1)
