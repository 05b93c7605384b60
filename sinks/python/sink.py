"""Function sink: calls a user function with each batch's DataFrame and a ``SinkContext``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingest.config.callables import function_name, load_function
from ingest.connector import WriteReport, executor_errors
from ingest.errors import ConfigError, FatalError, call_with_retries, describe, redact
from ingest.sink import OPTIONS_MODEL, SinkContext
from sinks.python.config import PythonSinkConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class PythonSink:
    """Calls ``function(df, context)`` on the driver once per batch (``ingest.sink.SinkContext``
    has the contract), again on ``TransientError`` under the retry settings.

    Guarantee: what the function makes of a replay. A batch is replayed with the same
    ``batch_id`` until the job's state commits it, so a function that writes the batch and its
    ``context.idempotency_key`` in one transaction and skips a key it holds is exactly once;
    any other function is at-least-once.
    """

    plan_write = False
    """The function may run any number of Spark jobs over the frame, or none."""

    def __init__(self, cfg: PythonSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.label = function_name(cfg.function)
        """The function as errors name it."""
        self.function = load_function(cfg.function, f"sinks.{cfg.name}.function")
        self.options = validated_options(self.function, cfg)
        """``cfg.options``, as the function's ``options_model`` validated them if it has one."""

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        context = SinkContext(batch_id, self.cfg.job, self.name, self.options, self.cfg)

        def call() -> Any:
            with executor_errors():  # a TransientError raised in a task is retried too
                return self.function(df, context)

        cfg = self.cfg
        try:
            result = call_with_retries(
                call,
                what=f"sink {self.name}: function {self.label} on batch {batch_id}",
                attempts=cfg.max_retries + 1,
                initial_wait=cfg.backoff_initial_interval,
                max_wait=cfg.backoff_max_interval,
            )
        except Exception as err:
            what = f"sink {self.name}: function {self.label} failed on batch {batch_id}: {describe(err)}"
            raise FatalError(redact(what)) from err
        return self._report(result, df)

    def _report(self, result: Any, df: DataFrame) -> WriteReport:
        if isinstance(result, WriteReport):
            return result
        if result is None:
            return WriteReport(df.count())
        if isinstance(result, int) and not isinstance(result, bool):
            return WriteReport(result)
        raise FatalError(
            f"sink {self.name}: function {self.label} returned a {type(result).__name__}; "
            "expected a WriteReport, an int (rows written) or None"
        )

    def close(self) -> None:
        pass


def validated_options(function: Any, cfg: PythonSinkConfig) -> Any:
    """``cfg.options`` validated by the function's ``options_model`` (its instance), or as they are;
    ``ConfigError`` naming each bad key as ``sinks.<name>.options.<key>``."""
    from pydantic import BaseModel, SecretStr, ValidationError

    model = getattr(function, OPTIONS_MODEL, None)
    if model is None:
        return cfg.options
    try:
        options = model.model_validate(cfg.options)
    except ValidationError as err:
        bad = [
            f"sinks.{cfg.name}.options.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in err.errors(include_input=False, include_url=False)
        ]
        raise ConfigError(redact("config key " + "; ".join(bad))) from None
    if isinstance(options, BaseModel):
        redact.add(v.get_secret_value() for v in dict(options).values() if isinstance(v, SecretStr))
    return options
