"""Error classes shared by connectors, the retry policy, and secret redaction."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

T = TypeVar("T")


class IngestError(Exception):
    """Base class of every error mq-ingest raises on purpose."""


class FatalError(IngestError):
    """An error that retrying cannot fix: bad credentials, a missing queue, bad input under policy fail."""


class TransientError(IngestError):
    """An error worth retrying: throttling, 5xx, timeouts, dropped connections."""


class ConfigError(FatalError):
    """Invalid configuration; the message names the offending key."""


def call_with_retries(
    fn: Callable[[], T],
    *,
    attempts: int,
    initial_wait: float = 0.1,
    max_wait: float = 5.0,
    retry_on: tuple[type[BaseException], ...] = (TransientError,),
) -> T:
    """Run ``fn`` and retry it on transient errors with exponential backoff and jitter.

    This is the one place retries live. Fatal errors and anything not in ``retry_on``
    propagate at once; after ``attempts`` tries the last transient error is re-raised.

    >>> call_with_retries(lambda: 42, attempts=3)
    42
    """
    retrying = Retrying(
        stop=stop_after_attempt(max(1, attempts)),
        wait=wait_exponential_jitter(multiplier=initial_wait, max=max_wait, jitter=initial_wait),
        retry=retry_if_exception_type(retry_on),
        reraise=True,
    )
    return retrying(fn)


class _Redactor:
    """Process-wide set of secret values that must never appear in logs or errors."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            self._secrets.update(v for v in values if v and len(v) >= 4)
            if self._secrets:
                alts = sorted(self._secrets, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(s) for s in alts))

    def __call__(self, text: str) -> str:
        pattern = self._pattern
        return pattern.sub("***", text) if pattern else text


redact = _Redactor()
"""Call ``redact(text)`` to mask known secrets; ``redact.add([...])`` registers them."""
