"""The job config's model: sources, sinks and the job's sections (trigger, staging, state, metrics…)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

import ingest.config.registry as registry
import ingest.config.sinks as sinks
import ingest.config.sources as sources
from ingest.config.callables import FunctionRef
from ingest.config.job_events import DeliveryConfig, SinkTarget
from ingest.config.paths import check_overlaps
from ingest.config.sinks import SinkConfig
from ingest.config.sources import SourceConfig
from ingest.config.types import NAME, Bytes, Seconds, Strict


class TriggerConfig(Strict):
    """When micro-batches run: every ``interval`` forever, or drain what is there and stop."""

    mode: Literal["processing_time", "available_now"] = "processing_time"
    """processing_time: a micro-batch every ``interval`` until stopped; available_now: drain the
    queues and stop."""
    interval: Seconds = Field(1.0, gt=0, le=86400)
    """How often a micro-batch starts (processing_time)."""
    idle_rounds: int = Field(1, ge=1)
    """available_now: the queues are drained when each receiver's last this many receives were empty."""
    max_rounds: int | None = Field(None, ge=1)
    """available_now: stop after this many micro-batches even if the queues are not drained."""
    progress_interval: Seconds = Field(10.0, ge=0, le=86400)
    """available_now: print a progress line (received, written, left on the queues) this often; 0: never."""
    drain_wait: Seconds = Field(1.0, ge=1, le=30)
    """available_now: the longest a receiver's long poll waits (never longer than its source's own
    wait), so a drain ends about two of these after its last message rather than two of the
    source's waits (SQS 20 s, MNS 10 s). Any long poll of 1 s or more asks every SQS server, so a
    short one gives no false empty reply."""


class StagingConfig(Strict):
    """Where receivers stage JSON-lines files for Spark, how they roll, and the backpressure caps."""

    dir: str = Field(min_length=1)
    """Where receivers stage the JSON-lines files Spark reads (local disk of the driver)."""
    roll_messages: int = Field(5000, ge=1, le=1_000_000)
    """A staged file is rolled after this many messages..."""
    roll_bytes: Bytes = Field(8 * 1024 * 1024, ge=1024, le=1024**3)
    """...or this many bytes, the most a staged file holds (a longer line is a file of its own)..."""
    roll_interval: Seconds = Field(0.5, gt=0, le=3600)
    """...or when its oldest line has waited this long."""
    max_files_per_trigger: int = Field(1000, ge=1, le=1_000_000)
    """Spark's ``maxFilesPerTrigger``: staged files one micro-batch reads at most."""
    batch_messages: int = Field(1, ge=1, le=10_000_000)
    """Under load (messages coming faster than this many per ``batch_wait``), staged files are held
    out of Spark's listing until they hold this many (or a receive finds its queue empty while no
    other receiver got messages), so a micro-batch carries about this many (fewer batches: less of
    Spark's fixed cost per batch). Slower, each file is listed once written. 1 (the default): never
    held, since measured on 2 cores Spark's own batches were already larger (docs/performance.md);
    e.g. 10,000 where short batches dominate. Above ``max_in_flight`` a batch never fills."""
    batch_wait: Seconds = Field(2.0, ge=0.1, le=60)
    """Under load, the longest a message waits in staging for its batch to fill (from when it was
    received). With ``batch_messages`` it sets the rate files are held above (5,000 msgs/s by
    default); keep it well below the sources' visibility timeouts."""
    clean_source: Literal["delete", "archive", "off"] = "delete"
    """Spark's ``cleanSource`` for staged files once their batch committed."""
    max_log_files: int = Field(20_000, ge=0, le=100_000_000)
    """Restart the query between batches (a few seconds' pause) each time it has read this many
    staged files, pruning Spark's file-source log of the deleted ones: Spark rewrites that whole
    log every 10th batch and keeps it in memory, so a job never restarted slows down as it
    grows (``ingest.batch.query.LogRenewal``). 0: never; with ``clean_source: off``, never."""
    archive_dir: str | None = None
    max_in_flight: int = Field(100_000, ge=1, le=10_000_000)
    """Receivers pause while this many messages are received but not yet acked."""
    max_staged_bytes: Bytes = Field(512 * 1024 * 1024, ge=1024, le=1024**4)
    """Receivers pause while this many body bytes are staged but not yet acked."""
    give_up_after: Seconds = Field(300.0, gt=0, le=86400)
    """How long failing staging writes (full disk, permissions) are retried, receivers paused,
    before the job stops with exit 1."""

    @model_validator(mode="after")
    def _archive_needs_dir(self) -> StagingConfig:
        if self.clean_source == "archive" and not self.archive_dir:
            raise ValueError("clean_source archive needs archive_dir")
        return self


