"""memlane against its peers on the same data and the same embedder: recall, context, ingest,
write and search latency, memory, disk and cold start, with ratios ours / best peer.

    make bench-peers                     # .venv-peers: memlane + the pinned peers, then this
    python bench/peers.py ../shared/bench/locomo/locomo_dev.json --embed-cache bench/.cache
    python bench/peers.py PATH --quick   # one conversation, 20 questions, a small scale

The data is never part of this repository (LoCoMo is CC BY-NC 4.0): the path is an argument.
The peers (bench/peer_systems.py says how each is set up) are whichever of LangGraph's
InMemoryStore and SqliteStore, mem0, Chroma and LlamaIndex's VectorMemory are installed; a
missing one is named and skipped. No network is used at run time.

Protocol — every system in a fresh subprocess of its own per measurement (so peak RSS is its
own), on the same rows, given the same embedder object:

- **LoCoMo** (one process a system): each conversation is one scope (an agent, a namespace,
  a user, a collection), its turns written one ``add`` at a time in order, as an agent writes
  while it runs (``"Speaker: text"``, the first speaker as ``user``). *Ingest* is the wall
  time of all adds plus ``settle`` (memlane: ``flush()``; LlamaIndex: ``persist()``), with
  MiniLM embedding every text for every system. *add p50 / p99* is per call. Then every
  question (categories 1-4, evidence as bench/locomo.py reads it): **any@10** (a gold turn
  in the top 10 of the conversation's scope) and **evidence in a 2,000-token context** —
  memlane's ``restore(session, 2000, query=q)``; a peer's top 150 results packed in rank
  order into 2,000 tokens (o200k_base, bench/restore_quality.py's packing and check).
- **Scaled stores**: the LoCoMo turns copied N times (N = 1, 7, 32: on the dev half's
  2,760 turns 2.8k, 19.3k, 88.3k events) into one scope, each copy its own sessions; loaded
  by each system's bulk path with vectors from the embed cache; then *search p50 / p95*
  over the questions (query vectors from the cache too: the figure is the store's search,
  not the model), *peak RSS* and *disk* (every file of the store's folder, WAL included,
  before close).
- **Cold start**: a fresh process loads the embedder, opens the scaled store and answers one
  question; the time from spawning it to the answer (interpreter start included, as for all).

A system whose bulk load at one scale took longer than ``--give-up`` seconds is not run at
the next (the table says so and why).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import CachedEmbedder, Conversation, git_commit, load, machine, percentile, report
from peer_systems import OURS, SYSTEMS, Row, System, folder_bytes
from restore_quality import contains_evidence, o200k, pack_lines

K = 10
BUDGET = 2000
PACK_K = 150
SCALES = (1, 7, 32)
QUICK_QUESTIONS = 20
MIN_SEARCHES = 20
HERE = Path(__file__).resolve()

FAIRNESS = [
    "Same embedder object for every system: memlane's MiniLM (all-MiniLM-L6-v2 on "
    "onnxruntime), wrapped in each peer's own embedding interface; no system downloads a "
    "model or calls a network service.",
    "Same rows for every system: LoCoMo turns as 'Speaker: text', one scope per conversation "
    "(per-conversation search), the scaled stores in one scope.",
    "Ingest and add latency include embedding every text, for every system alike. memlane's "
    "default (background=True) returns from add before embedding (its worker embeds in "
    "batches; ingest waits for flush()); the 'background=False' column embeds inside add "
    "as the peers do.",
    "Search latency at scale uses cached query vectors for every system (the store's search, "
    "not the model); the LoCoMo phase embeds every query.",
    "memlane searches hybrid (BM25 + vectors, its default); LangGraph, Chroma and "
    "LlamaIndex search vectors only; mem0 2.2.1 would add BM25 and entity boosts but needs "
    "fastembed and spaCy models for them, which it cannot fetch offline: semantic-only.",
    "Context at 2,000 tokens: memlane's restore() builds its own context; the peers have no "
    "such call, so their top 150 results are packed in rank order with the same tokenizer.",
    "Peak RSS is the VmHWM of each system's own process, embedder (ONNX model) included for "
    "all. Disk is the store's folder after ingest, before close (WAL included); "
    "InMemoryStore keeps nothing on disk.",
    "Scaled stores are bulk-loaded through each system's batch API (memlane record_many, "
    "LangGraph batch(PutOp), mem0 add(list), Chroma add(list); LlamaIndex one put each).",
    "Chroma and LangGraph SqliteStore's vector index: HNSW (approximate) and sqlite-vec "
    "(exact scan); memlane's search is exact.",
]


# -- data ------------------------------------------------------------------------------------


def conversation_rows(conv: Conversation, copy: int | None = None) -> list[Row]:
    """The conversation's turns as rows: one session for the LoCoMo phase (restore reads the
    whole conversation), one session per LoCoMo session and copy for the scaled stores."""
    roles = {conv.speakers[0]: "user", conv.speakers[1]: "assistant"}
    rows = []
    for part in conv.sessions:
        session = "all" if copy is None else f"copy {copy}, {conv.sample_id} part {part.number}"
        for turn in part.turns:
            key = turn.dia_id if copy is None else f"{conv.sample_id}/{turn.dia_id}#{copy}"
            rows.append(Row(key, turn.content, roles.get(turn.speaker, "user"), session, part.date))
    return rows


def scaled_rows(conversations: Sequence[Conversation], copies: int) -> list[Row]:
    return [
        row for i in range(copies) for conv in conversations for row in conversation_rows(conv, i)
    ]


def selected(path: Path, quick: bool) -> list[Conversation]:
    conversations, _ = load(path)
    if quick:
        conversations = conversations[:1]
        conversations[0].questions = conversations[0].questions[:QUICK_QUESTIONS]
    return conversations


# -- the embedder ----------------------------------------------------------------------------


def make_embedder(kind: str, cache: Path | None) -> Any:
    """The one embedder object a process hands to its system."""
    if kind == "hash":  # tests: fast and deterministic
        from memlane.testing import HashEmbedder

        return HashEmbedder()
    from memlane import MiniLMEmbedder

    base = MiniLMEmbedder()
    return CachedEmbedder(base, cache) if cache else base


def prepare_cache(
    conversations: Sequence[Conversation], source: Path | None, folder: Path, kind: str
) -> Path | None:
    """A cache folder holding exactly the vectors of this run's texts (turns and questions),
    taken from ``source`` where it has them, computed otherwise; so that a child process
    loads a few MB, not every vector ever cached."""
    if kind == "hash":
        return None
    from memlane import MiniLMEmbedder

    texts = [t.content for c in conversations for t in c.turns]
    texts += [q.text for c in conversations for q in c.questions]
    base = MiniLMEmbedder()
    full = CachedEmbedder(base, source) if source else CachedEmbedder(base, folder / "full")
    full(sorted(set(texts)))
    if source:
        full.save()
    subset = CachedEmbedder(base, folder)
    subset.vectors = {key: full.vectors[key] for key in map(full.key, set(texts))}
    subset.dirty = True
    subset.save()
    return folder


# -- one measurement in a child process -------------------------------------------------------


def peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def quantiles(values: Sequence[float], *qs: float) -> list[float]:
    return [percentile(values, q) for q in qs]


def run_locomo(system: System, conversations: Sequence[Conversation]) -> dict[str, Any]:
    counter = o200k().encode_ordinary
    adds: list[float] = []
    started = time.perf_counter()
    for conv in conversations:
        for row in conversation_rows(conv):
            t0 = time.perf_counter()
            system.add(conv.sample_id, row)
            adds.append((time.perf_counter() - t0) * 1000)
    system.settle()
    ingest = time.perf_counter() - started
    hits, contexts, searches = [], [], []
    for conv in conversations:
        turns = {turn.dia_id: turn.content for turn in conv.turns}
        system.search(conv.sample_id, "warm-up query", K)
        for question in conv.questions:
            t0 = time.perf_counter()
            found = system.search(conv.sample_id, question.text, K)
            searches.append((time.perf_counter() - t0) * 1000)
            hits.append(bool(set(found[:K]) & question.gold))
            text = system.context(conv.sample_id, question.text, BUDGET)
            if text is None:
                ranked = system.search(conv.sample_id, question.text, PACK_K)
                text = pack_lines(
                    [turns[key] for key in ranked if key in turns],
                    BUDGET,
                    lambda t: len(counter(t)),
                )
            contexts.append(contains_evidence(text, question, turns))
    return {
        "events": len(adds),
        "questions": len(hits),
        "any@10": statistics.fmean(hits) if hits else float("nan"),
        "context@2k": statistics.fmean(contexts) if contexts else float("nan"),
        "ingest_s": ingest,
        "add_ms": quantiles(adds, 50, 99),
        "search_ms": quantiles(searches, 50, 95),
        "disk_bytes": folder_bytes(system.folder) if system.persistent else None,
    }


def run_scale(
    system: System,
    conversations: Sequence[Conversation],
    copies: int,
    questions: int,
    seconds: float,
) -> dict[str, Any]:
    rows = scaled_rows(conversations, copies)
    started = time.perf_counter()
    system.load("scaled", rows)
    system.settle()
    load_s = time.perf_counter() - started
    asked = [q.text for c in conversations for q in c.questions]
    asked = asked[:: max(1, len(asked) // questions)][:questions]
    system.search("scaled", "warm-up query", K)
    searches: list[float] = []
    deadline = time.perf_counter() + seconds
    for text in asked:
        if len(searches) >= MIN_SEARCHES and time.perf_counter() > deadline:
            break  # a slow system: fewer samples rather than hours (the count is reported)
        t0 = time.perf_counter()
        system.search("scaled", text, K)
        searches.append((time.perf_counter() - t0) * 1000)
    return {
        "events": len(rows),
        "load_s": load_s,
        "search_ms": quantiles(searches, 50, 95),
        "searches": len(searches),
        "asked": len(asked),
        "disk_bytes": folder_bytes(system.folder) if system.persistent else None,
    }


def child(job: dict[str, Any]) -> dict[str, Any]:
    conversations = selected(Path(job["data"]), job["quick"])
    cache = Path(job["cache"]) if job.get("cache") else None
    embed = make_embedder(job["embedder"], cache)
    cls = SYSTEMS[job["system"]]
    system = cls(Path(job["folder"]), embed, int(embed.dim))
    if job["phase"] == "cold":
        question = conversations[0].questions[0].text
        found = system.search("scaled", question, K)
        answered = time.time()
        system.close()
        return {"answered_at": answered, "hits": len(found)}
    if job["phase"] == "locomo":
        result = run_locomo(system, conversations)
    else:
        result = run_scale(
            system, conversations, job["copies"], job["questions"], job["search_seconds"]
        )
    system.close()
    result["rss_mb"] = peak_rss_mb()
    return result


def spawn(job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``job`` in a fresh interpreter; its result, or why there is none."""
    spawned = time.time()
    try:
        done = subprocess.run(
            [sys.executable, str(HERE), "--child", json.dumps(job)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "MEM0_TELEMETRY": "False", "ANONYMIZED_TELEMETRY": "False"},
        )
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            if "answered_at" in result:
                result["cold_s"] = result.pop("answered_at") - spawned
            return result
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {done.returncode}: {tail[:300]}"}


