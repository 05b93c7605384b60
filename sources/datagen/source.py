"""The datagen source: deterministic generated rows (Flink's ``datagen``), for trying a job locally."""

from __future__ import annotations

import base64
import random
import string
import threading
import time
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import orjson
import sqlglot
from sqlglot import exp

from ingest.connector import AckResult, Received, Source
from ingest.errors import ConfigError
from sources.datagen.config import DatagenField, DatagenSourceConfig

_INT_RANGES = {
    exp.DataType.Type.TINYINT: (-(2**7), 2**7 - 1),
    exp.DataType.Type.SMALLINT: (-(2**15), 2**15 - 1),
    exp.DataType.Type.INT: (-(2**31), 2**31 - 1),
    exp.DataType.Type.BIGINT: (-(2**63), 2**63 - 1),
}
_FLOATS = {exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE}
_STRINGS = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR}
_BINARY = {exp.DataType.Type.BINARY, exp.DataType.Type.VARBINARY}
_TIMESTAMPS = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ}
_ALPHABET = string.ascii_letters + string.digits
Gen = Callable[[random.Random, int], Any]
"""A column's generator: (row's RNG, row number) → a JSON value."""


def columns_of(ddl: str) -> list[tuple[str, exp.DataType]]:
    """The (name, type) pairs of a Spark DDL column list, parsed without a JVM."""
    try:
        create = sqlglot.parse_one(f"CREATE TABLE t ({ddl})", read="spark")
    except sqlglot.errors.ParseError as err:
        why = err.errors[0]["description"] if err.errors else str(err)
        raise ConfigError(f"datagen: cannot read the schema {ddl!r}: {why}") from None
    return [(c.name, c.args["kind"]) for c in create.this.expressions if isinstance(c, exp.ColumnDef)]


def _generator(name: str, kind: exp.DataType, opts: DatagenField, top: bool) -> Gen:
    """The generator of one value of type ``kind`` (nested types: random elements, ``length`` of them)."""
    t = kind.this
    if top and opts.kind == "sequence":
        if t not in _INT_RANGES and t not in _STRINGS and t not in _FLOATS and t != exp.DataType.Type.DECIMAL:
            raise ConfigError(f"datagen field {name}: kind sequence needs a number or string column")
        start = opts.start or 0
        as_str = t in _STRINGS
        return lambda rng, n: str(start + n) if as_str else start + n
    if t in _INT_RANGES:
        low, high = _INT_RANGES[t]
        low = int(opts.min) if opts.min is not None else low
        high = int(opts.max) if opts.max is not None else high
        return lambda rng, n: rng.randint(low, high)
    if t in _FLOATS or t == exp.DataType.Type.DECIMAL:
        lo = opts.min if opts.min is not None else (0.0 if t == exp.DataType.Type.DECIMAL else -1e6)
        hi = opts.max if opts.max is not None else (lo + 1e6)
        if t == exp.DataType.Type.DECIMAL:
            params = [int(p.name) for p in kind.expressions]
            scale = params[1] if len(params) > 1 else 0
            precision = params[0] if params else 10
            hi = min(hi, 10 ** (precision - scale) - 10**-scale)
            return lambda rng, n: str(round(Decimal(rng.uniform(lo, hi)), scale))
        return lambda rng, n: rng.uniform(lo, hi)
    if t == exp.DataType.Type.BOOLEAN:
        return lambda rng, n: rng.random() < 0.5
    if t in _STRINGS or t in _BINARY:
        size, var, binary = opts.length, opts.var_len, t in _BINARY

        def text(rng: random.Random, n: int) -> str:
            k = rng.randint(0, size) if var else size
            if binary:
                return base64.b64encode(rng.randbytes(k)).decode()
            return "".join(rng.choices(_ALPHABET, k=k))

        return text
    if t in _TIMESTAMPS or t == exp.DataType.Type.DATE:
        past, is_date = opts.max_past, t == exp.DataType.Type.DATE

        def when(rng: random.Random, n: int) -> str:
            ts = datetime.now(timezone.utc) - timedelta(seconds=rng.uniform(0, past))
            if is_date:
                return date.isoformat(ts.date())
            return ts.isoformat(timespec="milliseconds").replace("+00:00", "Z")

        return when
    if t == exp.DataType.Type.ARRAY:
        item = _generator(name, kind.expressions[0], DatagenField(), False)
        return lambda rng, n: [item(rng, n) for _ in range(opts.length)]
    if t == exp.DataType.Type.MAP:
        key = _generator(name, kind.expressions[0], DatagenField(length=8), False)
        value = _generator(name, kind.expressions[1], DatagenField(), False)
        return lambda rng, n: {str(key(rng, n)): value(rng, n) for _ in range(opts.length)}
    if t == exp.DataType.Type.STRUCT:
        parts = [(c.name, _generator(name, c.args["kind"], DatagenField(), False)) for c in kind.expressions]
        return lambda rng, n: {k: g(rng, n) for k, g in parts}
    raise ConfigError(f"datagen field {name}: cannot generate type {kind.sql('spark')}")


