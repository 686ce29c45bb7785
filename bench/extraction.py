"""The extraction stage measured (issue 33; run by hand: ``python bench/extraction.py``).

Three figures, each saying how it was obtained:

1. **The rule extractor's precision and recall** on the hand-labelled set
   (``tests/data/extraction_labelled.jsonl``: 64 single user turns, 36 facts, with questions,
   negations, hypotheticals, reported speech and figures of speech among them). A fact
   counts as found when its key and its text (normalised: case, spaces) equal a labelled one.
2. **What it draws from LoCoMo** (``--locomo FILE``: the repository's dev half, CC BY-NC,
   never committed): every turn of every conversation is read as the speaker's own message;
   the facts found are counted, a random sample is written to ``--sample FILE`` (a JSON
   Lines file to check by hand: the turn and the fact, one a line), and the turns read are
   compared with those LoCoMo's ``observation`` annotations cite (recall and precision
   proxies, see :func:`locomo`).
3. **``add_message`` latency** with no extractor and with ``extractor="rules"``, side by
   side, the worker running (the issue's target: unchanged).
4. **Throughput of the stage** with a scripted extractor (no model: what the stage itself
   costs): ``--messages`` messages through ``add_message`` and ``flush()``, messages
   extracted per second, and the tokens per message an LLMExtractor's prompt would take
   (its prompt built for each window and counted with the gpt-4o tokenizer).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from memlane import SessionManager
from memlane.extraction import Extraction, ExtractionBatch, RuleExtractor, Turn
from memlane.extraction.llm import build_prompt
from memlane.extraction.rules import statements
from memlane.memory import normalized_fact
from memlane.testing import HashEmbedder
from memlane.text.tokens import tokenizer_for

REPO = Path(__file__).resolve().parent.parent
LABELLED = REPO / "tests" / "data" / "extraction_labelled.jsonl"


def labelled(path: Path = LABELLED) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _pairs(facts: Iterable[tuple[str | None, str]]) -> set[tuple[str | None, str]]:
    return {(key, normalized_fact(text)) for key, text in facts}


def precision_recall(path: Path = LABELLED) -> dict[str, object]:
    """Counts, precision and recall of ``statements()`` over the labelled set, and the
    examples it got wrong (false positives, misses)."""
    true_pos = false_pos = false_neg = 0
    wrong: list[dict[str, object]] = []
    for example in labelled(path):
        gold = _pairs((key, text) for key, text in example["facts"])  # type: ignore[attr-defined]
        found = _pairs((fact.key, fact.text) for fact in statements(str(example["text"])))
        true_pos += len(gold & found)
        false_pos += len(found - gold)
        false_neg += len(gold - found)
        if gold != found:
            wrong.append(
                {
                    "text": example["text"],
                    "extra": sorted(found - gold),
                    "missed": sorted(gold - found),
                }  # type: ignore[type-var]
            )
    precision = true_pos / (true_pos + false_pos) if true_pos + false_pos else 1.0
    recall = true_pos / (true_pos + false_neg) if true_pos + false_neg else 1.0
    return {
        "examples": len(labelled(path)),
        "labelled_facts": true_pos + false_neg,
        "true_positives": true_pos,
        "false_positives": false_pos,
        "missed": false_neg,
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "wrong": wrong,
    }


def locomo(path: Path, sample: Path | None, size: int, seed: int) -> dict[str, object]:
    """The rule extractor over every LoCoMo turn: how many facts, a sample to check by hand,
    and two proxies against LoCoMo's own ``observation`` annotations (facts about each
    speaker, each citing the turn it comes from): the share of cited turns the rules read a
    fact from (a recall proxy), and the share of turns the rules read a fact from that some
    observation cites (a precision proxy: observations are selective, so a correct fact may
    go uncited)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns = found = 0
    rows: list[dict[str, str | None]] = []
    kinds: dict[str, int] = {}
    cited: set[tuple[str, str]] = set()
    read: set[tuple[str, str]] = set()
    for conversation in data:
        name_of = str(conversation.get("sample_id"))
        for facts in (conversation.get("observation") or {}).values():
            for items in facts.values():
                for _, evidence in items:
                    for one in evidence if isinstance(evidence, list) else [evidence]:
                        cited.add((name_of, str(one)))
        talk = conversation["conversation"]
        for name, value in talk.items():
            if not name.startswith("session_") or not isinstance(value, list):
                continue
            for turn in value:
                turns += 1
                for fact in statements(turn.get("text", "")):
                    found += 1
                    read.add((name_of, str(turn.get("dia_id"))))
                    kinds[fact.key or fact.kind] = kinds.get(fact.key or fact.kind, 0) + 1
                    rows.append(
                        {"speaker": turn.get("speaker"), "turn": turn.get("text"),
                         "key": fact.key, "fact": fact.text}
                    )  # fmt: skip
    random.Random(seed).shuffle(rows)
    if sample is not None:
        with sample.open("w", encoding="utf-8") as out:
            for row in rows[:size]:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {
        "turns": turns,
        "facts": found,
        "per_1000_turns": round(1000 * found / turns, 1),
        "by_key": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
        "observation_turns": len(cited),
        "observation_turns_read": len(cited & read),
        "recall_proxy": round(len(cited & read) / len(cited), 3) if cited else None,
        "turns_read": len(read),
        "precision_proxy": round(len(cited & read) / len(read), 3) if read else None,
    }


