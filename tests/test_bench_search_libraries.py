"""bench/search_libraries.py's core on a tiny store (300 events, HashEmbedder): every system
it can reach here answers the bench's queries in both scopes, and its exactness figures mean
what they say — exact search scores 1.0 against itself, a broken ranking less. Libraries that
are not installed (the [bench-libraries] extra) are skipped."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import HashEmbedder, SessionManager
from memlane.embed import load_embedder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import search_libraries as bench
from perf import TOPICS, VERBS
from search_library_adapters import Corpus, Library, Query, Scope

QUERIES = {
    "short": [f"what happened with {t} after we {v} it?" for t in TOPICS[:4] for v in VERBS[:2]],
    "long": [f"we {VERBS[i]} {TOPICS[i]} and then {TOPICS[i + 3]} twice" for i in range(4)],
    "two topics": [f"did {a} affect {b}?" for a, b in zip(TOPICS[:4], TOPICS[5:9], strict=True)],
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[bench.Store, dict[str, Any], Path]:
    """A store of 300 events: a 150-event session and five side sessions of 30."""
    folder = tmp_path_factory.mktemp("tiny")
    path = folder / "tiny.db"
    with SessionManager(
        "tiny", url=f"sqlite:///{path}", embedder=HashEmbedder(), background=False
    ) as mgr:
        big = mgr.start_session("the big one")
        sides = [mgr.start_session(f"side {i}") for i in range(5)]
        for i in range(300):
            session = big if i < 150 else sides[i % 5]
            text = f"Step {i}: {VERBS[i % 10]} {TOPICS[i % 14]} and noted {TOPICS[(i * 7) % 14]}"
            mgr.record_fact(session.id, text)
        mgr.flush()
    store = bench.Store.read(path)
    queries = bench.make_queries(QUERIES, load_embedder(HashEmbedder()).embed)
    return store, queries, folder


def measured(lib: Library, tiny: Any, folder_name: str) -> dict[str, Any]:
    store, queries, folder = tiny
    corpus = store.keyword if lib.kind == "keyword" else store.vector
    lib.build(corpus, folder / folder_name)
    return bench.measure(lib, folder / folder_name, corpus, queries, store.scopes(), reps=1)


def exactness(lib: Library, tiny: Any, refs: Any = None) -> dict[str, float]:
    store, queries, _ = tiny
    found = measured(lib, tiny, bench.slug(lib))
    exact = bench.ExactVectors(store.vector)
    return bench.exactness(lib.kind, found, queries, store.scopes(), exact, refs)


def keyword_refs(tiny: Any) -> dict[str, list[list[int]]]:
    store, queries, folder = tiny
    engine = bench.MemlaneEngine(store, "keyword")
    engine.open(folder, store.keyword)
    return bench.keyword_references(engine, queries, store.scopes())


class Reversed(Library):
    """A broken ranking: numpy's exact one, worst first."""

    def __init__(self, inner: Library) -> None:
        self.inner, self.kind, self.name = inner, inner.kind, "reversed"

    def build(self, corpus: Corpus, folder: Path) -> None:
        self.inner.build(corpus, folder)

    def open(self, folder: Path, corpus: Corpus) -> None:
        self.inner.open(folder, corpus)

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        return self.inner.search(query, scope, 10_000)[::-1][:k]


def test_a_store_is_saved_for_the_measuring_processes(tiny: Any, tmp_path: Path) -> None:
    store = tiny[0]
    store.save(tmp_path)
    light, full = bench.Store.load(tmp_path, full=False), bench.Store.load(tmp_path, full=True)
    assert light.keyword.texts is None and light.path == store.path
    assert full.keyword.texts == store.keyword.texts
    assert (full.vector.vectors == store.vector.vectors).all()
    assert (full.vector.seqs == store.vector.seqs).all() and full.scopes() == store.scopes()


def test_a_generated_workload_has_the_stores_shape() -> None:
    sample = load_embedder(HashEmbedder()).embed([f"sample {i}" for i in range(20)])
    store = bench.Store.synthetic(2_000, sample, session_events=1_000)
    scopes = store.scopes()
    assert store.path is None and len(store.keyword.seqs) == 2_000 + 3  # + three goals
    assert scopes["big session"].name == "session (1001 events)"
    assert scopes["session"].name == "session (501 events)"  # (two side sessions)
    assert store.vector.vectors is not None and len(store.vector.vectors) == 2_003
    copies = store.vector.vectors @ store.vector.vectors[0]
    store.jitter(0.01)
    moved = store.vector.vectors @ store.vector.vectors[0]
    assert (copies > 0.9999).sum() > 1 and (moved > 0.9999).sum() == 1  # distinct now
    assert np.allclose(np.linalg.norm(store.vector.vectors, axis=1), 1.0, atol=1e-5)
    assert all(lib.name != "memlane (SessionManager)" for lib in bench.systems(store, None))