# -- the parent ------------------------------------------------------------------------------


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    conversations = selected(args.path, args.quick)
    scales = args.scales or ([1, 3] if args.quick else list(SCALES))
    wanted = args.systems or list(SYSTEMS)
    unknown = [name for name in wanted if name not in SYSTEMS]
    if unknown:
        sys.exit(f"unknown system(s) {unknown}; choose from {list(SYSTEMS)}")
    missing = [name for name in wanted if not SYSTEMS[name].available()]
    systems = [name for name in wanted if name not in missing]
    work = Path(tempfile.mkdtemp(prefix="peers-", dir=args.workdir))
    try:
        cache = prepare_cache(conversations, args.embed_cache, work / "vectors", args.embedder)
        base = {
            "data": str(args.path),
            "quick": args.quick,
            "embedder": args.embedder,
            "questions": args.scale_questions,
            "search_seconds": args.search_seconds,
        }
        results: dict[str, dict[str, Any]] = {name: {} for name in systems}
        for name in systems:
            folder = work / "store"
            print(f"[{time.strftime('%H:%M:%S')}] {name}: LoCoMo", file=sys.stderr)
            # the quick mode's ingest uses cached vectors too: it checks the harness, not speed
            results[name]["locomo"] = spawn(
                {**base, "system": name, "phase": "locomo", "folder": str(folder),
                 "cache": str(cache) if (cache and args.quick) else None},
                args.timeout,
            )  # fmt: skip
            shutil.rmtree(folder, ignore_errors=True)
            for copies in scales if SYSTEMS[name].scaled else []:
                key = f"scale{copies}"
                previous = [results[name].get(f"scale{c}", {}) for c in scales if c < copies]
                slow = [p for p in previous if p.get("load_s", 0) > args.give_up or "error" in p]
                if slow:
                    last = slow[-1]
                    reason = (
                        last.get("error")
                        or f"its load at a smaller scale took {last['load_s']:.0f} s"
                    )
                    results[name][key] = {"skipped": reason}
                    continue
                print(f"[{time.strftime('%H:%M:%S')}] {name}: x{copies}", file=sys.stderr)
                job = {
                    **base,
                    "system": name,
                    "folder": str(folder),
                    "cache": str(cache) if cache else None,
                }
                results[name][key] = spawn(
                    {**job, "phase": "scale", "copies": copies}, args.timeout
                )
                if SYSTEMS[name].persistent and "error" not in results[name][key]:
                    results[name][key].update(
                        spawn({**job, "phase": "cold", "cache": None}, args.timeout)
                    )
                shutil.rmtree(folder, ignore_errors=True)
            if args.out:  # what is measured so far survives a run stopped by hand
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.with_suffix(".partial.json").write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "data": args.path.name,
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "quick": args.quick,
        "embedder": args.embedder,
        "conversations": len(conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "scales": scales,
        "scale_questions": args.scale_questions,
        "missing": missing,
        "results": results,
        "versions": versions(systems),
        "fairness": FAIRNESS,
    }


