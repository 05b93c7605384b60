"""User code a job names: ``package.module:function`` in a config, or the function itself in Python."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator

from ingest.config.registry import load_object
from ingest.errors import ConfigError

_REF = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


def _checked(value: Any) -> Any:
    if isinstance(value, str) and not re.match(_REF, value):
        raise ValueError("expected package.module:function")
    if not isinstance(value, str) and not callable(value):
        raise ValueError("expected package.module:function, or a function when built in Python")
    return value


FunctionRef = Annotated[str | Callable[..., Any], BeforeValidator(_checked)]
"""A function: ``"package.module:function"`` (imported when the job is built, so the job's Python
must find it), or, in a job built in Python, the function object itself."""


def function_name(ref: str | Callable[..., Any]) -> str:
    """How errors name the function: as written, or ``module:qualname`` for an object."""
    if isinstance(ref, str):
        return ref
    module, name = getattr(ref, "__module__", "?"), getattr(ref, "__qualname__", type(ref).__name__)
    return f"{module}:{name}"


def load_function(ref: str | Callable[..., Any], key: str) -> Callable[..., Any]:
    """The function ``ref`` names; ``ConfigError`` naming ``key`` if it cannot be imported or called."""
    if not isinstance(ref, str):
        return ref
    found = load_object(ref, f"config key {key}")
    if not callable(found):
        raise ConfigError(f"config key {key}: {ref} is a {type(found).__name__}, not a function")
    return found
