"""What a queue sink with a multi-entry send call gives ``SendBuffer``: its target, results, limits, retries.

A "call" is one send request of several entries (SQS ``SendMessageBatch``, MNS
``BatchSendMessage``), not the job's micro-batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ingest.errors import FatalError

E = TypeVar("E")
"""A sink's entry: what one row becomes in a send call (never a ``str``: that means refused)."""


class CallRefused(FatalError):
    """A whole call refused for a reason one bad entry can cause (its message says which).

    A sink's ``classify`` returns it; the writer then sends its entries one by one, and an
    entry refused so on its own follows ``on_bad_record``.
    """


@dataclass(frozen=True, slots=True)
class Failed:
    """One entry's failure in the results of a send call (``None`` there: accepted)."""

    reason: str = ""
    """The target's code and message; empty: the reply did not mention the entry."""
    final: bool = False
    """The target will never take it (the caller's fault): no re-send, ``on_bad_record``."""


@dataclass(frozen=True)
class Limits:
    """When a buffered call goes out, and how much may be buffered or in flight."""

    max_entries: int
    """Entries per call."""
    max_batch_bytes: int
    """Bytes per call, as the sink's ``size`` counts them."""
    max_record_bytes: int | None = None
    """Larger entries are refused before sending ("over maxRecordSizeInBytes"); None: no check."""
    max_in_flight: int = 1
    """Calls at once; 1 keeps the rows' order."""
    max_queued: int = 0
    """Calls submitted beyond ``max_in_flight`` that wait their turn, in order, while rows go on."""
    max_buffered: int = 0
    """Records buffered or in flight before the row loop waits (at least ``max_entries``)."""
    max_wait: float | None = None
    """Seconds a record may wait in the buffer; 0: send each at once; None: only when full."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a call's failed entries are re-sent (with ``ingest.errors.call_with_retries``)."""

    attempts: int
    """Calls in all for one call's entries: the first and the re-sends."""
    initial_wait: float = 0.1
    max_wait: float = 5.0
    max_elapsed: float | None = None
    """Stop re-sending a call's entries after this many seconds, whatever ``attempts`` says."""
    fixed_wait: float | None = None
    """Wait this long between calls instead of backing off (a connector's ``sleepTimeMs``)."""
    fail_on_error: bool | None = None
    """``failOnError``: None (unset): re-send up to ``attempts`` / ``max_elapsed``, then fail; True:
    fail at the first entry failed for a retryable reason; False: re-send without end (Flink's
    re-queueing), the wait capped at ``max_wait``, until the target takes them or the write stops."""

    @property
    def endless(self) -> bool:
        """Failed retryable entries are re-sent until the target takes them (``failOnError`` false)."""
        return self.fail_on_error is False


class SendTarget(Protocol[E]):
    """What a sink supplies: entries, their size, one send call, and how its errors classify."""

    @property
    def cfg(self) -> Any:
        """The sink config: the buffer reads its ``name`` and ``on_bad_record``."""

    @property
    def target_name(self) -> str:
        """The target as refused records name it."""

    @property
    def call_name(self) -> str:
        """The call as errors name it, e.g. ``SendMessageBatch to <url>``."""

    def entry(self, row: dict[str, Any]) -> E | str:
        """The entry for one frame row, or why the target would refuse it."""

    def size(self, entry: E) -> int:
        """Bytes ``entry`` counts against ``Limits.max_batch_bytes`` and ``max_record_bytes``."""

    def send(self, entries: list[E]) -> Sequence[Failed | None]:
        """Make one call; per entry, in order, ``None`` (accepted) or ``Failed``.

        Raises when the call failed as a whole; ``classify`` then says what that means.
        """

    def classify(self, err: Exception) -> BaseException:
        """``TransientError`` (re-sent), ``CallRefused`` (split), ``FatalError`` or ``err`` (raised)."""
