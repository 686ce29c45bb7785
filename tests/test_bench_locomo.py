"""bench/locomo.py on a tiny synthetic file in LoCoMo's format (the real data is never here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memlane.testing import HashEmbedder

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def locomo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("locomo", REPO / "bench" / "locomo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["locomo"] = module
    spec.loader.exec_module(module)
    return module


def sample(tmp_path: Path) -> Path:
    conversation = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a dog called Rex."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! What breed is he?"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "A beagle, and very loud."},
        ],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "I started pottery classes."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Pottery sounds relaxing."},
        ],
    }
    qa = [
        {"question": "What breed is Rex?", "answer": "beagle", "evidence": ["D1:3"], "category": 4},
        {"question": "Pets?", "answer": "dog", "evidence": ["D1:1; D1:03"], "category": 1},
        {"question": "Malformed", "answer": "x", "evidence": ["D:2:1", "D"], "category": 2},
        {"question": "Missing turn", "answer": "x", "evidence": ["D9:9"], "category": 4},
        {"question": "No evidence", "answer": "x", "evidence": [], "category": 3},
        {"question": "Adversarial", "answer": "x", "evidence": ["D1:1"], "category": 5},
    ]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([{"sample_id": "c1", "conversation": conversation, "qa": qa}]))
    return path


def test_evidence_clean_up_follows_the_readme(locomo: ModuleType) -> None:
    known = {"D8:6", "D9:17", "D30:5", "D11:26"}
    assert locomo.normalise_evidence(["D8:6; D9:17"], known) == {"D8:6", "D9:17"}
    assert locomo.normalise_evidence(["D30:05"], known) == {"D30:5"}
    assert locomo.normalise_evidence(["D:11:26", "D"], known) == {"D11:26"}
    assert locomo.normalise_evidence(["D1:1"], known) == frozenset()


def test_load_skips_what_the_protocol_skips(locomo: ModuleType, tmp_path: Path) -> None:
    conversations, skipped = locomo.load(sample(tmp_path))
    (conv,) = conversations
    assert [s.number for s in conv.sessions] == [1, 2]
    assert conv.sessions[1].date.isoformat() == "2023-06-09T10:00:00+00:00"
    assert [q.text for q in conv.questions] == ["What breed is Rex?", "Pets?", "Malformed"]
    assert conv.questions[1].gold == {"D1:1", "D1:3"}
    assert skipped == {"adversarial": 1, "no_evidence": 2}
    assert conv.turns[0].content == "Ana: I adopted a dog called Rex."


def test_scores(locomo: ModuleType, tmp_path: Path) -> None:
    conversations, _ = locomo.load(sample(tmp_path))
    questions = conversations[0].questions
    rankings = [["D1:2", "D1:3"], ["D1:1", None, "D1:3"], ["D1:1"]]
    scores = locomo.score(rankings, questions, (1, 5))
    overall = scores["overall"]
    assert overall["n"] == 3
    assert overall["any@1"] == pytest.approx(1 / 3)  # only "Pets?" has gold first
    assert overall["any@5"] == pytest.approx(2 / 3)
    assert overall["all@5"] == pytest.approx(2 / 3)
    assert overall["mrr"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert scores["single-hop"]["n"] == 1


def test_library_and_bm25_runs_map_hits_to_turns(locomo: ModuleType, tmp_path: Path) -> None:
    conversations, _ = locomo.load(sample(tmp_path))
    run = locomo.run_library(conversations, 5, HashEmbedder(), tmp_path)
    assert len(run.rankings) == len(run.latencies_ms) == 3
    assert "D1:3" in run.rankings[0]  # the answer, found through its context ("breed")
    turns = {turn.dia_id for turn in conversations[0].turns}
    assert all(d is None or d in turns for ranking in run.rankings for d in ranking)
    pytest.importorskip("rank_bm25")
    bm25 = locomo.run_bm25(conversations)
    assert bm25.rankings[0][0] == "D1:2"  # "what", "breed", "is": the question's own turn
    assert sorted(bm25.rankings[0]) == sorted(turns)  # every turn ranked, for fusion


def test_restore_quality_harness_runs_both_scenarios_and_baselines(
    locomo: ModuleType, tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location(
        "restore_quality", REPO / "bench" / "restore_quality.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["restore_quality"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    result = module.evaluate(sample(tmp_path), (60, 400), embedder=HashEmbedder())
    scores = result["scores"]
    assert set(scores) == {
        "restore-long",
        "restore-cross",
        "buffer",
        "search-pack",
        "search-pack-dated",
    }
    assert scores["restore-long"]["overall"]["n"] == 3
    assert not result["violations"]  # every text within its budget, recounted with o200k
    # the whole tiny conversation fits 400 tokens: every method carries the evidence
    assert all(scores[m]["overall"]["400"] == 1.0 for m in scores)
    # 60 tokens: not everything fits, and restore still carries some evidence
    assert 0 < scores["restore-long"]["overall"]["60"] < 1
    # dated evidence: the bare baselines carry no dates, restore and the dated pack do
    dated = result["dated_scores"]
    assert dated["buffer"]["overall"]["400"] == dated["search-pack"]["overall"]["400"] == 0
    assert dated["search-pack-dated"]["overall"]["400"] == 1.0
    assert dated["restore-long"]["overall"]["400"] == dated["restore-cross"]["overall"]["400"] == 1
    # every gold turn: one question has two ("Pets?"); the whole conversation fits 400
    complete = result["complete_scores"]
    assert complete["restore-long"]["overall"]["n"] == 1
    assert all(complete[m]["overall"]["400"] == 1.0 for m in complete)
    assert "restore-long p50 / p95" in module.markdown(result)
    assert "Every gold turn in the context" in module.markdown(result)
