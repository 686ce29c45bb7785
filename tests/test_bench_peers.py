"""bench/peers.py --quick on a small synthetic file in LoCoMo's format (the real data is never
here), with the fast deterministic embedder and whichever peers this environment has: the
harness runs every system in its own process and computes real figures. No timing is
asserted: speed is the benchmark's business, not the test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from peer_systems import OURS, SYSTEMS  # noqa: E402

pytestmark = pytest.mark.slow  # a dozen processes, each importing its library

TOPICS = [
    ("adopted a beagle puppy called Rex", "What dog did Ana adopt?"),
    ("started pottery classes on Tuesdays", "Which classes did Ben start?"),
    ("ran a half marathon in Lisbon", "Where did Ana run a half marathon?"),
    ("repaired the old blue bicycle", "What did Ben repair?"),
    ("moved to a flat near the harbour", "Where is Ana's new flat?"),
    ("planted tomatoes and basil in the garden", "What did Ben plant in the garden?"),
]
FILLER = [
    "How was your week?",
    "Busy, but fine.",
    "Work has been hectic lately.",
    "Let's catch up soon.",
    "Sure, talk later!",
]


def sample(tmp_path: Path) -> Path:
    """One conversation, two sessions: each topic's turn among small talk, a question each."""
    conversation: dict[str, object] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    qa = []
    for number, topics in ((1, TOPICS[:3]), (2, TOPICS[3:])):
        turns = []
        for i, (fact, question) in enumerate(topics):
            for filler in FILLER:
                turns.append({"speaker": "Ben", "text": filler})
            speaker = "Ana" if "Ana" in question else "Ben"
            turns.append({"speaker": speaker, "text": f"I {fact} last month."})
            qa.append(
                {
                    "question": question,
                    "answer": fact,
                    "evidence": [f"D{number}:{len(turns)}"],
                    "category": 4 if i % 2 else 1,
                }
            )
        conversation[f"session_{number}"] = [
            {**turn, "dia_id": f"D{number}:{i}"} for i, turn in enumerate(turns, start=1)
        ]
        conversation[f"session_{number}_date_time"] = f"1:56 pm on {number} May, 2023"
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps([{"sample_id": "c1", "conversation": conversation, "qa": qa}]))
    return path


def test_quick_run_measures_ours_and_every_installed_peer(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "peers.py"),
            str(sample(tmp_path)),
            "--quick",
            "--embedder",
            "hash",
            "--scales",
            "1",
            "--workdir",
            str(tmp_path),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    results = result["results"]
    # every system is either measured or named as missing
    assert sorted([*results, *result["missing"]]) == sorted(SYSTEMS)
    assert OURS[0] in results
    peers = [name for name in results if name not in OURS]
    assert peers, "no peer importable here: the comparison compared nothing"
    for name, phases in results.items():
        locomo = phases["locomo"]
        assert "error" not in locomo, (name, locomo)
        assert locomo["questions"] == len(TOPICS)
        assert locomo["events"] == len(TOPICS) * (len(FILLER) + 1)
        # the gold turn shares its words with the question: a system that maps its hits
        # back to turns finds some; a broken mapping scores 0
        assert locomo["any@10"] > 0, name
        assert locomo["context@2k"] > 0, name
        if SYSTEMS[name].scaled:
            assert phases["scale1"]["events"] == locomo["events"], name
            assert phases["scale1"]["searches"] > 0, name
        if SYSTEMS[name].scaled and SYSTEMS[name].persistent:
            assert phases["scale1"]["disk_bytes"] > 0, name
            assert phases["scale1"]["cold_s"] > 0, name
    table = done.stdout
    assert "| best peer | ours / best |" in table
    assert "| any@10 ↑ |" in table and "×" in table  # a ratio was computed
    assert "Fairness notes:" in table
    for name in result["missing"]:
        assert name in table  # a skipped peer is named
