"""Which job a state table belongs to: its name and checkpoint, in the Delta table's configuration."""

from __future__ import annotations

import logging
import os
from typing import Any

from ingest.config.paths import normalise
from ingest.errors import ConfigError
from ingest.storage import is_object_url

log = logging.getLogger(__name__)

JOB_KEY = "mq_ingest.owner.job"
CHECKPOINT_KEY = "mq_ingest.owner.checkpoint"
"""Table properties of the owner. In the Delta log they are written by the commit that creates the
table (or, for a table from before them, by one metadata commit), so a kill -9 leaves the owner
recorded or the table as it was, never a half; checkpoints of the log carry them on."""


def owner_config(name: str, checkpoint: str) -> dict[str, str]:
    """The table properties that name the job ``name`` with ``checkpoint`` (resolved) as the owner."""
    return {JOB_KEY: name, CHECKPOINT_KEY: normalise(checkpoint)}


def table_owner(dt: Any) -> tuple[str, str] | None:
    """The job name and checkpoint the open table ``dt`` records; None for a table from before
    owners were recorded."""
    conf = dt.metadata().configuration
    if JOB_KEY not in conf:
        return None
    return str(conf[JOB_KEY]), str(conf.get(CHECKPOINT_KEY, ""))


def _refuse_another(dt: Any, path: str, name: str, checkpoint: str) -> bool:
    """Raise ``ConfigError`` if ``dt`` belongs to another job; return whether it records an owner."""
    owner = table_owner(dt)
    if owner is None:
        return False
    here = normalise(checkpoint)
    if owner == (name, here):
        return True
    real = normalise(path)
    shown = (
        path if is_object_url(path) or real == os.path.abspath(path) else f"{path} (which resolves to {real})"
    )
    moved = " (if its checkpoint was moved, run it where it ran before)" if owner[0] == name else ""
    raise ConfigError(
        f"config key state.path: {shown} belongs to job {owner[0]} (checkpoint {owner[1]}), not to "
        f"this job {name} (checkpoint {here}); two jobs cannot share a state table (each would skip "
        f"the other's batch ids as committed): give this job its own state.path{moved}"
    )


def check_state_owner(path: str, name: str, checkpoint: str) -> None:
    """Raise ``ConfigError`` if a state table at ``path`` belongs to another job than ``name`` on
    ``checkpoint``, or is ahead of that checkpoint (``check_not_ahead``). Reads only: no table, or
    one without an owner, passes (the job's start creates or adopts it)."""
    from deltalake import DeltaTable

    # Here, not at the top: state_delta imports pyarrow.dataset (and with it pandas, ~45 MB and
    # 0.2 s), and this module is on the import path of every job and of ``check``.
    from checkpoints.state_delta import location, store_errors

    uri, options = location(path)
    with store_errors(path, "read the state table at"):
        dt = (
            DeltaTable(uri, storage_options=options)
            if DeltaTable.is_deltatable(uri, storage_options=options)
            else None
        )
    if dt is not None:
        _refuse_another(dt, path, name, checkpoint)
        version = dt.transaction_version(name)
        check_not_ahead(path, -1 if version is None else int(version), checkpoint)


def check_not_ahead(path: str, committed: int, checkpoint: str) -> None:
    """Raise ``ConfigError`` if the state table at ``path`` has committed a batch id that
    ``checkpoint`` never planned: a checkpoint removed (or restored from an older copy) while the
    state was kept. Its batches up to ``committed`` would pass the replay guard as replays, and
    their messages be deleted from the queue unwritten. A state commit happens inside a planned
    batch, so the state is never ahead of its own checkpoint."""
    from checkpoints.journal import planned_batches

    planned = max(planned_batches(checkpoint), default=-1)
    if committed > planned:
        raise ConfigError(
            f"config key state.path: {path} has committed batch {committed}, but the checkpoint "
            f"{checkpoint} has planned {'no batch' if planned < 0 else f'batches up to {planned}'}: "
            f"its batches {planned + 1}-{committed} would be taken for replays and their messages "
            "deleted unwritten. A checkpoint goes with its state table: restore the checkpoint, or "
            "start afresh by removing the state table too (its dedup keys go with it)"
        )


def claim(dt: Any, path: str, name: str, checkpoint: str) -> None:
    """Make the open table ``dt`` the state of job ``name`` on ``checkpoint``, or refuse it.

    A table recording no owner (written before owners were recorded) is adopted by one metadata
    commit. Two jobs adopting at once: one commit lands, the other fails, and its job then finds
    the table owned by the first. Call it with the checkpoint lock held.

    Raises:
        ConfigError: the table belongs to another job (the line names ``state.path``).
    """
    if _refuse_another(dt, path, name, checkpoint):
        return
    try:
        dt.alter.set_table_properties(owner_config(name, checkpoint), raise_if_not_exists=False)
    except Exception:
        dt.update_incremental()
        if table_owner(dt) is None:
            raise
    dt.update_incremental()
    _refuse_another(dt, path, name, checkpoint)
    log.info("state table %s: adopted by job %s (it recorded no owner)", path, name)
