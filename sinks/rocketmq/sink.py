"""Apache RocketMQ sink: CSV, binary or JSON messages sent from the executors, keyed by source message id."""

from __future__ import annotations

import itertools
import logging
import threading
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ingest.connector import (
    META,
    Limits,
    RefusedRecord,
    RetryPolicy,
    SendBuffer,
    WriteReport,
    write_partitions,
    write_rows,
)
from ingest.errors import ConfigError, redact
from sinks.rocketmq.config import RocketMqSinkConfig
from sinks.rocketmq.lanes import Producer
from sinks.rocketmq.transports import Transport, make_transport

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
LANE_QUEUE = 64
"""Messages a lane holds, queued or being sent, before the row loop waits for it."""


class RocketMqSink:
    """Writes each micro-batch to a RocketMQ topic (the reference RocketMQ sink's options).

    Payloads: ``csv`` (Spark's ``to_csv`` of every column but ``_meta``) and ``json`` (``to_json``),
    both encoded with ``encoding``; ``binary`` sends the one binary column as is. Each message's
    keys are the source message id (``_meta.message_id``) or ``key_column``; ``tag`` tags every
    message; ``property_columns`` become user properties; with ``sharding_key_column`` the rows are
    sent in order per key (remoting: ``send_orderly_with_sharding_key``; gRPC: FIFO message group).

    Guarantee: at-least-once. A batch ends with every row accepted by the broker, routed by
    ``on_bad_record``, or it raises, and Spark replays it. A replay (or a retried send whose
    first answer was lost) sends again with the same keys, so consumers deduplicate on the
    message keys to get exactly-once effect.

    Every send has an outer deadline (``send_timeout``; a silent name server blocks the native
    client for about a minute whatever its own timeout) and is retried ``retryTimes`` times,
    ``sleepTimeMs`` apart. Refused credentials and missing topics fail at once (:class:`FatalError`,
    without the secret). Records the target refuses for good (over ``max_message_size``, empty, not
    encodable) follow ``on_bad_record``: ``fail`` raises, ``skip`` and ``dead_letter`` land in
    the write's report for the pipeline to count and route.
    """

    plan_write = False
    """``write`` sends rows from the executors (an RDD action), not one Spark SQL action."""

    def __init__(self, cfg: RocketMqSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name

    def frame(self, df: DataFrame) -> DataFrame:
        """The send frame: ``body``, ``key``, ``source_id``, ``props``, and ``sharding_key`` when ordered."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        cfg, where = self.cfg, f"sinks.{self.cfg.name}"
        cols = [c for c in df.columns if c != META]
        checks: list[tuple[str, list[str | None]]] = [
            ("key_column", [cfg.key_column]),
            ("sharding_key_column", [cfg.sharding_key_column]),
            ("property_columns", list(cfg.property_columns)),
        ]
        for option, names in checks:
            missing = [n for n in names if n and n not in cols]
            if missing:
                raise ConfigError(f"{where}.{option}: no column {missing[0]!r}; have {cols}")
        if cfg.payload == "binary":
            binary = [c for c in cols if isinstance(df.schema[c].dataType, T.BinaryType)]
            if len(binary) != 1:
                raise ConfigError(
                    f"{where}.payload binary needs exactly one binary column; got {binary} of {cols}"
                )
            body = F.col(binary[0])
        elif not cols:
            raise ConfigError(f"{where}: the rows have no columns to send")
        else:
            row = F.struct(*[F.col(c) for c in cols])
            body = F.to_csv(row) if cfg.payload == "csv" else F.to_json(row)
        source_id = (
            F.col(f"{META}.message_id").cast("string") if META in df.columns else F.lit(None).cast("string")
        )
        key = F.col(cfg.key_column).cast("string") if cfg.key_column else source_id
        props = [x for n in cfg.property_columns for x in (F.lit(n), F.col(n).cast("string"))]
        out = [body.alias("body"), key.alias("key"), source_id.alias("source_id")]
        out.append((F.create_map(*props) if props else F.lit(None)).alias("props"))
        if not cfg.sharding_key_column:
            return df.select(*out)
        meta = set(df.select(f"{META}.*").columns) if META in df.columns else set()
        arrival = F.col(f"{META}.arrival") if "arrival" in meta else F.monotonically_increasing_id()
        out += [F.col(cfg.sharding_key_column).cast("string").alias("sharding_key"), arrival.alias("arrival")]
        # One key in one partition, in arrival order: the per-key order survives the send.
        return df.select(*out).repartition("sharding_key").sortWithinPartitions("sharding_key", "arrival")

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        """Send ``df``'s rows; report how many the broker accepted and the records refused for good."""
        if not self.cfg.key_column and META not in df.columns:
            log.warning(
                "sinks.%s: no _meta and no key_column: messages carry no keys to deduplicate on", self.name
            )
        return write_partitions(self.frame(df), RocketMqPartitionWriter(self.cfg).write)

    def close(self) -> None:
        """Nothing to do: producers live and die with each partition's write."""


class RocketMqPartitionWriter:
    """Sends one partition's rows with one producer, started on first use and shut down at the end.

    Plain Python; runs on an executor. Rows are dicts (or Rows) with ``body`` (str or bytes),
    ``key``, ``source_id``, ``props`` and optionally ``sharding_key``. The rows go to
    ``max_in_flight`` lanes, each a ``ingest.connector.SendBuffer`` sending one message per call,
    one call at a time, on the shared producer (``lanes.Producer``); rows of one sharding key
    share a lane, so their order holds. A failed send is retried ``retryTimes`` times,
    ``sleepTimeMs`` apart; once one has failed for good, the lanes stop sending.
    """

    def __init__(
        self, cfg: RocketMqSinkConfig, transport: Callable[[RocketMqSinkConfig], Transport] = make_transport
    ):
        self.cfg = cfg
        self.make_transport = transport

    def write(self, rows: Iterable[Any]) -> tuple[int, list[RefusedRecord]]:
        """Send every row; return (messages the broker accepted, rejected records)."""
        cfg = self.cfg
        if cfg.access_key:
            redact.add([cfg.access_key.get_secret_value()])
        producer, halt = Producer(cfg, self.make_transport), threading.Event()  # one halt: all lanes stop
        limits = Limits(1, cfg.max_message_size, max_queued=LANE_QUEUE, max_buffered=LANE_QUEUE, max_wait=0)
        retry = RetryPolicy(attempts=cfg.retry_times + 1, fixed_wait=cfg.sleep_time_ms / 1000)
        lanes, order = cfg.max_in_flight, itertools.count()

        def lane_of(row: dict[str, Any]) -> str:
            shard = row.get("sharding_key")
            return str(zlib.crc32(shard.encode()) % lanes if shard is not None else next(order) % lanes)

        try:
            return write_rows(rows, lambda _: SendBuffer(producer, limits, retry, "rocketmq", halt), lane_of)
        finally:
            producer.close()