class DatagenSource(Source):
    """Generated JSON rows behind the source protocol, paced at ``rows-per-second``.

    Guarantee: exactly-once with the job's dedup, across restarts: row ``n`` and its message
    id ``<name>-<n>`` are the same on every run. Within a run it behaves as a queue: a row
    not acked comes back after its visibility timeout, or at once when released. With
    ``number-of-rows`` or a sequence's ``end`` it is bounded: exhausted once its last row was
    generated and every row acked.
    """

    can_probe = False
    reports_lag = True

    def __init__(self, cfg: DatagenSourceConfig) -> None:
        if not cfg.body_schema:
            raise ConfigError(f"sources.{cfg.name}: a datagen source needs a schema")
        self.cfg = cfg
        self.name = cfg.name
        self.queue = f"datagen:{cfg.name}"
        self.max_batch = cfg.batch_size
        self.visibility_timeout = cfg.visibility_timeout
        cols = columns_of(cfg.body_schema)
        unknown = set(cfg.fields) - {c for c, _ in cols}
        if unknown:
            raise ConfigError(f"sources.{cfg.name}.fields: {sorted(unknown)} are not columns of the schema")
        self._columns = [
            (c, _generator(c, t, cfg.fields.get(c, DatagenField()), True), cfg.fields.get(c, DatagenField()))
            for c, t in cols
        ]
        limits = [f.end - f.start + 1 for f in cfg.fields.values() if f.kind == "sequence"]  # type: ignore[operator]
        if cfg.number_of_rows is not None:
            limits.append(cfg.number_of_rows)
        self.total: int | None = min(limits) if limits else None
        self.bounded = self.total is not None
        self._next = 0
        self._started: float | None = None
        self._pending: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def row(self, n: int) -> dict[str, Any]:
        """Row ``n``: the same values on every run."""
        rng = random.Random(self.cfg.seed * 1_000_003 + n)
        return {
            c: None if f.null_rate and rng.random() < f.null_rate else g(rng, n) for c, g, f in self._columns
        }

    def _message(self, n: int, handle: str) -> Received:
        now = int(time.time() * 1000)
        body = orjson.dumps(self.row(n)).decode()
        return Received(f"{self.name}-{n}", handle, body, sent_ts=now, enqueue_ts=now)

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
        """Rows due again (not acked in time, released), then new rows as the pace allows."""
        deadline = time.monotonic() + wait_seconds
        while True:
            with self._lock:
                out = self._take(min(max_messages, self.max_batch))
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _take(self, limit: int) -> list[Received]:
        now = time.monotonic()
        self._started = self._started if self._started is not None else now
        hidden = now + self.visibility_timeout
        out: list[Received] = []
        for handle, (n, until) in list(self._pending.items()):
            if len(out) < limit and until <= now:
                del self._pending[handle]
                new = f"{n}:{time.time_ns()}"
                self._pending[new] = (n, hidden)
                out.append(self._message(n, new))
        rate = self.cfg.rows_per_second
        due = int((now - self._started) * rate + max(1.0, rate / 10)) - self._next  # a 100 ms burst
        if self.total is not None:
            due = min(due, self.total - self._next)
        for _ in range(max(0, min(due, limit - len(out)))):
            handle = f"{self._next}:{time.time_ns()}"
            self._pending[handle] = (self._next, hidden)
            out.append(self._message(self._next, handle))
            self._next += 1
        return out

    def ack(self, handles: Sequence[str]) -> AckResult:
        result = AckResult()
        with self._lock:
            for h in handles:
                if self._pending.pop(h, None) is None:
                    result.failed[h] = "unknown or stale receipt handle"
                else:
                    result.deleted.append(h)
        return result

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        until = time.monotonic() + seconds
        with self._lock:
            live = [h for h in handles if h in self._pending]
            for h in live:
                self._pending[h] = (self._pending[h][0], until)
        return {h: h for h in live}

    def release(self, handles: Sequence[str]) -> None:
        self.extend(handles, 0)

    def exhausted(self) -> bool:
        """Bounded, every row generated, and none unacked: a row pending may still come back."""
        with self._lock:
            return self.total is not None and self._next >= self.total and not self._pending

    def lag(self) -> int | None:
        """Rows still to generate (None when unbounded)."""
        return None if self.total is None else self.total - self._next + len(self._pending)

    def close(self) -> None:
        pass
