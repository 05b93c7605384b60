"""Builds the four delivery messages (reference field names) and captures the job's start log.

Every message is a flat dict in the reference's field order. Common fields: ``messageType``,
``workspace``, ``namespace``, ``messageId`` (a UUID per message) and ``timestamp`` (epoch
milliseconds, int); the job messages add ``deploymentId``, ``deploymentName``, ``jobId`` (a
UUID per run) and ``tag``. Memory is in bytes, CPU in cores, ``*CpuMemory`` in CUs (1 CU =
1 core and 4 GiB: the larger of cores and GiB / 4). Start-log ``length`` and ``offset`` count
characters (Unicode code points) of the whole log. ``eventId`` numbers a run's events 1, 2, ….

JOB_RESOURCE_USAGE extends the reference's fields with ``messagesIn`` (received, all sources),
``messagesOut`` (rows accepted, summed over sinks), ``inFlight`` (received, not yet acked)
and ``sourceLag`` (messages waiting, per source that reports it; JSON text in SLS). In SLS
every field is a log content, as text; the log time is ``timestamp``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from ingest.errors import redact

START_LOG, EVENT, QUOTA, USAGE = "JOB_START_LOG", "JOB_EVENT", "RESOURCE_QUOTA", "JOB_RESOURCE_USAGE"

EVENTS = (
    "STARTING",
    "RUNNING",
    "BATCH_FAILED",
    "BATCH_REPLAYED",
    "RECEIVER_PAUSED",
    "RECEIVER_RESUMED",
    "STOPPING",
    "FINISHED",
    "FAILED",
)
"""The event names the job reports; ``Delivery.event`` accepts others too."""

QUOTA_FIELDS = tuple(
    f"{scope}{kind}{what}"
    for scope in ("namespace", "resourceQueue")
    for kind in ("Total", "Used")
    for what in ("CpuMemory", "Cpu", "Memory")
)
"""The RESOURCE_QUOTA figures, ``resourceQueueName`` aside."""

GIB = 1024**3


def cu(cpu: float, memory: float) -> float:
    """Compute Units of ``cpu`` cores and ``memory`` bytes: 1 CU = 1 core and 4 GiB."""
    return round(max(cpu, memory / (4 * GIB)), 3)


@dataclass(frozen=True)
class Identity:
    """What every message says about whose it is."""

    deploymentId: str
    deploymentName: str
    jobId: str
    tag: str
    workspace: str
    namespace: str


class MessageFactory:
    """Builds messages for one job run; ``eventId`` counts 1, 2, … within the run."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self._lock = threading.RLock()  # reentrant: event() may run in a signal handler
        self._event_seq = 0

    def _job(self, kind: str) -> dict[str, Any]:
        i = self.identity
        return {
            "messageType": kind,
            "deploymentId": i.deploymentId,
            "deploymentName": i.deploymentName,
            "jobId": i.jobId,
            "tag": i.tag,
        }

    def _tail(self, msg: dict[str, Any]) -> dict[str, Any]:
        msg["workspace"] = self.identity.workspace
        msg["namespace"] = self.identity.namespace
        msg["messageId"] = str(uuid.uuid4())
        msg["timestamp"] = time.time_ns() // 1_000_000
        return msg

    def start_log(self, text: str, part_chars: int) -> list[dict[str, Any]]:
        """JOB_START_LOG messages of at most ``part_chars`` characters each; join with `join_start_log`."""
        parts = [text[o : o + part_chars] for o in range(0, len(text), part_chars)] or [""]
        out = []
        for n, part in enumerate(parts):
            msg = self._job(START_LOG)
            msg.update(length=len(text), offset=n * part_chars, content=part)
            out.append(self._tail(msg))
        return out

    def event(self, name: str, content: str) -> dict[str, Any]:
        """One JOB_EVENT; ``content`` is redacted."""
        with self._lock:
            self._event_seq += 1
            seq = self._event_seq
        msg = self._job(EVENT)
        msg.update(eventId=seq, eventName=name, content=redact(content))
        return self._tail(msg)

    def quota(self, figures: dict[str, float | int], queue_name: str) -> dict[str, Any]:
        """One RESOURCE_QUOTA from the figures named in `QUOTA_FIELDS`."""
        msg: dict[str, Any] = {"messageType": QUOTA}
        for name in QUOTA_FIELDS[:6]:
            msg[name] = figures[name]
        msg["resourceQueueName"] = queue_name
        for name in QUOTA_FIELDS[6:]:
            msg[name] = figures[name]
        return self._tail(msg)

    def usage(
        self,
        cpu: float,
        memory: int,
        messages_in: int,
        messages_out: int,
        in_flight: int,
        lag: dict[str, int],
    ) -> dict[str, Any]:
        """One JOB_RESOURCE_USAGE; the fields after ``jobUsedMemory`` extend the reference's."""
        msg = self._job(USAGE)
        msg.update(
            jobUsedCpu=round(cpu, 3),
            jobUsedMemory=int(memory),
            messagesIn=int(messages_in),
            messagesOut=int(messages_out),
            inFlight=int(in_flight),
            sourceLag=dict(lag),
        )
        return self._tail(msg)


def join_start_log(parts: list[dict[str, Any]]) -> str:
    """Re-join JOB_START_LOG parts (any order); raise ValueError if one is missing."""
    if not parts:
        raise ValueError("no start log parts")
    length = parts[0]["length"]
    text = "".join(p["content"] for p in sorted(parts, key=lambda p: p["offset"]))
    if len(text) != length:
        raise ValueError(f"start log parts cover {len(text)} of {length} characters")
    return text


def to_json(msg: dict[str, Any]) -> bytes:
    """The message as one line of JSON (no newline)."""
    return orjson.dumps(msg)


def to_contents(msg: dict[str, Any]) -> list[tuple[str, str]]:
    """The message as SLS log contents: every field a string (maps as JSON, numbers as text)."""
    out = []
    for key, value in msg.items():
        if isinstance(value, str):
            text = value
        elif isinstance(value, (dict, list)):
            text = orjson.dumps(value).decode()
        else:
            text = "" if value is None else str(value)
        out.append((key, text))
    return out


class StartLogCapture(logging.Handler):
    """Collects the job's log lines (redacted) until `stop`; bounded to ``max_chars``.

    Attach it to the root logger as early as possible (before the config is loaded) and
    hand it to ``Delivery``; records below the logger levels never reach any handler.
    """

    def __init__(self, max_chars: int = 1_000_000, level: int | str = logging.INFO) -> None:
        super().__init__(level)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.max_chars = max_chars
        self._lines: list[str] = []
        self._chars = 0
        self._dropped = 0
        self._stopped = False
        self._buf_lock = threading.RLock()  # not Handler.lock, which emit() runs under

    def emit(self, record: logging.LogRecord) -> None:
        if self._stopped:
            return
        try:
            self.add_line(self.format(record))
        except Exception:
            self.handleError(record)

    def add_line(self, line: str) -> None:
        """Append one line (redacted), unless stopped or full."""
        line = redact(line)
        with self._buf_lock:
            if self._stopped:
                return
            if self._chars + len(line) + 1 > self.max_chars:
                self._dropped += 1
                return
            self._lines.append(line)
            self._chars += len(line) + 1

    def stop(self) -> str:
        """Stop capturing and return the log (with a note if lines were cut)."""
        with self._buf_lock:
            self._stopped = True
            text = "\n".join(self._lines)
            if self._dropped:
                text += f"\n[start log cut at {self.max_chars} characters: {self._dropped} line(s) left out]"
            return text
