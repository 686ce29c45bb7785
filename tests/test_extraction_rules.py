"""The rule extractor: its facts on the hand-labelled set (precision must stay 1.0 there,
recall at least what was measured), its entities, and the sentences it must not read as
facts (questions, negations, hypotheticals, reported speech)."""

from __future__ import annotations

import importlib.util
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memlane.extraction import ExtractionBatch, RuleExtractor, Turn
from memlane.extraction.rules import entities, statements

REPO = Path(__file__).resolve().parent.parent
WHEN = datetime(2026, 5, 20, 12, tzinfo=timezone.utc)


def _bench() -> object:
    spec = importlib.util.spec_from_file_location("bench_extraction", REPO / "bench/extraction.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_precision_and_recall_on_the_labelled_set() -> None:
    figures = _bench().precision_recall()  # type: ignore[attr-defined]
    assert figures["examples"] >= 60
    assert figures["false_positives"] == 0, figures["wrong"]
    assert figures["recall"] >= 0.78, figures["wrong"]


@pytest.mark.parametrize(
    "text",
    [
        "Do I live in Paris?",
        "Am I allergic to nuts?",
        "If I moved to Rome, would I need a visa?",
        "I'd love to live in Rome someday.",
        "My friend said she lives in Oslo.",
        '"I live in Paris", he wrote.',
        "I don't live in Paris anymore.",
        "I'm not allergic to anything.",
        "My car is not red.",
        "I lived in London for ten years.",
        "My point is that the build fails.",
        "I like it when tests are fast.",
        "I love the colours in this photo!",
        "I think my name is misspelled.",
    ],
)
def test_not_facts(text: str) -> None:
    assert statements(text) == []


def test_a_move_is_a_new_value_of_the_city() -> None:
    found = statements("Big news: I moved to Porto last month. My name is Ana.")
    assert [(f.key, f.text) for f in found] == [("city", "Lives in Porto"), ("name", "Name is Ana")]


def test_entities() -> None:
    text = (
        "Mail ann@example.org the report at https://example.org/r?id=4. It costs $1,200 or "
        "900 EUR, weighs 3.5 kg; see src/memlane/manager.py and call fact_resolver() on 3 June "
        "2025 with Anna Schmidt."
    )
    found = {(e.type, e.text, e.value) for e in entities(text, WHEN)}
    assert ("email", "ann@example.org", None) in found
    assert ("url", "https://example.org/r?id=4", None) in found
    assert ("money", "$1,200", None) in found and ("money", "900 EUR", None) in found
    assert ("quantity", "3.5 kg", None) in found
    assert ("path", "src/memlane/manager.py", None) in found
    assert ("code", "fact_resolver()", None) in found
    assert ("date", "3 June 2025", "2025-06-03") in found
    assert ("name", "Anna Schmidt", None) in found
    assert not any(e.type == "name" and e.text in ("Mail", "It") for e in entities(text, WHEN))


def test_relative_dates_are_read_at_the_messages_time() -> None:
    (date,) = [e for e in entities("I got back yesterday", WHEN) if e.type == "date"]
    assert date.value == "2026-05-19"


def test_facts_only_from_the_users_turns() -> None:
    turns = (
        Turn("a", "assistant", "I live in the cloud and I'm allergic to bugs.", WHEN, 1),
        Turn("u", "user", "I'm allergic to cats.", WHEN, 2),
    )
    found = RuleExtractor()(ExtractionBatch("u1", "s1", turns))
    assert [(f.text, f.sources) for f in found.facts] == [("Is allergic to cats", ("u",))]
    assert "a" not in found.entities or all(e.type != "name" for e in found.entities["a"])
