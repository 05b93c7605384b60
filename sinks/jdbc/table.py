"""JDBC sink, driver side: a JDBC connection in the driver's JVM (Py4J) for the marker, checks and commit."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

from ingest.errors import ConfigError, FatalError, TransientError, call_with_retries, redact
from sinks.jdbc.config import JdbcSinkConfig, Part
from sinks.jdbc.dialect import dialect_for
from sinks.jdbc.errors import database_error, sql_state

log = logging.getLogger(__name__)
T = TypeVar("T")
_MISSING = re.compile(r"does not exist|doesn't exist|not found|unknown table|no such table", re.IGNORECASE)
_MISSING_STATES = ("42P01", "42S02", "42Y07", "42704")
"""A missing table: PostgreSQL, MySQL/MariaDB, Derby, DB2/H2."""


def staging_prefix(sink_id: str) -> str:
    """Staging tables' name prefix for a sink: readable, lower case, short enough for any database
    (PostgreSQL cuts names at 63 bytes), unique by a hash of the sink's id."""
    slug = re.sub(r"[^a-z0-9]+", "_", sink_id.lower()).strip("_")[:24]
    return f"mq_stage_{slug}_{hashlib.sha1(sink_id.encode()).hexdigest()[:8]}_"


class JdbcTarget:
    """The sink's table and marker table, reached through the driver JVM's JDBC (the driver the
    executors use, so any database with a JDBC driver works). Every step retries transient errors
    ``max_retries`` times (backing off up to 5 s), reconnecting; errors name ``sinks.<name>.url``.

    Table names go into SQL as the dialect quotes them (``table``, ``marker``, ``staging()``),
    from the parts the config checked."""

    def __init__(self, cfg: JdbcSinkConfig) -> None:
        self.cfg = cfg
        self.key = f"sinks.{cfg.name}.url"
        self.dialect = dialect_for(cfg.url)
        self.sink_id = cfg.app_id or cfg.name
        parts = cfg.table_name()
        self.table = self.dialect.table(parts)
        """The target table's name as SQL."""
        self.marker = self.dialect.table(cfg.table_name("marker_table"))
        """The marker table's name as SQL."""
        self.qualifiers = parts[:-1]
        """The target's catalog and schema parts: its staging tables go beside it."""
        self.prefix = staging_prefix(self.sink_id)
        self._conn: Any = None

    def staging(self, batch_id: int) -> str:
        """The staging table of ``batch_id`` as SQL (in the target table's schema)."""
        return self.dialect.table([*self.qualifiers, Part(f"{self.prefix}{batch_id}", False)])

    def retrying(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` with its database errors classified; transient ones retried on a new connection."""

        def attempt() -> T:
            try:
                return fn()
            except Exception as err:
                classified = database_error(self.key, what, err, self.dialect.transient_codes)
                if isinstance(classified, TransientError):
                    self.close()  # the next try connects anew
                raise classified from None

        return call_with_retries(
            attempt,
            what=f"sink {self.cfg.name}: {what}",
            attempts=self.cfg.max_retries + 1,
            initial_wait=0.5,
            max_wait=5.0,
        )

    def connection(self) -> Any:
        """The open JDBC connection (autocommit on), made on first use."""
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def columns(self) -> list[tuple[str, int, str]] | None:
        """The table's columns as (name, ``java.sql.Types`` code, type name); None if it is missing."""
        try:
            return self._query_columns(self.table)
        except Exception as err:
            state, _, message, _ = sql_state(err)
            if state in _MISSING_STATES or (state and state.startswith("42") and _MISSING.search(message)):
                return None
            raise

    def committed(self) -> int:
        """The last batch the marker table holds for this sink, -1 if none (the marker table is made)."""
        self._ensure_marker()
        return self._marked(self.connection())

    def commit(
        self, batch_id: int, staging: str, columns: list[tuple[str, str]], casts: dict[str, str]
    ) -> bool:
        """Move ``staging``'s rows into the table and record ``batch_id`` in one transaction; False
        (nothing written) if the marker holds it already. ``columns``: (the table's name, the staging
        table's) of each column; ``casts``: the table's type of a column (by the table's name) that
        needs an explicit cast (PostgreSQL's ``jsonb``, ``uuid``). The dialect says how the rows
        move (for merge: a delete and insert, or an upsert)."""
        conn = self.connection()
        by_batch = {theirs.lower(): (ours, theirs) for ours, theirs in columns}
        keys = [by_batch[k.lower()] for k in self.cfg.merge_keys] if self.cfg.mode == "merge" else []
        statements = self.dialect.move(self.table, staging, columns, casts, keys)
        conn.setAutoCommit(False)
        try:
            if not self._mark(conn, batch_id):
                conn.rollback()
                return False
            for sql in statements:
                self.execute(sql, conn)
            conn.commit()
            return True
        except BaseException:
            _quietly(conn.rollback)
            raise
        finally:
            _quietly(lambda: conn.setAutoCommit(True))

    def drop(self, table: str) -> None:
        """Drop a staging table (its name as SQL) if it is there."""
        self.execute(f"DROP TABLE IF EXISTS {table}")

    def execute(self, sql: str, conn: Any = None) -> None:
        """Run one statement that returns no rows (on ``conn``, else the open connection)."""
        st = (conn or self.connection()).createStatement()
        try:
            st.executeUpdate(sql)
        finally:
            st.close()

    def unique_keys(self) -> list[set[str]]:
        """The column sets (lower case) of the table's primary and unique keys."""
        *qualifiers, name = (self.dialect.stored(p) for p in self.cfg.table_name())
        conn = self.connection()
        catalog, schema = self.dialect.catalog_schema(qualifiers, conn.getCatalog())
        md = conn.getMetaData()
        keys: dict[str, set[str]] = {}
        rs = md.getIndexInfo(catalog, schema, name, True, False)
        try:
            while rs.next():
                if (column := rs.getString("COLUMN_NAME")) is not None:
                    keys.setdefault(str(rs.getString("INDEX_NAME")), set()).add(str(column).lower())
        finally:
            rs.close()
        return list(keys.values())

    def stale_staging(self, keep: int) -> list[str]:
        """Staging tables (their names as SQL) of this sink's batches but ``keep`` (left by failed
        or killed runs)."""
        prefix, conn = self.prefix, self.connection()
        qualifiers = [self.dialect.stored(p) for p in self.qualifiers]
        catalog, schema = self.dialect.catalog_schema(qualifiers, conn.getCatalog())
        md = conn.getMetaData()
        found = []
        for pattern in {prefix, prefix.upper()}:
            rs = md.getTables(catalog, schema, pattern.replace("_", "\\_") + "%", None)
            while rs.next():
                found.append(str(rs.getString("TABLE_NAME")))
            rs.close()
        own = re.compile(re.escape(prefix) + r"(\d+)$", re.IGNORECASE)
        return [
            self.dialect.table([*self.qualifiers, Part(name, True)])
            for name in found
            if (m := own.match(name)) and int(m.group(1)) != keep
        ]

    def close(self) -> None:
        if self._conn is not None:
            _quietly(self._conn.close)
            self._conn = None

    def _mark(self, conn: Any, batch_id: int) -> bool:
        """Record ``batch_id`` as committed (the row lock serialises concurrent commits of the sink);
        False if the marker holds it or a later one."""
        table = self.marker
        ps = conn.prepareStatement(
            f"UPDATE {table} SET batch_id = ?, committed_at = CURRENT_TIMESTAMP "
            "WHERE sink_id = ? AND batch_id < ?"
        )
        try:
            ps.setLong(1, batch_id)
            ps.setString(2, self.sink_id)
            ps.setLong(3, batch_id)
            if ps.executeUpdate() == 1:
                return True
        finally:
            ps.close()
        if self._marked(conn) >= 0:
            return False
        ps = conn.prepareStatement(
            f"INSERT INTO {table} (sink_id, batch_id, committed_at) VALUES (?, ?, CURRENT_TIMESTAMP)"
        )
        try:
            ps.setString(1, self.sink_id)
            ps.setLong(2, batch_id)
            ps.executeUpdate()  # a concurrent first commit fails here on the primary key: retried
        finally:
            ps.close()
        return True

    def _marked(self, conn: Any) -> int:
        ps = conn.prepareStatement(f"SELECT batch_id FROM {self.marker} WHERE sink_id = ?")
        try:
            ps.setString(1, self.sink_id)
            rs = ps.executeQuery()
            return int(rs.getLong(1)) if rs.next() else -1
        finally:
            ps.close()

    def _ensure_marker(self) -> None:
        try:
            self._query_columns(self.marker)
            return
        except Exception:
            pass
        self.execute(self.dialect.marker_ddl(self.marker))

    def _query_columns(self, table: str) -> list[tuple[str, int, str]]:
        """The columns of ``table`` (its name as SQL)."""
        st = self.connection().createStatement()
        try:
            md = st.executeQuery(f"SELECT * FROM {table} WHERE 1 = 0").getMetaData()
            return [
                (str(md.getColumnName(i)), int(md.getColumnType(i)), str(md.getColumnTypeName(i)))
                for i in range(1, md.getColumnCount() + 1)
            ]
        finally:
            st.close()

    def _connect(self) -> Any:
        from py4j.protocol import Py4JJavaError
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            raise FatalError(f"{self.key}: no Spark session to connect from")
        jvm, gateway = sc._jvm, sc._gateway
        assert jvm is not None and gateway is not None
        driver = self.cfg.driver_class()
        try:
            cls = jvm.org.apache.spark.util.Utils.classForName(driver, True, False)
        except Py4JJavaError:
            cls = _from_jars(jvm, gateway, driver, self.cfg.spark_jars()[0])
        if cls is None:
            raise ConfigError(
                f"config key sinks.{self.cfg.name}.driver: JDBC driver class {driver} not found; give its "
                f"jar in sinks.{self.cfg.name}.jars (or its Maven coordinates in packages)"
            ) from None
        instance = cls.getDeclaredConstructor(gateway.new_array(jvm.java.lang.Class, 0)).newInstance(
            gateway.new_array(jvm.java.lang.Object, 0)
        )
        props = jvm.java.util.Properties()
        for k, v in connection_properties(self.cfg).items():
            props.setProperty(k, v)
        conn = instance.connect(self.cfg.url, props)
        if conn is None:
            raise ConfigError(f"config key {self.key}: driver {driver} does not take {redact(self.cfg.url)}")
        return conn


def _from_jars(jvm: Any, gateway: Any, driver: str, jars: list[str]) -> Any:
    """``driver`` loaded from the sink's local jars, for a JVM started without them (a session made
    before the job's, as in a notebook); None if it is not there either."""
    from py4j.protocol import Py4JJavaError

    local = [j.removeprefix("file:") for j in jars if "://" not in j or j.startswith("file:")]
    urls = gateway.new_array(jvm.java.net.URL, len(local))
    for i, jar in enumerate(local):
        urls[i] = jvm.java.io.File(jar).toURI().toURL()
    loader = jvm.java.net.URLClassLoader(urls, jvm.java.lang.Thread.currentThread().getContextClassLoader())
    try:
        return jvm.java.lang.Class.forName(driver, True, loader)
    except Py4JJavaError:
        return None


def connection_properties(cfg: JdbcSinkConfig) -> dict[str, str]:
    """The JDBC connection properties: ``properties``, ``user`` and ``password``."""
    props = dict(cfg.properties)
    if cfg.user is not None:
        props["user"] = cfg.user
    if cfg.password is not None:
        props["password"] = cfg.password.get_secret_value()
    return props


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception as err:
        log.debug("ignored: %s", redact(str(err)))
