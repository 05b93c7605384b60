"""A function sink's and a Python transform's config, without Spark: the function found or named as
missing, options checked by the function's model (``check`` names the key), secrets masked, and the
context a function is given."""

from __future__ import annotations

import pytest

from ingest.batch.transforms import JobTransform
from ingest.config import parse_config
from ingest.config.registry import build_sink
from ingest.errors import ConfigError, redact
from ingest.sink import SinkContext
from tests.support import user_functions
from tests.support.jobconfig import fake_source, job_config


def config(tmp_path, sink: dict, **over) -> dict:
    return job_config(fake_source(tmp_path), tmp_path, [{"type": "python", "name": "store"} | sink], **over)


def test_options_the_function_model_refuses_are_named_each_by_its_key(tmp_path):
    """``check`` builds the sinks as the run does (``ingest.run._check``): this is its error."""
    sink = {"function": "tests.support.user_functions:to_sqlite", "options": {"fail_tims": 2}}
    cfg = parse_config(config(tmp_path, sink))
    with pytest.raises(ConfigError) as refused:
        build_sink(cfg.sinks[0])
    assert str(refused.value) == (
        "config key sinks.store.options.path: Field required; "
        "sinks.store.options.fail_tims: Extra inputs are not permitted"
    )


def test_a_function_or_transform_that_cannot_be_imported_is_named_with_its_key(tmp_path):
    cfg = parse_config(config(tmp_path, {"function": "no_such_pkg.sinks:write"}))
    with pytest.raises(ConfigError, match=r"^config key sinks.store.function: cannot import no_such_pkg"):
        build_sink(cfg.sinks[0])
    cfg = parse_config(config(tmp_path, {"function": "json:dumps"}, transform_function="json:no_such_fn"))
    with pytest.raises(ConfigError, match=r"^config key transform_function: json has no attribute"):
        JobTransform(cfg)
    with pytest.raises(ConfigError, match=r"sinks.store.function: .*package.module:function"):
        parse_config(config(tmp_path, {"function": "not a reference"}))


def test_the_context_carries_the_batch_the_names_the_key_and_the_validated_options(tmp_path, monkeypatch):
    monkeypatch.setenv("STORE_PATH", str(tmp_path / "s.db"))
    options = {"path": "${env:STORE_PATH}", "fail_times": 0}
    cfg = parse_config(config(tmp_path, {"function": user_functions.to_sqlite, "options": options}))
    sink = build_sink(cfg.sinks[0])
    assert sink.function is user_functions.to_sqlite  # passed as an object, as a job built in Python does
    assert sink.label == "tests.support.user_functions:to_sqlite"
    assert sink.options == user_functions.SqliteOptions(path=str(tmp_path / "s.db"))
    context = SinkContext(7, cfg.sinks[0].job, "store", sink.options)
    assert context.idempotency_key == "t-job/store/7"


def test_secret_options_are_masked(tmp_path):
    sink = {
        "function": "json:dumps",
        "options": {"api_token": "tok-3f9a1c", "nested": {"password": "pw-77e1"}},
    }
    parse_config(config(tmp_path, sink))
    writer = {"type": "spark_writer", "name": "w", "format": "jdbc", "options": {"password": "pw-5b2d"}}
    parse_config(job_config(fake_source(tmp_path), tmp_path, [writer]))
    assert redact("tok-3f9a1c pw-77e1 pw-5b2d kept") == "*** *** *** kept"


def test_a_function_declared_idempotent_per_batch_is_printed_so_by_check(tmp_path):
    from ingest.run import guarantees

    sink = {"function": "tests.support.user_functions:to_sqlite", "guarantee": "idempotent_per_batch"}
    assert guarantees(parse_config(config(tmp_path, sink))) == [
        "sink store (python): exactly-once, idempotent per batch: a replayed batch leaves the target "
        "as it was"
    ]
    default = parse_config(config(tmp_path, {"function": "tests.support.user_functions:to_sqlite"}))
    assert guarantees(default) == [
        "sink store (python): at-least-once: a replayed batch is written again (a row may arrive twice)"
    ]
    with pytest.raises(ConfigError, match=r"^<dict>: sinks\.store\.guarantee: Input should be 'at_least"):
        parse_config(config(tmp_path, {"function": "json:dumps", "guarantee": "exactly_once"}))
