"""bench/standing_instructions.py runs end to end on a tiny set and reports its figures."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memlane.testing import HashEmbedder

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    path = REPO / "bench" / "standing_instructions.py"
    spec = importlib.util.spec_from_file_location("standing_instructions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_planted_instructions_land_where_the_questions_follow(bench: ModuleType) -> None:
    sessions = bench.planted_sessions(5, 2, 3, (40, 60))
    for session, placed in sessions:
        assert len(placed) == 3
        for index, sentence in placed:
            item = session.items[index]
            assert item.role == "user" and sentence in item.content
        for probe in session.probes:  # the probes still point at their answers
            for index, spans in probe.spans.items():
                text = bench.render(session.items[index])
                assert all(span in text for span in spans)


def test_a_tiny_run_reports_every_figure(bench: ModuleType) -> None:
    result = bench.run(HashEmbedder(), 5, 2, 2, (40, 60), [1000, 4000])
    json.dumps(result)
    assert result["pairs"] > 0
    for method in bench.METHODS:
        for budget in (1000, 4000):
            assert 0 <= result["instruction_in_context"][f"{method}@{budget}"] <= 1
    # the planted rules the patterns recognise (11 of 12: "I like …" is not pinned)
    from memlane.text.instructions import statements

    assert sum(bool(statements(s)) for s in bench.PLANTED) == len(bench.PLANTED) - 1
    assert result["instruction_in_context"]["restore@4000"] > 0.6
    assert "| restore |" in bench.markdown(result)
