"""Flink SQL scripts (``CREATE TABLE … WITH``, ``INSERT INTO … SELECT``) as mq-ingest jobs.

``python -m ingest.run --sql job.sql`` reads the script into the same job config a YAML file
gives, then runs it on the one code path. Job settings a script cannot hold (checkpoint,
state, staging, trigger, Spark) come from ``--settings FILE``, else ``<script>.settings.yaml``
beside the script if there is one, else defaults under ``data/<script name>``.

May import: the ground, ``checkpoints``, every subpackage of ``ingest``; it names no connector
(each config class declares its Flink SQL name).
Must not be imported by: the ground, ``sources``, ``sinks``, ``checkpoints``, ``ingest.runtime``,
``ingest.intake``, ``ingest.decode``, ``ingest.batch``, ``ingest.ops``.

``tests/unit/test_layers.py`` checks both.

>>> cfg = load_sql_text(
...     "CREATE TABLE gen (n BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');"
...     "CREATE TABLE out (n BIGINT) WITH ('connector' = 'print');"
...     "INSERT INTO out SELECT n FROM gen WHERE n > 2;", "demo.sql", {})
>>> cfg.config["sinks"][0]["transform"]
'SELECT CAST(`n` AS BIGINT) AS `n` FROM `source` AS `gen` WHERE `n` > 2'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ingest.config import JobConfig, describe, read_text, read_yaml, resolve_env
from ingest.errors import ConfigError, NothingToRun, redact
from ingest.flinksql.connectors import secret_options
from ingest.flinksql.script import ScriptError, Where, parse_script
from ingest.flinksql.translate import check_table, translate

__all__ = ["NothingToRun", "ScriptError", "SqlJob", "load_sql", "load_sql_text", "settings_for"]


@dataclass
class SqlJob:
    """A script read into a job config mapping (validate it with ``ingest.config.parse_config``)."""

    config: dict[str, Any]
    inserts: dict[str, Where]
    """Where each sink's INSERT is in the script."""

    def locate(self, message: str) -> str:
        """An error about a sink's transform, placed at its INSERT in the script."""
        for sink, where in self.inserts.items():
            key = f"config key sinks.{sink}.transform: "
            if key in message:
                return message.replace(key, f"{where}: INSERT INTO {sink}: ")
        return message

    def to_yaml(self) -> str:
        """The job as YAML; secrets written in the script (not ``${…}`` references) are masked."""
        secret = secret_options()

        def mask(node: Any) -> Any:
            if isinstance(node, dict):
                hidden = {k for k, v in node.items() if k in secret and not str(v).startswith("${env:")}
                return {k: "******" if k in hidden else mask(v) for k, v in node.items()}
            if isinstance(node, list):
                return [mask(v) for v in node]
            return node

        return yaml.safe_dump(mask(self.config), sort_keys=False, allow_unicode=True, width=110)

    def check(self, origin: str) -> None:
        """Validate the whole job as ``parse_config`` does, before any environment is needed:
        a value whose ``${env:NAME}`` is not set yet is checked when the job starts.

        Raises:
            ConfigError: naming each bad key, as ``parse_config`` does.
        """
        data = resolve_env(self.config, strict=False, origin=origin)
        try:
            JobConfig.model_validate(data)
        except ValidationError as err:
            errors = [e for e in err.errors(include_url=False) if not _pending(e.get("input"))]
            if errors:
                raise ConfigError(redact(describe(errors, origin, data))) from None


def _pending(value: Any) -> bool:
    """Whether an error's input (a value, or a mapping's own values) holds a reference not set yet."""
    values = value.values() if isinstance(value, dict) else [value]
    return any(isinstance(v, str) and "${env:" in v for v in values)


def load_sql_text(text: str, path: str, settings: dict[str, Any]) -> SqlJob:
    """The job config of a script's text.

    Raises:
        NothingToRun: the script only creates tables (each one checked, as Flink's DDL scripts are).
    """
    script = parse_script(text, path)
    if not script.inserts:
        for table in script.tables.values():
            check_table(script, table)
        names = ", ".join(script.tables)
        raise NothingToRun(
            f"{path}: {len(script.tables)} table(s) valid ({names}); the script has no INSERT INTO … "
            "SELECT, so there is nothing to run"
        )
    return SqlJob(translate(script, settings), {i.target: i.where for i in script.inserts})


def settings_for(script: str | Path, given: str | Path | None) -> dict[str, Any]:
    """The job settings: the file given, else ``<script>.settings.yaml`` if it exists, else none."""
    path = Path(given) if given else Path(script).with_suffix(".settings.yaml")
    if not given and not path.exists():
        return {}
    data = read_yaml(path, "job settings", f"job settings {path}") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"job settings {path}: the top level must be a mapping")
    return data


def load_sql(path: str | Path, settings: str | Path | None = None) -> SqlJob:
    """Read a script file and its settings into a job config mapping."""
    p = Path(path)
    return load_sql_text(read_text(p, "SQL script"), str(p), settings_for(p, settings))
