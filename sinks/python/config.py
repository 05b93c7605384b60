"""The function sink's typed config: the function, its free-form options, its retries."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, model_validator

from ingest.config.callables import FunctionRef
from ingest.config.connector import FlinkSql, Guarantee, SinkDelivery
from ingest.config.sink_base import SinkBase
from ingest.config.types import Seconds
from ingest.errors import option_secrets, redact


class PythonSinkConfig(SinkBase):
    """A user function called with each batch's DataFrame and a context (``ingest.sink.SinkContext``):
    exactly once when the function is idempotent per batch id, else at-least-once."""

    implementation: ClassVar[str] = "sinks.python.sink:PythonSink"

    flinksql: ClassVar[FlinkSql | None] = None
    """No Flink SQL connector: a function is named in a job's YAML or passed in Python."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "at_least_once",
        refuses_records=True,
        note="Exactly once when the function is idempotent per batch: a replay carries the same "
        "`batch_id` and idempotency key; `guarantee: idempotent_per_batch` declares it, and "
        "`mq-ingest check` prints it. The function refuses records through `context.refuse`.",
    )

    type: Literal["python"]
    function: FunctionRef
    """The function called with each batch, ``package.module:function``, importable by the job's
    Python (installed, or on ``PYTHONPATH``); in a job built in Python, the function itself."""
    options: dict[str, Any] = Field({}, repr=False)
    """Free-form options for the function (``context.options``): ``${env:NAME}`` is resolved, and
    values of keys naming a password, secret, token or credential are masked in logs and errors.
    A function declaring an ``options_model`` (``sink_options``) has them validated by it."""
    declared_guarantee: Guarantee = Field("at_least_once", alias="guarantee")
    """What the function makes of a replayed batch, as its author declares it (``mq-ingest
    check`` prints it): ``idempotent_per_batch`` for a function that writes a batch with its
    ``context.idempotency_key`` and skips a key it holds, ``idempotent_per_message_id`` for one
    whose target drops a message id it holds."""
    max_retries: int = Field(3, ge=0, le=100)
    """Calls again after the function raised ``TransientError``, before the batch fails."""
    backoff_initial_interval: Seconds = Field(0.5, alias="backoff.initial_interval", gt=0, le=60)
    """The wait before calling again; it doubles (with jitter) up to..."""
    backoff_max_interval: Seconds = Field(10.0, alias="backoff.max_interval", gt=0, le=600)
    """...this long."""

    _job: str = PrivateAttr("")

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee the function's author declares (``guarantee``); at-least-once unless given."""
        return self.declared_guarantee

    @property
    def job(self) -> str:
        """The name of the job the sink belongs to (the job config fills it in)."""
        return self._job

    def for_job(self, job: str) -> PythonSinkConfig:
        """Takes the job's name, which the function's context carries."""
        self._job = job
        return self

    @model_validator(mode="after")
    def _consistent(self) -> PythonSinkConfig:
        if self.backoff_max_interval < self.backoff_initial_interval:
            raise ValueError("backoff.max_interval must not be below backoff.initial_interval")
        redact.add(option_secrets(self.options))
        return self
