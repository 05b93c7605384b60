"""Shared field types for the config models: durations, byte sizes, the strict base model."""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

NAME = r"^[A-Za-z0-9_.-]+$"
"""The pattern of a job's, source's and sink's name."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$")
_DURATION_UNITS = {
    None: 1.0,
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1,
    "b": 1,
    "kb": 1000,
    "kib": 1024,
    "mb": 1000**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "gib": 1024**3,
}


def _parse_duration(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError("expected a finite duration")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if not m:
            raise ValueError("expected a duration such as 500ms, 10s, 5m, 1h or 7d")
        return float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    return value


def _parse_size(value: Any) -> Any:
    if isinstance(value, str):
        m = _SIZE.match(value)
        if not m:
            raise ValueError("expected a size such as 65536, 256KiB or 8MiB")
        unit = m.group(2).lower() if m.group(2) else None
        return int(float(m.group(1)) * _SIZE_UNITS[unit])
    return value


Seconds = Annotated[float, BeforeValidator(_parse_duration)]
"""A duration in seconds; accepts numbers (seconds) or strings like ``500ms``, ``10s``, ``7d``."""

Bytes = Annotated[int, BeforeValidator(_parse_size)]
"""A size in bytes; accepts integers or strings like ``256KiB``, ``8MiB``."""


class Strict(BaseModel):
    """Base of every config model: unknown keys are errors; option aliases are accepted; a dotted
    option group may be given nested (``nested_options``)."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True
    )

    @model_validator(mode="before")
    @classmethod
    def _nested_options(cls, data: Any) -> Any:
        return nested_options(cls, data)


@cache
def _groups(model: type[BaseModel]) -> frozenset[str]:
    """The dotted option groups of a model: each prefix of a dotted option name (``backoff``,
    ``aws``, ``aws.credentials`` of ``aws.credentials.provider``)."""
    names = [n for name, info in model.model_fields.items() for n in (name, info.alias) if n]
    return frozenset(n.rsplit(".", k)[0] for n in names for k in range(1, n.count(".") + 1))


def nested_options(model: type[BaseModel], data: Any) -> Any:
    """Config data with each dotted option group given nested made its dotted keys:
    ``backoff: {initial_interval: 1s}`` is ``backoff.initial_interval: 1s``, as ``staging:``
    nests its options. An option given both ways is refused, naming it.

    Every config model does this before its own validators (``Strict``); a model whose own
    ``mode="before"`` validator reads dotted keys calls it first, as that validator runs earlier.

    >>> from pydantic import Field
    >>> class Retry(Strict):
    ...     initial: float = Field(1.0, alias="backoff.initial_interval")
    >>> nested_options(Retry, {"backoff": {"initial_interval": 2}})
    {'backoff.initial_interval': 2}
    """
    groups = _groups(model)
    if not isinstance(data, dict) or not groups.intersection(k for k in data if isinstance(k, str)):
        return data
    out: dict[Any, Any] = {}

    def put(key: Any, value: Any, nested_in: str | None) -> None:
        if isinstance(key, str) and key in groups and isinstance(value, dict):
            for sub, v in value.items():
                put(f"{key}.{sub}", v, nested_in or key)
        elif key in out:
            raise KeyedError(str(key), f"given twice: as {key} and nested under {nested_in or key}")
        else:
            out[key] = value

    for key, value in sorted(data.items(), key=lambda kv: isinstance(kv[1], dict)):
        put(key, value, None)
    return out


class KeyedError(ValueError):
    """A cross-check's error about one key (``checkpoint``, ``sinks.out.path``): the config error
    names that key rather than the model that checked it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