def versions(systems: Sequence[str]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("memlane", "langgraph", "langgraph-checkpoint-sqlite", "sqlite-vec",
                    "mem0ai", "qdrant-client", "chromadb", "llama-index-core"):  # fmt: skip
        with contextlib.suppress(PackageNotFoundError):
            out[package] = version(package)
    return out


# -- the table -------------------------------------------------------------------------------

#: (row label, how to read it from a system's results, True when higher is better)
Metric = tuple[str, Any, bool]


def metrics(scales: Sequence[int], result: dict[str, Any]) -> list[Metric]:
    def at(phase: str, field: str, index: int | None = None, scale: float = 1.0) -> Any:
        def read(entry: dict[str, Any]) -> float | None:
            value = entry.get(phase, {}).get(field)
            if value is None:
                return None
            return (value[index] if index is not None else value) * scale

        return read

    mib = 1 / (1 << 20)
    rows: list[Metric] = [
        ("any@10", at("locomo", "any@10"), True),
        ("gold turn in a 2,000-token context", at("locomo", "context@2k"), True),
        ("ingest, LoCoMo (s)", at("locomo", "ingest_s"), False),
        ("add p50 (ms)", at("locomo", "add_ms", 0), False),
        ("add p99 (ms)", at("locomo", "add_ms", 1), False),
        ("search p50, per conversation (ms)", at("locomo", "search_ms", 0), False),
        ("peak RSS, LoCoMo phase (MB)", at("locomo", "rss_mb"), False),
    ]
    for copies in scales:
        events = next(
            (r.get(f"scale{copies}", {}).get("events") for r in result["results"].values()
             if r.get(f"scale{copies}", {}).get("events")),
            None,
        )  # fmt: skip
        label = f"{events:,}" if events else f"x{copies}"
        rows += [
            (f"search p50 at {label} (ms)", at(f"scale{copies}", "search_ms", 0), False),
            (f"search p95 at {label} (ms)", at(f"scale{copies}", "search_ms", 1), False),
            (f"disk at {label} (MiB)", at(f"scale{copies}", "disk_bytes", scale=mib), False),
            (f"peak RSS at {label} (MB)", at(f"scale{copies}", "rss_mb"), False),
            (f"cold start at {label} (s)", at(f"scale{copies}", "cold_s"), False),
        ]
    return rows


def cell(value: float | None) -> str:
    if value is None:
        return "—"
    if value != value:  # nan
        return "n/a"
    return (
        f"{value:.3f}"
        if abs(value) < 10
        else f"{value:.1f}"
        if abs(value) < 1000
        else f"{value:,.0f}"
    )


def markdown(result: dict[str, Any]) -> str:
    names = list(result["results"])
    ours = next((n for n in names if n == OURS[0]), None)
    peers = [n for n in names if n not in OURS]
    lines = [
        f"memlane and its peers — {result['data']} — {result['conversations']} conversations, "
        f"{result['questions']} questions — commit {result['commit']} — {result['date']}"
        + (" — QUICK (not representative)" if result["quick"] else ""),
        f"machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, "
        f"Python {result['machine']['python']}; embedder: {result['embedder']}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()),
        "",
        "| | " + " | ".join(names) + " | best peer | ours / best |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    for label, read, higher in metrics(result["scales"], result):
        values = {n: read(result["results"][n]) for n in names}
        candidates = {n: v for n, v in values.items() if n in peers and v is not None and v == v}
        best_name = (
            (max if higher else min)(candidates, key=lambda n: candidates[n])
            if candidates
            else None
        )
        best = candidates.get(best_name) if best_name else None
        mine = values.get(ours) if ours else None
        ratio = f"{mine / best:.2f}×" if mine is not None and best else "—"
        best_cell = f"{cell(best)} ({best_name})" if best_name else "—"
        arrow = "↑" if higher else "↓"
        lines.append(
            f"| {label} {arrow} | " + " | ".join(cell(values[n]) for n in names)
            + f" | {best_cell} | {ratio} |"
        )  # fmt: skip
    lines += [
        "",
        "↑ higher is better, ↓ lower is better; ours / best is memlane's default column over "
        "the best peer's (for ↑ above 1 is better, for ↓ below 1 is better).",
    ]
    problems = [
        f"- {name}, {phase}: {entry.get('error') or 'not run: ' + entry['skipped']}"
        for name, phases in result["results"].items()
        for phase, entry in phases.items()
        if "error" in entry or "skipped" in entry
    ]
    problems += [
        f"- {name}, {phase}: {entry['searches']} searches (the --search-seconds cap)"
        for name, phases in result["results"].items()
        for phase, entry in phases.items()
        if "searches" in entry and entry["searches"] < entry.get("asked", result["scale_questions"])
    ]
    if result["missing"]:
        problems.append(f"- not installed here, skipped: {', '.join(result['missing'])}")
    if problems:
        lines += ["", "Not measured:", *problems]
    lines += ["", "Fairness notes:", *(f"- {note}" for note in result["fairness"])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, nargs="?", help="a LoCoMo JSON file")
    parser.add_argument("--quick", action="store_true", help="one conversation, 20 questions")
    parser.add_argument("--systems", nargs="+", help=f"a subset of {list(SYSTEMS)}")
    parser.add_argument("--scales", type=int, nargs="+", help="copies of the data (1 7 32)")
    parser.add_argument("--scale-questions", type=int, default=200, help="searches per scale")
    parser.add_argument("--search-seconds", type=float, default=120, help="stop searching a "
                        f"scale after this long (at least {MIN_SEARCHES} searches)")  # fmt: skip
    parser.add_argument("--embed-cache", type=Path, help="MiniLM vectors cached here")
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per process")
    parser.add_argument("--give-up", type=float, default=900, help="skip larger scales after "
                        "a bulk load this slow (s)")  # fmt: skip
    parser.add_argument("--workdir", type=Path, help="where the stores are built (tmp)")
    parser.add_argument("--out", type=Path, help="JSON result file (default: bench/results/)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(json.loads(args.child))), flush=True)
        os._exit(0)  # a peer's non-daemon threads must not hold the process open
    if args.path is None or not args.path.is_file():
        sys.exit(f"{args.path} is not a file; pass the path of a LoCoMo JSON file.")
    report(evaluate(args), args.out, "peers", markdown)


if __name__ == "__main__":
    main()
