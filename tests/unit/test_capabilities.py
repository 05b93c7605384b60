"""Capabilities are declared by each connector class, and the job asks only those that declare them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Literal

import pytest
from pydantic import Field

from ingest.config import parse_config, registry
from ingest.config.connector import FlinkSql, SinkDelivery, type_name
from ingest.config.registry import load_object
from ingest.config.sink_base import SinkBase
from ingest.config.source_base import SourceBase
from ingest.connector import Source
from ingest.errors import ConfigError
from ingest.intake.probe import probe_sources
from ingest.metrics import Metrics
from ingest.ops.depths import QueueDepths
from tests.support.jobconfig import fake_source, files_sink, job_config


def _classes(kind: str) -> list[type]:
    return [load_object(model.implementation, model.__name__) for model in registry.connectors(kind)]


@pytest.mark.parametrize("cls", _classes("sources"), ids=lambda c: c.__name__)
def test_every_source_declares_what_it_can_and_has_the_method_for_it(cls):
    own = vars(cls)
    assert isinstance(own.get("can_probe"), bool), f"{cls.__name__} does not declare can_probe"
    assert isinstance(own.get("reports_lag"), bool), f"{cls.__name__} does not declare reports_lag"
    assert cls.can_probe == (cls.probe is not Source.probe), f"{cls.__name__}: can_probe vs probe()"
    assert cls.reports_lag == (cls.lag is not Source.lag), f"{cls.__name__}: reports_lag vs lag()"


@pytest.mark.parametrize("cls", _classes("sinks"), ids=lambda c: c.__name__)
def test_every_sink_declares_whether_it_plans_its_write(cls):
    assert isinstance(vars(cls).get("plan_write"), bool), f"{cls.__name__} does not declare plan_write"


@pytest.mark.parametrize("model", registry.connectors("sinks"), ids=lambda m: m.__name__)
def test_a_sink_config_declares_checks_target_where_its_sink_checks_its_target(model):
    """The hook is declared (``SinkBase.checks_target``), never found with ``hasattr``: the sink
    class defines ``check_target`` exactly where its config says ``mq-ingest check`` calls it."""
    cls = load_object(model.implementation, model.__name__)
    assert isinstance(model.checks_target, bool), model.__name__  # type: ignore[attr-defined]
    assert model.checks_target == ("check_target" in vars(cls)), model.__name__  # type: ignore[attr-defined]


@pytest.mark.parametrize("model", registry.connectors("sinks"), ids=lambda m: m.__name__)
def test_every_sink_config_declares_its_delivery_guarantee_as_data(model):
    """What ``check``, the docs page's guarantee line and the sink contract suite read."""
    assert isinstance(vars(model).get("delivery"), SinkDelivery), f"{model.__name__} declares no delivery"


def test_a_sink_that_skips_a_replayed_batch_is_idempotent():
    """Reporting 0 rows for a replayed batch is only right where the target holds it already."""
    for model in registry.connectors("sinks"):
        delivery = model.delivery  # type: ignore[attr-defined]
        assert not delivery.skips_replayed_batch or delivery.guarantee != "at_least_once", model.__name__


def test_the_queues_that_probe_and_report_lag_say_so():
    by_name = {c.__name__: c for c in _classes("sources")}
    assert by_name["SqsSource"].can_probe and by_name["MnsSource"].can_probe
    assert not by_name["FakeSource"].can_probe and not by_name["DatagenSource"].can_probe
    assert all(c.reports_lag for c in by_name.values())
    sinks = {c.__name__: c.plan_write for c in _classes("sinks")}
    assert {name for name, plans in sinks.items() if plans} == {"FilesSink", "DeltaSink", "JdbcSink"}
    checking = {m.__name__ for m in registry.connectors("sinks") if m.checks_target}  # type: ignore[attr-defined]
    assert checking == {"JdbcSinkConfig"}


class _Undeclared(Source):
    """Has ``probe`` and ``lag`` but declares neither: the job calls neither."""

    name, queue, max_batch, visibility_timeout = "u", "q", 1, 30.0
    calls: list[str]

    def __init__(self) -> None:
        self.calls = []

    def probe(self) -> None:
        self.calls.append("probe")

    def lag(self) -> int:
        self.calls.append("lag")
        return 5


