"""Standing instructions: does restore carry what the user asked the agent to keep doing,
when the query is about something else?

    python bench/standing_instructions.py                      # hash embedder, < 2 minutes
    python bench/standing_instructions.py --embedder minilm --json out.json

A user says "From now on, always give me file paths relative to the repository root" early
in a long session; two hundred events later they ask about a log line. An agent that
continues from ``restore()`` must still obey the instruction, so the instruction must be in
the context, although no search for the later question finds it (issue 31, item 5).

Data: bench/long_events_data.py's generated agent runs (``--sessions``, seed ``--seed``:
long tool outputs, assistant answers, short user turns), with ``--planted`` user messages
per session put at random places in its first 70%: an instruction or a preference from
:data:`PLANTED` (each said as a user turn, sometimes inside a longer message), and, as
distractors, sentences that look alike but set no rule (:data:`LOOKALIKES`: "we always
deploy on Fridays", "do you always cache?").

Protocol, through the public API: every item recorded, ``flush()``; then for every planted
instruction and every probe question of its session asked after it (at most 6 per
instruction), ``restore(session, B, query=question)`` at each budget, and the two baselines
of bench/long_events.py (search-pack: ``search(question, k=60)`` packed whole; buffer: the
newest events whole). Reported: the share of (instruction, question) pairs whose context
holds the instruction's sentence (whitespace collapsed), per method and budget; how many
look-alikes restore showed as instructions (a false positive costs budget); and the
planted facts' own evidence in the same restores (bench/long_events.py's strict rule), so
that pinning instructions is seen to cost what it costs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import git_commit, machine, report
from long_events import SEARCH_PACK_K, log, normalise, o200k, pack, record, strict
from long_events_data import Item, LongSession, generated_runs, render

from memlane import SessionManager

BUDGETS = (2000, 4000, 8000)
SEED = 31
QUESTIONS_PER_INSTRUCTION = 6

#: (what the user says, the sentence that must reach the context)
PLANTED = (
    "From now on, always give me file paths relative to the repository root.",
    "Please never use tabs for indentation in the code you write for me.",
    "I prefer answers as short numbered steps rather than long paragraphs.",
    "Always include the exact command you ran when you report a result.",
    "Going forward, keep every SQL query you suggest compatible with PostgreSQL 13.",
    "I'd rather you ask before deleting any file in the workspace.",
    "Make sure to mention the time zone whenever you give me a timestamp.",
    "Never restart the payment service without telling me first.",
    "I like type hints on every function, even the small private ones.",
    "Whenever you quote a log line, say which host it came from.",
    "I want you to round every money amount to whole euros in summaries.",
    "You should always run the linter before you call a change done.",
)
#: sentences that look like the above but set no rule
LOOKALIKES = (
    "We always deploy on Fridays, which is a problem for the on-call team.",
    "Do you always cache the results of that query?",
    "I have never seen this error before in staging.",
    "It was always slow on the old cluster.",
    "My manager said I should always write the tests first.",
    "Never mind, the build passes now.",
)
CARRIERS = (
    "Thanks, that helps. {sentence}",
    "{sentence}",
    "One more thing before we go on. {sentence} Now, back to the logs: what did the last run say?",
)


def planted_sessions(
    seed: int, sessions: int, planted: int, events: tuple[int, int]
) -> list[tuple[LongSession, list[tuple[int, str]]]]:
    """Generated runs with ``planted`` instructions (and half as many look-alikes) each;
    per session the instructions' ``(item index, sentence)``."""
    rng = random.Random(f"instructions-{seed}")
    out = []
    for session in generated_runs(seed, sessions, events):
        items = list(session.items)
        chosen = rng.sample(PLANTED, planted)
        lookalikes = rng.sample(LOOKALIKES, max(1, planted // 2))
        inserts: list[tuple[int, str, bool]] = []
        for sentence in chosen:
            inserts.append((rng.randrange(1, int(len(items) * 0.7)), sentence, True))
        for sentence in lookalikes:
            inserts.append((rng.randrange(1, int(len(items) * 0.7)), sentence, False))
        placed: list[tuple[int, str]] = []
        # insert from the last position back, so earlier positions stay valid; probes keep
        # their item indexes by being shifted below
        shift = [0] * (len(items) + 1)
        for at, _, _ in inserts:
            for i in range(at, len(items) + 1):
                shift[i] += 1
        for at, sentence, _ in sorted(inserts, key=lambda x: -x[0]):
            before = items[at - 1]
            text = rng.choice(CARRIERS).format(sentence=sentence)
            items.insert(
                at,
                Item("message", text, before.created_at + timedelta(seconds=1), role="user"),
            )
        # where each planted instruction ended up
        for index, item in enumerate(items):
            if item.kind == "message" and item.role == "user":
                for sentence in chosen:
                    if sentence in str(item.content):
                        placed.append((index, sentence))
        probes = [
            replace(p, spans={shift[i] + i: spans for i, spans in p.spans.items()})
            for p in session.probes
        ]
        out.append((replace(session, items=items, probes=probes), placed))
    return out


def run(
    embedder: Any,
    seed: int,
    sessions: int,
    planted: int,
    events: tuple[int, int],
    budgets: Sequence[int],
) -> dict[str, Any]:
    count = o200k()
    data = planted_sessions(seed, sessions, planted, events)
    hits: dict[str, list[bool]] = {f"{m}@{b}": [] for m in METHODS for b in budgets}
    facts: dict[str, list[bool]] = {f"restore@{b}": [] for b in budgets}
    lookalikes_shown: list[int] = []
    sections: list[int] = []
    restore_ms: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="instructions-") as tmp,
        SessionManager(
            "instructions", Path(tmp) / "s.db", embedder=embedder, count_recalls=False
        ) as mgr,
    ):
        recorded = [record(mgr, session) for session, _ in data]
        mgr.flush()
        for (session, placed), (sid, ids) in zip(data, recorded, strict=True):
            texts = [render(item) for item in session.items]
            costs = [count(text) for text in texts]
            index = {event_id: i for i, event_id in enumerate(ids)}
            buffers = {
                b: normalise(pack(texts[::-1], costs[::-1], b, count, skip=False)) for b in budgets
            }
            for where, sentence in placed:
                later = [p for p in session.probes if min(p.spans) > where]
                for probe in later[:QUESTIONS_PER_INSTRUCTION]:
                    deep = mgr.search(probe.text, k=SEARCH_PACK_K, session_id=sid)
                    order = [index.get(h.event.id) for h in deep]
                    chosen = [i for i in order if i is not None]
                    want = normalise(sentence)
                    for budget in budgets:
                        r0 = time.perf_counter()
                        context = mgr.restore(sid, budget, query=probe.text)
                        restore_ms.append((time.perf_counter() - r0) * 1000)
                        text = normalise(context.text)
                        hits[f"restore@{budget}"].append(want in text)
                        searched = pack(
                            [texts[i] for i in chosen],
                            [costs[i] for i in chosen],
                            budget,
                            count,
                            skip=True,
                        )
                        hits[f"search-pack@{budget}"].append(want in normalise(searched))
                        hits[f"buffer@{budget}"].append(want in buffers[budget])
                        spans = [normalise(s) for ss in probe.spans.values() for s in ss]
                        facts[f"restore@{budget}"].append(strict(text, spans))
                        block = context.report.sections.get("instructions", 0)
                        sections.append(block)
                        lookalikes_shown.append(
                            sum(normalise(s) in text for s in LOOKALIKES)
                            if "instructions" in context.report.sections
                            else 0
                        )
        log(f"{len(data)} sessions, {sum(len(p) for _, p in data)} instructions planted")
    return {
        "commit": git_commit(),
        "machine": machine(),
        "seed": seed,
        "sessions": sessions,
        "planted": planted,
        "pairs": len(hits[f"restore@{budgets[0]}"]),
        "instruction_in_context": {k: statistics.fmean(v) for k, v in hits.items() if v},
        "fact_in_context": {k: statistics.fmean(v) for k, v in facts.items() if v},
        "instructions_section_tokens_mean": statistics.fmean(sections) if sections else 0,
        "lookalikes_in_context_mean": statistics.fmean(lookalikes_shown) if sections else 0,
        "restore_ms_p50": statistics.median(restore_ms) if restore_ms else 0,
        "budgets": list(budgets),
    }


