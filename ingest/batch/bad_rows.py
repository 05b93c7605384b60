"""What becomes of rows no sink takes: undecodable messages and records a sink refused for good."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ingest.batch.deadletter import DeadLetter
from ingest.config import SourceConfig
from ingest.connector import META, RefusedRecord
from ingest.decode.rows import ERROR
from ingest.errors import FatalError
from ingest.metrics import Metrics

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("ingest.batch.handler")
"""The batch handler's logger: these lines are part of the batch's story."""


class BadRows:
    """Applies the policies for rows that cannot reach the sinks, in one micro-batch.

    An undecodable message follows its source's ``on_bad_message`` (``fail`` raises
    ``FatalError`` naming the message; ``skip`` logs it; ``dead_letter`` sends it to the
    dead-letter target); a record a sink refused follows the sink's ``on_bad_record`` (the
    sink raised already for ``fail``). Both are counted.
    """

    def __init__(self, sources: Mapping[str, SourceConfig], dead_letter: DeadLetter | None, metrics: Metrics):
        self.sources = sources
        self.dead_letter = dead_letter
        self.metrics = metrics

    def undecodable(self, decoded: DataFrame, batch_id: int) -> int:
        """Route the batch's rows that did not decode (``ERROR`` set); return how many there were.

        Raises:
            FatalError: a bad message's source has ``on_bad_message: fail`` (or is unknown).
        """
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

    def refused(self, sink: str, rejected: list[RefusedRecord], batch_id: int) -> None:
        """Records a sink refused for good: counted; the dead_letter ones go to the dead-letter target."""
        for action in ("skip", "dead_letter"):
            n = sum(1 for r in rejected if r.action == action)
            self.metrics.inc("rejectedRecords", n, sink=sink, action=action)
        dead = [r for r in rejected if r.action == "dead_letter"]
        if dead and self.dead_letter is not None:
            self.dead_letter.write_records(dead, batch_id, sink)
            self.metrics.inc("deadLettered", len(dead))
