"""The JSON-lines sink: each batch's rows in one file, written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ingest.connector import RefusedRecord, WriteReport, refused_record
from mq_ingest_example.config import JsonlSinkConfig


class JsonlSink:
    """Writes batch N to ``batch_id=N.jsonl`` by rename: a replayed batch replaces its own file."""

    plan_write = False  # it collects the rows to the driver, then writes

    def __init__(self, cfg: JsonlSinkConfig) -> None:
        self.cfg, self.name = cfg, cfg.name

    def write(self, df, batch_id: int) -> WriteReport:
        lines: list[str] = []
        refused: list[RefusedRecord] = []
        for row in df.collect():
            record = row.asDict(recursive=True)
            meta = record.pop("_meta", None) or {}
            line = json.dumps(record, default=str)
            if len(line.encode()) > self.cfg.max_record_bytes:  # refused for good: by the policy
                reason = f"{len(line)} bytes > max_record_bytes"
                refused.append(refused_record(self.cfg, self.name, meta.get("message_id"), reason, line))
            else:
                lines.append(line)
        out = Path(self.cfg.path)
        out.mkdir(parents=True, exist_ok=True)
        part = out / f".batch_id={batch_id}.jsonl.part"
        with part.open("w", encoding="utf-8") as f:
            f.writelines(f"{line}\n" for line in lines)
            f.flush()
            os.fsync(f.fileno())  # durable before the batch counts as written
        os.replace(part, out / f"batch_id={batch_id}.jsonl")
        return WriteReport(len(lines), refused)

    def close(self) -> None:
        pass