class StateConfig(Strict):
    """The Delta table of seen message ids, and the dedup window."""

    path: str = Field(min_length=1)
    """The Delta table of seen keys (the dedup state; one writer: this job)."""
    dedup_key: str = Field("message_id", min_length=1)
    """A staged envelope column, or a SQL expression over them, that identifies a message."""
    dedup_window: Seconds = Field(7 * 86400.0, gt=0, le=3650 * 86400)
    """How long a key is remembered; a redelivery later than this is written again."""
    maintenance_every: int = Field(100, ge=1)
    """Expire ids past the window and compact the table every this many batches."""
    retry_for: Seconds = Field(300.0, ge=0, le=86400)
    """How long a batch's state commit that fails for a transient reason (its S3 store down,
    throttled) is retried before the batch fails; nothing is acked meanwhile."""


class DeadLetterConfig(Strict):
    """Where undecodable messages go under ``on_bad_message: dead_letter``."""

    path: str | None = None
    """A directory: one JSON-lines file per batch (``batch_id=N.jsonl``) with the raw body,
    the envelope and the error."""
    sink: str | None = None
    """The name of one of the job's sinks: it receives the bad messages (columns ``body``,
    ``error``, ``_meta``, then its own transform) and none of the good rows."""

    @model_validator(mode="after")
    def _one_target(self) -> DeadLetterConfig:
        if not self.path and not self.sink:
            raise ValueError("dead_letter needs path or sink")
        return self


class SparkConfig(Strict):
    master: str = ""
    """Empty: spark-submit's ``--master`` when submitted, else ``local[2]``; a value overrides both."""
    conf: dict[str, str] = {}
    """Spark settings (``spark.*``), over mq-ingest's defaults."""
    log_level: str = "WARN"
    """The driver's Spark log level."""
    class_data_sharing: bool = True
    """Start the driver JVM from the class archive ``python -m ingest.cds`` built, if there is one."""


class MetricsConfig(Strict):
    file: str | None = None
    """Prometheus text written after every batch."""
    port: int | None = Field(None, ge=0, le=65535)
    """HTTP port of ``/metrics`` and ``/healthz`` (0: any free port)."""
    host: str = "127.0.0.1"
    """The address the HTTP endpoint listens on; it has no authentication, so ``0.0.0.0`` serves
    anyone who can reach the port."""
    print_batches: bool = True
    """Print a line per micro-batch."""
    queue_depth_interval: Seconds = Field(10.0, ge=0, le=86400)
    """How often each source's queue depth is asked for (the ``queueDepth`` gauge); 0: never."""
    health_max_batch_age: Seconds = Field(600.0, gt=0, le=86400)
    """``/healthz`` answers 503 when messages are in flight and no micro-batch finished for this
    long, or a sink's write has lasted this long (naming the sink)."""
    health_stall_limit: Seconds = Field(60.0, gt=0, le=86400)
    """``/healthz`` answers 503 when intake has stalled this long: a receiver's receives failing
    all along, or receivers paused (staging failing, in-flight caps) with no micro-batch finished
    or running meanwhile; 200 again once it goes on."""