def throughput(messages: int, window: int) -> dict[str, object]:
    """Messages per second through the stage with a scripted extractor (one keyed fact per
    window), and prompt tokens per message for an LLMExtractor's windows of the same text."""
    count = tokenizer_for("gpt-4o").count
    prompt_tokens = 0

    class Scripted:
        name = "scripted"
        version = "1"

        def __init__(self) -> None:
            self.window = window

        def __call__(self, batch: ExtractionBatch) -> Extraction:
            nonlocal prompt_tokens
            prompt_tokens += count(build_prompt(batch))
            return RuleExtractor(window=window)(batch)

    texts = [
        "I moved to Porto last month.",
        "Can you book the 9:40 train to Lisbon for 2 people, about €35 each?",
        "The config lives in ~/projects/app/settings.toml; call load_settings() first.",
        "I'm allergic to peanuts, so no satay please.",
        "Thanks! Send the invoice to ana@example.org by Friday.",
        "I prefer window seats.",
    ]
    with tempfile.TemporaryDirectory() as folder:
        mgr = SessionManager(
            "bench", db_path=str(Path(folder) / "x.db"), embedder=HashEmbedder(),
            background=False, extractor=Scripted(),
        )  # fmt: skip
        session = mgr.start_session(goal="chat", user_id="u1")
        started = time.perf_counter()
        for n in range(messages):
            mgr.add_message(session.id, "user" if n % 2 == 0 else "assistant", texts[n % 6])
        recorded = time.perf_counter() - started
        mgr.flush()  # embeds the messages too: the stage is timed on its own below
        stage = mgr._extraction
        assert stage is not None
        for n in range(messages):
            mgr.add_message(session.id, "user" if n % 2 == 0 else "assistant", texts[n % 6])
        started = time.perf_counter()
        report = stage.run(flush=True)
        extracted = time.perf_counter() - started
        facts = len(mgr.fact_history("u1"))
        mgr.close()
    return {
        "messages": messages,
        "window": window,
        "record_ms_per_message": round(1000 * recorded / messages, 3),
        "extracted_messages_per_second": round(report.messages / extracted, 1),
        "batches": report.batches,
        "facts_in_history": facts,
        "llm_prompt_tokens_per_message": round(prompt_tokens / (2 * messages), 1),
    }


def record_latency(messages: int, rounds: int = 3) -> dict[str, object]:
    """``add_message`` latency with no extractor and with ``extractor="rules"``, side by side
    (the worker running, and a backlog written first so that the stage extracts while the
    caller writes, as in production): the median and p99 of each, in ms, over ``rounds``
    interleaved rounds. ``bench/perf.py --extractor rules`` times ``record()`` too."""
    import statistics

    text = "I moved to Porto last month; mail ana@example.org about the $40 refund."
    times: dict[str, list[float]] = {"none": [], "rules": []}
    for _ in range(rounds):
        for label in ("none", "rules"):
            with tempfile.TemporaryDirectory() as folder:
                mgr = SessionManager(
                    "bench", db_path=str(Path(folder) / "x.db"), embedder=HashEmbedder(),
                    extractor=None if label == "none" else "rules",
                )  # fmt: skip
                session = mgr.start_session(goal="chat", user_id="u1")
                # a backlog and a pause, so the stage is busy while the timed writes run (a
                # first version timed 400 writes in 0.8 s, before its thread ever looked)
                for n in range(messages):
                    mgr.add_message(session.id, "user", f"{text} (earlier {n})")
                time.sleep(1.5)
                for n in range(messages):
                    started = time.perf_counter()
                    mgr.add_message(session.id, "user", f"{text} ({n})")
                    times[label].append(1000 * (time.perf_counter() - started))
                mgr.close()

    def summary(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "p50_ms": round(statistics.median(ordered), 3),
            "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 3),
        }

    return {label: summary(values) for label, values in times.items()} | {
        "messages": messages * rounds
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", type=Path, default=None, help="LoCoMo JSON (never committed)")
    parser.add_argument("--sample", type=Path, default=None, help="where to write the sample")
    parser.add_argument("--sample-size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--window", type=int, default=6)
    parser.add_argument("--latency-messages", type=int, default=400)
    parser.add_argument("--json", action="store_true", help="one JSON object, for machines")
    args = parser.parse_args(argv)
    out: dict[str, object] = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "labelled": precision_recall(),
        "throughput": throughput(args.messages, args.window),
        "record_latency": record_latency(args.latency_messages),
    }
    if args.locomo is not None:
        out["locomo"] = locomo(args.locomo, args.sample, args.sample_size, args.seed)
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    pr = out["labelled"]
    assert isinstance(pr, dict)
    print(f"labelled set: {pr['examples']} turns, {pr['labelled_facts']} facts")
    counts = f"tp {pr['true_positives']}, fp {pr['false_positives']}, missed {pr['missed']}"
    print(f"  precision {pr['precision']}  recall {pr['recall']}  ({counts})")
    for wrong in pr["wrong"]:  # type: ignore[attr-defined]
        print(f"  - {wrong['text']!r}: extra {wrong['extra']}, missed {wrong['missed']}")
    print("throughput:", json.dumps(out["throughput"]))
    print("add_message latency, no extractor vs rules:", json.dumps(out["record_latency"]))
    if "locomo" in out:
        print("locomo:", json.dumps(out["locomo"], ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Turn", "locomo", "precision_recall", "throughput"]
