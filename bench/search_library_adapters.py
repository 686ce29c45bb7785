"""The third-party search libraries of bench/search_libraries.py, behind one small interface.

Each adapter builds an index of a :class:`Corpus` into a folder, opens it in another process,
answers a top-k search in one of two scopes — the agent's whole partition, or one session of
it (a filter) — and appends rows durably (what a write costs). Results are event ``seq`` s.
Nothing here imports memlane: the keyword adapters get their query words (and bm25s its
tokenizer) from the caller, so that every system sees the same query.

Settings, and why:

- **tantivy**: a regex tokenizer on ``[^\\W_]+`` (FTS5's unicode61 token rule), lower case,
  ASCII folding, tantivy's ``english`` stemmer (Snowball's English, i.e. Porter2, not
  Porter); positions not indexed (BM25 needs frequencies only). Tantivy's BM25: k1 1.2,
  b 0.75, idf ``ln(1 + (N - n + 0.5) / (n + 0.5))``. The session filter is a term query on a
  u64 field with a constant score of 0, so that it filters without changing the ranking.
- **bm25s**: memlane's own tokens and Porter stems (passed in), ``method="robertson"``,
  k1 1.2, b 0.75 (FTS5's formula but for its idf clamp: 0 where FTS5 keeps 1e-6); numpy
  backend (numba is not installed). The session filter is ``weight_mask``.
- **faiss**: ``IndexFlatIP`` (exact) and ``IndexHNSWFlat`` (M 32, efConstruction 64,
  efSearch 64); the session filter is an ``IDSelectorBatch`` built per query.
- **usearch**: HNSW, cosine, f32, its defaults (connectivity 16, expansion 128 / 64). Its
  Python binding has no filtered search: a session search over-fetches (4 k times the rows
  per session row, at most 10,000) and filters, and when that leaves fewer than k rows, ranks
  the session's own vectors exactly (``index.get``).
- **sqlite-vec**: a ``vec0`` table with the session as a metadata column (filtered inside
  the scan), cosine distance, brute force. Loaded through ``apsw``: this Python's ``sqlite3``
  cannot load extensions.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
Tokenize = Callable[[str], list[str]]

#: the pinned libraries (pyproject's [bench-libraries] extra), by the module each imports
LIBRARIES = {
    "tantivy": "tantivy",
    "bm25s": "bm25s",
    "faiss": "faiss-cpu",
    "usearch": "usearch",
    "sqlite_vec": "sqlite-vec",
    "apsw": "apsw",
}


@dataclass
class Corpus:
    """The rows of one partition, in ``seq`` order: texts for keyword systems, L2-normalised
    vectors for vector ones (either may be None where it is not needed)."""

    seqs: npt.NDArray[np.int64]
    sessions: npt.NDArray[np.int32]  # small ints standing for session ids
    texts: list[str] | None = None
    vectors: Vector | None = None


@dataclass(frozen=True)
class Scope:
    """What a search reads: the agent's whole partition (``session`` None), or one session
    (its small-int code, and its id for memlane's API)."""

    name: str
    session: int | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class Query:
    """One query as every system gets it: the text (memlane), its query words (memlane's
    ``query_words``: stop words dropped; the keyword libraries), and its vector."""

    text: str
    words: tuple[str, ...]
    vector: Vector


def folder_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def top_k(scores: Vector, k: int) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` best scores, best first, ties by position (storage order, as
    memlane breaks them)."""
    if scores.size > k:
        cut = np.argpartition(-scores, k - 1)[:k]
        kth = scores[cut].min()
        cut = np.flatnonzero(scores >= kth)  # every row tied with the k-th
    else:
        cut = np.arange(scores.size)
    return cut[np.lexsort((cut, -scores[cut]))][:k]


class Library:
    """One system under test."""

    name = ""
    kind = ""  # "keyword" or "vector"
    #: what several processes writing one index need, in one line (the decision's table)
    writers = ""

    def build(self, corpus: Corpus, folder: Path) -> None:
        raise NotImplementedError

    def open(self, folder: Path, corpus: Corpus) -> None:
        raise NotImplementedError

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        raise NotImplementedError

    def append(self, folder: Path, rows: Corpus) -> str:
        """Add ``rows`` and make them durable, as a writer would; returns a note."""
        raise NotImplementedError

    def session_rows(self, session: int) -> npt.NDArray[np.intp]:
        # (per query, as a caller holding only a session id must: memlane's masks are too)
        return np.flatnonzero(self.corpus.sessions == session)

    corpus: Corpus


# -- keyword -------------------------------------------------------------------------------


class Tantivy(Library):
    name, kind = "tantivy", "keyword"
    writers = "one IndexWriter per index (a lock file; a 2nd fails LockBusy): one writer process"

    def _analyzer(self) -> Any:
        import tantivy

        return (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"[^\W_]+"))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .filter(tantivy.Filter.stemmer("english"))
            .build()
        )

    def _index(self, folder: Path) -> Any:
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", tokenizer_name="memlane_en", index_option="freq")
        builder.add_unsigned_field("session", indexed=True, fast=True)
        builder.add_unsigned_field("seq", fast=True)
        self.schema = builder.build()
        folder.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(self.schema, path=str(folder), reuse=True)
        # (tokenizers are not saved with the index: every process registers its own)
        self.analyzer = self._analyzer()
        index.register_tokenizer("memlane_en", self.analyzer)
        return index

    def _add(self, writer: Any, rows: Corpus) -> None:
        import tantivy

        assert rows.texts is not None
        for seq, session, text in zip(rows.seqs, rows.sessions, rows.texts, strict=True):
            doc = tantivy.Document()
            doc.add_text("text", text)
            doc.add_unsigned("session", int(session))
            doc.add_unsigned("seq", int(seq))
            writer.add_document(doc)

    def build(self, corpus: Corpus, folder: Path) -> None:
        index = self._index(folder)
        writer = index.writer(heap_size=256_000_000)
        self._add(writer, corpus)
        writer.commit()
        writer.wait_merging_threads()

    def open(self, folder: Path, corpus: Corpus) -> None:
        self.corpus = corpus
        self.index = self._index(folder)
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        import tantivy

        Q, Occur = tantivy.Query, tantivy.Occur
        terms = list(dict.fromkeys(self.analyzer.analyze(" ".join(query.words))))
        if not terms:
            return []
        text = Q.boolean_query(
            [(Occur.Should, Q.term_query(self.schema, "text", t)) for t in terms]
        )
        if scope.session is not None:
            only = Q.const_score_query(Q.term_query(self.schema, "session", scope.session), 0.0)
            text = Q.boolean_query([(Occur.Must, text), (Occur.Must, only)])
        hits = self.searcher.search(text, k, count=False).hits
        return [int(s) for s in self.searcher.fast_field_values("seq", [a for _, a in hits])]

    def append(self, folder: Path, rows: Corpus) -> str:
        writer = self.index.writer(heap_size=64_000_000)
        try:  # a second writer, as another process would open one meanwhile
            self.index.writer(heap_size=64_000_000)
            note = "a second writer opened (unexpected)"
        except ValueError as exc:
            note = f"second writer refused: {str(exc).split(':')[1].strip()[:40]}"
        self._add(writer, rows)
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        return note


class Bm25s(Library):
    name, kind = "bm25s", "keyword"
    writers = "no incremental add: every write rebuilds and re-saves the whole index"

    def __init__(self, tokenize: Tokenize) -> None:
        self.tokenize = tokenize

    def _fit(self, corpus: Corpus, folder: Path) -> None:
        import bm25s

        assert corpus.texts is not None
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="robertson")
        retriever.index([self.tokenize(text) for text in corpus.texts], show_progress=False)
        if folder.exists():
            shutil.rmtree(folder)
        retriever.save(str(folder))

    def build(self, corpus: Corpus, folder: Path) -> None:
        self._fit(corpus, folder)

    def open(self, folder: Path, corpus: Corpus) -> None:
        import bm25s

        self.corpus = corpus
        self.retriever = bm25s.BM25.load(str(folder))
        self.vocab = self.retriever.vocab_dict

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        stems = dict.fromkeys(self.tokenize(" ".join(query.words)))
        known = [stem for stem in stems if stem in self.vocab]
        if not known:
            return []
        mask = None
        if scope.session is not None:
            mask = (self.corpus.sessions == scope.session).astype(np.float32)
        docs, scores = self.retriever.retrieve(
            [known], k=k, show_progress=False, n_threads=0, weight_mask=mask
        )
        # (a masked or unmatched row scores 0 and may still fill the k)
        return [int(self.corpus.seqs[d]) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def append(self, folder: Path, rows: Corpus) -> str:
        assert self.texts is not None and rows.texts is not None
        whole = Corpus(
            np.concatenate((self.corpus.seqs, rows.seqs)),
            np.concatenate((self.corpus.sessions, rows.sessions)),
            texts=self.texts + rows.texts,
        )
        self._fit(whole, folder)
        return "rebuilt whole"

    texts: list[str] | None = None  # the corpus's texts, for append (set by the caller)


# -- vectors -------------------------------------------------------------------------------


class NumpyExact(Library):
    """The reference: an exact float32 scan (what memlane's engine was before its codes)."""

    name, kind = "numpy exact", "vector"
    writers = "a .npy file: one process rewrites it whole"

    def build(self, corpus: Corpus, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        assert corpus.vectors is not None
        np.save(folder / "vectors.npy", corpus.vectors)

    def open(self, folder: Path, corpus: Corpus) -> None:
        self.corpus = corpus
        self.matrix = np.load(folder / "vectors.npy")

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        if scope.session is None:
            best = top_k(self.matrix @ query.vector, k)
        else:
            rows = self.session_rows(scope.session)
            best = rows[top_k(self.matrix[rows] @ query.vector, k)]
        return self.corpus.seqs[best].tolist()

    def append(self, folder: Path, rows: Corpus) -> str:
        assert rows.vectors is not None
        self.matrix = np.concatenate((self.matrix, rows.vectors))
        np.save(folder / "vectors.npy", self.matrix)
        return "rewrote the file"


class FaissFlat(Library):
    name, kind = "faiss flat", "vector"
    writers = "in memory; write_index rewrites the whole file; one writer process"

    def _new(self, dim: int) -> Any:
        import faiss

        return faiss.IndexFlatIP(dim)

    def _params(self, selector: Any) -> Any:
        import faiss

        return faiss.SearchParameters(sel=selector)

    def build(self, corpus: Corpus, folder: Path) -> None:
        import faiss

        assert corpus.vectors is not None
        index = self._new(corpus.vectors.shape[1])
        index.add(corpus.vectors)
        folder.mkdir(parents=True, exist_ok=True)
        faiss.write_index(index, str(folder / "index.faiss"))

    def open(self, folder: Path, corpus: Corpus) -> None:
        import faiss

        self.corpus = corpus
        self.index = faiss.read_index(str(folder / "index.faiss"))
        self.defaults = self._params(None)

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        import faiss

        params = self.defaults
        if scope.session is not None:
            rows = self.session_rows(scope.session).astype(np.int64)
            params = self._params(faiss.IDSelectorBatch(rows))
        _, found = self.index.search(query.vector[None, :], k, params=params)
        return [int(self.corpus.seqs[i]) for i in found[0] if i >= 0]

    def append(self, folder: Path, rows: Corpus) -> str:
        import faiss

        self.index.add(rows.vectors)
        faiss.write_index(self.index, str(folder / "index.faiss"))
        return "rewrote the file"


class FaissHnsw(FaissFlat):
    name = "faiss HNSW"

    def _new(self, dim: int) -> Any:
        import faiss

        index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 64
        return index

    def _params(self, selector: Any) -> Any:
        import faiss

        return faiss.SearchParametersHNSW(efSearch=64, sel=selector)


#: the most results a usearch session search over-fetches before it filters them
OVER_FETCH = 10_000


class Usearch(Library):
    name, kind = "usearch HNSW", "vector"
    writers = "in memory (or a view); save() rewrites the whole file; one writer process"

    def build(self, corpus: Corpus, folder: Path) -> None:
        from usearch.index import Index

        assert corpus.vectors is not None
        index = Index(ndim=corpus.vectors.shape[1], metric="cos", dtype="f32")
        index.add(np.arange(len(corpus.vectors)), corpus.vectors)
        folder.mkdir(parents=True, exist_ok=True)
        index.save(str(folder / "index.usearch"))

    def open(self, folder: Path, corpus: Corpus) -> None:
        from usearch.index import Index

        self.corpus = corpus
        self.index = Index.restore(str(folder / "index.usearch"))
        self.fallbacks = 0  # session searches the over-fetch could not fill

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        if scope.session is None:
            keys = self.index.search(query.vector, k).keys
            return [int(self.corpus.seqs[key]) for key in keys]
        rows = self.session_rows(scope.session)
        # over-fetch so that, spread evenly, about 4 k of the session's rows come back (at
        # most OVER_FETCH: past that a graph search costs more than the exact fallback)
        wanted = max(4 * k, 4 * k * len(self.corpus.seqs) // len(rows))
        count = min(len(self.corpus.seqs), wanted, OVER_FETCH)
        keys = self.index.search(query.vector, count).keys
        inside = set(rows.tolist())
        kept = [int(key) for key in keys if int(key) in inside][:k]
        if len(kept) < min(k, len(rows)):
            self.fallbacks += 1
            vectors = self.index.get(rows)
            kept = rows[top_k(np.asarray(vectors, np.float32) @ query.vector, k)].tolist()
        return [int(self.corpus.seqs[key]) for key in kept]

    def append(self, folder: Path, rows: Corpus) -> str:
        start = self.index.size
        self.index.add(np.arange(start, start + len(rows.seqs)), rows.vectors)
        self.index.save(str(folder / "index.usearch"))
        return "rewrote the file"


class SqliteVec(Library):
    name, kind = "sqlite-vec", "vector"
    writers = "SQLite transactions: any process writes (one at a time), readers see commits"

    def _connect(self, path: Path) -> Any:
        import apsw
        import sqlite_vec

        conn = apsw.Connection(str(path))
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        return conn

    def _insert(self, conn: Any, rows: Corpus) -> None:
        assert rows.vectors is not None
        with conn:  # one transaction
            conn.executemany(
                "INSERT INTO items (rowid, embedding, session) VALUES (?, ?, ?)",
                (
                    (int(seq), vector.astype("<f4").tobytes(), int(session))
                    for seq, session, vector in zip(
                        rows.seqs, rows.sessions, rows.vectors, strict=True
                    )
                ),
            )

    def build(self, corpus: Corpus, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        assert corpus.vectors is not None
        conn = self._connect(folder / "vectors.db")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            f"CREATE VIRTUAL TABLE items USING vec0(embedding float[{corpus.vectors.shape[1]}] "
            "distance_metric=cosine, session integer)"
        )
        for start in range(0, len(corpus.seqs), 50_000):
            end = start + 50_000
            part = Corpus(corpus.seqs[start:end], corpus.sessions[start:end])
            part.vectors = corpus.vectors[start:end]
            self._insert(conn, part)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    def open(self, folder: Path, corpus: Corpus) -> None:
        self.corpus = corpus
        self.conn = self._connect(folder / "vectors.db")

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        sql = "SELECT rowid FROM items WHERE embedding MATCH ? AND k = ?"
        params: list[Any] = [query.vector.astype("<f4").tobytes(), k]
        if scope.session is not None:
            sql += " AND session = ?"
            params.append(scope.session)
        return [int(row[0]) for row in self.conn.execute(sql + " ORDER BY distance", params)]

    def append(self, folder: Path, rows: Corpus) -> str:
        self._insert(self.conn, rows)
        return "one transaction"


def keyword_libraries(tokenize: Tokenize) -> list[Library]:
    return [Tantivy(), Bm25s(tokenize)]


def vector_libraries() -> list[Library]:
    return [NumpyExact(), FaissFlat(), FaissHnsw(), Usearch(), SqliteVec()]


def missing_modules() -> list[str]:
    """The modules of the pinned libraries that cannot be imported here."""
    import importlib.util

    return [module for module in LIBRARIES if importlib.util.find_spec(module) is None]


def requires(library: Library) -> list[str]:
    """The modules ``library`` needs (none: numpy's and memlane's)."""
    return {
        "tantivy": ["tantivy"],
        "bm25s": ["bm25s"],
        "faiss flat": ["faiss"],
        "faiss HNSW": ["faiss"],
        "usearch HNSW": ["usearch"],
        "sqlite-vec": ["sqlite_vec", "apsw"],
    }.get(library.name, [])


def dump_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value))
