"""A job's start: owners checked, state opened, committed batches acked, stale staged files gone."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from checkpoints.owner import check_owner
from checkpoints.source_log import check_home, planned_files, prune
from checkpoints.state_owner import check_not_ahead, check_state_owner
from ingest.config import JobConfig
from ingest.errors import ConfigError
from ingest.intake.acker import Acker
from ingest.intake.staging import Stager
from ingest.storage import StoreError, is_object_url, store_for

if TYPE_CHECKING:
    from checkpoints.state import StateTable

log = logging.getLogger(__name__)


def queues_of(cfg: JobConfig, sources: Mapping[str, Any]) -> list[str]:
    """The job's queues as its checkpoint records them, ``"<type> <queue>"`` (``sources``: built, by name)."""
    return [f"{s.type} {sources[s.name].queue}" for s in cfg.sources]


def check_storage(cfg: JobConfig, only: str | None = None) -> None:
    """Raise ``ConfigError`` naming the key and the bucket if one of the job's S3 locations (its own
    directories, a sink's path; or just the key ``only``: an intake worker's ``staging.dir``) cannot
    be read: a missing bucket, refused credentials, a server down. One cheap call each, before
    anything is received; ``check`` runs it too."""
    from ingest.config.paths import job_dirs

    for key, path, _ in job_dirs(cfg):
        if is_object_url(path) and only in (None, key):
            try:
                store_for(path).probe()
            except StoreError as err:
                raise ConfigError(f"config key {key}: {err.strerror}: {err.filename}") from None


def check_owners(cfg: JobConfig, sources: Mapping[str, Any]) -> None:
    """Raise ``ConfigError`` if the checkpoint or the state table belongs to another job, or the
    checkpoint was written before the job's folder moved, or an S3 location cannot be read. Reads
    only (``check`` runs it too); the start records the owners afterwards, with the checkpoint lock
    held."""
    check_storage(cfg)
    check_owner(cfg.checkpoint, cfg.name, queues_of(cfg, sources))  # before the moved-folder check
    check_home(cfg.checkpoint, cfg.staging.dir, cfg.state.path)
    check_state_owner(cfg.state.path, cfg.name, cfg.checkpoint)


def recover(cfg: JobConfig, acker: Acker, stager: Stager, echo: Callable[[str], None]) -> StateTable:
    """Open the job's state table and bring the checkpoint and the staging dir in line with it.

    The table is claimed for the job (``checkpoints.state_owner``; another job's is refused).
    Acks the batches Spark committed that the last run left unacked, removes staged files no
    batch will replay (their messages are still in flight and come back), and drops
    file-source log entries of files committed and deleted. Call it with the checkpoint lock
    held, before anything is received.

    Returns:
        The opened state table.
    """
    from checkpoints.state import StateTable  # deltalake: imported only by a job that runs

    state = StateTable(cfg.state.path, cfg.name, cfg.state.dedup_window, cfg.checkpoint)
    state.open()
    check_not_ahead(cfg.state.path, state.committed_batch(), cfg.checkpoint)
    recovered = acker.reconcile()
    if recovered:
        echo(f"recovered: acked {recovered} committed batch(es) left from the last run")
    if cfg.intake.mode == "driver":  # else the staged files are the live workers'
        drop_unplanned(cfg, stager)
    pruned = prune(cfg.checkpoint)
    if pruned:
        log.info("file-source log: dropped %d entries of staged files committed and deleted", pruned)
    return state


def drop_unplanned(cfg: JobConfig, stager: Stager) -> int:
    """Remove the staged files no batch will replay; return how many.

    A file no batch planned holds only messages still in flight on their queues, which come
    back (at once where a stop released them); Spark deletes a committed batch's files when it
    plans the next one, and a stop can outrun it. Call it while no query runs.
    """
    deleting = cfg.staging.clean_source == "delete"
    stale = stager.discard_except(planned_files(cfg.checkpoint, at_restart=deleting))
    if stale:
        log.info("removed %d staged file(s) no batch will replay (unread ones come back)", stale)
    return stale
