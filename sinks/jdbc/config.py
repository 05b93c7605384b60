"""The JDBC table sink's typed config: the database, the table (its name parsed), the write mode, the jars."""

from __future__ import annotations

import os
import re
import unicodedata
from typing import ClassVar, Literal, NamedTuple

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.config.connector import FlinkSql, SinkDelivery
from ingest.config.sink_base import SinkBase
from ingest.config.types import KeyedError
from ingest.errors import redact

KNOWN_DRIVERS: dict[str, tuple[str, str, str]] = {
    "postgresql": (
        "org.postgresql.Driver",
        "/usr/share/java/postgresql.jar",
        "org.postgresql:postgresql:42.7.4",
    ),
    "mariadb": (
        "org.mariadb.jdbc.Driver",
        "/usr/share/java/mariadb-java-client.jar",
        "org.mariadb.jdbc:mariadb-java-client:3.5.11",
    ),
    "mysql": (
        "com.mysql.cj.jdbc.Driver",
        "/usr/share/java/mysql-connector-j.jar",
        "com.mysql:mysql-connector-j:8.4.0",
    ),
}
"""URL subprotocol → (driver class, where Debian's package puts its jar, its Maven coordinates)."""

_SECRET_PROPERTY = re.compile(r"password|secret|token|key", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"[?&;:]password=([^&;]+)", re.IGNORECASE)
_BACKQUOTING = ("mariadb", "mysql")
"""URL subprotocols whose databases also quote names in backquotes, and name a table
``database.table`` at most."""
_NAME_SYNTAX = (
    "write [catalog.][schema.]table, each part letters, digits, _ and $ (not first), "
    'or in double quotes ("Mixed Case")'
)


def subprotocol(url: str) -> str:
    """``postgresql`` for ``jdbc:postgresql://…``."""
    return url.split(":", 2)[1] if url.count(":") >= 2 else ""


class Part(NamedTuple):
    """One part of a table's name (its catalog, schema or table): its text, and whether it was
    quoted (then it is that exact name) or bare (then the database folds its case as it does)."""

    text: str
    quoted: bool


def parse_table_name(value: str, url: str = "") -> tuple[Part, ...]:
    """``value``'s parts, split on the dots outside quotes: each bare (letters, digits, ``_``,
    ``$``, not starting with a digit or ``$``) or in ``"`` (``""`` a quote in it; on MariaDB and
    MySQL also in backquotes); three at most, two on MariaDB and MySQL. Anything else is a
    ``ValueError`` saying what is wrong: a name is pasted into SQL, so nothing else may pass."""
    backquoting = subprotocol(url).lower() in _BACKQUOTING
    marks, most = ('"`', 2) if backquoting else ('"', 3)
    parts: list[Part] = []
    i = 0
    while True:
        if value[i : i + 1] and value[i] in marks:
            text, i = _quoted(value, i)
            parts.append(Part(text, True))
        else:
            start = i
            while i < len(value) and _bare(value[i], first=i == start):
                i += 1
            if i == start:
                raise _refused(value, i)
            parts.append(Part(value[start:i], False))
        if i == len(value):
            break
        if value[i] != ".":
            raise _refused(value, i)
        i += 1
    if len(parts) > most:
        where = "a MariaDB or MySQL table is database.table" if backquoting else "catalog.schema.table"
        raise _not_a_name(value, f"{len(parts)} parts, {most} at most ({where})")
    return tuple(parts)


def _bare(c: str, first: bool) -> bool:
    """Whether ``c`` may be in a bare name (ASCII letters, ``_``, unicode letters; after the first
    character also digits and ``$``)."""
    if c.isascii():
        return c.isalpha() or c == "_" or (not first and (c.isdigit() or c == "$"))
    return c.isalpha() or (not first and c.isalnum())


def _quoted(value: str, start: int) -> tuple[str, int]:
    """The name quoted at ``start`` (its mark doubled inside it), and where it ends."""
    mark, i, text = value[start], start + 1, ""
    while True:
        end = value.find(mark, i)
        if end < 0:
            raise _not_a_name(value, f"the {mark} at character {start + 1} is not closed")
        text += value[i:end]
        if value[end + 1 : end + 2] != mark:
            break
        text, i = text + mark, end + 2
    if not text:
        raise _not_a_name(value, f"an empty name at character {start + 1}")
    if bad := [c for c in text if unicodedata.category(c) == "Cc"]:
        raise _not_a_name(value, f"a control character (U+{ord(bad[0]):04X}) in it")
    return text, end + 1


