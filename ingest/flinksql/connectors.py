"""A script's connector tables (``'connector' = …`` and WITH options) as typed source and sink configs."""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from ingest.config import resolve_env
from ingest.config.sinks import (
    ConsoleSinkConfig,
    FilesSinkConfig,
    MnsSinkConfig,
    RocketMqSinkConfig,
    SqsSinkConfig,
)
from ingest.config.sources import DatagenField, DatagenSourceConfig, MnsSourceConfig, SqsSourceConfig
from ingest.flinksql.script import Script, Table, Where
from sinks.delta.config import DeltaSinkConfig

SOURCES: dict[str, type[BaseModel]] = {
    "mns": MnsSourceConfig,
    "sqs": SqsSourceConfig,
    "datagen": DatagenSourceConfig,
}
SINKS: dict[str, type[BaseModel]] = {
    "mns": MnsSinkConfig,
    "sqs": SqsSinkConfig,
    "mq": RocketMqSinkConfig,
    "print": ConsoleSinkConfig,
    "filesystem": FilesSinkConfig,
    "delta": DeltaSinkConfig,
}
_TYPE = {"mq": "rocketmq", "print": "console", "filesystem": "files"}
_DERIVED = {"type", "name", "body_schema", "fields", "transform"}
"""Fields the script itself gives (the connector, the table's name and columns, the INSERT)."""
_PLACEHOLDER = re.compile(r"\$\{(?:secret_values\.)?([A-Za-z_][A-Za-z0-9_]*)\}")


def env_references(value: str) -> str:
    """``${secret_values.name}`` and ``${name}`` as the config's ``${env:name}``: read from the
    environment when the job starts, and redacted from every log line, error and event."""
    return _PLACEHOLDER.sub(r"${env:\1}", value)


def _option_names(model: type[BaseModel]) -> dict[str, str]:
    names = {}
    for name, info in model.model_fields.items():
        if name not in _DERIVED:
            names[name] = name
            if info.alias:
                names[info.alias] = name
    return names


def _is_list(model: type[BaseModel], field: str) -> bool:
    return typing.get_origin(model.model_fields[field].annotation) is list


class _Table:
    """One table's options on their way into a config dict; refusals name the option's position."""

    def __init__(self, script: Script, table: Table, role: str) -> None:
        self.script, self.table, self.role = script, table, role
        self.options = dict(table.options)
        self.out: dict[str, Any] = {"name": table.name}

    def pop(self, key: str) -> tuple[str, Where] | None:
        return self.options.pop(key, None)

    def refuse(self, message: str, where: Where | None = None) -> Exception:
        from ingest.flinksql.script import ScriptError

        return ScriptError(f"{where or self.table.where}: table {self.table.name}: {message}")


def _sink_format(t: _Table, connector: str) -> None:
    given = t.pop("format")
    if given is None:
        return
    value, where = given
    if connector == "filesystem":
        formats = {"json": "jsonl", "parquet": "parquet"}
        if value not in formats:
            raise t.refuse(f"format {value!r}: the filesystem sink writes json or parquet", where)
        t.out["format"] = formats[value]
    elif connector in ("mns", "sqs"):
        if value not in ("json", "csv", "raw"):
            raise t.refuse(f"format {value!r}: a {connector} sink writes json, csv or raw bodies", where)
        t.out["body_format"] = value
    else:
        raise t.refuse(f"option 'format' is not an option of the {connector} sink", where)


def _datagen_fields(t: _Table) -> None:
    columns = {name for name, _, _ in t.table.columns}
    fields: dict[str, dict[str, str]] = {}
    for key in [k for k in t.options if k.startswith("fields.")]:
        value, where = t.options.pop(key)
        _, _, rest = key.partition(".")
        column, _, option = rest.rpartition(".")
        if column not in columns:
            raise t.refuse(f"option {key!r}: {column!r} is not a column of the table", where)
        if option not in _option_names(DatagenField):
            known = sorted(_option_names(DatagenField))
            raise t.refuse(f"option {key!r}: datagen fields take {known}", where)
        fields.setdefault(column, {})[option] = value
    if fields:
        t.out["fields"] = fields


