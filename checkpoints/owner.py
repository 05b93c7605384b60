"""Which job a checkpoint belongs to: its name and its queues, recorded when the job starts."""

from __future__ import annotations

import orjson

from checkpoints.journal import own_dir
from ingest.errors import ConfigError
from ingest.storage import Store, store_for

RECORD = "job.json"
"""The record's file name in ``<checkpoint>/mq_ingest``, beside the lock and the ack journals."""


def _store(checkpoint: str) -> Store:
    return store_for(own_dir(checkpoint))


def _described(name: str, queues: list[str]) -> str:
    return f"job {name} (sources: {', '.join(queues) or 'none'})"


def recorded(checkpoint: str) -> tuple[str, list[str]] | None:
    """The job name and queues the checkpoint records; None where none is recorded (a new
    checkpoint, or one written before jobs recorded themselves)."""
    found = _store(checkpoint).read(RECORD)
    if found is None:
        return None
    data = orjson.loads(found)
    return str(data["name"]), [str(q) for q in data["queues"]]


def check_owner(checkpoint: str, name: str, queues: list[str]) -> None:
    """Raise ``ConfigError`` if the checkpoint belongs to another job: another name, or none of
    the same queues (each ``"<type> <queue>"``).

    Spark would run on another job's checkpoint as on its own (its batch ids and staged-file log
    are not this job's), and acks and dedup would follow them. The same job whose sources changed
    (one queue added, say) still shares a queue with its record and is let in.
    """
    owner = recorded(checkpoint)
    if owner is None:
        return
    old_name, old_queues = owner
    if old_name == name and set(old_queues) & set(queues):
        return
    raise ConfigError(
        f"config key checkpoint: {checkpoint} belongs to {_described(old_name, old_queues)}, not to this "
        f"{_described(name, sorted(queues))}; two jobs cannot share a checkpoint: give this job its own "
        f"checkpoint, state.path and staging.dir (if it is job {old_name} renamed or moved to other "
        f"queues, run it with the name and sources it had)"
    )


def record_owner(checkpoint: str, name: str, queues: list[str]) -> None:
    """Record the job as the checkpoint's owner, written whole (a local temporary file renamed in,
    or one PUT); a checkpoint from before this record gets it at its job's first start. Call it
    with the checkpoint lock held, after ``check_owner``."""
    store = _store(checkpoint)
    data = orjson.dumps({"name": name, "queues": sorted(queues)})
    if store.read(RECORD) != data:
        store.write(RECORD, data)