class IntakeConfig(Strict):
    """Where the receivers run: in the driver (``driver``), or in ``mq-ingest intake`` processes
    (``workers``) on any node that reaches the staging location (docs/operations/intake-workers.md)."""

    mode: Literal["driver", "workers"] = "driver"
    """``driver``: receivers, staging, leases and deletes in the job's process. ``workers``: the job
    runs no receivers; it reads what intake workers stage and tells each what has committed."""
    heartbeat: Seconds = Field(5.0, ge=0.5, le=300)
    """Seconds between a worker's renewals of its lease (``<staging>/_workers/<id>/lock.<n>``)."""
    stale_after: Seconds = Field(30.0, ge=2, le=3600)
    """Seconds without a renewal after which the job counts a worker of another host gone and deletes
    its committed messages itself (a gone worker of the job's host: at once)."""
    stop_timeout: Seconds = Field(60.0, ge=0, le=3600)
    """How long a stopping worker waits for the acks of the messages it staged before it exits
    (those left are deleted by the job once committed, or come back after their visibility timeout)."""

    @model_validator(mode="after")
    def _stale_after_beats(self) -> IntakeConfig:
        if self.stale_after < 2 * self.heartbeat:
            raise ValueError("intake.stale_after must be at least two heartbeats")
        return self