def test_scopes_are_the_agent_a_side_session_and_the_big_one(tiny: Any) -> None:
    scopes = tiny[0].scopes()
    assert scopes["agent"].session is None
    assert scopes["session"].name == "session (31 events)"  # (30 facts and its goal)
    assert scopes["big session"].name == "session (151 events)"


def test_vector_recall_counts_ties_and_nothing_out_of_scope(tiny: Any) -> None:
    assert bench.vector_recall([0.9, 0.8], kth=0.8, wanted=2) == 1.0  # 0.8: tied with the 2nd
    assert bench.vector_recall([0.9, 0.1], kth=0.8, wanted=2) == 0.5
    assert bench.vector_recall([], kth=0.0, wanted=0) == 1.0  # an empty scope
    store, queries, _ = tiny
    exact, query, scopes = bench.ExactVectors(store.vector), queries["short"][0], store.scopes()
    best = bench.vector_libraries()[0]  # numpy exact, in memory
    best.corpus, best.matrix = store.vector, store.vector.vectors
    found = best.search(query, scopes["session"], 10)
    assert exact.recall(found, query, scopes["session"]) == 1.0
    assert exact.recall(found[:1] * 10, query, scopes["session"]) == 0.1  # a repeat counts once
    outside = store.vector.seqs[store.vector.sessions != scopes["session"].session][:10]
    assert exact.recall(outside.tolist(), query, scopes["session"]) == 0.0


def test_overlap_and_ndcg() -> None:
    assert bench.overlap([3, 2, 1], [1, 2, 3], k=3) == 1.0
    assert bench.overlap([4, 5, 1], [1, 2, 3], k=3) == pytest.approx(1 / 3)
    assert bench.ndcg([1, 2, 3], [1, 2, 3, 4], k=3) == 1.0
    assert bench.ndcg([3, 2, 1], [1, 2, 3, 4], k=3) < 1.0
    assert bench.ndcg([9, 8, 7], [1, 2, 3, 4], k=3) == 0.0


def test_exact_vector_search_has_recall_one_and_a_broken_one_less(tiny: Any) -> None:
    assert exactness(bench.vector_libraries()[0], tiny)["all"] == 1.0  # numpy exact
    broken = exactness(Reversed(bench.vector_libraries()[0]), tiny)
    assert broken["all"] < 0.5


def test_memlane_vector_engine_and_manager_are_exact(tiny: Any) -> None:
    store = tiny[0]
    assert exactness(bench.MemlaneEngine(store, "vector"), tiny)["all"] == 1.0
    manager = bench.MemlaneManager(store, "vector", HashEmbedder())
    assert exactness(manager, tiny)["all"] == 1.0
    manager.close()


def test_memlane_keyword_ranking_agrees_with_itself_a_broken_one_does_not(tiny: Any) -> None:
    store, refs = tiny[0], keyword_refs(tiny)
    engine = exactness(bench.MemlaneEngine(store, "keyword"), tiny, refs)
    assert engine["all"] == 1.0 and engine["ndcg all"] == 1.0
    manager = bench.MemlaneManager(store, "keyword", HashEmbedder())
    assert exactness(manager, tiny, refs)["all"] == 1.0  # the user's path ranks the same
    manager.close()
    broken = exactness(Reversed(bench.MemlaneEngine(store, "keyword")), tiny, refs)
    assert broken["all"] < 1.0 and broken["ndcg all"] < 1.0


def _installed(module: str) -> None:
    pytest.importorskip(module)


@pytest.mark.parametrize("name", ["faiss flat", "faiss HNSW", "usearch HNSW", "sqlite-vec"])
def test_vector_libraries(tiny: Any, name: str) -> None:
    lib = next(lib for lib in bench.vector_libraries() if lib.name == name)
    for module in bench.requires(lib):
        _installed(module)
    # exact ones are exact; graph indexes at 300 rows too, but allow them a miss
    assert exactness(lib, tiny)["all"] >= (1.0 if name in ("faiss flat", "sqlite-vec") else 0.95)


@pytest.mark.parametrize("name", ["tantivy", "bm25s"])
def test_keyword_libraries(tiny: Any, name: str) -> None:
    lib = next(lib for lib in bench.keyword_libraries(bench.memlane_tokens) if lib.name == name)
    for module in bench.requires(lib):
        _installed(module)
    found = exactness(lib, tiny, keyword_refs(tiny))
    # BM25 with other tokenizers and weights: mostly the same rows, not all
    assert 0.3 < found["all"] <= 1.0 and 0.3 < found["ndcg all"] <= 1.0
