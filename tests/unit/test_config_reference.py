"""The README's option reference is the one the config models generate: every option, default and limit."""

from __future__ import annotations

from ingest.config.reference import SECTIONS, reference
from tests.spark.jobs import ROOT


def test_the_readme_holds_the_generated_option_reference():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert reference() in readme, "run: python -m ingest.config.reference --write README.md"


def test_every_option_of_every_model_is_in_it():
    text = reference()
    for _, model in SECTIONS:
        for name, info in model.model_fields.items():
            if name != "type":
                assert f"| `{info.alias or name}` |" in text, (model.__name__, name)