class _Declared(_Undeclared):
    can_probe = True
    reports_lag = True


def test_only_declared_capabilities_are_used():
    from ingest.ops.job_events.resources import ResourceSampler

    undeclared, declared = _Undeclared(), _Declared()
    probe_sources([undeclared, declared], drain=True)
    metrics = Metrics("t")
    depths = QueueDepths({"u": undeclared, "d": declared}, metrics, 0).get(now=True)
    assert depths == {"u": None, "d": 5}
    assert metrics.gauge("queueDepth", source="d") == 5 and metrics.gauge("queueDepth", source="u") is None
    sampler = ResourceSampler(lambda: None, {"u": undeclared, "d": declared}, "q")
    assert sampler.lag() == {"d": 5}
    assert undeclared.calls == [] and declared.calls == ["probe", "lag", "lag"]


@pytest.mark.parametrize(("sinks", "observed"), [("files", True), ("console", False), ("both", False)])
def test_a_batch_is_written_in_one_job_only_for_a_single_sink_that_plans_its_write(tmp_path, sinks, observed):
    from ingest.batch.handler import BatchHandler
    from ingest.config.registry import build_sink

    console = {"type": "console", "name": "show"}
    chosen = {"files": [files_sink(tmp_path)], "console": [console], "both": [files_sink(tmp_path), console]}
    cfg = parse_config(job_config(fake_source(tmp_path), tmp_path, chosen[sinks]))
    built = [build_sink(s) for s in cfg.data_sinks]
    handler = BatchHandler(cfg, None, None, built, None, Metrics("t"))  # type: ignore[arg-type]
    assert handler._observed is observed


def test_each_sink_is_bound_to_its_own_config_by_name_whatever_the_order(tmp_path):
    """Sinks and configs are never paired by position (a dead-letter sink once shifted them)."""
    from ingest.batch.handler import BatchHandler
    from ingest.config.registry import build_sink

    dlq = {"type": "console", "name": "dlq"}
    a, b = files_sink(tmp_path, name="a", path=str(tmp_path / "a")), {"type": "console", "name": "b"}
    raw = job_config(fake_source(tmp_path), tmp_path, [dlq, a, b], dead_letter={"sink": "dlq"})
    cfg = parse_config(raw)
    built = [build_sink(s) for s in reversed(cfg.data_sinks)]
    handler = BatchHandler(cfg, None, None, built, None, Metrics("t"))  # type: ignore[arg-type]
    assert [(sink.name, sink_cfg.name) for sink, sink_cfg in handler.sinks] == [("b", "b"), ("a", "a")]
    assert all(sink_cfg.type == {"a": "files", "b": "console"}[sink.name] for sink, sink_cfg in handler.sinks)


def test_the_connectors_that_share_a_path_or_take_the_jobs_schema_say_so():
    """The job's config checks ask these declarations, never a connector's type."""
    sinks, sources = registry.connectors("sinks"), registry.connectors("sources")
    assert {type_name(m) for m in sinks if m.shares_path} == {"fake", "delta"}  # type: ignore[attr-defined]
    assert {type_name(m) for m in sinks if m.delivery.skips_replayed_batch} == {"delta", "jdbc"}  # type: ignore[attr-defined]
    assert {type_name(m) for m in sources if m.uses_job_schema} == {"datagen"}  # type: ignore[attr-defined]


class _SharedDirSinkConfig(SinkBase):
    """A sink (registered in code, never built) whose sinks may share one directory."""

    implementation: ClassVar[str] = "nowhere:Sink"
    flinksql: ClassVar[FlinkSql | None] = None
    delivery: ClassVar[SinkDelivery] = SinkDelivery("at_least_once")
    shares_path: ClassVar[bool] = True
    type: Literal["shared_dir"]
    path: str


class _OncePerBatchSinkConfig(SinkBase):
    """A sink (registered in code, never built) that reports a batch it holds as 0 rows."""

    implementation: ClassVar[str] = "nowhere:Sink"
    flinksql: ClassVar[FlinkSql | None] = None
    delivery: ClassVar[SinkDelivery] = SinkDelivery("idempotent_per_batch", skips_replayed_batch=True)
    type: Literal["once_per_batch"]


