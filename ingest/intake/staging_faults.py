"""A stager's failing steps (writing a file, publishing held ones): backoff, the give-up clock, recovery."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from ingest.errors import FatalError
from ingest.storage import StoreError

log = logging.getLogger(__name__)


class StagingFaults:
    """Which of the stager's steps last failed, when to try again, and when to give up.

    The steps are ``write`` (a roll's lines into a file; they wait in the buffer) and ``publish``
    (held files into Spark's listing; they wait in ``_held/``). The stager is ``failing`` from a
    step's failure until every step that failed has worked since: a file written into ``_held/``
    while the staging dir takes no new name is not a recovery. Meanwhile receivers pause, the
    stager tries again with backoff (0.2 s, doubling up to 5 s), and after ``give_up_after``
    seconds with no progress the job stops. On S3 an outage is such a failure; a missing bucket or
    refused credentials (``StoreError.fatal``) stop the job at once: no retry cures them, and the
    receivers would stay paused for ``give_up_after`` with nothing to say but the same error.
    """

    def __init__(self, directory: Path | str, give_up_after: float) -> None:
        self.dir = directory
        self.give_up_after = give_up_after
        self.since: float | None = None
        """time.monotonic() of the first failure since the last recovery or progress, or None."""
        self.failures = 0
        self.retry_at = 0.0
        self.steps: set[str] = set()
        """The steps whose last try failed."""
        self.last_error = ""
        """The latest failure, ``path: reason`` (``/healthz`` says it)."""

    @property
    def failing(self) -> bool:
        return self.since is not None

    def due(self, now: float) -> bool:
        """Whether a step may be tried now: nothing is failing, or its backoff is over."""
        return self.since is None or now >= self.retry_at

    def progress(self) -> None:
        """Some lines were written before a later piece failed: the give-up clock and the backoff
        start again."""
        self.since, self.failures = None, 0

    def worked(self, step: str, done: str) -> None:
        """``step`` worked (``done`` says what it did): once no step is failing, the stager is well."""
        self.steps.discard(step)
        if self.since is not None and not self.steps:
            log.warning("staging dir %s is writable again; %s", self.dir, done)
            self.since, self.failures = None, 0

    def failed(self, err: OSError, step: str, buffered: int, held: int) -> FatalError | None:
        """``step`` failed with ``err`` (``buffered`` lines and ``held`` messages wait): log it and
        set the next retry; return the error to stop the job with once ``give_up_after`` is over."""
        now = time.monotonic()
        self.steps.add(step)
        if self.since is None:
            self.since = now
        self.failures += 1
        delay = min(5.0, 0.1 * 2**self.failures)
        self.retry_at = now + delay
        where = err.filename or self.dir
        reason = f"{err.strerror or err} ({type(err).__name__}, errno {err.errno})"
        self.last_error = f"{where}: {reason}"
        if isinstance(err, StoreError) and err.fatal:
            return FatalError(
                f"staging.dir {self.dir}: {err.strerror} (writing {where}); "
                "in-flight messages are released and come back"
            )
        if now - self.since >= self.give_up_after:
            return FatalError(
                f"staging dir {self.dir}: cannot write staged files for {self.give_up_after:.0f}s: "
                f"{where}: {reason}; in-flight messages are released and come back"
            )
        log.warning(
            "staging %s failed at %s (%s); %d line(s) kept, %d held, retry in %.1fs, receivers paused",
            step,
            where,
            reason,
            buffered,
            held,
            delay,
        )
        return None
