"""Error classes shared by connectors, the retry policy, and secret redaction."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from tenacity import (
    RetryCallState,
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
log = logging.getLogger(__name__)


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


_XML_CODE = re.compile(r"<Code>([^<]+)</Code>")
_XML_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")


def error_code(err: Any) -> tuple[str, str, int]:
    """(code, message, HTTP status) of a botocore ClientError; ("", text, 0) for other errors (the
    SQS connectors and the claim-check object store read AWS-protocol answers with it).

    A query-protocol XML error behind the JSON protocol (moto's IAM checks answer that way)
    leaves botocore with the HTTP status as code and the XML as message; read the XML.
    """
    if not isinstance(getattr(err, "response", None), dict):
        return "", str(err), 0
    error = err.response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    inner = _XML_CODE.search(message)
    if inner and (not code or code.isdigit()):
        code = inner.group(1)
        found = _XML_MESSAGE.search(message)
        message = found.group(1) if found else ""
    return code, message, status


class RetriesStopped(IngestError):
    """Retries cut short by a stop of the job (``stop_retries_with``): what was retried is left
    undone on purpose, as a batch that fails uncommitted is (nothing of it is acked)."""

    def __init__(self, what: str, tries: int, last: str) -> None:
        super().__init__(redact(f"retrying {what} after {tries} {'try' if tries == 1 else 'tries'}: {last}"))
        self.what, self.tries = what, tries


_UNLIMITED_LOG_EVERY = 60.0
"""Seconds between the WARNING lines of retries without a limit (a sink under ``failOnError`` false)."""
_STOP: ContextVar[threading.Event | None] = ContextVar("mq_ingest_retries_stop", default=None)
"""The event whose setting cuts this thread's retries short (``stop_retries_with``)."""


@contextlib.contextmanager
def stop_retries_with(event: threading.Event) -> Iterator[None]:
    """In the block, in this thread: once ``event`` is set, ``call_with_retries`` tries no more
    and its wait between tries ends at once; it raises ``RetriesStopped`` (a job's stop)."""
    token = _STOP.set(event)
    try:
        yield
    finally:
        _STOP.reset(token)


def call_with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int | None,
    initial_wait: float = 0.1,
    max_wait: float = 5.0,
    retry_on: tuple[type[BaseException], ...] = (TransientError,),
    fixed_wait: float | None = None,
    give_up: Callable[[], bool] | None = None,
) -> T:
    """Run ``fn`` and retry it on transient errors with exponential backoff and jitter.

    This is the one place retries live. Fatal errors and anything not in ``retry_on``
    propagate at once; after ``attempts`` tries the last transient error is re-raised, its
    message ending ``(after N tries)`` (``None``: no limit, until ``fn`` succeeds or
    ``give_up`` says so; the wait stays capped). Each retry logs one WARNING line,
    ``retrying <what> (attempt n of m) after <error>``, redacted; without a limit, the first
    retry's and then one a minute. The first wait is ``initial_wait``, then it doubles, with up
    to ``initial_wait`` of jitter, capped at ``max_wait``; ``fixed_wait`` waits that long
    between tries instead (a connector's sleepTimeMs). ``give_up`` stops retrying as soon as
    it returns true; a stop (``stop_retries_with``) does too, at once, raising ``RetriesStopped``.

    >>> call_with_retries(lambda: 42, what="the answer", attempts=3)
    42
    """
    try:
        return fn()  # the common case, without the retry machinery
    except retry_on as err:
        if (attempts is not None and attempts <= 1) or (give_up is not None and give_up()):
            raise
        retrying = _retrying(what, err, attempts, initial_wait, max_wait, retry_on, fixed_wait, give_up)
    try:
        return retrying(fn)
    except retry_on as err:
        _add_tries(err, 1 + retrying.statistics.get("attempt_number", 0))
        raise


def _retrying(
    what: str,
    first: BaseException,
    attempts: int | None,
    initial_wait: float,
    max_wait: float,
    retry_on: tuple[type[BaseException], ...],
    fixed_wait: float | None,
    give_up: Callable[[], bool] | None,
) -> Retrying:
    """tenacity's retrying of what failed once (``first``): it logs before each wait, and a wait
    ends at once, raising ``RetriesStopped``, when this thread's stop event is set."""
    event = _STOP.get()
    last, tries = [first], [1]  # the last error, and how many tries have failed
    logged: list[float] = []  # when the last line of a retrying without a limit was logged

    def before(tries: int) -> None:
        error = redact(describe(last[0]))
        if attempts is not None:
            log.warning("retrying %s (attempt %d of %d) after %s", redact(what), tries + 1, attempts, error)
        elif not logged or time.monotonic() - logged[0] >= _UNLIMITED_LOG_EVERY:
            logged[:] = [time.monotonic()]
            log.warning("retrying %s (attempt %d, no limit) after %s", redact(what), tries + 1, error)

    def pause(seconds: float) -> None:
        if event is None:
            time.sleep(seconds)
        elif event.wait(seconds):
            raise RetriesStopped(what, tries[0], redact(describe(last[0]))) from last[0]

    def noted(state: RetryCallState) -> None:
        tries[0] = state.attempt_number + 1
        if state.outcome is not None and (err := state.outcome.exception()) is not None:
            last[0] = err
        before(tries[0])

    before(1)
    pause(fixed_wait if fixed_wait is not None else initial_wait)
    stop: stop_base = stop_after_attempt(attempts - 1) if attempts is not None else stop_never
    if give_up is not None:
        stop = stop_any(stop, _GiveUp(give_up))
    wait: wait_base = (
        wait_fixed(fixed_wait)
        if fixed_wait is not None
        else wait_exponential_jitter(multiplier=initial_wait, max=max_wait, jitter=initial_wait)
    )
    return Retrying(
        stop=stop,
        wait=wait,
        retry=retry_if_exception_type(retry_on),
        sleep=pause,
        before_sleep=noted,
        reraise=True,
    )


class _GiveUp(stop_base):
    """Stop retrying as soon as ``give_up()`` says so."""

    def __init__(self, give_up: Callable[[], bool]) -> None:
        self.give_up = give_up

    def __call__(self, retry_state: Any) -> bool:
        return self.give_up()


def _add_tries(err: BaseException, tries: int) -> None:
    """End the message of ``err`` (a plain one-message exception) with how many tries were made."""
    if type(err).__str__ is BaseException.__str__ and len(err.args) == 1 and isinstance(err.args[0], str):
        err.args = (f"{err.args[0]} (after {tries} tries)",)


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
