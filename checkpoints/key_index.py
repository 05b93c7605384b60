"""A compact in-memory set of message keys: 128-bit hashes in sorted numpy runs, 24 bytes a key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

# Two independent 64-bit SipHash-2-4 hashes make one 128-bit fingerprint: two distinct keys
# among a billion share one with odds of about 1e-21, far below any disk's error rate.
_HASH_KEYS = ("mq-ingest-idx-h1", "mq-ingest-idx-h2")

Keys = pa.Array | pa.ChunkedArray | Sequence[Any]


def fingerprints(keys: Keys) -> tuple[np.ndarray, np.ndarray]:
    """The two 64-bit halves of each key's 128-bit fingerprint (``uint64`` arrays)."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        values = keys.to_numpy(zero_copy_only=False)
    else:
        values = np.empty(len(keys), dtype=object)
        values[:] = list(keys)
    return tuple(pd.util.hash_array(values, hash_key=k, categorize=False) for k in _HASH_KEYS)  # type: ignore[return-value]


class _Run:
    """Fingerprints sorted by (hi, lo), with each key's ``seen_ms`` alongside."""

    __slots__ = ("hi", "lo", "seen")

    def __init__(self, hi: np.ndarray, lo: np.ndarray, seen: np.ndarray) -> None:
        order = np.lexsort((lo, hi))
        self.hi, self.lo, self.seen = hi[order], lo[order], seen[order]

    def __len__(self) -> int:
        return len(self.hi)

    def contains(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        left = np.searchsorted(self.hi, hi, side="left")
        right = np.searchsorted(self.hi, hi, side="right")
        found = np.zeros(len(hi), dtype=bool)
        single = right - left == 1
        found[single] = self.lo[left[single]] == lo[single]
        # Keys whose high halves collide with another key's (rare): compare each low half.
        for i in np.flatnonzero(right - left > 1):
            found[i] = bool((self.lo[left[i] : right[i]] == lo[i]).any())
        return found


class KeyIndex:
    """The keys of a dedup window, held as fingerprints in a few sorted runs.

    A Python ``dict`` of the same keys costs about 250 bytes a key (the string object and
    the table slot); this index costs 24 (two hash halves and ``seen_ms``), so a window of
    ten million keys fits in a quarter of a gigabyte. Lookups hash the batch's keys once
    and binary-search each run. New keys land in a run of their own; a run is merged into
    the one before it when it grows to half that run's size, so there are O(log n) runs and
    each key is re-sorted O(log n) times over its life.

    Example:
        >>> index = KeyIndex()
        >>> index.add(["a", "b"], seen_ms=1_000)
        >>> index.contains(["a", "c"]).tolist()
        [True, False]
        >>> index.prune(cutoff_ms=2_000)
        2
        >>> len(index)
        0
    """

    def __init__(self) -> None:
        self._runs: list[_Run] = []

    def __len__(self) -> int:
        return sum(len(r) for r in self._runs)

    @property
    def runs(self) -> int:
        """How many sorted runs a lookup searches (tests and metrics)."""
        return len(self._runs)

    def contains(self, keys: Keys) -> np.ndarray:
        """A boolean array: True where the key is in the index."""
        hi, lo = fingerprints(keys)
        found = np.zeros(len(hi), dtype=bool)
        for run in self._runs:
            found |= run.contains(hi, lo)
        return found

    def add(self, keys: Keys, seen_ms: int | np.ndarray) -> None:
        """Index ``keys`` (not already in it, no repeats) with their ``seen_ms``."""
        hi, lo = fingerprints(keys)
        if not len(hi):
            return
        seen = np.broadcast_to(np.asarray(seen_ms, dtype=np.int64), hi.shape).copy()
        self._runs.append(_Run(hi, lo, seen))
        while len(self._runs) > 1 and 2 * len(self._runs[-1]) >= len(self._runs[-2]):
            last = self._runs.pop()
            self._runs[-1] = self._merge(self._runs[-1], last)

    def prune(self, cutoff_ms: int) -> int:
        """Forget keys seen before ``cutoff_ms``; return how many were forgotten."""
        before = len(self)
        kept = [self._keep(r, r.seen >= cutoff_ms) for r in self._runs]
        self._runs = [r for r in kept if len(r)]
        return before - len(self)

    @staticmethod
    def _keep(run: _Run, mask: np.ndarray) -> _Run:
        if mask.all():
            return run
        kept = _Run.__new__(_Run)
        kept.hi, kept.lo, kept.seen = run.hi[mask], run.lo[mask], run.seen[mask]
        return kept

    @staticmethod
    def _merge(a: _Run, b: _Run) -> _Run:
        hi, lo = np.concatenate([a.hi, b.hi]), np.concatenate([a.lo, b.lo])
        return _Run(hi, lo, np.concatenate([a.seen, b.seen]))
