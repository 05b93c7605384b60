"""The JDBC sink's SQL per database, by the JDBC URL's scheme: quoting, the commit, DDL, error codes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sinks.jdbc.config import Part, subprotocol

Pairs = list[tuple[str, str]]
"""(the table's name, the staging table's) of columns."""


@dataclass(frozen=True)
class Dialect:
    """Standard SQL, as PostgreSQL speaks it (and the default for a database without its own):
    ``"`` quotes names; merge is a ``DELETE`` of the batch's keys then an ``INSERT … SELECT``, which
    needs no unique key on them."""

    name: str = "standard"
    mark: str = '"'
    cast_types: frozenset[str] = frozenset()
    """Column types a text value goes into only with an explicit ``CAST``."""
    transient_codes: frozenset[int] = frozenset()
    """Vendor error codes retrying can fix whose SQLState says nothing (MariaDB's ``HY000``)."""
    merge_needs_unique_key: bool = False
    """Whether merge needs a primary or unique key on exactly ``merge_keys`` (an upsert)."""
    folds_lower: bool = False
    """Whether the database keeps a bare name in lower case (PostgreSQL); else as written."""

    def quote(self, name: str) -> str:
        """A name (a column's, a part of a table's) quoted (a quote mark in it doubled)."""
        return f"{self.mark}{name.replace(self.mark, self.mark * 2)}{self.mark}"

    def table(self, parts: Sequence[Part]) -> str:
        """A table's name as SQL: its quoted parts quoted in this dialect's marks (so ``"a b"``
        in backquotes on MariaDB), its bare parts as written (checked to be letters, digits, ``_``
        and ``$``), so the database folds their case as it folds any bare name."""
        return ".".join(self.quote(p.text) if p.quoted else p.text for p in parts)

    def stored(self, part: Part) -> str:
        """The name the database's catalogue keeps for ``part`` (for ``DatabaseMetaData``): a
        quoted part as written, a bare one as the database folds it (PostgreSQL: ASCII letters
        to lower case)."""
        if part.quoted or not self.folds_lower:
            return part.text
        return "".join(c.lower() if c.isascii() else c for c in part.text)

    def move(
        self, target: str, staging: str, columns: Pairs, casts: dict[str, str], keys: Pairs
    ) -> list[str]:
        """The statements that move ``staging``'s rows (one per key, for a merge) into ``target``,
        in one transaction. ``columns``, ``keys``: (the table's name, the staging table's) of
        each column, each merge key; ``casts``: the table's type of a column needing a cast."""
        insert = self._insert(target, staging, columns, casts)
        return self._merge(target, staging, insert, columns, keys) if keys else [insert]

    def _merge(self, target: str, staging: str, insert: str, columns: Pairs, keys: Pairs) -> list[str]:
        """The statements of a merge, around the batch's ``insert``: the rows with its keys deleted first."""
        q = self.quote
        on = " AND ".join(f"s.{q(theirs)} = {target}.{q(ours)}" for ours, theirs in keys)
        return [f"DELETE FROM {target} WHERE EXISTS (SELECT 1 FROM {staging} s WHERE {on})", insert]

    def _insert(self, target: str, staging: str, columns: Pairs, casts: dict[str, str]) -> str:
        q = self.quote
        names = ", ".join(q(ours) for ours, _ in columns)
        values = ", ".join(
            f"CAST(s.{q(theirs)} AS {casts[ours]})" if ours in casts else f"s.{q(theirs)}"
            for ours, theirs in columns
        )
        return f"INSERT INTO {target} ({names}) SELECT {values} FROM {staging} s"

    def marker_ddl(self, table: str) -> str:
        """``CREATE TABLE`` of the marker table: one row per sink, its last committed batch."""
        return (
            f"CREATE TABLE IF NOT EXISTS {table} (sink_id VARCHAR(255) NOT NULL PRIMARY KEY, "
            "batch_id BIGINT NOT NULL, committed_at TIMESTAMP)"
        )

    def unique_key_ddl(self, table: str, keys: list[str]) -> str:
        """The statement giving a table ``create_table`` made a unique key on ``keys``."""
        return f"ALTER TABLE {table} ADD UNIQUE ({', '.join(self.quote(k) for k in keys)})"

    def spark_url(self, url: str) -> str:
        """The URL Spark's JDBC writer gets: Spark picks its own dialect (quoting, the staging and
        ``create_table`` column types) by the URL's scheme."""
        return url

    def catalog_schema(self, qualifiers: Sequence[str], current: str | None) -> tuple[str | None, str | None]:
        """(catalog, schema) arguments of ``DatabaseMetaData`` lookups for a table's ``catalog.``
        and ``schema.`` parts, as the catalogue keeps them (``current``: the connection's catalog)."""
        catalog = qualifiers[-2] if len(qualifiers) > 1 else None
        return catalog, (qualifiers[-1] if qualifiers else None)


@dataclass(frozen=True)
class MySQLDialect(Dialect):
    """MariaDB and MySQL: backticks quote names; merge is ``INSERT … SELECT … ON DUPLICATE KEY
    UPDATE``, an upsert that needs a primary or unique key on the merge keys; a ``schema.`` is a
    database (a catalog to JDBC)."""

    name: str = "mysql"
    mark: str = "`"
    transient_codes: frozenset[int] = frozenset({1205, 1213, 1040, 1053, 1927})
    """Lock wait timeout (``HY000``), deadlock, too many connections, server shutdown, connection killed."""
    merge_needs_unique_key: bool = True

    def _merge(self, target: str, staging: str, insert: str, columns: Pairs, keys: Pairs) -> list[str]:
        """An upsert: the batch's ``insert``, a row whose key the table has updating that row."""
        q = self.quote
        update = ", ".join(f"{target}.{q(ours)} = VALUES({q(ours)})" for ours, _ in columns)
        return [f"{insert} ON DUPLICATE KEY UPDATE {update}"]

    def spark_url(self, url: str) -> str:
        """``jdbc:mariadb:`` as ``jdbc:mysql:``: Spark 4 keeps its MySQL dialect (backticks, MySQL's
        types), which MariaDB speaks, for ``jdbc:mysql`` URLs only; else its generic one quotes
        names with ``"``, which MariaDB reads as strings. MariaDB Connector/J takes the scheme
        (3.x only with ``permitMysqlScheme``)."""
        if not url.startswith("jdbc:mariadb:"):
            return url
        rest = url.removeprefix("jdbc:mariadb:")
        return f"jdbc:mysql:{rest}{'&' if '?' in rest else '?'}permitMysqlScheme"

    def catalog_schema(self, qualifiers: Sequence[str], current: str | None) -> tuple[str | None, str | None]:
        """The database as the catalog, the connection's own if the table names none (a null
        catalog is every database to drivers whose ``nullCatalogMeansCurrent`` is off)."""
        return (qualifiers[-1] if qualifiers else current), None


POSTGRES = Dialect(
    "postgresql",
    cast_types=frozenset({"json", "jsonb", "uuid", "xml", "inet", "cidr", "macaddr", "citext"}),
    folds_lower=True,
)
_BY_SCHEME = {"postgresql": POSTGRES, "mariadb": MySQLDialect("mariadb"), "mysql": MySQLDialect()}


def dialect_for(url: str) -> Dialect:
    """The dialect of a ``jdbc:<scheme>:`` URL; standard SQL for a scheme without its own."""
    scheme = subprotocol(url).lower()
    return _BY_SCHEME.get(scheme, Dialect(scheme or "standard"))
