"""The docs' option tables are the ones the config models generate: every option, with a meaning,
and sizes and durations as a user writes them."""

from __future__ import annotations

import re
import typing

import pytest

from ingest.config.meanings import MEANINGS
from ingest.config.reference import PAGES, SECTIONS, block, meaning, reference, stale, written
from ingest.config.types import _parse_duration, _parse_size
from tests.support.jobs import ROOT

DOCS = ROOT / "docs"


def test_every_docs_page_holds_its_generated_options():
    assert stale(DOCS) == [], "run: python -m ingest.config.reference --write docs"
    for page, sections in PAGES.items():
        assert block(sections) in (DOCS / page).read_text(encoding="utf-8"), page


def test_every_option_of_every_model_is_on_a_page():
    text = reference()
    for _, model in SECTIONS:
        for name, info in model.model_fields.items():
            if name != "type":
                assert f"| `{info.alias or name}` |" in text, (model.__name__, name)


def test_every_source_and_sink_has_a_page_in_the_site_nav():
    nav = (ROOT / ".ci" / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES:
        assert f": {page}\n" in nav, page


def test_every_option_has_a_meaning():
    missing = [
        f"{model.__name__}.{name}"
        for _, model in SECTIONS
        for name, info in model.model_fields.items()
        if name != "type" and not meaning(model, name, info).strip()
    ]
    assert missing == [], "write a docstring under the field (or an entry in ingest.config.meanings)"


def test_the_fallback_meanings_name_fields_that_exist():
    declared = {
        f"{cls.__name__}.{name}"
        for _, model in SECTIONS
        for cls in model.__mro__
        for name in getattr(cls, "__annotations__", {})
    }
    assert sorted(set(MEANINGS) - declared) == []


def test_a_connectors_option_meanings_live_in_its_own_folder():
    """The fallback meanings are the framework's models' only: a connector's options are described
    by their field docstrings in its folder, so a new connector edits nothing under ``ingest/``."""
    owners = {
        cls.__name__: cls.__module__ for _, model in SECTIONS for cls in model.__mro__ if cls is not object
    }
    elsewhere = sorted(key for key in MEANINGS if not owners[key.split(".")[0]].startswith("ingest."))
    assert elsewhere == [], "move these to a docstring under the connector's field"


def test_sizes_and_durations_print_as_a_user_writes_them():
    text = reference()
    assert not re.search(r"`\d+B`|\d\.0s\b|`\d+\.\d+s`", text)
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| `")}
    assert "| `512MiB` |" in rows["| `max_staged_bytes`"]
    assert "| `7d` |" in rows["| `dedup_window`"]
    assert "| `500ms` |" in rows["| `roll_interval`"]
    assert "| `true` |" in rows["| `print_batches`"]


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        *[("duration", d) for d in (0.5, 604800.0, 35.0, 0.0, 43200.0, 1.5)],
        *[("size", n) for n in (1024, 536870912, 65536, 1000, 1099511627776)],
    ],
)
def test_a_printed_size_or_duration_reads_back_as_the_same_value(kind, value):
    shown = written(kind, value).replace(",", "")
    parse = _parse_duration if kind == "duration" else _parse_size
    assert parse(shown) == value, shown


def test_rocketmq_send_timeout_is_documented_as_the_code_applies_it():
    """The sink gives up each try of a send after ``send_timeout`` and retries ``retryTimes`` times
    (sinks/rocketmq/lanes.py, ``RetryPolicy`` in sink.py): the page must not call it one deadline."""
    from sinks.rocketmq.config import RocketMqSinkConfig

    text = meaning(RocketMqSinkConfig, "send_timeout", RocketMqSinkConfig.model_fields["send_timeout"])
    assert text.startswith("Deadline of each try of a send") and "retries included" not in text
    assert "Deadline of one send, retries included" not in (DOCS / "sinks" / "rocketmq.md").read_text()


def test_the_configuration_page_links_every_sources_and_sinks_page():
    from ingest.config.connector import type_name
    from ingest.config.registry import builtins

    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for kind in ("sources", "sinks"):
        for model in builtins(kind):
            assert f"]({kind}/{type_name(model)}.md)" in page, (kind, type_name(model))


def test_every_type_the_docs_name_is_one_a_job_takes():
    """``type: spark`` for the Spark-writer sink was refused; its type is ``spark_writer``."""
    from ingest.config.connector import type_name
    from ingest.config.job_events import DeliveryTarget
    from ingest.config.registry import connectors
    from tests.support import plugins

    targets = [type_name(m) for m in typing.get_args(typing.get_args(DeliveryTarget)[0])]
    known = {type_name(m) for kind in ("sources", "sinks") for m in connectors(kind)} | set(targets)
    known |= {type_name(m) for models in plugins.configs().values() for m in models}  # the plugin page's
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    named = {(p.relative_to(ROOT).as_posix(), t) for p in pages for t in _TYPE.findall(p.read_text())}
    assert sorted((page, t) for page, t in named if t not in known) == []


_TYPE = re.compile(r"(?<![\w.])type: *([a-z_]+)\b")
"""A ``type: <name>`` a page writes (in YAML or in prose; not a key path such as ``sinks.out.type:``)."""


def test_a_connectors_nested_models_are_tables_on_its_own_page():
    """A connector declares the models its options nest (``docs_tables``): they follow its own
    table on its page, a plugin's in the printed reference too."""
    from typing import ClassVar, Literal

    from ingest.config import registry
    from ingest.config.connector import DocsTables, FlinkSql, SinkDelivery
    from ingest.config.sink_base import SinkBase
    from ingest.config.types import Strict

    class Retry(Strict):
        tries: int = 3
        """How often a write is tried."""

    class NestingSinkConfig(SinkBase):
        implementation: ClassVar[str] = "nowhere:Sink"
        flinksql: ClassVar[FlinkSql | None] = None
        delivery: ClassVar[SinkDelivery] = SinkDelivery("at_least_once")
        docs_tables: ClassVar[DocsTables] = (("nesting retry", Retry),)
        type: Literal["nesting"]
        retry: Retry = Retry()

    assert [title for title, _ in PAGES["sources/datagen.md"]] == [
        "sources[] type: datagen",
        "datagen fields.<column>",
    ]
    registry.register("sinks", NestingSinkConfig)
    try:
        text = reference(plugins=True)
    finally:
        registry.unregister("sinks", NestingSinkConfig)
    page = text[text.index("### sinks[] type: nesting") :]
    assert "### nesting retry" in page
    assert "| `tries` | int | `3` |  | How often a write is tried. |" in page
