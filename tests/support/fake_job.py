"""The fake-queue job the kill -9 tests crash: seeded with repeats, and restarted until it drains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, run_in_session, wait_all_visible, write_config

VISIBILITY = 3.0
"""Seconds a received message stays hidden: a killed job's messages come back this soon."""


def seed_job(tmp: Path, n: int, dups: int, **cfg: Any) -> tuple[FakeQueue, list[str], Path]:
    """Queue ``in`` with ``n`` events and ``dups`` of them sent again under the same message id,
    and the job's config file: small batches and staging files, so a kill finds some work done.

    Args:
        tmp: the test's directory (queues, staging, output, state, config all go under it).
        n: events ``body(0)`` … ``body(n - 1)``.
        dups: how many of the first events are sent a second time with their message id.
        cfg: more ``job_config`` settings (e.g. ``sinks``).

    Returns:
        The queue, the ``n`` message ids, and the config file's path.
    """
    q = FakeQueue(str(tmp / "queues"), "in")
    ids = q.send_batch([{"body": body(i)} for i in range(n)])
    for i in range(dups):
        q.send(body(i), message_id=ids[i])
    config = job_config(
        tmp,
        source={"visibility_timeout": VISIBILITY, "batch_size": 25},
        staging={
            "dir": str(tmp / "staging"),
            "roll_messages": 50,
            "roll_interval": "100ms",
            "max_files_per_trigger": 3,
        },
        **cfg,
    )
    return q, ids, write_config(tmp, config)


def restart_until_drained(cfg_path: Path, q: FakeQueue, attempts: int = 3) -> str:
    """Restart once the killed job's messages are visible again (as a scheduled run would), until
    the queue is empty; in the suite's Spark session (the kills hit CLI runs). Returns the runs' output."""
    out = []
    for _ in range(attempts):
        wait_all_visible(q)
        code, text = run_in_session(cfg_path)
        out.append(text)
        assert code == 0, text
        if q.count()["total"] == 0:
            break
    return "\n".join(out)
