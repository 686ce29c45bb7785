"""memlane's search engines beside the libraries built for the job, on the same data (by hand).

    python bench/search_libraries.py [--events 100000] [--queries 56]

Needs `pip install faiss-cpu usearch tantivy` (a library that is missing is left out, and
said). The same events go everywhere: bench/perf.py's agent texts (15-60 words, Zipf-like
vocabulary, 14 topics), each with a vector near one of 2,000 real MiniLM vectors of such texts
(the sample plus a little noise, renormalised: clustered as real embeddings are, without exact
ties; ``--vectors random``: random unit vectors, the worst case for graph indexes), each text
recorded through memlane's public API (one agent, one big session) with an embedder that
replays those vectors, so vectors and texts are identical on every side. The keyword index
memlane builds in the background is waited for, so the timed searches are its steady state.

Vectors, k = 10, the query a stored vector plus noise (so it has true neighbours):
- **memlane** `search(mode="semantic")`: what a user gets (the scope filter, the numpy scan
  with its quantized first pass, the events read back) — the whole call;
- **numpy** a float32 matrix product and argpartition: the floor of exact search;
- **faiss** `IndexFlatIP` (exact) and `IndexHNSWFlat` (M 32, efSearch 64: approximate);
- **usearch** `Index` (HNSW, cosine, its defaults).
Recall@10 is against the exact top 10; build time and index size are reported.

Keywords, k = 10, questions like "what happened with <topic> after we <verb> it?":
- **memlane** `search(mode="keyword")`: the whole call (BM25 over the event and its context);
- **tantivy** the same texts in one text field, the `en_stem` tokenizer, its BM25.
Agreement is the overlap of the two top 10s (they share no tokenizer, so it is a likeness,
not a recall). p50 / p95 in ms over the queries, each run twice.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from perf import TOPICS, VERBS, agent_texts  # noqa: E402

from memlane import SessionManager  # noqa: E402

DIM = 384


class Replay:
    """An embedder that returns the vector each text was given (memlane's embedder protocol)."""

    name = "replay-random-384"
    dim = DIM

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[text] for text in texts]).astype(np.float32)


def unit_rows(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def minilm_like(n: int, seed: int) -> np.ndarray:
    """Vectors near real MiniLM ones: 2,000 embedded agent texts, each event's the
    sample's plus noise (a tenth of a unit vector), renormalised."""
    from memlane import MiniLMEmbedder

    sample = MiniLMEmbedder()(agent_texts(2_000, seed=seed)).astype(np.float32)
    rows = sample[np.arange(n) % len(sample)] + 0.1 * unit_rows(n, seed)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def timed(fn: Any, queries: list[Any]) -> tuple[list[float], list[Any]]:
    """Each query twice; latencies in ms (both passes) and the second pass's answers."""
    lat: list[float] = []
    answers: list[Any] = []
    for _ in range(2):
        answers = []
        for query in queries:
            start = time.perf_counter()
            answers.append(fn(query))
            lat.append((time.perf_counter() - start) * 1000)
    return lat, answers


def p50_p95(lat: list[float]) -> list[float]:
    ordered = sorted(lat)
    return [round(statistics.median(ordered), 2), round(ordered[int(len(ordered) * 0.95)], 2)]


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return round(
        float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact, strict=True)])),
        3,
    )


def rows_of(hits: Any) -> list[int]:
    """The rows of ``texts`` behind memlane's hits (each content starts "Step <row>:")."""
    return [int(h.event.content.split(":")[0].split()[1]) for h in hits if h.event.kind == "fact"]


