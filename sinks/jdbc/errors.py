"""The JDBC sink's errors: a database's ``SQLException`` (through Py4J, Spark) as the sink's own."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ingest.errors import FatalError, IngestError, TransientError, first_line, redact

_TRANSIENT_STATES = ("08", "40", "53", "55P03", "57", "58", "HYT")
"""SQLState classes retrying can fix: connection exceptions (refused, lost), transaction rollbacks
(serialization failures, deadlocks), insufficient resources, operator intervention (a server shutting
down or starting), system errors, timeouts."""
_TRANSIENT_CLASSES = re.compile(
    r"SQLTransient|SQLRecoverable|SQLTimeout|SocketTimeout|ConnectException|EOFException|"
    r"SocketException|NoRouteToHost|UnknownHost"
)
_TRANSIENT_TEXT = re.compile(
    r"connection (?:refused|reset|attempt failed)|connection to .* refused|timed? ?out|"
    r"terminating connection|the database system is (?:starting up|shutting down)|i/o error",
    re.IGNORECASE,
)
_DETAIL = re.compile(r"^\s*(Detail|Where): (.+)$", re.MULTILINE)
_NO_DRIVER = "no suitable driver"


class SqlError(NamedTuple):
    """What a database said: its SQLState, the Java classes of the cause chain, its message, and
    its vendor error code (0 if none)."""

    state: str | None
    classes: str
    message: str
    code: int = 0


def sql_state(err: Any) -> SqlError:
    """What a Py4J error says: the innermost ``SQLException`` with a state wins (a
    ``BatchUpdateException``'s next exception included); a plain Python error gives (None, its
    class, its text)."""
    java = getattr(err, "java_exception", None) or getattr(err, "_origin", None)  # Py4J's, PySpark's
    if java is None:
        return SqlError(None, type(err).__name__, str(err))
    state, classes, message, code = None, [], "", 0
    cause = java
    for _ in range(20):
        classes.append(str(cause.getClass().getName()))
        got, number, text = _state(cause)
        if got:
            state, code, message = got, number, text
        elif not state:
            message = message or text
        following = cause.getCause()
        if following is None or following.equals(cause):
            break
        cause = following
    return SqlError(state, " ".join(classes), message or str(java.toString()), code)


def _state(cause: Any) -> tuple[str | None, int, str]:
    """A Java exception's SQLState (None if it is no ``SQLException`` or has none), vendor code and
    message; a batch's next exception's, which has the database's words."""
    from py4j.protocol import Py4JError

    text = str(cause.getMessage() or "")
    try:
        state = cause.getSQLState()
        following = cause.getNextException()
    except Py4JError:
        return None, 0, text
    if following is not None and following.getSQLState():
        return str(following.getSQLState()), int(following.getErrorCode()), str(following.getMessage() or "")
    return (str(state) if state else None), int(cause.getErrorCode()), text


def classify(
    key: str,
    what: str,
    state: str | None,
    classes: str,
    message: str,
    code: int = 0,
    transient_codes: frozenset[int] = frozenset(),
) -> IngestError:
    """One line naming ``key`` (``sinks.<name>.url``), what failed and the database's words (its
    first line and its ``Detail``), redacted; transient for a refused or lost connection, a timeout
    or a serialization failure (or a vendor ``code`` among the dialect's ``transient_codes``: MariaDB
    says ``HY000`` for a lock wait timeout), fatal for the rest (authentication, a missing table, a
    type mismatch, a constraint violation).

    >>> classify("sinks.db.url", "write t", "08001", "PSQLException", "Connection to h:1 refused.")
    TransientError('sinks.db.url: cannot write t: Connection to h:1 refused. (SQLState 08001)')
    >>> classify("k", "write t", "42804", "PSQLException", 'ERROR: column "a" is of type integer\\n  Hint: x')
    FatalError('k: cannot write t: ERROR: column "a" is of type integer (SQLState 42804)')
    """
    text = first_line(message) or classes.split()[0]
    details = [d for _, d in _DETAIL.findall(message)][:1]
    line = f"{key}: cannot {what}: {text}" + "".join(f"; {d}" for d in details)
    if state:
        line += f" (SQLState {state}" + (f", error {code}" if code else "") + ")"
    transient = code in transient_codes or (
        any(state.startswith(s) for s in _TRANSIENT_STATES)
        if state
        else bool(_TRANSIENT_CLASSES.search(classes) or _TRANSIENT_TEXT.search(message))
    )
    if state is None and _NO_DRIVER in message.lower():
        transient = False
    return (TransientError if transient else FatalError)(redact(line))


def database_error(
    key: str, what: str, err: BaseException, transient_codes: frozenset[int] = frozenset()
) -> IngestError:
    """``err`` (a Py4J error from JDBC or a Spark job) as :func:`classify` says; ours as they are."""
    if isinstance(err, IngestError):
        return err
    return classify(key, what, *sql_state(err), transient_codes=transient_codes)
