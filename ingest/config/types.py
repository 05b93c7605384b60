"""Shared field types for the config models: durations, byte sizes, the strict base model."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

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
    """Base of every config model: unknown keys are errors; option aliases are accepted."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True
    )


class KeyedError(ValueError):
    """A cross-check's error about one key (``checkpoint``, ``sinks.out.path``): the config error
    names that key rather than the model that checked it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
