"""A small tmpfs for machine-fault tests: a real full disk or read-only folder (skipped without root)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    """``path`` (made here) as a tmpfs mounted with ``options`` (``size=64k``, ``size=1m,ro``);
    the test is skipped where mounting is not allowed. Unmounted lazily: the JVM may still hold a
    file a failed write left open."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)
