"""The connector registry: every source and sink config class, found by entry points, keyed on ``type``.

A connector is a config class (pydantic, a ``type`` literal, ``extra="forbid"``) that names its
implementation (``implementation = "module:Class"``) and declares its Flink SQL name and, for a
sink, its delivery guarantee (``ingest.config.connector``). Packages declare theirs in the
entry-point groups ``mq_ingest.sources`` and ``mq_ingest.sinks`` (the name is the ``type``);
this repository's built-ins are declared the same way, in ``ingest/connectors.ini``, which
``pyproject.toml`` makes the wheel's entry points and which is also read as it is, so a
checkout never installed, a spark-submit code zip or an editable install made before a
connector was added still finds every built-in. ``register`` adds one in code (a notebook, a
test). The config unions (``ingest.config.sources``, ``ingest.config.sinks``) are built from here.
"""

from __future__ import annotations

import configparser
import importlib
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata, resources
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from ingest.config.types import KeyedError
from ingest.errors import ConfigError

if TYPE_CHECKING:
    from ingest.config.sink_base import SinkBase
    from ingest.config.source_base import SourceBase
    from ingest.connector import Sink, Source

log = logging.getLogger(__name__)

Kind = Literal["sources", "sinks"]
GROUPS: dict[str, str] = {"sources": "mq_ingest.sources", "sinks": "mq_ingest.sinks"}
"""The entry-point group of each kind of connector: ``name = "package.module:ConfigClass"``."""
BUILTINS = "connectors.ini"
"""The built-ins' entry points, in the ``ingest`` package (INI, as ``entry_points.txt``)."""
BUILTIN_PACKAGE = "mq-ingest"
IN_CODE = "registered in code"


@dataclass(frozen=True)
class Entry:
    """One declared connector: its ``type``, where its config class is, which package declared it."""

    kind: str
    name: str
    value: str
    package: str

    def __str__(self) -> str:
        return f"entry point {self.name} = {self.value} in {GROUPS[self.kind]} (package {self.package})"