def _refused(value: str, i: int) -> ValueError:
    """The error for ``value``, which is no name from character ``i`` on; a name whose parts are
    words between single spaces or dashes gets the same name quoted as the hint."""
    pieces = value.split(".")
    if all(re.fullmatch(r"[\w$]+(?:[ -][\w$]+)*", p) for p in pieces):
        hint = ".".join(p if _is_bare(p) else f'"{p}"' for p in pieces)
        return _not_a_name(value, f"a part with a space or sign goes in quotes: {hint!r}")
    if i == len(value) or value[i] == ".":
        return _not_a_name(value, f"an empty part at character {i + 1}; {_NAME_SYNTAX}")
    return _not_a_name(value, f"{value[i]!r} at character {i + 1}; {_NAME_SYNTAX}")


def _is_bare(piece: str) -> bool:
    return all(_bare(c, first=n == 0) for n, c in enumerate(piece))


def _not_a_name(value: str, why: str) -> ValueError:
    return ValueError(f"{value!r} is not a table name: {why}")


class JdbcSinkConfig(SinkBase):
    """A relational table through JDBC (PostgreSQL first): exactly once per micro-batch.

    The executors write a batch's rows through Spark's JDBC writer into a staging table named for
    the sink and the batch; the driver then moves them into ``table`` in one database transaction
    that also records the batch in ``marker_table``: a replayed batch the marker holds writes nothing.
    """

    implementation: ClassVar[str] = "sinks.jdbc.sink:JdbcSink"
    checks_target: ClassVar[bool] = True
    """``mq-ingest check`` compares the table with the columns the sink receives, if reachable."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "idempotent_per_batch",
        skips_replayed_batch=True,
        note="The batch's rows and its marker row commit in one database transaction; a replayed "
        "batch finds its marker and writes nothing.",
    )

    flinksql: ClassVar[FlinkSql | None] = FlinkSql(
        "jdbc",
        aliases={
            "table-name": "table",
            "username": "user",
            "sink.buffer-flush.max-rows": "batch_size",
            "sink.max-retries": "max_retries",
            "sink.parallelism": "num_partitions",
        },
        ignored=("sink.buffer-flush.interval",),
        defaults={"include_meta": False},
    )
    """``'connector' = 'jdbc'`` with Flink's option names: ``url``, ``table-name``, ``username``,
    ``password``, ``driver``, ``sink.buffer-flush.max-rows``, ``sink.max-retries``, ``sink.parallelism``
    (``sink.buffer-flush.interval`` is accepted: a micro-batch is the flush); the table's columns
    are the declared ones, so ``_meta`` is left out unless ``include_meta`` says otherwise."""

    type: Literal["jdbc"]
    url: str = Field(pattern=r"^jdbc:[A-Za-z0-9]+:")
    """The JDBC URL, ``jdbc:postgresql://host:5432/db`` (a password in it is masked in logs and errors;
    better give it as ``password``)."""
    table: str = Field(min_length=1)
    """The target table, ``name``, ``schema.name`` or ``catalog.schema.name``; a part with other
    characters than letters, digits, ``_`` and ``$`` in double quotes, ``'"Mixed Case"'``."""
    user: str | None = None
    """The database user."""
    password: SecretStr | None = None
    """The user's password; write it as ``${env:NAME}``: it is kept out of every log, error and event."""
    driver: str | None = None
    """The JDBC driver class; default from the URL (``org.postgresql.Driver``, MariaDB's, MySQL's)."""
    properties: dict[str, str] = Field({}, repr=False)
    """More JDBC connection properties (``sslmode``, ``connectTimeout``, ``socketTimeout``…), for the
    executors' writes and the driver's commit alike; values of keys naming a password, secret, token
    or key are masked."""
    mode: Literal["append", "merge"] = "append"
    """append: every row is added; merge: upsert on ``merge_keys``."""
    merge_keys: list[str] = []
    """mode merge: the columns identifying a row; the table's rows with the key of a batch row are
    replaced by the batch's latest row per key (latest by ``_meta.received_at``, then ``_meta.arrival``)."""
    create_table: bool = False
    """Create a missing ``table`` from the first batch's columns; false: a missing table is an error."""
    include_meta: bool = True
    """Keep the ``_meta`` struct (message id, queue, timestamps…, without the staging fields) as a
    JSON text column ``_meta``; false: drop it."""
    batch_size: int = Field(1000, ge=1, le=1_000_000)
    """Rows per JDBC batch insert of an executor (Spark's ``batchsize``)."""
    num_partitions: int | None = Field(None, ge=1, le=1024)
    """Connections writing at once at most (Spark's ``numPartitions``); default: one per partition."""
    max_retries: int = Field(10, ge=0, le=100)
    """Retries of a step that failed for a transient reason (connection refused or lost, a timeout, a
    serialization failure), backing off up to 5 s: the default rides out about half a minute's outage."""
    marker_table: str = Field("mq_ingest_batches", min_length=1)
    """The table recording the last batch each sink committed (created if missing); a name as
    ``table``'s."""
    app_id: str | None = None
    """The sink's id in the marker table and its staging tables' names; default: the job's name, ``.``,
    the sink's name."""
    jars: list[str] = []
    """Driver jars the job adds to ``spark.jars``; default: the driver's jar where its Debian package
    put it, else its Maven coordinates (``packages``)."""
    packages: list[str] = []
    """Maven coordinates the job adds to ``spark.jars.packages`` (downloaded at start)."""

    @field_validator("properties")
    @classmethod
    def _mask_properties(cls, value: dict[str, str]) -> dict[str, str]:
        redact.add([v for k, v in value.items() if _SECRET_PROPERTY.search(k) and "${env:" not in v])
        return value

    @field_validator("url")
    @classmethod
    def _mask_url(cls, value: str) -> str:
        redact.add([m for m in _URL_PASSWORD.findall(value) if "${env:" not in m])
        return value

    def for_job(self, job: str) -> JdbcSinkConfig:
        """``app_id`` defaults to the job's name, ``.``, the sink's name."""
        return self if self.app_id is not None else self.model_copy(update={"app_id": f"{job}.{self.name}"})

    @model_validator(mode="after")
    def _table_names(self) -> JdbcSinkConfig:
        """Each table name one the database reads as one table's, or an error naming its option
        (``sinks.<name>.table``): a name is pasted into SQL, so nothing else may pass."""
        for option in ("table", "marker_table"):
            value = getattr(self, option)
            try:
                parse_table_name(value, self.url)
            except ValueError as err:
                raise KeyedError(option, str(err)) from None
        return self

    @model_validator(mode="after")
    def _consistent(self) -> JdbcSinkConfig:
        if len(set(self.merge_keys)) != len(self.merge_keys):
            raise ValueError("merge_keys names a column twice")
        if self.mode == "merge" and not self.merge_keys:
            raise ValueError("mode merge needs merge_keys")
        if self.mode == "append" and self.merge_keys:
            raise ValueError("merge_keys go with mode merge")
        if self.driver is None and subprotocol(self.url) not in KNOWN_DRIVERS:
            raise ValueError(f"no known driver for {subprotocol(self.url)!r} URLs: set driver (and jars)")
        return self

    def column_options(self) -> dict[str, list[str]]:
        """``merge_keys``: columns of the rows the sink receives."""
        return {"merge_keys": self.merge_keys}

    def table_name(self, option: Literal["table", "marker_table"] = "table") -> tuple[Part, ...]:
        """The parts of ``table``'s name, or ``marker_table``'s."""
        return parse_table_name(getattr(self, option), self.url)

    def driver_class(self) -> str:
        """The JDBC driver class: ``driver``, or the one the URL's subprotocol names."""
        return self.driver or KNOWN_DRIVERS[subprotocol(self.url)][0]

    def spark_jars(self) -> tuple[list[str], list[str]]:
        """(jars, Maven coordinates) the job adds to its Spark session for this sink's driver."""
        if self.jars or self.packages:
            return list(self.jars), list(self.packages)
        known = KNOWN_DRIVERS.get(subprotocol(self.url))
        if self.driver is not None and (known is None or known[0] != self.driver):
            return [], []
        assert known is not None
        return ([known[1]], []) if os.path.exists(known[1]) else ([], [known[2]])
