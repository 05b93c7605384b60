"""Apache RocketMQ sink: CSV, binary or JSON messages sent from the executors, keyed by source message id."""

from __future__ import annotations

import itertools
import logging
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ingest.config.sinks import RocketMqSinkConfig
from ingest.errors import ConfigError, redact
from sinks.base import META, WriteReport
from sinks.frame import write_partitions
from sinks.rocketmq.lanes import Lanes
from sinks.rocketmq.transports import OutMessage, SendRefused, Transport, make_transport

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


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
    ``key``, ``source_id``, ``props`` and optionally ``sharding_key``. Up to ``max_in_flight``
    sends run at once, on lanes; rows of one sharding key share a lane, so their order holds.
    """

    def __init__(
        self, cfg: RocketMqSinkConfig, transport: Callable[[RocketMqSinkConfig], Transport] = make_transport
    ):
        self.cfg = cfg
        self.make_transport = transport

    def message(self, row: dict[str, Any]) -> OutMessage:
        """The message for one frame row; raises :class:`SendRefused` for a body that cannot be sent."""
        body = row.get("body")
        if isinstance(body, str):
            try:
                body = body.encode(self.cfg.encoding)
            except UnicodeEncodeError as err:
                raise SendRefused(
                    f"not encodable as {self.cfg.encoding}: {err.reason} at {err.start}"
                ) from None
        body = bytes(body or b"")
        if not body:
            raise SendRefused("empty body (RocketMQ refuses empty messages)")
        if len(body) > self.cfg.max_message_size:
            raise SendRefused(f"{len(body)} bytes, over max_message_size {self.cfg.max_message_size}")
        props = {k: v for k, v in (row.get("props") or {}).items() if v is not None and v.strip()}
        key = row.get("key")
        return OutMessage(body, key or None, row.get("sharding_key"), props, row.get("source_id"))

    def write(self, rows: Iterable[Any]) -> tuple[int, list[dict]]:
        """Send every row; return (messages the broker accepted, rejected records)."""
        rows = iter(rows)
        first = next(rows, None)
        if first is None:
            return 0, []  # an empty partition starts no producer
        if self.cfg.access_key:
            redact.add([self.cfg.access_key.get_secret_value()])
        run = Lanes(self)
        try:
            lanes = len(run.lanes)
            for i, raw in enumerate(itertools.chain([first], rows)):
                row = raw.asDict() if hasattr(raw, "asDict") else dict(raw)
                try:
                    msg = self.message(row)
                except SendRefused as err:
                    run.reject(row, str(err))
                    continue
                shard = msg.sharding_key
                run.put(zlib.crc32(shard.encode()) % lanes if shard is not None else i % lanes, msg, row)
            return run.finish(), run.rejected
        except BaseException as err:
            run.abort(err)  # the lanes stop sending: the batch fails and is replayed
            raise
        finally:
            run.close()