class JobConfig(Strict):
    """A whole job: sources → decode → transform → sinks, with exactly-once state."""

    name: str = Field(pattern=NAME, max_length=100)
    """The job's name: the state table's app id and the Spark application name (with a sink's
    name, a table sink's app id)."""
    sources: list[SourceConfig] = Field(min_length=1)
    body_schema: str | None = Field(None, alias="schema")
    """Spark DDL of the decoded body, e.g. ``userId BIGINT, action STRING``."""
    transform: str | None = None
    """Optional ``SELECT … FROM source WHERE …`` over the decoded rows."""
    transform_function: FunctionRef | None = None
    """Optional Python transform, ``package.module:function``: a DataFrame → DataFrame function
    over the decoded rows, run before the SQL ``transform`` (which then reads its output as
    ``source``); in a job built in Python, the function itself."""
    sinks: list[SinkConfig] = Field(min_length=1)
    dead_letter: DeadLetterConfig | None = None
    checkpoint: str = Field(min_length=1)
    """Spark's checkpoint directory; also holds the ack journal and the job lock."""
    state: StateConfig
    staging: StagingConfig
    trigger: TriggerConfig = TriggerConfig()
    spark: SparkConfig = SparkConfig()
    metrics: MetricsConfig = MetricsConfig()
    delivery: DeliveryConfig | None = None
    """Where the job reports its start log, events and resource figures; edits to it in the
    job's file take effect within 10 s while the job runs."""
    lease_margin: float = Field(0.5, gt=0, lt=1)
    """Extend visibility when this fraction of the timeout is left."""
    intake: IntakeConfig = IntakeConfig()
    """Where the receivers run (``mode: driver``, the default, or ``workers``)."""

    @model_validator(mode="before")
    @classmethod
    def _job_schema(cls, data: Any) -> Any:
        """A source that declares ``uses_job_schema`` (datagen) and has no ``schema`` of its own
        takes the job's."""
        if isinstance(data, dict) and isinstance(data.get("sources"), list) and data.get("schema"):
            data = {**data, "sources": [_with_schema(s, data["schema"]) for s in data["sources"]]}
        return data

    @model_validator(mode="after")
    def _cross_checks(self) -> JobConfig:
        for kind, items in (("sources", self.sources), ("sinks", self.sinks)):
            names = [i.name for i in items]
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise ValueError(f"{kind}: duplicate name(s) {sorted(dup)}")
        needs_schema = [s.name for s in self.sources if s.format == "csv"]  # json without one: schemaless
        for s in self.sources:
            if s.uses_job_schema and not getattr(s, "body_schema", None):
                raise ValueError(f"a {s.type} source needs a schema (its own or the job's)")
        if needs_schema and not self.body_schema and not any(s.message_type == "OSS" for s in self.sources):
            raise ValueError(f"schema is required for csv sources {needs_schema}")
        self._resolve_bad_message_policies()
        for i, sink in enumerate(self.sinks):  # what a sink takes of the job (a table's app id)
            self.sinks[i] = sink.for_job(self.name)
        uses_dlq = [s.name for s in self.sources if s.on_bad_message == "dead_letter"]
        uses_dlq += [s.name for s in self.sinks if s.on_bad_record == "dead_letter"]
        if uses_dlq and self.dead_letter is None:
            raise ValueError(f"dead_letter is required by {uses_dlq} (policy dead_letter)")
        sink_names = {s.name for s in self.sinks}
        if self.dead_letter and self.dead_letter.sink and self.dead_letter.sink not in sink_names:
            raise ValueError(f"dead_letter.sink {self.dead_letter.sink!r} is not a sink name")
        # The dead-letter sink may be written more than once a batch (the bad messages, each sink's
        # refused records): one that skips a batch it holds would drop all but the first.
        dlq = self.dead_letter_sink
        if dlq is not None and dlq.delivery.skips_replayed_batch:
            raise ValueError(
                f"dead_letter.sink: a {dlq.type} sink commits once a batch; it takes decoded rows only"
            )
        if not self.data_sinks:
            raise ValueError(
                f"dead_letter.sink {self.dead_letter.sink!r} is the only sink: "  # type: ignore[union-attr]
                "the decoded rows need a sink of their own"
            )
        check_overlaps(self)
        return self

    @property
    def data_sinks(self) -> list[SinkConfig]:
        """The sinks that receive the decoded rows: all but the dead-letter sink."""
        dlq = self.dead_letter.sink if self.dead_letter else None
        return [s for s in self.sinks if s.name != dlq]

    @property
    def dead_letter_sink(self) -> SinkConfig | None:
        """The sink named by ``dead_letter.sink``, if any."""
        dlq = self.dead_letter.sink if self.dead_letter else None
        return next((s for s in self.sinks if s.name == dlq), None)

    def _resolve_bad_message_policies(self) -> None:
        """Give each source that does not name its ``on_bad_message`` the job's default: ``skip``
        with ``json.ignore-parse-errors``, else ``dead_letter`` when there is a dead-letter target,
        else ``fail`` (bad input is never dropped unless asked)."""
        for i, source in enumerate(self.sources):
            if "on_bad_message" in source.model_fields_set:
                continue
            if source.json_ignore_parse_errors:
                policy = "skip"
            else:
                policy = "dead_letter" if self.dead_letter is not None else "fail"
            # The models are frozen: the list holds a copy with the policy filled in.
            self.sources[i] = source.model_copy(update={"on_bad_message": policy})


def _with_schema(source: Any, schema: str) -> Any:
    """``source`` (its raw mapping) with the job's ``schema`` if its connector uses it and it has none."""
    if not isinstance(source, dict) or source.get("schema"):
        return source
    model = registry.connector("sources", source.get("type"))
    return {**source, "schema": schema} if getattr(model, "uses_job_schema", False) else source


def _rebuild() -> None:
    """After ``registry.register``: the models that hold a config union take the new one."""
    sink_union, source_union = sinks.rebuilt(), sources.rebuilt()
    SinkTarget.model_fields["sink"].annotation = sink_union
    JobConfig.model_fields["sinks"].annotation = list[sink_union]  # type: ignore[valid-type]
    JobConfig.model_fields["sources"].annotation = list[source_union]  # type: ignore[valid-type]
    for model in (SinkTarget, DeliveryConfig, JobConfig):
        model.model_rebuild(force=True)


registry.on_change(_rebuild)