def build_memlane(folder: Path, texts: list[str], vectors: np.ndarray, table: dict) -> Any:
    started = time.perf_counter()
    mgr = SessionManager("bench", folder / "store.db", embedder=Replay(table), background=False)
    session = mgr.start_session("one long agent session")
    table["one long agent session"] = vectors[0]
    batch = 1_000
    for i in range(0, len(texts), batch):
        mgr.record_many(session.id, [{"kind": "fact", "content": t} for t in texts[i : i + batch]])
    mgr.flush()
    # The in-memory keyword index builds in the background (FTS5 answers meanwhile): wait, so
    # that the timed searches measure the steady state (as bench/search_scale.py does).
    keywords = getattr(mgr._writer.searcher.store, "_keywords", None)
    builder = getattr(keywords, "_builder", None)
    mgr.search("warm the keyword index up", k=10, mode="keyword")
    builder = getattr(keywords, "_builder", None) or builder
    if builder is not None:
        builder.join()
    return mgr, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=56)
    parser.add_argument("--vectors", choices=("minilm", "random"), default="minilm")
    args = parser.parse_args()
    out: dict[str, Any] = {"events": args.events}
    texts = agent_texts(args.events, seed=4)
    if args.vectors == "minilm":
        vectors = minilm_like(len(texts), seed=5)
    else:
        vectors = unit_rows(len(texts), seed=5)
    out["vectors_kind"] = args.vectors
    table = dict(zip(texts, vectors, strict=True))
    rng = np.random.default_rng(6)
    picks = rng.choice(len(texts), args.queries, replace=False)
    noisy = vectors[picks] + 0.05 * rng.standard_normal((args.queries, DIM)).astype(np.float32)
    qvecs = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    qtexts = [f"semantic query {i}" for i in range(args.queries)]
    table.update(zip(qtexts, qvecs, strict=True))
    exact = [list(np.argsort(-(vectors @ q))[:10]) for q in qvecs]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        mgr, seconds = build_memlane(folder, texts, vectors, table)
        out["memlane_build_s"] = round(seconds, 1)
        table["warm up"] = qvecs[0]
        mgr.search("warm up", k=10, mode="semantic")  # the in-memory indexes are built
        lat, hits = timed(lambda q: mgr.search(q, k=10, mode="semantic"), qtexts)
        rows = [rows_of(answer) for answer in hits]
        out["vectors"] = {"memlane": {"p50_p95_ms": p50_p95(lat), "recall@10": recall(rows, exact)}}
        lat, answers = timed(lambda q: np.argpartition(-(vectors @ q), 10)[:10], list(qvecs))
        out["vectors"]["numpy"] = {"p50_p95_ms": p50_p95(lat), "recall@10": recall(answers, exact)}
        vector_libraries(out["vectors"], vectors, qvecs, exact, folder)
        queries = [f"what happened with {t} after we {v} it?" for t in TOPICS for v in VERBS[:4]]
        queries = queries[: args.queries]
        lat, hits = timed(lambda q: mgr.search(q, k=10, mode="keyword"), queries)
        ours = [rows_of(answer) for answer in hits]
        out["keywords"] = {"memlane": {"p50_p95_ms": p50_p95(lat)}}
        keyword_library(out["keywords"], texts, queries, ours, folder)
        mgr.close()
        out["memlane_file_mb"] = round(
            sum(p.stat().st_size for p in folder.glob("store.db*")) / 2**20, 1
        )
    print(json.dumps(out, indent=1))


def vector_libraries(
    out: dict, vectors: np.ndarray, qvecs: np.ndarray, exact: list, folder: Path
) -> None:
    if importlib.util.find_spec("faiss") is None:
        out["faiss"] = "not installed"
    else:
        import faiss

        for label, make in (
            ("faiss_flat", lambda: faiss.IndexFlatIP(DIM)),
            ("faiss_hnsw", lambda: faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)),
        ):
            start = time.perf_counter()
            index = make()
            index.add(vectors)
            if label == "faiss_hnsw":
                index.hnsw.efSearch = 64
            built = time.perf_counter() - start
            lat, answers = timed(
                lambda q, index=index: index.search(q[None, :], 10)[1][0].tolist(), list(qvecs)
            )
            path = folder / f"{label}.index"
            faiss.write_index(index, str(path))
            out[label] = {
                "p50_p95_ms": p50_p95(lat),
                "recall@10": recall(answers, exact),
                "build_s": round(built, 1),
                "file_mb": round(path.stat().st_size / 2**20, 1),
            }
    if importlib.util.find_spec("usearch") is None:
        out["usearch"] = "not installed"
    else:
        from usearch.index import Index

        start = time.perf_counter()
        index = Index(ndim=DIM, metric="cos")
        index.add(np.arange(len(vectors)), vectors)
        built = time.perf_counter() - start
        lat, answers = timed(lambda q: index.search(q, 10).keys.tolist(), list(qvecs))
        path = folder / "usearch.index"
        index.save(str(path))
        out["usearch"] = {
            "p50_p95_ms": p50_p95(lat),
            "recall@10": recall(answers, exact),
            "build_s": round(built, 1),
            "file_mb": round(path.stat().st_size / 2**20, 1),
        }


def keyword_library(
    out: dict, texts: list[str], queries: list[str], ours: list, folder: Path
) -> None:
    if importlib.util.find_spec("tantivy") is None:
        out["tantivy"] = "not installed"
        return
    import tantivy

    schema_builder = tantivy.SchemaBuilder()
    schema_builder.add_integer_field("row", stored=True, indexed=True)
    schema_builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
    schema = schema_builder.build()
    start = time.perf_counter()
    (folder / "tantivy").mkdir()
    index = tantivy.Index(schema, path=str(folder / "tantivy"))
    writer = index.writer()
    for row, text in enumerate(texts):
        writer.add_document(tantivy.Document(row=row, text=text))
    writer.commit()
    index.reload()
    built = time.perf_counter() - start
    searcher = index.searcher()

    def search(query: str) -> list[int]:
        words = " ".join(w for w in query.replace("?", "").split() if w.isalnum())
        parsed = index.parse_query(words, ["text"])
        return [searcher.doc(address)["row"][0] for _, address in searcher.search(parsed, 10).hits]

    lat, answers = timed(search, queries)
    size = sum(p.stat().st_size for p in (folder / "tantivy").rglob("*") if p.is_file())
    out["tantivy"] = {
        "p50_p95_ms": p50_p95(lat),
        "overlap@10_with_memlane": recall(answers, ours),
        "build_s": round(built, 1),
        "dir_mb": round(size / 2**20, 1),
    }


if __name__ == "__main__":
    main()
