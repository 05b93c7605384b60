"""The job config: YAML with ``${env:NAME}`` references, validated once into pydantic models.

The models (``JobConfig`` and its sections, the source and sink unions) are importable from
here, and loaded on first use: a connector's config module (``sinks.sqs.config``) builds on the
shared modules of this package, and the registries import those connector modules, so importing
this package must not import the registries (a connector's config imported first would be
imported again half-made).

May import: the ground only (``ingest.errors``, ``ingest.connector``, the connectors' config
modules ``sources.<type>.config`` and ``sinks.<type>.config``, which the registry imports).
Must not be imported by: nothing; it is the ground everything builds on.

``tests/unit/test_layers.py`` checks both.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import SecretStr, ValidationError

from ingest.config.types import NAME, KeyedError, Strict
from ingest.errors import ConfigError, redact, url_passwords

if TYPE_CHECKING:
    from ingest.config.job import (
        DeadLetterConfig,
        IntakeConfig,
        JobConfig,
        MetricsConfig,
        SparkConfig,
        StagingConfig,
        StateConfig,
        TriggerConfig,
    )
    from ingest.config.sinks import SinkConfig
    from ingest.config.sources import SourceConfig

__all__ = [
    "DeadLetterConfig",
    "IntakeConfig",
    "JobConfig",
    "MetricsConfig",
    "SinkConfig",
    "SourceConfig",
    "SparkConfig",
    "StagingConfig",
    "StateConfig",
    "TriggerConfig",
    "load_config",
    "parse_config",
]
_MODELS = {
    "DeadLetterConfig": "ingest.config.job",
    "IntakeConfig": "ingest.config.job",
    "JobConfig": "ingest.config.job",
    "MetricsConfig": "ingest.config.job",
    "SparkConfig": "ingest.config.job",
    "StagingConfig": "ingest.config.job",
    "StateConfig": "ingest.config.job",
    "TriggerConfig": "ingest.config.job",
    "SinkConfig": "ingest.config.sinks",
    "SourceConfig": "ingest.config.sources",
}
"""Where each model this package exports is defined."""


def __getattr__(name: str) -> Any:
    """The models, imported on first use (PEP 562)."""
    if name not in _MODELS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODELS[name]), name)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (it would silently win); a
    merge key (``<<: *base``) is not a key given, and what the mapping gives itself wins over it."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
"""A ``${env:NAME}`` reference in a config string."""

_ENV_OPEN = re.compile(r"\$\{env:")
"""Where a reference starts: each must be a whole ``ENV_REF``."""


def resolve_env(node: Any, path: str = "", strict: bool = True, origin: str | None = None) -> Any:
    """Replace ``${env:NAME}`` in every string; the values are registered as secrets.

    A variable that is not set raises ``ConfigError`` naming the key, or with ``strict``
    false stays as written (``--print-config`` checks a script before its environment exists).
    A reference that names no variable (``${env:}``, ``${env:1X}``, no closing brace) is refused
    either way. Errors begin ``<origin>: <key>:`` (``config key <key>:`` without an origin).
    """
    if isinstance(node, dict):
        return {k: resolve_env(v, f"{path}.{k}" if path else str(k), strict, origin) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_env(v, f"{path}.{i}", strict, origin) for i, v in enumerate(node)]
    if isinstance(node, str) and "${env:" in node:
        where = f"{origin}: {path}" if origin else f"config key {path}"
        for start in _ENV_OPEN.finditer(node):
            if not ENV_REF.match(node, start.start()):
                bad = node[start.start() : node.find("}", start.start()) + 1 or None]
                raise ConfigError(f"{where}: {bad!r} names no environment variable (want ${{env:NAME}})")

        def sub(m: re.Match[str]) -> str:
            value = os.environ.get(m.group(1))
            if value is None:
                if not strict:
                    return m.group(0)
                raise ConfigError(f"{where}: environment variable {m.group(1)} is not set")
            redact.add([value])
            return value

        return ENV_REF.sub(sub, node)
    return node


def _register_secrets(model: Any) -> None:
    """Register every SecretStr value, and passwords inside URLs, in the config for redaction."""
    if isinstance(model, SecretStr):
        redact.add([model.get_secret_value()])
    elif isinstance(model, Strict):
        for name in type(model).model_fields:
            value = getattr(model, name)
            if name.endswith("_url") and isinstance(value, str):
                redact.add(url_passwords(value))
            _register_secrets(value)
    elif isinstance(model, (list, tuple)):
        for item in model:
            _register_secrets(item)


def describe(errors: list[Any], origin: str, data: Any = None) -> str:
    """The ``ConfigError`` text for pydantic's ``errors``: ``<origin>: <key>: <message>`` for the
    first bad key on one line (so ``grep '^error:'`` shows it), then a line for each other.
    Keys name list items by their ``name`` in ``data`` (``sinks.store.path``, not ``sinks.0.files.path``)."""
    lines = []
    for e in errors:
        loc = _named(list(e["loc"]), data)
        msg = e["msg"]
        keyed = (e.get("ctx") or {}).get("error")
        if isinstance(keyed, KeyedError):  # a cross-check naming its own key under the model's place
            loc, msg = [*loc, *keyed.key.split(".")], str(keyed)
        lines.append(f"{'.'.join(loc) or '(top level)'}: {msg}")
    first, *rest = lines or ["(top level): invalid"]
    return "\n".join([f"{origin}: {first}", *(f"  {line}" for line in rest)])


def _named(loc: list[Any], data: Any) -> list[str]:
    """An error's location as a key: a list item by its ``name`` (when unique among its list's), its
    ``type`` tag (pydantic's step into the connector union) left out: ``sinks.store.backoff``."""
    out: list[str] = []
    node, tagged = data, False
    for part in loc:
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            item = node[part]
            name = item.get("name") if isinstance(item, dict) else None
            names = [i.get("name") for i in node if isinstance(i, dict)]
            unique = isinstance(name, str) and re.match(NAME, name) and names.count(name) == 1
            out.append(str(name) if unique else str(part))
            node, tagged = item, False
            continue
        if isinstance(node, dict) and not tagged and part == node.get("type"):
            tagged = True  # the union's tag, pydantic's first step into a connector: left out
            continue
        out.append(str(part))
        node, tagged = (node.get(part) if isinstance(node, dict) else None), False
    return out


def parse_config(data: Any, origin: str = "<dict>") -> JobConfig:
    """Validate a config mapping; raise ``ConfigError`` naming each bad key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: (top level): the top level must be a mapping")
    data = resolve_env(data, origin=origin)
    try:
        cfg = __getattr__("JobConfig").model_validate(data)
    except ValidationError as err:
        raise ConfigError(
            redact(describe(err.errors(include_input=False, include_url=False), origin, data))
        ) from None
    _register_secrets(cfg)
    from ingest.config.registry import warn_broken

    warn_broken()  # the plugins that could not be loaded: the job runs without them
    return cfg


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """A UTF-8 file's text; ``ConfigError`` naming ``what`` and the file if it cannot be read."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read {what} {p}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} {p} is not UTF-8 text (byte {err.start})") from None


MAX_VALUES = 100_000
"""The most values a YAML file may stand for with its aliases expanded. Ten lines of nested
aliases stand for billions (an "alias bomb"); every pass over the data (``${env:…}`` resolution,
validation) would copy each one. A job's file holds hundreds."""


def _expanded(node: Any, sizes: dict[int, int], open_: set[int]) -> int:
    """How many values ``node`` stands for with its aliases expanded, each shared node counted
    once (``sizes``, by id); a node that contains itself raises ``ValueError``."""
    if not isinstance(node, (dict, list)):
        return 1
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in open_:
        raise ValueError("an alias refers to a node that contains it")
    open_.add(id(node))
    items = [v for kv in node.items() for v in kv] if isinstance(node, dict) else node
    sizes[id(node)] = size = 1 + sum(_expanded(v, sizes, open_) for v in items)
    open_.discard(id(node))
    return size


def _too_big(data: Any) -> str | None:
    """The key under which ``data``'s expanded values pass ``MAX_VALUES`` (the deepest one
    holding more than that), ``(top level)``, or None when the data is within the bound."""
    sizes: dict[int, int] = {}
    if _expanded(data, sizes, set()) <= MAX_VALUES:
        return None
    path: list[str] = []
    while True:
        pairs = data.items() if isinstance(data, dict) else enumerate(data)
        big = next(((k, v) for k, v in pairs if sizes.get(id(v), 0) > MAX_VALUES), None)
        if big is None:
            return ".".join(path) or "(top level)"
        path.append(str(big[0]))
        data = big[1]


def read_yaml(path: str | os.PathLike[str], what: str, label: str | None = None) -> Any:
    """A YAML file's data (a key given twice in a mapping is an error); errors name ``label``
    (default: the file) and the position, never the line, which may hold a secret. Data that
    expands through aliases past ``MAX_VALUES`` or nests too deeply is refused."""
    label = label or str(path)
    try:
        data = yaml.load(read_text(path, what), Loader=_UniqueKeyLoader)  # a SafeLoader subclass
        key = _too_big(data)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"invalid YAML in {label}{where}: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"invalid YAML in {label}: {type(err).__name__}") from None
    except RecursionError:
        raise ConfigError(f"invalid YAML in {label}: nested too deeply") from None
    except ValueError as err:
        raise ConfigError(f"invalid YAML in {label}: {err}") from None
    if key is not None:
        raise ConfigError(
            f"{label}: {key}: its YAML aliases expand to more than {MAX_VALUES:,} values (an alias bomb?)"
        )
    return data


def load_config(path: str | os.PathLike[str]) -> JobConfig:
    """Read and validate a YAML job file."""
    return parse_config(read_yaml(path, "config"), str(Path(path)))
