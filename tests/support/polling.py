"""Waiting in tests: poll a condition under a deadline instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    cond: Callable[[], object], timeout: float = 60.0, what: str = "condition", every: float = 0.05
) -> None:
    """Return once ``cond()`` is true; fail the test if it is not within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what} not met within {timeout:.0f}s"
        time.sleep(every)
