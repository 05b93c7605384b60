"""A script's connector tables (``'connector' = …`` and WITH options) as typed source and sink configs."""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

import ingest.config.registry as registry
from ingest.config import resolve_env
from ingest.config.connector import FlinkSql, option_names, type_name
from ingest.flinksql.script import Script, Table, Where


def by_connector(kind: str) -> dict[str, tuple[type[BaseModel], FlinkSql]]:
    """Each registered connector's Flink SQL name → its config class and declaration (``flinksql``);
    a plugin that declares one is a Flink SQL connector too."""
    models = registry.connectors(kind)
    return {m.flinksql.connector: (m, m.flinksql) for m in models if m.flinksql}  # type: ignore[attr-defined]


_DERIVED = frozenset({"type", "name", "body_schema", "fields", "transform"})
"""Fields the script itself gives (the connector, the table's name and columns, the INSERT)."""
_PLACEHOLDER = re.compile(r"\$\{(?:secret_values\.)?([A-Za-z_][A-Za-z0-9_]*)\}")


def env_references(value: str) -> str:
    """``${secret_values.name}`` and ``${name}`` as the config's ``${env:name}``: read from the
    environment when the job starts, and redacted from every log line, error and event."""
    return _PLACEHOLDER.sub(r"${env:\1}", value)


def _is_list(model: type[BaseModel], field: str) -> bool:
    return typing.get_origin(model.model_fields[field].annotation) is list


class _Table:
    """One table's options on their way into a config dict; refusals name the option's position."""

    def __init__(self, script: Script, table: Table, role: str, columns: list[tuple[str, str]]) -> None:
        self.script, self.table, self.role, self.columns = script, table, role, columns
        self.options = dict(table.options)
        self.out: dict[str, Any] = {"name": table.name}

    def pop(self, key: str) -> tuple[str, Where] | None:
        return self.options.pop(key, None)

    def refuse(self, message: str, where: Where | None = None) -> Exception:
        from ingest.flinksql.script import ScriptError

        return ScriptError(f"{where or self.table.where}: table {self.table.name}: {message}")


def _sink_format(t: _Table, connector: str, flink: FlinkSql) -> None:
    given = t.pop("format")
    if given is None:
        return
    value, where = given
    if flink.formats is None:
        raise t.refuse(f"option 'format' is not an option of the {connector} sink", where)
    if value not in flink.formats:
        raise t.refuse(f"format {value!r}: {flink.formats_refused}", where)
    t.out[flink.format_key] = flink.formats[value]


def _connector_specific(t: _Table, connector: str, flink: FlinkSql) -> None:
    """What the connector's declaration adds to its config's own options (``FlinkSql``)."""
    if t.role == "sink":
        _sink_format(t, connector, flink)
    for alias, key in flink.aliases.items():
        if given := t.pop(alias):
            t.out[key] = given[0]
    for key in flink.ignored:
        t.pop(key)
    if flink.read is not None:
        flink.read(t)
    for key, value in flink.defaults.items():
        t.out.setdefault(key, value)


def table_config(script: Script, table: Table, role: str, columns: list[tuple[str, str]]) -> dict[str, Any]:
    """The source or sink config of ``table`` (``role``: ``source`` or ``sink``), validated.

    Option values keep their placeholders as ``${env:…}`` references; they are resolved when
    the job's config is validated (and here, to check them, without keeping the values).
    """
    t = _Table(script, table, role, columns)
    given = t.pop("connector")
    if given is None:
        raise t.refuse("the WITH options need 'connector'")
    connector, where = given
    models = by_connector(f"{role}s")
    if connector not in models:
        other = by_connector("sinks" if role == "source" else "sources")
        hint = f" ({connector} is a {'sink' if role == 'source' else 'source'} here)" * (connector in other)
        raise t.refuse(f"connector {connector!r} cannot be a {role}{hint}; {role}s: {sorted(models)}", where)
    model, flink = models[connector]
    t.out["type"] = type_name(model)
    _connector_specific(t, connector, flink)
    names = option_names(model, _DERIVED)
    for key, (value, at) in t.options.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise t.refuse(f"option {key!r} is not an option of the {connector} {role}{hint}", at)
        value = env_references(value)
        listed = [v.strip() for v in value.split(",") if v.strip()]
        t.out[key] = listed if _is_list(model, names[key]) else value
    _validate(t, model, flink, columns)
    return t.out


def _validate(t: _Table, model: type[BaseModel], flink: FlinkSql, columns: list[tuple[str, str]]) -> None:
    """Check the table's options alone, so an error names the option's line and column.

    An option whose environment variable is not set yet is checked when the job starts.
    """
    values = resolve_env(t.out, strict=False)
    if flink.schema_from_columns:  # its schema is the job's, filled in with the whole job
        values["schema"] = ", ".join(f"`{name}` {sql_type}" for name, sql_type in columns)
    pending = any("${env:" in str(v) for v in values.values())
    try:
        model.model_validate(values)
    except ValidationError as err:
        for e in err.errors(include_input=False, include_url=False):
            key = str(e["loc"][0]) if e["loc"] else ""
            if "${env:" in str(values.get(key, "")) or (not key and pending):
                continue
            where = t.table.options.get(key, (None, None))[1]
            raise t.refuse(f"option {key!r}: {e['msg']}" if key else e["msg"], where) from None


def keeps_meta(sink: dict[str, Any]) -> bool:
    """Whether a sink's INSERT carries ``_meta`` besides its declared columns (``FlinkSql.keep_meta``)."""
    sinks = by_connector("sinks").values()
    return next(flink.keep_meta for model, flink in sinks if type_name(model) == sink["type"])


def secret_options() -> set[str]:
    """Option names (and field names) of every secret option of the script connectors."""
    out: set[str] = set()
    for model, _ in (*by_connector("sources").values(), *by_connector("sinks").values()):
        for name, info in model.model_fields.items():
            if "SecretStr" in str(info.annotation):
                out |= {name} | ({info.alias} if info.alias else set())
    return out
