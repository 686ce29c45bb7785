"""bench/long_events.py in a tiny configuration with the deterministic embedder (the LoCoMo
file is never here: a small one in its format stands in)."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memlane.testing import HashEmbedder

REPO = Path(__file__).resolve().parent.parent
BUDGETS = (2000, 8000)


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("long_events", REPO / "bench" / "long_events.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["long_events"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data(bench: ModuleType) -> ModuleType:
    return sys.modules["long_events_data"]


def locomo_file(tmp_path: Path) -> Path:
    lines = [
        ("Ana", "I adopted a dog called Rex last spring, a beagle from the shelter downtown."),
        ("Ben", "Lovely! I have been thinking about pottery classes on Thursday evenings."),
        ("Ana", "Rex barks at the mail carrier every morning, which the neighbours dislike."),
        ("Ben", "My pottery teacher says my bowls are finally getting symmetrical."),
        ("Ana", "We took Rex hiking in the mountains near Denver over the long weekend."),
        ("Ben", "I sold three mugs at the craft fair, my first sale ever."),
    ]
    session = [
        {"speaker": who, "dia_id": f"D1:{i}", "text": text}
        for i, (who, text) in enumerate(lines, start=1)
    ]
    conversation = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": session,
    }
    qa = [
        {"question": "Where did Ana hike with Rex?", "evidence": ["D1:5"], "category": 4},
        {"question": "What did Ben sell at the fair?", "evidence": ["D1:6"], "category": 4},
        {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
    ]
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps([{"sample_id": "c1", "conversation": conversation, "qa": qa}]))
    return path


def test_the_loose_rule_takes_an_opening_or_a_window_around_the_span(bench: ModuleType) -> None:
    text = "".join(f"line {i:03d} of a long tool output. " for i in range(100))
    span = "line 050 of a long tool output."
    at = text.index(span)
    assert bench.strict("x " + span + " y", [span])
    assert not bench.loose("x " + span + " y", text, [span])  # the span alone is no window
    assert bench.loose("x " + text[at - 100 : at + 150] + " y", text, [span])
    assert not bench.loose("x " + text[at - 50 : at + 100] + " y", text, [span])
    assert bench.loose("x " + text[:200] + " y", text, [span])  # the opening
    assert not bench.strict(text[:200], [span])


def test_pack_keeps_whole_texts_within_the_budget(bench: ModuleType) -> None:
    count = bench.o200k()
    texts = ["short one", "word " * 500, "another short one"]
    costs = [count(t) for t in texts]
    assert bench.pack(texts, costs, 100, count, skip=True) == "short one\n\nanother short one"
    assert bench.pack(texts, costs, 100, count, skip=False) == "short one"


def test_generated_runs_are_deterministic_and_spans_unique(data: ModuleType) -> None:
    first = data.generated_runs(7, sessions=2, events=(40, 60))
    second = data.generated_runs(7, sessions=2, events=(40, 60))
    assert [data.render(i) for s in first for i in s.items] == [
        data.render(i) for s in second for i in s.items
    ]
    assert [p.text for s in first for p in s.probes] == [p.text for s in second for p in s.probes]
    probes = [p for s in first for p in s.probes]
    assert len(probes) >= 6
    for session in first:
        texts = [data.render(item) for item in session.items]
        for probe in session.probes:
            ((where, (span,)),) = probe.spans.items()
            assert [i for i, t in enumerate(texts) if span in t] == [where]
            assert texts[where].find(span) == probe.depth


def test_joined_messages_hold_the_gold_turns(
    bench: ModuleType, data: ModuleType, tmp_path: Path
) -> None:
    (conv,), _ = bench.load(locomo_file(tmp_path))
    session = data.joined_locomo(conv, bench.o200k(), random.Random(1), (20, 40))
    assert len(session.items) >= 3
    assert [item.role for item in session.items[:2]] == ["user", "assistant"]
    assert "\n".join(data.render(item) for item in session.items) == "\n".join(
        turn.content for turn in conv.turns
    )
    hike = session.probes[0]
    ((where, (line,)),) = hike.spans.items()
    assert line == "Ana: We took Rex hiking in the mountains near Denver over the long weekend."
    assert line in session.items[where].content


def test_mixed_blocks_keep_single_turns_beside_joined_messages(
    bench: ModuleType, data: ModuleType, tmp_path: Path
) -> None:
    """With a share of short blocks, some turns stay messages of their own (roles by
    speaker), the rest are joined; every gold turn is where its probe says; no share, no
    change (the same seed gives the joined dataset as before)."""
    (conv,), _ = bench.load(locomo_file(tmp_path))
    count = bench.o200k()
    joined = data.joined_locomo(conv, count, random.Random(1), (20, 40))
    assert data.joined_locomo(conv, count, random.Random(1), (20, 40), 0.0) == joined
    mixes = [
        data.joined_locomo(conv, count, random.Random(seed), (20, 40), 0.5) for seed in range(8)
    ]
    for mixed in mixes:
        assert "\n".join(data.render(item) for item in mixed.items) == "\n".join(
            turn.content for turn in conv.turns
        )
        for probe in mixed.probes:
            for where, spans in probe.spans.items():
                assert all(span in mixed.items[where].content for span in spans)
        for item in mixed.items:
            if "\n" not in item.content:  # a single turn: its speaker's role
                assert item.role == ("user" if item.content.startswith("Ana:") else "assistant")
    singles = [sum("\n" not in item.content for item in m.items) for m in mixes]
    joins = [sum("\n" in item.content for item in m.items) for m in mixes]
    assert any(singles) and any(joins)  # both kinds occur over the seeds
    (session,), _ = bench.build("mixed", locomo_file(tmp_path), 3, False, count)
    assert session.name == "mixed" and len(session.probes) == 2


def test_one_session_keeps_time_order_and_points_probes_at_their_items(
    bench: ModuleType, data: ModuleType, tmp_path: Path
) -> None:
    (conv,), _ = bench.load(locomo_file(tmp_path))
    parts = [data.joined_locomo(conv, bench.o200k(), random.Random(s), (20, 40)) for s in (1, 2)]
    one = data.one_session(parts)
    assert len(one.items) == sum(len(p.items) for p in parts)
    assert len(one.probes) == sum(len(p.probes) for p in parts)
    times = [item.created_at for item in one.items]
    assert times == sorted(times) and times[len(parts[0].items)] > times[0]
    for probe in one.probes:
        for where, spans in probe.spans.items():
            assert all(span in data.render(one.items[where]) for span in spans)
    second = one.probes[len(parts[0].probes)]
    assert min(second.spans) >= len(parts[0].items)  # the second part's items, renumbered


def test_a_tiny_run_reports_every_figure_and_finds_planted_facts(
    bench: ModuleType, tmp_path: Path
) -> None:
    result = bench.evaluate(
        ("joined", "generated"),
        locomo_file(tmp_path),
        BUDGETS,
        HashEmbedder(),
        seed=3,
        workdir=tmp_path,
        sessions=1,
        events=(40, 60),
        join_sizes=(20, 40),
    )
    json.dumps(result)  # JSON-ready
    assert set(result["datasets"]) == {"joined", "generated"}
    for name, dataset in result["datasets"].items():
        overall = dataset["scores"]["overall"]
        assert overall["n"] == dataset["questions"] == len(dataset["outcomes"]) > 0
        keys = {"any@1", "any@5", "any@10", "passage@10"} | {
            f"{method}{rule}@{b}"
            for method in bench.METHODS
            for rule in ("", "-loose")
            for b in BUDGETS
        }
        assert keys <= set(overall), name
        assert all(0.0 <= overall[key] <= 1.0 for key in keys)
        assert overall["any@1"] <= overall["any@5"] <= overall["any@10"]
        for b in BUDGETS:  # restore's report accounts for every question
            assert sum(overall[f"restore-{fate}@{b}"] for fate in bench.FATES) == pytest.approx(1)
        assert overall["restore-included@8000"] >= overall["restore-included@2000"]
        # every question is a long or a short answer, by its longest answering event
        scores = dataset["scores"]
        split = [scores.get(g, {}).get("n", 0) for g in ("long answer", "short answer")]
        assert sum(split) == overall["n"]
        tokens = [o["answer_tokens"] for o in dataset["outcomes"]]
        assert min(tokens) > 0
        assert split[0] == sum(t >= bench.LONG_ANSWER_TOKENS for t in tokens)
        assert dataset["ingest"]["events_per_s"] > 0
        assert set(dataset["latency_ms"]) == {"search", *(f"restore@{b}" for b in BUDGETS)}
        assert sum(dataset["violations"].values()) == 0
    # the planted facts are there to be found: keyword search alone finds most of them
    generated = result["datasets"]["generated"]
    assert generated["scores"]["overall"]["any@10"] >= 0.5
    assert any(
        o["rank"] == 1 and o["evidence"]["search-pack@8000"][0] for o in generated["outcomes"]
    )
    assert result["datasets"]["joined"]["scores"]["overall"]["any@10"] == 1.0  # 2 questions
    assert "| **overall** | restore |" in bench.markdown(result)


def test_a_kept_store_is_reused_without_ingesting_again(bench: ModuleType, tmp_path: Path) -> None:
    """``--store``: the second run reads the first run's store and gets the same answers."""
    options = {"sessions": 1, "events": (30, 40)}
    store = tmp_path / "kept"
    first = bench.evaluate(
        ("generated",), tmp_path, BUDGETS, HashEmbedder(), 5, workdir=store, **options
    )
    assert (store / "long-events-generated.recorded.json").is_file()
    again = bench.evaluate(
        ("generated",), tmp_path, BUDGETS, HashEmbedder(), 5, workdir=store, **options
    )
    a, b = first["datasets"]["generated"], again["datasets"]["generated"]
    assert a["ingest"] == b["ingest"] and a["scores"] == b["scores"]
    other = {"sessions": 2, "events": (30, 40)}
    with pytest.raises(SystemExit, match="holds other sessions"):
        bench.evaluate(("generated",), tmp_path, BUDGETS, HashEmbedder(), 5, workdir=store, **other)


def test_tech_chats_are_deterministic_and_their_spans_point_at_their_messages(
    bench: ModuleType,
) -> None:
    """bench/tech_chats_data.py: the same chats from the same seed; each question's spans sit
    in its answering messages; the rules planted are ones restore and search recognise."""
    from memlane.text.instructions import statements

    tech = sys.modules["tech_chats_data"]
    first, second = tech.tech_chats(5, chats=2), tech.tech_chats(5, chats=2)
    assert [i.content for s in first for i in s.items] == [
        i.content for s in second for i in s.items
    ]
    for session in first:
        assert 80 <= len(session.items) <= 220
        kinds = {probe.category for probe in session.probes}
        assert kinds >= {"ordering", "summary", "instruction", "preference", "fact"}
        for probe in session.probes:
            for where, spans in probe.spans.items():
                assert all(span in session.items[where].content for span in spans)
            if probe.category == "ordering":  # the user's messages that opened each aspect
                assert all(session.items[i].role == "user" for i in probe.spans)
                assert len(probe.spans) >= 3
        rules = [
            probe
            for probe in session.probes
            if probe.category in ("instruction", "preference")
            and statements(next(iter(probe.spans.values()))[0])
        ]
        assert len(rules) >= 4  # most planted rules read as rules
