"""Error classes shared by connectors, the retry policy, and secret redaction."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_any,
    stop_never,
    wait_exponential_jitter,
    wait_fixed,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

T = TypeVar("T")


class IngestError(Exception):
    """Base class of every error mq-ingest raises on purpose."""


class FatalError(IngestError):
    """An error that retrying cannot fix: bad credentials, a missing queue, bad input under policy fail."""


class TransientError(IngestError):
    """An error worth retrying: throttling, 5xx, timeouts, dropped connections."""


class NothingToRun(Exception):
    """The job is valid but has nothing to run (a Flink SQL script of ``CREATE TABLE`` only)."""


class ConfigError(FatalError):
    """Invalid configuration; the message names the offending key."""


_IN_WORKER = "An exception was thrown from the Python worker"
"""How Spark's text of an error raised in a Python worker begins; the traceback follows."""


def describe(err: BaseException) -> str:
    """One line for an error mq-ingest did not raise on purpose: its type and first line; for
    an error from the JVM (Py4J, whose text goes on with the Java trace), the innermost Java
    cause, which is the one that names the file or the column.

    An error raised in a Python worker (a UDF in an executor) is the first line of the exception
    its last traceback ends with (Spark's own first line says only that a Python worker raised).

    >>> describe(ValueError("bad value\\nmore"))
    'ValueError: bad value'
    """
    lines = str(err).splitlines()
    if lines and lines[0].startswith(_IN_WORKER):
        last = max((i for i, line in enumerate(lines) if line.startswith("Traceback (")), default=None)
        raised = [line for line in lines[last + 1 :] if line[:1].strip()] if last is not None else []
        if raised:  # the traceback's frames are indented; its exception's line is not
            return raised[0]
    java = getattr(err, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None and not cause.getCause().equals(cause):
                cause = cause.getCause()
            return first_line(str(cause.toString()))
        except Exception:  # the JVM is gone: say what Python knows
            pass
    return f"{type(err).__name__}: {first_line(str(err))}"


def first_line(text: str) -> str:
    """The first line of ``text`` (empty for a blank one)."""
    return (text.strip().splitlines() or [""])[0]


class _GiveUp(stop_base):
    """Stop retrying as soon as ``give_up()`` says so."""

    def __init__(self, give_up: Callable[[], bool]) -> None:
        self.give_up = give_up

    def __call__(self, retry_state: Any) -> bool:
        return self.give_up()


def call_with_retries(
    fn: Callable[[], T],
    *,
    attempts: int | None,
    initial_wait: float = 0.1,
    max_wait: float = 5.0,
    retry_on: tuple[type[BaseException], ...] = (TransientError,),
    fixed_wait: float | None = None,
    give_up: Callable[[], bool] | None = None,
) -> T:
    """Run ``fn`` and retry it on transient errors with exponential backoff and jitter.

    This is the one place retries live. Fatal errors and anything not in ``retry_on``
    propagate at once; after ``attempts`` tries the last transient error is re-raised
    (``None``: no limit, until ``fn`` succeeds or ``give_up`` says so; the wait stays capped).
    ``fixed_wait`` waits that long between tries instead (a connector's sleepTimeMs);
    ``give_up`` stops retrying as soon as it returns true. The first try runs without
    the retry machinery, so the common case costs a plain call.

    >>> call_with_retries(lambda: 42, attempts=3)
    42
    """
    try:
        return fn()
    except retry_on:
        if (attempts is not None and attempts <= 1) or (give_up is not None and give_up()):
            raise
    wait: wait_base = (
        wait_fixed(fixed_wait)
        if fixed_wait is not None
        else wait_exponential_jitter(multiplier=initial_wait, max=max_wait, jitter=initial_wait)
    )
    stop: stop_base = stop_after_attempt(attempts - 1) if attempts is not None else stop_never
    if give_up is not None:
        stop = stop_any(stop, _GiveUp(give_up))
    retrying = Retrying(stop=stop, wait=wait, retry=retry_if_exception_type(retry_on), reraise=True)
    time.sleep(fixed_wait if fixed_wait is not None else initial_wait)
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

    def clear(self) -> None:
        """Forget every registered secret (a test runs many jobs in one process)."""
        with self._lock:
            self._secrets.clear()
            self._pattern = None

    def __call__(self, text: str) -> str:
        pattern = self._pattern
        return pattern.sub("***", text) if pattern else text


redact = _Redactor()
"""Call ``redact(text)`` to mask known secrets; ``redact.add([...])`` registers them."""


def url_passwords(url: str | None) -> list[str]:
    """The password in a URL's userinfo (``http://user:pass@host``), as written and percent-decoded."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url or "").password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []


SECRET_WORDS = ("password", "secret", "token", "credential")
"""A free-form option whose key holds one of these words holds a secret (``password``,
``fs.s3a.secret.key``, ``sessionToken``)."""


def option_secrets(options: Mapping[str, Any]) -> list[str]:
    """The secret values among free-form options (a sink's ``options``), to register with
    ``redact``: those of keys naming a secret, and passwords in URLs (``https://user:pw@host``).

    >>> option_secrets({"user": "mq", "password": "pw-1", "url": "https://u:pw-2@h"})
    ['pw-1', 'pw-2']
    """
    found: list[str] = []
    for key, value in options.items():
        if isinstance(value, Mapping):
            found += option_secrets(value)
        elif value is not None and any(word in str(key).lower() for word in SECRET_WORDS):
            found.append(str(value))
        elif isinstance(value, str) and "://" in value:
            found += url_passwords(value)
    return found
