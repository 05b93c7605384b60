"""One lifecycle for every background thread: start, stop with a deadline, running, first error, name."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ingest.errors import FatalError, redact

log = logging.getLogger(__name__)

Watcher = Callable[["Worker", BaseException], None]
"""Called once with a worker and its first error (``Supervisor`` watches its parts so)."""


class Worker:
    """A named daemon thread that runs ``work()`` (or ``target``) and never dies silently.

    ``stopping`` is set by ``stop``; ``work`` returns when it is. An exception out of
    ``work`` ends the thread and becomes its error: ``FatalError("<title> failed: <type>: <text>")``.
    A part that keeps running but cannot go on (a delete refused for good, a disk that stays
    full) reports through ``fail``. Only the first error is kept; it is logged once and
    handed to the watchers once. ``start`` after ``stop`` runs a new thread.

    Example:
        >>> w = Worker("demo", target=lambda: None)
        >>> w.start()
        >>> w.join(5), w.running, w.error
        (True, False, None)
    """

    def __init__(self, name: str, target: Callable[[], None] | None = None) -> None:
        self.name = name
        self.title = f"{name} thread"
        """How messages name it: ``<title> failed: …``, ``<title> is not running``."""
        self.stopping = threading.Event()
        self._target = target
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._error_lock = threading.Lock()
        self._watchers: list[Watcher] = []

    # ----- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (a new one after ``stop``); no-op while it runs."""
        if self.running:
            return
        self.stopping.clear()
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end without waiting for it."""
        self.stopping.set()
        self._wake()

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to end and wait at most ``timeout`` seconds (None: until it does).

        Returns whether it has ended.
        """
        self.request_stop()
        return self.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end, at most ``timeout`` seconds; return whether it has."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return not self.running

    @property
    def running(self) -> bool:
        """Its thread was started and has not ended."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def workers(self) -> tuple[Worker]:
        """Its threads: itself (a group of workers lists its members)."""
        return (self,)

    @property
    def started(self) -> bool:
        """``start`` was called at least once."""
        return self._thread is not None

    # ----- errors --------------------------------------------------------------------

    @property
    def error(self) -> BaseException | None:
        """The first error it reported or died of, or None."""
        return self._error

    def fail(self, err: BaseException, exc_info: BaseException | None = None) -> None:
        """Report ``err``: kept, logged and handed to the watchers if it is the first one."""
        with self._error_lock:
            if self._error is not None:
                return
            self._error = err
            watchers = list(self._watchers)
        text = redact(str(err))
        log.error("%s", text if text.startswith(self.title) else f"{self.title}: {text}", exc_info=exc_info)
        for watch in watchers:
            watch(self, err)

    def watch(self, watcher: Watcher) -> None:
        """Call ``watcher`` with the first error (at once if there already is one)."""
        with self._error_lock:
            self._watchers.append(watcher)
            err = self._error
        if err is not None:
            watcher(self, err)

    def unhealthy(self) -> str | None:
        """Why it is not working, or None: its error, or a thread that ended unasked."""
        if self._error is not None:
            return str(self._error)
        if self.started and not self.running and not self.stopping.is_set():
            return f"{self.title} is not running"
        return None

    # ----- for subclasses ------------------------------------------------------------

    def work(self) -> None:
        """The thread's body: run ``target`` (subclasses override this instead)."""
        if self._target is not None:
            self._target()

    def _wake(self) -> None:
        """Interrupt a wait in ``work`` so it sees ``stopping`` (subclasses with their own waits)."""

    def _main(self) -> None:
        try:
            self.work()
        except BaseException as err:
            self.fail(FatalError(f"{self.title} failed: {type(err).__name__}: {err}"), exc_info=err)