METHODS = ("restore", "search-pack", "buffer")


def markdown(result: dict[str, Any]) -> str:
    budgets = result["budgets"]
    lines = [
        f"Standing instructions — commit {result['commit']}, seed {result['seed']}, "
        f"{result['sessions']} sessions x {result['planted']} instructions, "
        f"{result['pairs']} (instruction, later question) pairs",
        "",
        "| instruction in context | " + " | ".join(f"B={b}" for b in budgets) + " |",
        "|---|" + "---|" * len(budgets),
    ]
    for method in METHODS:
        cells = " | ".join(
            f"{result['instruction_in_context'][f'{method}@{b}']:.3f}" for b in budgets
        )
        lines.append(f"| {method} | {cells} |")
    facts = " | ".join(f"{result['fact_in_context'][f'restore@{b}']:.3f}" for b in budgets)
    lines += [
        f"| the question's own answer, restore | {facts} |",
        "",
        f"instructions section: {result['instructions_section_tokens_mean']:.0f} tokens on "
        f"average; look-alikes shown there: {result['lookalikes_in_context_mean']:.2f} a "
        f"restore; restore p50 {result['restore_ms_p50']:.1f} ms",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--planted", type=int, default=3, help="instructions per session")
    parser.add_argument(
        "--events", type=int, nargs=2, default=[100, 200], metavar=("MIN", "MAX"),
        help="events per generated run",
    )  # fmt: skip
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--json", type=Path, help="JSON result file (default: bench/results/)")
    args = parser.parse_args(argv)
    if args.embedder == "minilm":
        from memlane import MiniLMEmbedder

        embedder: Any = MiniLMEmbedder()
    else:
        from memlane.testing import HashEmbedder

        embedder = HashEmbedder()
    result = run(
        embedder,
        args.seed,
        args.sessions,
        args.planted,
        tuple(args.events),
        sorted(set(args.budgets)),
    )
    report(result, args.json, "standing-instructions", markdown)


if __name__ == "__main__":
    main()
