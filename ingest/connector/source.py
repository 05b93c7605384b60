"""The protocol every queue source implements (receive, ack, extend, release, close) and what it returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable


@dataclass(slots=True)
class Received:
    """One message as a receive call returned it.

    Timestamps are epoch milliseconds. ``body`` is text; a source whose payload is not
    valid UTF-8 passes it base64-encoded and sets ``body_base64``.
    """

    message_id: str
    receipt_handle: str
    body: str
    body_base64: bool = False
    md5: str | None = None
    sent_ts: int | None = None
    first_receive_ts: int | None = None
    receive_count: int = 1
    enqueue_ts: int | None = None
    sender_id: str | None = None
    group_id: str | None = None
    dedup_id: str | None = None
    sequence_number: str | None = None
    priority: int | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    message_attributes: dict[str, str] = field(default_factory=dict)
    message_attribute_types: dict[str, str] = field(default_factory=dict)
    """Each message attribute's data type as the queue gives it (SQS ``Number``, ``String.custom``,
    ``Binary``; MNS ``NUMBER``, ``BOOLEAN``…), where the source knows one."""
    payload_ref: str | None = None
    """Claim-check: ``bucket/key`` of the object holding the payload, when the body is a payload
    pointer (``ingest.connector.claim_check``); ``""`` when marked as one but unreadable as a pointer."""


@dataclass(slots=True)
class AckResult:
    """Outcome of an ack (delete) call: handles deleted and handles that failed, with why."""

    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class Source(Protocol):
    """A queue the receivers poll.

    Contract (the suite in ``tests/contract`` checks it on every source):

    * ``receive`` hides returned messages for ``visibility_timeout`` seconds and gives
      each receive a fresh receipt handle.
    * ``ack(handles)`` deletes; an acked message never comes back. A stale or invalid
      handle is reported in ``AckResult.failed`` and does not raise.
    * A message that is not acked becomes visible again after its visibility timeout.
    * ``extend(handles, seconds)`` keeps messages hidden for ``seconds`` from now and
      returns ``{old_handle: newest_handle}`` for the handles it extended (MNS issues a
      new handle on every change; other queues return the same one). Handles it could
      not extend are left out.
    * ``release(handles)`` makes messages visible again at once.
    * Methods may be called from several threads at once; an implementation whose SDK
      is not thread-safe keeps one client per thread. Clients are created lazily, on
      first use, never in ``__init__``.
    * Errors are raised as ``ingest.errors.FatalError`` (credentials, missing queue,
      access denied: the message names the queue, never a secret) or
      ``ingest.errors.TransientError`` (worth retrying).
    * A source that holds a known, finite number of messages sets ``bounded`` and says
      through ``exhausted()`` when it has delivered all of them and every one was acked.
      Sources inherit this class for the defaults (unbounded, never exhausted, no probe, no
      lag): a queue may always receive more.
    * Capabilities are declared, never guessed from the methods an object has: each source
      class sets ``can_probe`` and ``reports_lag`` (``tests/unit/test_capabilities.py``
      checks every registered source says so and that it matches the methods it overrides).
    * ``probe()`` runs once at start, before anything is received, on a source that sets
      ``can_probe``: ``FatalError`` where every call would fail (credentials, missing queue,
      deletes denied), ``TransientError`` naming the queue and its endpoint where the queue
      could not be reached within the source's own retries.
    * ``prepare()`` runs once as a run starts, before the probe; most sources have nothing to do.
    * ``lag()``, on a source that sets ``reports_lag``: the messages waiting on the queue, or
      None when it cannot tell right now (the ``queueDepth`` gauge, the drain progress line
      and JOB_RESOURCE_USAGE).
    """

    name: str
    """The source's name in the job config."""
    queue: str
    """The queue's name or URL, as written into the staged envelope."""
    max_batch: int
    """The most messages one ``receive`` call may ask for."""
    visibility_timeout: float
    """Seconds a received message stays hidden; the lease keeper extends before it ends."""
    receive_failed_at: float = 0.0
    """``time.monotonic()`` of this source's latest receive attempt that failed (0: none), retried
    or not. The server may have served it and hidden messages whose reply was lost; they come
    back after ``visibility_timeout``, so until then an empty receive does not prove a drain done.
    A source that retries its receives sets it on each failed attempt."""
    bounded: bool = False
    """The source ends: it holds a known, finite number of messages (a datagen with
    ``number-of-rows``). A job whose sources are all bounded stops once they are exhausted."""
    can_probe: ClassVar[bool] = False
    """The source checks its queue at start with ``probe``; the job probes only those that do."""
    reports_lag: ClassVar[bool] = False
    """The source tells its backlog with ``lag``; the job asks only those that do."""

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]: ...

    def ack(self, handles: Sequence[str]) -> AckResult: ...

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]: ...

    def release(self, handles: Sequence[str]) -> None: ...

    def close(self) -> None: ...

    def prepare(self) -> str | None:
        """Ready the queue once as a run starts, under the checkpoint lock, before the probe
        and the first receive (the fake source seeds its demo messages here).

        Returns:
            A line for the job to print, or None.
        """
        return None

    def exhausted(self) -> bool:
        """Whether every message was received and acked, so none will ever come again.

        Always False for an unbounded source.
        """
        return False

    def probe(self) -> None:
        """Check, before anything is read, that the queue answers and its messages may be deleted.

        Called only when the class sets ``can_probe``.

        Raises:
            FatalError: retrying cannot help (the message names the queue, never a secret).
            TransientError: the queue could not be reached within the source's retries.
        """

    def lag(self) -> int | None:
        """Messages waiting on the queue; None when it cannot tell right now.

        Called only when the class sets ``reports_lag``.
        """
        return None