def load_object(spec: str, what: str) -> Any:
    """The object ``"module:attribute"`` names; ``ConfigError`` naming ``what`` if it cannot be had.

    The one loader of every ``module:Class`` the config names (a connector's implementation,
    an entry point's config class).
    """
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ConfigError(f"{what}: {spec!r} is not 'module:attribute'")
    try:
        obj: Any = importlib.import_module(module)
    except Exception as err:  # an ImportError, or whatever the module raised as it ran
        raise ConfigError(f"{what}: cannot import {module}: {type(err).__name__}: {err}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what}: {module} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def build_source(cfg: SourceBase) -> Source:
    """The source a config describes (its ``implementation`` called with it), made in this
    process; its clients are made lazily. The job builds every source so, naming none."""
    return load_object(cfg.implementation, f"sources.{cfg.name} ({cfg.type})")(cfg)


def build_sink(cfg: SinkBase) -> Sink:
    """The sink a config describes (its ``implementation`` called with it); its clients are made
    lazily. The job builds every sink so, naming none."""
    return load_object(cfg.implementation, f"sinks.{cfg.name} ({cfg.type})")(cfg)


def builtin_entries(kind: str) -> list[Entry]:
    """The built-ins' entries, read from ``ingest/connectors.ini`` (in order)."""
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names as written
    parser.read_string(resources.files("ingest").joinpath(BUILTINS).read_text(encoding="utf-8"))
    group = GROUPS[kind]
    return (
        [Entry(kind, n, v.strip(), BUILTIN_PACKAGE) for n, v in parser.items(group)]
        if group in parser
        else []
    )


def installed_entries(kind: str) -> list[Entry]:
    """The entries installed packages declare (the built-ins' own among them, when installed)."""
    out = []
    for ep in metadata.entry_points(group=GROUPS[kind]):
        package = ep.dist.name if ep.dist is not None else "unknown"
        out.append(Entry(kind, ep.name, ep.value.strip(), package))
    return sorted(out, key=lambda e: (e.package, e.name))


def entries(kind: str) -> list[Entry]:
    """The built-ins (from their own list), then every other installed package's.

    mq-ingest's own installed entry points are the same list, or an older one (an editable
    install made before a connector was added or moved): the list in the code wins.
    """
    others = [e for e in installed_entries(kind) if _normal(e.package) != _normal(BUILTIN_PACKAGE)]
    return builtin_entries(kind) + others


def _normal(package: str) -> str:
    return package.lower().replace("_", "-").replace(".", "-")


def check_class(cls: Any, name: str, where: str) -> type[BaseModel]:
    """``cls`` if it is a connector config class whose ``type`` is ``name``, else ``ConfigError``."""
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise ConfigError(f"{where}: {cls!r} is not a pydantic model class")
    field = cls.model_fields.get("type")
    args = typing.get_args(field.annotation) if field is not None else ()
    if field is None or typing.get_origin(field.annotation) is not Literal or len(args) != 1:
        raise ConfigError(f"{where}: {cls.__name__} has no field type: Literal[{name or '<its type>'!r}]")
    if args[0] != name:
        raise ConfigError(f"{where}: {cls.__name__}'s type is {args[0]!r}, its entry point says {name!r}")
    if cls.model_config.get("extra") != "forbid":
        raise ConfigError(f"{where}: {cls.__name__} must refuse unknown options (extra='forbid')")
    if not isinstance(getattr(cls, "implementation", None), str):
        raise ConfigError(f"{where}: {cls.__name__} declares no implementation 'module:Class'")
    return cls


_loaded: dict[str, dict[str, tuple[type[BaseModel], str]]] = {}
"""Each kind's connectors once loaded: type → (config class, the package that declared it)."""
_broken: dict[str, dict[str, str]] = {}
"""Each kind's plugins that could not be loaded: type → why (naming its entry point)."""
_warned: set[str] = set()
_in_code: dict[str, dict[str, type[BaseModel]]] = {"sources": {}, "sinks": {}}
_listeners: list[Callable[[], None]] = []


def _load(kind: str) -> dict[str, tuple[type[BaseModel], str]]:
    """Load every entry point of ``kind``; a plugin's that fails is left out (``broken``), so it
    stops only the jobs that name its type; a built-in's that fails stops every job."""
    if kind not in _loaded:
        found: dict[str, tuple[type[BaseModel], str]] = {}
        broken: dict[str, str] = {}
        for entry in entries(kind):
            try:
                cls = check_class(load_object(entry.value, str(entry)), entry.name, str(entry))
            except ConfigError as err:
                if entry.package == BUILTIN_PACKAGE:
                    raise
                broken.setdefault(entry.name, str(err))
                continue
            if entry.name in found and found[entry.name][0] is not cls:
                raise ConfigError(f"{entry}: type {entry.name!r} is also declared by {found[entry.name][1]}")
            found.setdefault(entry.name, (cls, entry.package))
        _loaded[kind] = found
        _broken[kind] = {name: why for name, why in broken.items() if name not in found}
    return {**_loaded[kind], **{n: (c, IN_CODE) for n, c in _in_code[kind].items()}}


def broken(kind: str) -> dict[str, str]:
    """The types of ``kind`` whose plugin could not be loaded → why (its entry point and error)."""
    _load(kind)
    return {name: why for name, why in _broken[kind].items() if name not in _in_code[kind]}


def warn_broken() -> None:
    """Log a warning, once a process, for each plugin that could not be loaded (a job that
    does not name its type runs without it)."""
    for kind in GROUPS:
        for name, why in broken(kind).items():
            if why not in _warned:
                _warned.add(why)
                log.warning("%s; type %r left out: a job naming it is refused", why, name)


def connectors(kind: str) -> list[type[BaseModel]]:
    """Every connector config class of ``kind`` (``sources`` or ``sinks``): the built-ins in their
    declared order, then the installed plugins', then those registered in code."""
    return [cls for cls, _ in _load(kind).values()]


def connector(kind: str, type_: object) -> type[BaseModel] | None:
    """The config class of ``kind`` whose ``type`` is ``type_``; None if no connector has it."""
    found = _load(kind).get(type_) if isinstance(type_, str) else None
    return found[0] if found is not None else None


def builtins(kind: str) -> list[type[BaseModel]]:
    """The built-in connector config classes of ``kind`` (those with a docs page here)."""
    loaded = _load(kind)
    return [loaded[e.name][0] for e in builtin_entries(kind)]


def package_of(kind: str, type_: str) -> str:
    """The package that declared a connector (``mq-ingest`` for a built-in)."""
    return _load(kind)[type_][1]


def union(kind: str) -> Any:
    """The config union keyed on ``type`` of every connector of ``kind``; an item naming a type
    whose plugin could not be loaded is refused with why (``type: …cannot import …``)."""
    from pydantic import BeforeValidator, Field

    def loadable(data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("type"), str):
            why = broken(kind).get(data["type"])
            if why is not None:
                raise KeyedError("type", f"type {data['type']!r} cannot be loaded: {why}")
        return data

    members = tuple(connectors(kind))
    return typing.Annotated[
        typing.Union[members],  # noqa: UP007
        Field(discriminator="type"),
        BeforeValidator(loadable),
    ]


def register(kind: Kind, cls: type[BaseModel]) -> None:
    """Add a connector in code (a notebook, a test): the config union and every reader see it."""
    name = _type_of(cls)
    check_class(cls, name, f"register({kind!r}, {cls.__name__})")
    if name in _load(kind) and _load(kind)[name][0] is not cls:
        raise ConfigError(f"register({kind!r}, {cls.__name__}): type {name!r} is {package_of(kind, name)}'s")
    _in_code[kind][name] = cls
    _changed()


def unregister(kind: Kind, cls: type[BaseModel]) -> None:
    """Take back a connector ``register`` added."""
    _in_code[kind].pop(_type_of(cls), None)
    _changed()


def refresh() -> None:
    """Read the entry points again (a package installed into a running notebook): the config
    union and every reader see its connectors."""
    _loaded.clear()
    _broken.clear()
    _changed()


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener`` after each ``register`` or ``unregister`` (the models that hold a union rebuild)."""
    _listeners.append(listener)


def _type_of(cls: type[BaseModel]) -> str:
    field = cls.model_fields.get("type")
    args = typing.get_args(field.annotation) if field is not None else ()
    return str(args[0]) if args else ""


def _changed() -> None:
    for listener in _listeners:
        listener()
