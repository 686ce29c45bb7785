"""PostgreSQL vector search: HNSW (iterative scan, several ef_search) vs the exact plan.

Run by hand (docs/backends.md keeps the numbers):

    python bench/pgvector_plan.py                 # 100k vectors, a throw-away server
    python bench/pgvector_plan.py --events 20000 --url postgresql://me@host/db

The store is a real ``PostgresStore`` schema; rows are bulk-loaded with COPY (the keyword
trigger is switched off while loading: keyword search is not measured here). Vectors are
MiniLM vectors of 2,000 agent-event texts plus small Gaussian noise (so no two are equal), in
384 dimensions. Each query is ``PgVectors.search`` (the store's own vector index) with the
scope filter a ``SessionManager.search`` would use, k = 10, timed from the client (no query
embedding).
Recall@10 is measured against the exact plan's answer.

Scenarios: one agent owning every vector; one of 10 agents (10% of the rows); one agent and
one kind (~1%); one agent and a rare metadata value (~0.1%, through ``where``).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memlane.core.scope import Scope
from memlane.store.base import EventFilter
from memlane.store.postgres import PostgresStore


def sample_vectors(n: int, seed: int = 0) -> np.ndarray[Any, Any]:
    try:
        from perf import agent_texts  # type: ignore[import-not-found]

        from memlane import MiniLMEmbedder

        base = MiniLMEmbedder()(agent_texts(2_000, seed=4))
    except Exception:  # no model installed: random unit vectors (the worst case for HNSW)
        base = np.random.default_rng(seed).normal(size=(2_000, 384)).astype(np.float32)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(base), n)
    vectors = base[picks] + rng.normal(scale=0.05, size=(n, base.shape[1])).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def load(store: PostgresStore, vectors: np.ndarray[Any, Any], agents: int) -> None:
    n, dim = vectors.shape
    kinds = ["fact", "step", "message", "tool_output", "decision"]
    with store.atomic() as tx:
        tx.execute("ALTER TABLE events DISABLE TRIGGER events_insert")
        for a in range(agents):
            tx.execute(
                "INSERT INTO sessions (id, agent_id, goal, status, metadata, created_us, "
                "updated_us) VALUES (?, ?, 'bench', 'active', '{}', 0, 0)",
                (f"s{a}", f"agent{a}"),
            )
        buffer = io.StringIO()
        for i in range(n):
            agent = i % agents
            kind = kinds[0] if i % 100 == 0 else kinds[1 + i % 4]
            meta = '{"rare": true}' if i % 1000 == 7 else "{}"
            buffer.write(
                f"e{i}\ts{agent}\tagent{agent}\t{kind}\tevent {i}\t0.5\t[]\t{meta}\t{i}\t10\t"
                f"agent:agent{agent}\n"
            )
        buffer.seek(0)
        with (
            tx.conn.cursor() as cursor,
            cursor.copy(
                "COPY events (id, session_id, agent_id, kind, content, importance, tags, "
                "metadata, created_us, token_count, partition) FROM STDIN"
            ) as copy,
        ):
            while chunk := buffer.read(1 << 20):
                copy.write(chunk)
        tx.execute("ALTER TABLE events ENABLE TRIGGER events_insert")
        seqs = [row[0] for row in tx.execute("SELECT seq FROM events ORDER BY seq").fetchall()]
        with (
            tx.conn.cursor() as cursor,
            cursor.copy("COPY vectors (seq, partition, agent_id, embedding) FROM STDIN") as copy,
        ):
            for i, seq in enumerate(seqs):
                text = "[" + ",".join(f"{x:.6f}" for x in vectors[i]) + "]"
                copy.write_row((seq, f"agent:agent{i % agents}", f"agent{i % agents}", text))
        for key, value in (("embedder_name", "bench"), ("embedder_dim", str(dim))):
            store.set_meta(tx, key, value)
    with store.atomic() as tx:
        tx.execute("ANALYZE")


def timed(store: PostgresStore, queries: np.ndarray[Any, Any], flt: EventFilter) -> Any:
    latencies, answers = [], []
    parts = [(f"agent:{flt.scope.agent_id}", False)] if flt.scope else []
    index = store.vector_index()
    index.search(queries[0], flt, parts, 10, list)  # warm
    for query in queries:
        started = time.perf_counter()
        answers.append([match.seq for match in index.search(query, flt, parts, 10, list)])
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--url", help="a PostgreSQL server (default: start a throw-away one)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.url:
        run(args, args.url)
    else:
        from tests.servers import postgres_server

        with postgres_server() as url:
            run(args, url)


def run(args: argparse.Namespace, url: str) -> None:
    vectors = sample_vectors(args.events)
    queries = sample_vectors(args.queries, seed=99)
    joiner = "&" if "?" in url else "?"
    results: dict[str, Any] = {"events": args.events}
    scenarios: dict[str, tuple[int, EventFilter]] = {
        "1 agent, all rows": (1, EventFilter(Scope("agent0"))),
        "1 of 10 agents (10%)": (10, EventFilter(Scope("agent3"))),
        "agent + kind (~1%)": (10, EventFilter(Scope("agent0"), kinds=("fact",))),
        "agent + where (~0.1%)": (10, EventFilter(Scope("agent7"), where={"rare": True})),
    }
    stores: dict[int, tuple[PostgresStore, PostgresStore]] = {}
    for agents in (1, 10):
        exact = PostgresStore(f"{url}{joiner}schema=plan_{agents}")
        started = time.perf_counter()
        load(exact, vectors, agents)
        load_s = time.perf_counter() - started
        hnsw = PostgresStore(f"{url}{joiner}schema=plan_{agents}&vector_index=hnsw")
        started = time.perf_counter()
        with hnsw.atomic() as tx:
            tx.execute("SET LOCAL maintenance_work_mem = '1GB'")
            hnsw._ensure_hnsw(tx, vectors.shape[1])
        results[f"load_{agents}"] = {
            "copy_s": load_s,
            "hnsw_build_s": time.perf_counter() - started,
        }
        stores[agents] = (exact, hnsw)
    print(f"\n{args.events:,} vectors, 384 dims, k=10, {args.queries} queries\n")
    print("| scenario | plan | p50 ms | p95 ms | recall@10 | results < k |")
    print("|---|---|---|---|---|---|")
    import memlane.store._pg_vectors as pg

    for name, (agents, flt) in scenarios.items():
        exact, hnsw = stores[agents]
        base_lat, truth = timed(exact, queries, flt)
        rows = [("exact", base_lat, truth)]
        for ef in (40, 100, 200, 400):
            pg.HNSW_EF_SEARCH = ef
            lat, got = timed(hnsw, queries, flt)
            rows.append((f"hnsw ef_search={ef}", lat, got))
        for plan, lat, got in rows:
            recall = statistics.mean(
                len(set(a) & set(t)) / max(1, len(t)) for a, t in zip(got, truth, strict=True)
            )
            short = sum(len(a) < len(t) for a, t in zip(got, truth, strict=True))
            p50, p95 = np.percentile(lat, 50), np.percentile(lat, 95)
            print(f"| {name} | {plan} | {p50:.1f} | {p95:.1f} | {recall:.3f} | {short} |")
            results[f"{name} / {plan}"] = {"p50": p50, "p95": p95, "recall": recall, "short": short}
    for exact, hnsw in stores.values():
        hnsw.close()
        exact.close()
    print(json.dumps({k: v for k, v in results.items() if k.startswith("load")}))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
