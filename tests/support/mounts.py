"""Real file-system faults for machine-fault tests: a small tmpfs (a full disk, a read-only mount) and an
immutable folder (``chattr +i``); each test is skipped where they cannot be made (without root)."""

from __future__ import annotations

import contextlib
import shutil
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


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """``path`` (a folder) made immutable while the block runs (``chattr +i``): nothing is created in,
    renamed into or removed from it, even by root, as on a volume remounted read-only; its
    subfolders stay writable. The test is skipped where the file system or the user cannot."""
    if shutil.which("chattr") is None:
        pytest.skip("cannot make a folder immutable here: no chattr")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a folder immutable here (chattr +i): {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
