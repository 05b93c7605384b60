"""Launches the driver JVM with the job's Spark settings in a private properties file, never on argv.

A process's command line is world-readable (``ps``, ``/proc/PID/cmdline``): PySpark's own launch
passes every setting as ``spark-submit --conf key=value``, secrets resolved from ``${env:…}``
included. Here they go in a file of mode 0600, in a directory only this user can enter, read by
``spark-submit --properties-file`` and removed as soon as the JVM has started. What Spark itself
puts on the ``java`` command line (``ON_JAVA_COMMAND_LINE``) stays visible there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import tempfile
from collections.abc import Iterator, Mapping

from ingest.config import read_text
from ingest.errors import redact

log = logging.getLogger(__name__)
ON_JAVA_COMMAND_LINE = ("spark.driver.extraJavaOptions", "spark.driver.extraClassPath")
"""Settings Spark's launcher copies onto the driver's ``java`` command line, from the file too."""
_FILE_FLAG = "--properties-file"


def escape(text: str, key: bool = False) -> str:
    r"""``text`` as a key or value of a ``java.util.Properties`` file, read back exactly (but
    that Spark trims a value's outer white space): ``\``, separators, comment marks and a
    leading space escaped, everything outside printable ASCII as ``\uXXXX``.

    >>> escape("spark.a=b", key=True), escape(" pw#1")
    ('spark.a\\=b', '\\ pw\\#1')
    """
    out = []
    for i, ch in enumerate(text):
        if ch in "\\=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:  # UTF-16 code units, as Java's \u escapes are
            units = ch.encode("utf-16-be")
            out += [f"\\u{units[j]:02x}{units[j + 1]:02x}" for j in range(0, len(units), 2)]
    return "".join(out)


def properties_text(conf: Mapping[str, str]) -> str:
    """The ``spark-submit --properties-file`` text holding ``conf``."""
    return "".join(f"{escape(k, key=True)}={escape(v)}\n" for k, v in conf.items())


def _split_users_file(submit_args: str) -> tuple[str | None, str]:
    """The properties file ``PYSPARK_SUBMIT_ARGS`` names, if any, and the arguments without it."""
    args, given, rest = shlex.split(submit_args), None, []
    i = 0
    while i < len(args):
        if args[i] == _FILE_FLAG and i + 1 < len(args):
            given, i = args[i + 1], i + 2
            continue
        if args[i].startswith(_FILE_FLAG + "="):
            given = args[i].split("=", 1)[1]
        else:
            rest.append(args[i])
        i += 1
    return given, shlex.join(rest)


@contextlib.contextmanager
def settings_file(conf: Mapping[str, str]) -> Iterator[str]:
    """``PYSPARK_SUBMIT_ARGS`` for the block: ``--properties-file`` naming a private file that
    holds ``conf`` (after the lines of a file the user's own ``PYSPARK_SUBMIT_ARGS`` named: ours
    win), and Spark's ``spark-defaults.conf`` below both, as it is below ``--conf``. The file and
    its directory are gone after the block; the variable is as it was. Yields the file's path."""
    before = os.environ.get("PYSPARK_SUBMIT_ARGS")
    users_file, rest = _split_users_file(before if before is not None else "pyspark-shell")
    text = properties_text(conf)
    if users_file is not None:  # theirs first: in a properties file the last line of a key wins
        text = read_text(users_file, "the properties file PYSPARK_SUBMIT_ARGS names") + "\n" + text
    with tempfile.TemporaryDirectory(prefix="mq-ingest-spark-") as private:  # mode 0700
        path = os.path.join(private, "spark.properties")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        defaults = "" if users_file is not None else " --load-spark-defaults"  # as Spark does without one
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"{_FILE_FLAG} {shlex.quote(path)}{defaults} {rest}"
        try:
            yield path
        finally:
            if before is None:
                os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
            else:
                os.environ["PYSPARK_SUBMIT_ARGS"] = before


def warn_of_visible_secrets(conf: Mapping[str, str]) -> None:
    """A warning for each setting of ``ON_JAVA_COMMAND_LINE`` that holds a secret (a value
    registered with ``redact``: a ``${env:…}`` one), naming the key, never the value."""
    for key in ON_JAVA_COMMAND_LINE:
        if redact(conf.get(key, "")) != conf.get(key, ""):
            log.warning(
                "spark.conf.%s holds a secret, and Spark puts it on the driver JVM's command line, "
                "which every local user can read; pass the secret otherwise (docs/operations/security.md)",
                key,
            )


def launch_driver_jvm(conf: dict[str, str]) -> None:
    """Launch the driver JVM with ``conf`` (in a private file, ``settings_file``), as PySpark does,
    but in a session and process group of its own, unless one runs already.

    A stop sent to the job's process group (systemd's default, a container runtime, ``kill --
    -PGID``, a terminal's Ctrl-C) then reaches only the Python driver, which finishes the running
    batch on a JVM still alive; in the group, SIGTERM ended the JVM first and failed the batch.
    The JVM still ends with the driver, however it dies: Spark's gateway exits when its stdin,
    a pipe from this process, closes (``tests/spark/test_cli.py`` kills the driver with -9).
    """
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    warn_of_visible_secrets(conf)
    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        with settings_file(conf):  # read by spark-submit before the gateway answers
            gateway = launch_gateway(None, popen_kwargs={"start_new_session": True})
        SparkContext._gateway, SparkContext._jvm = gateway, gateway.jvm
