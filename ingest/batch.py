"""The foreachBatch handler: replay guard, dedup, decode, bad-message policy, sinks, state commit."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from checkpoints.journal import AckJournal
from ingest.config import JobConfig
from ingest.deadletter import DeadLetter
from ingest.decode import ERROR, decode
from ingest.errors import FatalError
from ingest.faults import crash_point
from ingest.metrics import Metrics
from sinks.base import META, Sink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from checkpoints.state import StateTable

log = logging.getLogger(__name__)
_ISIN_LIMIT = 2000
KEY = "_key"


class BatchHandler:
    """Called by Spark with each micro-batch of staged envelopes (``foreachBatch``).

    Order of effects, which the crash tests rely on:
      1. the ack journal for ``batch_id`` is written (every row, duplicates and bad ones too);
      2. if the state table already holds ``batch_id`` (a replay after a crash between the
         state commit and Spark's commit), nothing else happens;
      3. rows whose key is in the state table, repeats in the batch and messages enqueued
         before ``startTimeMs`` are dropped and counted;
      4. bodies are decoded; undecodable ones follow their source's ``on_bad_message``;
      5. the transform runs and every sink writes;
      6. the new keys and ``batch_id`` are committed to the state table in one commit.
    Spark then writes ``commits/N`` and the acker deletes the journaled messages.
    """

    def __init__(
        self,
        cfg: JobConfig,
        state: StateTable,
        journal: AckJournal,
        sinks: Sequence[Sink],
        dead_letter: DeadLetter | None,
        metrics: Metrics,
        on_done: Callable[[int, dict], None] = lambda batch_id, info: None,
        on_failed: Callable[[int, BaseException], None] = lambda batch_id, err: None,
    ) -> None:
        self.cfg = cfg
        self.state = state
        self.journal = journal
        self.sinks = list(sinks)
        self.dead_letter = dead_letter
        self.metrics = metrics
        self.on_done = on_done
        self.on_failed = on_failed
        self.sources = {s.name: s for s in cfg.sources}
        self.failure: BaseException | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._handle(df, batch_id)
        except BaseException as err:
            # Spark wraps this in a long StreamingQueryException; the job re-raises the original.
            self.failure = err
            self.on_failed(batch_id, err)
            raise

    def _handle(self, df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        started = time.monotonic()
        key = F.coalesce(F.expr(self.cfg.state.dedup_key).cast("string"), F.col("message_id"))
        # Decode once and cache: the id scan, the bad-row scan and the sinks all read the cache.
        decoded = self._decode(df.withColumn(KEY, key)).persist()
        try:
            meta = decoded.select(
                *(F.col(f"{META}.{c}").alias(c) for c in ("source", "receipt_handle")),
                KEY,
                *(F.col(f"{META}.{c}").alias(c) for c in ("enqueue_ts", "sent_ts", "received_at", "arrival")),
            ).toArrow()
            if meta.num_rows == 0:
                return
            phases = {"read+decode": time.monotonic() - started}
            sources = meta.column("source").to_pylist()
            handles = meta.column("receipt_handle").to_pylist()
            self.journal.write(batch_id, list(zip(sources, handles, strict=True)))
            info = {"rows": meta.num_rows, "replayed": False}
            if self.state.is_committed(batch_id):
                self.metrics.inc("replayedBatches")
                info["replayed"] = True
                self._finish(batch_id, info, started)
                return
            drops, new_keys = self._select(meta, sources, handles)
            kept = self._drop(decoded, drops)
            bad = self._bad_messages(kept, batch_id)
            phases["dedup+bad"] = time.monotonic() - started - sum(phases.values())
            good = kept.filter(F.col(ERROR).isNull()).drop(ERROR, KEY)
            out = self._transform(good)
            info["written"] = {}
            for sink in self.sinks:
                n = sink.write(out, batch_id)
                self.metrics.inc("written", n, sink=sink.name)
                info["written"][sink.name] = n
                self._route_rejected(sink, batch_id)
            phases["sinks"] = time.monotonic() - started - sum(phases.values())
        finally:
            decoded.unpersist()
        crash_point("after_sink")
        self.state.commit(batch_id, new_keys)
        phases["state"] = time.monotonic() - started - sum(phases.values())
        crash_point("after_state")
        if batch_id % self.cfg.state.maintenance_every == 0 and batch_id > 0:
            self.state.maintain()
        info.update(new=len(new_keys), dropped=len(drops), bad=bad, phases=phases)
        self._finish(batch_id, info, started)

    def _finish(self, batch_id: int, info: dict, started: float) -> None:
        latency = time.monotonic() - started
        self.metrics.inc("batches")
        self.metrics.set("batchLatencySeconds", latency)
        self.metrics.set("batchRows", info["rows"])
        info["latency"] = latency
        self.on_done(batch_id, info)

    def _select(self, meta, sources: list[str], handles: list[str]) -> tuple[list[str], list[str]]:
        """Handles to drop (duplicates, before start time) and the batch's new keys, deterministically."""
        keys = meta.column("_key")
        unseen = self.state.unseen(keys).to_pylist()
        keys = keys.to_pylist()
        enq = meta.column("enqueue_ts").to_pylist()
        sent = meta.column("sent_ts").to_pylist()
        received = meta.column("received_at").to_pylist()
        arrival = meta.column("arrival").to_pylist()
        order = sorted(range(len(keys)), key=lambda i: (received[i], arrival[i], handles[i]))
        seen: set[str] = set()
        drops: list[str] = []
        new_keys: list[str] = []
        dup = Counter()
        early = Counter()
        decided: set[str] = set()
        for i in order:
            if handles[i] in decided:
                continue  # another row of the same message (a record set decodes to many rows)
            decided.add(handles[i])
            src = sources[i]
            start = self.sources[src].start_time_ms if src in self.sources else None
            ts = enq[i] if enq[i] is not None else sent[i]
            if start is not None and ts is not None and ts < start:
                drops.append(handles[i])
                early[src] += 1
            elif not unseen[i] or keys[i] in seen:
                drops.append(handles[i])
                dup[src] += 1
            else:
                seen.add(keys[i])
                new_keys.append(keys[i])
        for src, n in dup.items():
            self.metrics.inc("duplicateMessages", n, source=src)
        for src, n in early.items():
            self.metrics.inc("skippedBeforeStart", n, source=src)
        return drops, new_keys

    @staticmethod
    def _drop(df: DataFrame, handles: list[str]) -> DataFrame:
        from pyspark.sql import functions as F

        handle = F.col(f"{META}.receipt_handle")
        if not handles:
            return df
        if len(handles) <= _ISIN_LIMIT:
            return df.filter(~handle.isin(handles))
        drop_df = df.sparkSession.createDataFrame([(h,) for h in handles], "_drop_handle string")
        return df.join(F.broadcast(drop_df), handle == F.col("_drop_handle"), "left_anti")

    def _decode(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        parts = []
        for name, opts in self.sources.items():
            part = df if len(self.sources) == 1 else df.filter(F.col("source") == name)
            parts.append(decode(part, opts, self.cfg.body_schema, carry=[KEY]))
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p, allowMissingColumns=True)
        return out

    def _bad_messages(self, decoded: DataFrame, batch_id: int) -> int:
        from pyspark.sql import functions as F

        bad = decoded.filter(F.col(ERROR).isNotNull()).select(META, ERROR).collect()
        if not bad:
            return 0
        routed = []
        for row in bad:
            m = row[META]
            policy = self.sources[m["source"]].on_bad_message if m["source"] in self.sources else "fail"
            where = f"message {m['message_id']} from source {m['source']} (staged file {m['_file']})"
            if policy == "fail":
                raise FatalError(
                    f"batch {batch_id}: {where} cannot be decoded: {row[ERROR]}; "
                    f"sources.{m['source']}.on_bad_message is fail"
                )
            self.metrics.inc("deserializationErrors", source=m["source"])
            if policy == "dead_letter":
                routed.append(row)
            else:
                log.warning("batch %d: skipped %s: %s", batch_id, where, row[ERROR])
        if routed and self.dead_letter is not None:
            self.dead_letter.write(decoded.sparkSession, routed, batch_id)
            self.metrics.inc("deadLettered", len(routed))
        return len(bad)

    def _route_rejected(self, sink: Sink, batch_id: int) -> None:
        """Records a sink refused for good: counted; the dead_letter ones go to the dead-letter target."""
        rejected = getattr(sink, "rejected", None) or []
        for action in ("skip", "dead_letter"):
            n = sum(1 for r in rejected if r.get("action") == action)
            self.metrics.inc("rejectedRecords", n, sink=sink.name, action=action)
        dead = [r for r in rejected if r.get("action") == "dead_letter"]
        if dead and self.dead_letter is not None:
            self.dead_letter.write_records(dead, batch_id, sink.name)
            self.metrics.inc("deadLettered", len(dead))

    def _transform(self, good: DataFrame) -> DataFrame:
        if not self.cfg.transform:
            return good
        good.createOrReplaceTempView("source")
        return good.sparkSession.sql(self.cfg.transform)
