"""A compact in-memory set of message keys: 128-bit hashes in sorted numpy runs, 24 bytes a key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa

# The high half is SipHash-2-4 with a fixed key (pandas.util.hash_array, vectorised); the low
# half is Python's own str hash (SipHash-1-3 under this process's random key, cached on each
# string). Two distinct keys among a billion share both halves with odds of about 1e-21, far
# below any disk's error rate. The index is rebuilt by each process, so a per-process key is fine.
_HASH_KEY = "mq-ingest-idx-h1"

Keys: TypeAlias = "pa.Array | pa.ChunkedArray | Sequence[Any]"


def fingerprints(keys: Keys) -> tuple[np.ndarray, np.ndarray]:
    """The two 64-bit halves of each key's 128-bit fingerprint (``uint64`` arrays)."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        values = keys.to_numpy(zero_copy_only=False)
    else:
        values = np.empty(len(keys), dtype=object)
        values[:] = list(keys)
    hi = pd.util.hash_array(values, hash_key=_HASH_KEY, categorize=False)
    lo = np.fromiter(map(hash, values), dtype=np.int64, count=len(values)).view(np.uint64)
    return hi, lo


class _Run:
    """Fingerprints sorted by their high half, with each key's ``seen_ms`` alongside.

    Keys sharing a high half sit side by side in any order; ``contains`` compares each of
    their low halves, so the order among them does not matter.
    """

    __slots__ = ("hi", "lo", "seen")

    def __init__(self, hi: np.ndarray, lo: np.ndarray, seen: np.ndarray, ordered: bool = False) -> None:
        if not ordered:
            order = np.argsort(hi, kind="stable")  # a radix sort for uint64: linear
            hi, lo, seen = hi[order], lo[order], seen[order]
        self.hi, self.lo, self.seen = hi, lo, seen

    def __len__(self) -> int:
        return len(self.hi)

    def contains(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """True where (hi, lo) is in the run; ``hi`` must be sorted (the binary searches then
        walk the run front to back, which is several times faster than in random order)."""
        n = len(self.hi)
        found = np.zeros(len(hi), dtype=bool)
        if not n:
            return found
        first = np.searchsorted(self.hi, hi)
        at = np.minimum(first, n - 1)
        same_hi = self.hi[at] == hi
        found = same_hi & (self.lo[at] == lo)
        # The high half matched, the low half did not: another key shares the high half (rare),
        # and the one sought may sit further along the run of equal high halves.
        for i in np.flatnonzero(same_hi & ~found):
            j = first[i]
            while j < n and self.hi[j] == hi[i]:
                if self.lo[j] == lo[i]:
                    found[i] = True
                    break
                j += 1
        return found


class KeyIndex:
    """The keys of a dedup window, held as fingerprints in a few sorted runs.

    A Python ``dict`` of the same keys costs about 250 bytes a key (the string object and
    the table slot); this index costs 24 (two hash halves and ``seen_ms``), so a window of
    ten million keys fits in a quarter of a gigabyte. Lookups hash the batch's keys once
    and binary-search each run. New keys land in a run of their own; a run is merged into
    the one before it (a linear merge) when it grows to half that run's size, so there are
    O(log n) runs and each key is copied O(log n) times over its life.

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
        return self.contains_hashed(*fingerprints(keys))

    def contains_hashed(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """``contains`` for keys already fingerprinted (see ``fingerprints``)."""
        order = np.argsort(hi, kind="stable")
        hi_sorted, lo_sorted = hi[order], lo[order]
        hit = np.zeros(len(hi), dtype=bool)
        for run in self._runs:
            hit |= run.contains(hi_sorted, lo_sorted)
        found = np.empty(len(hi), dtype=bool)
        found[order] = hit
        return found

    def add(self, keys: Keys, seen_ms: int | np.ndarray) -> None:
        """Index ``keys`` (not already in it, no repeats) with their ``seen_ms``."""
        self.add_hashed(*fingerprints(keys), seen_ms)

    def add_hashed(self, hi: np.ndarray, lo: np.ndarray, seen_ms: int | np.ndarray) -> None:
        """``add`` for keys already fingerprinted (see ``fingerprints``)."""
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
        """One run of both, in linear time: ``b``'s entries inserted at their places in ``a``."""
        at = np.searchsorted(a.hi, b.hi)
        return _Run(np.insert(a.hi, at, b.hi), np.insert(a.lo, at, b.lo), np.insert(a.seen, at, b.seen), True)
