"""The suite's xdist groups hold: ``make test`` runs with ``--dist loadgroup``, and a module marked
``xdist_group`` (the standalone cluster, LocalStack, the wheel) must run on one worker, or each
worker sets its expensive module fixtures up again. pytest-xdist 3.8 with pytest 9.2 stopped
grouping without a word (pytest-xdist#1386); this fails if a version bump does that again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

GROUPED = """
import os
import pytest

pytestmark = [pytest.mark.xdist_group("together")]


@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    with open(os.environ["WORKERS_FILE"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""
OTHERS = """
import time


def test_1():
    time.sleep(0.2)


def test_2():
    time.sleep(0.2)
"""


def test_a_marked_module_runs_on_one_worker_under_loadgroup(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_others.py").write_text(OTHERS)
    seen = tmp_path / "workers.txt"
    args = ["-n", "3", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=tmp_path,
        env={**os.environ, "WORKERS_FILE": str(seen)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers = seen.read_text().split()
    assert len(workers) == 4, run.stdout[-3000:]
    assert len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}: xdist_group is not honoured"
