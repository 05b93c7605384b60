"""A parsed Flink SQL script as the job config the YAML gives: one source, a transform per sink."""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp

from ingest.flinksql.connectors import by_connector, keeps_meta, table_config
from ingest.flinksql.script import Insert, Script, ScriptError, Table
from ingest.flinksql.types import UnsupportedType, spark_schema, spark_type

SETTINGS_KEYS = {"name", "checkpoint", "state", "staging", "trigger", "spark", "metrics"}
SETTINGS_KEYS |= {"delivery", "dead_letter", "lease_margin", "intake", "work_dir"}
"""What a companion settings YAML may hold: everything about the job that a script cannot say."""

_REFUSED: list[tuple[type[exp.Expr], str]] = [
    (exp.Join, "joins"),
    (exp.Group, "GROUP BY (an aggregation over a stream)"),
    (exp.Having, "HAVING"),
    (exp.Window, "window functions (OVER)"),
    (exp.AggFunc, "aggregate functions"),
    (exp.Order, "ORDER BY"),
    (exp.Limit, "LIMIT"),
    (exp.Subquery, "subqueries"),
    (exp.With, "WITH (common table expressions)"),
    (exp.Union, "UNION"),
    (exp.Lateral, "LATERAL"),
    (exp.Unnest, "UNNEST"),
]


def _columns(script: Script, table: Table) -> list[tuple[str, str]]:
    out = []
    for name, kind, where in table.columns:
        try:
            out.append((name, spark_type(kind)))
        except UnsupportedType as err:
            what = f"table {table.name}, column {name}: type {err} is not supported"
            raise ScriptError(f"{where}: {what}") from None
    return out


def check_table(script: Script, table: Table) -> None:
    """Validate a table no INSERT uses, in the role its connector has (as a source where it has both).

    Raises:
        ScriptError: as ``table_config`` does, naming the option's line and column.
    """
    given = table.options.get("connector")
    sinks, sources = by_connector("sinks"), by_connector("sources")
    role = "sink" if given is not None and given[0] in sinks and given[0] not in sources else "source"
    table_config(script, table, role, _columns(script, table))


def _source_of(script: Script, ins: Insert) -> Table:
    for node_type, what in _REFUSED:
        node = ins.select.find(node_type)
        if node is not None:
            raise script.refuse(node, f"INSERT INTO {ins.target}: {what} are not supported", ins.where)
    if ins.select.args.get("distinct"):
        what = f"INSERT INTO {ins.target}: SELECT DISTINCT is not supported"
        raise script.refuse(ins.select, what, ins.where)
    tables = list(ins.select.find_all(exp.Table))
    if len(tables) != 1:
        what = f"INSERT INTO {ins.target}: the SELECT must read one table"
        raise script.refuse(ins.select, what, ins.where)
    name = tables[0].name
    if name not in script.tables:
        raise script.refuse(tables[0], f"table {name} is not created in the script", ins.where)
    return script.tables[name]


def _transform(
    ins: Insert,
    source: Table,
    source_cols: list[tuple[str, str]],
    sink_cols: list[tuple[str, str]],
    keep_meta: bool,
) -> str:
    """The INSERT's SELECT over the view ``source``, its values cast to the sink's columns by position."""
    select = ins.select.copy()
    table = select.find(exp.Table)
    assert table is not None  # _source_of found exactly one
    alias = table.alias or source.name
    as_alias = exp.TableAlias(this=exp.to_identifier(alias))
    table.replace(exp.Table(this=exp.to_identifier("source"), alias=as_alias))
    items: list[exp.Expression] = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            items += [exp.column(n, quoted=True) for n, _ in source_cols]
        else:
            items.append(item)
    types = dict(sink_cols)
    targets = ins.columns or [n for n, _ in sink_cols]
    unknown = [c for c in targets if c not in types]
    if unknown:
        raise ScriptError(f"{ins.where}: INSERT INTO {ins.target}: {unknown} are not columns of {ins.target}")
    if len(items) != len(targets):
        raise ScriptError(
            f"{ins.where}: INSERT INTO {ins.target}: the SELECT gives {len(items)} value(s) "
            f"for {len(targets)} column(s) {targets}"
        )
    given = dict(zip(targets, items, strict=True))
    out = []
    for name, kind in sink_cols:
        value = given[name].unalias() if name in given else exp.Null()
        cast = exp.cast(value, exp.DataType.build(kind, dialect="spark"))
        out.append(exp.alias_(cast, exp.to_identifier(name, quoted=True)))
    if keep_meta:
        out.append(exp.column("_meta"))
    return select.select(*out, append=False).sql(dialect="spark", identify=True)


def _job_name(path: str) -> str:
    stem = re.sub(r"\.sql$", "", path.replace("\\", "/").rsplit("/", 1)[-1])
    return re.sub(r"[^A-Za-z0-9_.-]", "-", stem) or "flink-sql"


def translate(script: Script, settings: dict[str, Any]) -> dict[str, Any]:
    """The job config (a mapping, as a YAML file would give it) that runs ``script``.

    Args:
        script: the parsed script.
        settings: the job settings a script cannot hold (``SETTINGS_KEYS``); ``work_dir``
            (default ``data/<name>``) places the checkpoint, state and staging directories
            not given.
    """
    unknown = set(settings) - SETTINGS_KEYS
    if unknown:
        allowed = sorted(SETTINGS_KEYS)
        raise ScriptError(f"job settings: {sorted(unknown)} cannot be set there (allowed: {allowed})")
    first = script.inserts[0]
    source = _source_of(script, first)
    for ins in script.inserts[1:]:
        other = _source_of(script, ins)
        if other is not source:
            what = f"INSERT INTO {ins.target} reads {other.name}, but the INSERT INTO {first.target}"
            what += f" on line {first.where.line} reads {source.name}; a job reads one source table"
            raise script.refuse(ins.select.find(exp.Table), what, ins.where)
    source_cols = _columns(script, source)
    sinks: list[dict[str, Any]] = []
    for ins in script.inserts:
        if ins.target not in script.tables:
            raise ScriptError(f"{ins.where}: table {ins.target} is not created in the script")
        if ins.target == source.name:
            raise ScriptError(f"{ins.where}: INSERT INTO {ins.target} reads and writes the same table")
        if any(s["name"] == ins.target for s in sinks):
            raise ScriptError(f"{ins.where}: a second INSERT INTO {ins.target}; write each sink once")
        table = script.tables[ins.target]
        sink_cols = _columns(script, table)
        sink = table_config(script, table, "sink", sink_cols)
        sink["transform"] = _transform(ins, source, source_cols, sink_cols, keeps_meta(sink))
        sinks.append(sink)
    settings = dict(settings)
    name = settings.pop("name", _job_name(script.path))
    work = str(settings.pop("work_dir", f"data/{name}")).rstrip("/")
    job: dict[str, Any] = {
        "name": name,
        "sources": [table_config(script, source, "source", source_cols)],
        "schema": spark_schema(source_cols),
        "sinks": sinks,
        "checkpoint": f"{work}/checkpoint",
        "state": {"path": f"{work}/state"},
        "staging": {"dir": f"{work}/staging"},
    }
    for key, value in settings.items():
        merge = isinstance(job.get(key), dict) and isinstance(value, dict)
        job[key] = {**job[key], **value} if merge else value
    return job