def _delta_table(t: _Table) -> None:
    """Flink's Delta connector names the location 'table-path' ('path' is taken too); the table's
    columns are the declared ones, so ``_meta`` is left out unless 'include_meta' says otherwise."""
    given = [t.pop(k) for k in ("table-path", "path")]
    paths = [g for g in given if g is not None]
    if len(paths) != 1:
        raise t.refuse("the delta connector needs 'table-path' (or 'path'), once")
    t.out["path"] = paths[0][0]
    if "table-name" in t.options:
        where = t.options["table-name"][1]
        raise t.refuse("option 'table-name' needs a catalog; give the location as 'table-path'", where)
    t.out.setdefault("include_meta", False)


def _connector_specific(t: _Table, connector: str, columns: list[tuple[str, str]]) -> None:
    if t.role == "sink":
        _sink_format(t, connector)
    if connector == "sqs" and t.role == "source" and (tasks := t.pop("tasks.max")):
        t.out["receivers"] = tasks[0]  # Kafka Connect's tasks: our receiver threads
    if connector == "mns" and t.role == "sink":
        t.pop("region")  # the endpoint names the region; the MNS sink needs no more
    if connector == "filesystem":
        path = t.pop("path")
        if path is None:
            raise t.refuse("the filesystem connector needs 'path'")
        t.out["path"] = path[0].removeprefix("file://")
        t.out.setdefault("include_meta", False)
    if connector == "delta":
        _delta_table(t)
    if connector == "mq" and "payload" not in t.options:
        binary = len(columns) == 1 and columns[0][1] == "BINARY"
        t.out["payload"] = "binary" if binary else "csv"
    if connector == "datagen":
        _datagen_fields(t)


def table_config(script: Script, table: Table, role: str, columns: list[tuple[str, str]]) -> dict[str, Any]:
    """The source or sink config of ``table`` (``role``: ``source`` or ``sink``), validated.

    Option values keep their placeholders as ``${env:…}`` references; they are resolved when
    the job's config is validated (and here, to check them, without keeping the values).
    """
    t = _Table(script, table, role)
    given = t.pop("connector")
    if given is None:
        raise t.refuse("the WITH options need 'connector'")
    connector, where = given
    models = SOURCES if role == "source" else SINKS
    if connector not in models:
        other = SINKS if role == "source" else SOURCES
        hint = f" ({connector} is a {'sink' if role == 'source' else 'source'} here)" * (connector in other)
        raise t.refuse(f"connector {connector!r} cannot be a {role}{hint}; {role}s: {sorted(models)}", where)
    model = models[connector]
    t.out["type"] = _TYPE.get(connector, connector)
    _connector_specific(t, connector, columns)
    names = _option_names(model)
    for key, (value, at) in t.options.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise t.refuse(f"option {key!r} is not an option of the {connector} {role}{hint}", at)
        value = env_references(value)
        listed = [v.strip() for v in value.split(",") if v.strip()]
        t.out[key] = listed if _is_list(model, names[key]) else value
    _validate(t, model, columns)
    return t.out


def _validate(t: _Table, model: type[BaseModel], columns: list[tuple[str, str]]) -> None:
    """Check the table's options alone, so an error names the option's line and column.

    An option whose environment variable is not set yet is checked when the job starts.
    """
    values = resolve_env(t.out, strict=False)
    if model is DatagenSourceConfig:  # its schema is the job's, filled in with the whole job
        values["schema"] = ", ".join(f"`{name}` {kind}" for name, kind in columns)
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


def secret_options() -> set[str]:
    """Option names (and field names) of every secret option of the script connectors."""
    out: set[str] = set()
    for model in (*SOURCES.values(), *SINKS.values()):
        for name, info in model.model_fields.items():
            if "SecretStr" in str(info.annotation):
                out |= {name} | ({info.alias} if info.alias else set())
    return out