class _GeneratedSourceConfig(SourceBase):
    """A source (registered in code, never built) that generates rows of the job's schema."""

    implementation: ClassVar[str] = "nowhere:Source"
    flinksql: ClassVar[FlinkSql | None] = None
    uses_job_schema: ClassVar[bool] = True
    type: Literal["generated"]
    body_schema: str | None = Field(None, alias="schema")


class _JobNamedSinkConfig(SinkBase):
    """A sink (registered in code, never built) whose ``table`` defaults to the job's name."""

    implementation: ClassVar[str] = "nowhere:Sink"
    flinksql: ClassVar[FlinkSql | None] = None
    delivery: ClassVar[SinkDelivery] = SinkDelivery("at_least_once")
    type: Literal["job_named"]
    table: str | None = None

    def for_job(self, job: str) -> _JobNamedSinkConfig:
        return self if self.table else self.model_copy(update={"table": f"{job}_{self.name}"})


@pytest.fixture
def declaring() -> Iterator[None]:
    """Connectors no built-in is, each declaring one capability, in the registry for the test."""
    added = [
        ("sinks", _SharedDirSinkConfig),
        ("sinks", _OncePerBatchSinkConfig),
        ("sinks", _JobNamedSinkConfig),
    ]
    added.append(("sources", _GeneratedSourceConfig))
    for kind, cls in added:
        registry.register(kind, cls)  # type: ignore[arg-type]
    yield
    for kind, cls in added:
        registry.unregister(kind, cls)  # type: ignore[arg-type]


def _job(tmp_path, **over) -> dict:
    return job_config(fake_source(tmp_path), tmp_path, [files_sink(tmp_path)]) | over


def test_sinks_that_declare_shares_path_may_share_one_and_no_others(tmp_path, declaring):
    shared = [{"type": "shared_dir", "name": n, "path": str(tmp_path / "dir")} for n in ("a", "b")]
    assert [s.name for s in parse_config(_job(tmp_path, sinks=shared)).sinks] == ["a", "b"]
    files = files_sink(tmp_path, name="c", path=str(tmp_path / "dir"))
    with pytest.raises(ConfigError, match=r"sinks\.c\.path: .* is the same directory as sinks\.a\.path"):
        parse_config(_job(tmp_path, sinks=[*shared, files]))


def test_a_dead_letter_sink_that_skips_a_batch_it_holds_is_refused(tmp_path, declaring):
    sinks = [files_sink(tmp_path), {"type": "once_per_batch", "name": "dlq"}]
    with pytest.raises(ConfigError, match=r"dead_letter\.sink: a once_per_batch sink commits once a batch"):
        parse_config(_job(tmp_path, sinks=sinks, dead_letter={"sink": "dlq"}))


def test_a_source_that_uses_the_jobs_schema_takes_it_and_needs_one(tmp_path, declaring):
    source = {"type": "generated", "name": "gen"}
    cfg = parse_config(_job(tmp_path, sources=[source], schema="id BIGINT"))
    assert cfg.sources[0].body_schema == "id BIGINT"  # type: ignore[union-attr]
    own = parse_config(_job(tmp_path, sources=[{**source, "schema": "n INT"}], schema="id BIGINT"))
    assert own.sources[0].body_schema == "n INT"  # type: ignore[union-attr]
    job = _job(tmp_path, sources=[source])
    job.pop("schema", None)
    with pytest.raises(ConfigError, match=r"a generated source needs a schema \(its own or the job's\)"):
        parse_config(job)


def test_a_sink_takes_what_it_needs_of_the_job_through_its_declared_hook(tmp_path, declaring):
    """``SinkBase.for_job``, which the job config calls on every sink (no hook found by name)."""
    sinks = [{"type": "job_named", "name": "a"}, {"type": "job_named", "name": "b", "table": "mine"}]
    cfg = parse_config(_job(tmp_path, sinks=sinks))
    assert [s.table for s in cfg.sinks] == [f"{cfg.name}_a", "mine"]  # type: ignore[union-attr]
