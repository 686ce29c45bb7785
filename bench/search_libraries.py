"""memlane's search engines against libraries built for them, one workload, one run (by hand).

    python bench/search_libraries.py STORE.db [--build N] [--only NAME ...] [--reps 3]
        [--workdir DIR] [--json OUT]
    python bench/search_libraries.py --synthetic N [--jitter 0.01] ...   # no store

(decisions/2026-11-26-search-engines-vs-libraries.md has the figures and the commands.)

Needs the [bench-libraries] extra (tantivy, bm25s, faiss-cpu, usearch, sqlite-vec, apsw);
a library that is missing is named and left out. STORE.db is a store of bench/perf.py's
generator (``--build N`` makes one: one agent, a 10k-event session, side sessions of ~500
events, replayed real MiniLM vectors). Every system gets the same rows — the store's indexed
events (texts) and their vectors, read from the file — and the same queries: bench/perf.py's
56, 40 long ones and 25 naming two topics (bench/search_scale.py's), k = 10, embedded once
with MiniLM, so no figure here includes query embedding. Scopes, as memlane applies them:
the agent's whole partition (memlane keeps a partition per agent, so a library gets the
agent's rows as its whole index), and one session of it as a filter — a side session (~0.5%
of the rows at 100k) and the 10k-event one — by each library's own means (see
search_library_adapters.py).

Systems: memlane as a user gets it (``SessionManager.search(mode="keyword" | "semantic")``,
with an embedder that returns the queries' MiniLM vectors, so the model is neither run nor
loaded), memlane's engines alone (``KeywordCache``, ``VectorCache`` fed from memory), and the
libraries. Each is built in one process and measured in a fresh one: open + first query
(persistence), p50 / p95 over queries of each query's median over ``--reps`` repetitions
(after one untimed pass), RSS the index added, and a durable write of 100 rows. Recall: for
vectors, the share of the top 10 whose exact cosine reaches the exact 10th best (exact =
numpy float32 over the same vectors; ties count, since the replayed vectors repeat ~50 times
at 100k); for keywords, overlap of the top 10 with memlane's BM25 and an nDCG@10 taking
memlane's top 50 as graded relevance (the libraries tokenize and weigh differently).

``--synthetic N`` generates bench/perf.py's store in memory instead (a 1M-event store takes
hours to write on a shared 2-core machine): memlane's engines and the libraries only, not
``SessionManager``. ``--jitter SIGMA`` then makes the replayed vectors distinct
(:meth:`Store.jitter`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import Stemmer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_library_adapters import (
    Corpus,
    Library,
    Query,
    Scope,
    Vector,
    folder_mb,
    keyword_libraries,
    missing_modules,
    requires,
    vector_libraries,
)

from memlane import SessionManager
from memlane.embed import load_embedder
from memlane.ranking.vectors.codec import decode_vectors, vector_dim

# memlane's engines are private modules, moved under memlane.ranking in issue 30: every
# private import of this bench is here, the new path first.
try:
    from memlane.ranking.keyword.cache import KeywordCache
    from memlane.ranking.keyword.terms import query_words, tokens
    from memlane.ranking.partition_rows import RowQuery
    from memlane.ranking.vectors.cache import VectorCache
except ImportError:  # before the move
    from memlane.store._keyword import query_words, tokens  # type: ignore[no-redef]
    from memlane.store._keyword_cache import KeywordCache  # type: ignore[no-redef]
    from memlane.store._partition_rows import RowQuery  # type: ignore[no-redef]
    from memlane.store._vector_cache import VectorCache  # type: ignore[no-redef]

K = 10
#: memlane's ranking deep enough to grade the libraries' top 10 by (keyword nDCG)
GRADED_DEPTH = 50
#: (query set, scope) pairs measured; sessions with the short queries only
PLAN = (
    ("short", "agent"),
    ("long", "agent"),
    ("two topics", "agent"),
    ("short", "session"),
    ("short", "big session"),
)
#: seconds of timed repetitions per (set, scope) before fewer are taken (a 1M brute force)
REP_BUDGET_S = 30.0
APPENDED = 100


# -- the workload ----------------------------------------------------------------------------


def query_texts() -> dict[str, list[str]]:
    """bench/search_scale.py's query sets."""
    from perf import TOPICS, VERBS, agent_texts

    short = [f"what happened with {t} after we {v} it?" for t in TOPICS for v in VERBS[:4]]
    two = [
        f"did {a} affect {b} after we {v} it?"
        for i, a in enumerate(TOPICS)
        for b, v in zip(TOPICS[i + 1 : i + 3], VERBS[:2], strict=False)
    ]
    return {"short": short, "long": agent_texts(40, seed=9), "two topics": two}


class Store:
    """What the bench reads of a memlane SQLite file: its one partition's indexed events
    and their vectors, from the file's own tables (there is no public bulk read of
    vectors). :meth:`light` is the same without texts and vectors (a measuring process)."""

    path: Path
    agent: str
    partition: str
    session_ids: list[str]
    keyword: Corpus
    vector: Corpus
    kinds: list[str]
    times: npt.NDArray[np.int64]

    @classmethod
    def read(cls, path: Path) -> Store:
        store = cls()
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            parts = conn.execute("SELECT DISTINCT partition, agent_id FROM events").fetchall()
            assert len(parts) == 1, f"one agent's store expected, found {parts}"
            # (a text of 32k+ characters would be ranked by its payload: none here)
            long = conn.execute("SELECT count(*) FROM events WHERE length(content) >= 32768")
            assert long.fetchone()[0] == 0
            rows = conn.execute(
                "SELECT seq, session_id, kind, created_us, content FROM events "
                "WHERE indexed ORDER BY seq"
            ).fetchall()
            vectors = conn.execute(
                "SELECT v.seq, e.session_id, v.vector FROM vectors v "
                "JOIN events e ON e.seq = v.seq ORDER BY v.seq"
            ).fetchall()
        finally:
            conn.close()
        store.path, (store.partition, store.agent) = path, parts[0]
        store.session_ids = sorted({row[1] for row in rows} | {row[1] for row in vectors})
        code = {session: i for i, session in enumerate(store.session_ids)}
        store.kinds = [row[2] for row in rows]
        store.times = np.asarray([row[3] for row in rows], np.int64)
        store.keyword = Corpus(
            np.asarray([row[0] for row in rows], np.int64),
            np.asarray([code[row[1]] for row in rows], np.int32),
            texts=[row[4] for row in rows],
        )
        blobs = [row[2] for row in vectors]
        matrix = decode_vectors(blobs, vector_dim(blobs[0])) if blobs else np.zeros((0, 1))
        store.vector = Corpus(
            np.asarray([row[0] for row in vectors], np.int64),
            np.asarray([code[row[1]] for row in vectors], np.int32),
            vectors=matrix.astype(np.float32),
        )
        return store

    @classmethod
    def synthetic(cls, n: int, sample: Vector, session_events: int = 10_000) -> Store:
        """bench/perf.py's store of ``n`` events generated in memory, for the engines and the
        libraries only (its write path takes 1.5 h+ at 1M on this shared machine): the same
        texts, sessions and replayed vectors as ``build_store`` makes, but the big session's
        events all plain texts (there, some are steps and tool outputs) and no pending
        steps."""
        from perf import agent_texts

        store = cls()
        texts = agent_texts(n, seed=2)
        sides = max(1, (n - session_events) // 500)
        goals = ["Survey 2026 sparse attention methods and report the best"]
        goals += [f"side task {s}" for s in range(sides)]
        # insertion order: the big session's goal and events, the side goals, their events
        rows = [(0, goals[0])] + [(0, texts[i]) for i in range(session_events)]
        rows += [(1 + s, goals[1 + s]) for s in range(sides)]
        rows += [(1 + i % sides, texts[i]) for i in range(session_events, n)]
        store.path, store.agent, store.partition = None, "bench", "bench"
        store.session_ids = [f"session-{s:06d}" for s in range(1 + sides)]
        seqs = np.arange(1, len(rows) + 1, dtype=np.int64)
        sessions = np.asarray([session for session, _ in rows], np.int32)
        all_texts = [text for _, text in rows]
        store.kinds = ["fact"] * len(rows)
        store.times = 1_780_000_000_000_000 + seqs * 1000  # a millisecond apart
        store.keyword = Corpus(seqs, sessions, texts=all_texts)
        # bench/perf.py's ReplayEmbedder: a sample vector picked by the text's crc32
        picks = [zlib.crc32(text.encode()) % len(sample) for text in all_texts]
        store.vector = Corpus(seqs, sessions, vectors=sample[picks])
        return store

    def jitter(self, sigma: float, seed: int = 7) -> None:
        """Move every vector by Gaussian noise of ``sigma`` per dimension, renormalised: the
        replayed vectors repeat (~50 copies each at 100k, ~500 at 1M), which no real log
        does so uniformly and which graph indexes (HNSW) handle badly; with ``sigma`` 0.01
        a copy keeps a cosine of ~0.98 with its original and every vector is distinct."""
        assert self.vector.vectors is not None
        rng = np.random.default_rng(seed)
        moved = self.vector.vectors
        for start in range(0, len(moved), 65_536):  # (bounded temporaries at 1M)
            part = moved[start : start + 65_536]
            part += rng.normal(0.0, sigma, part.shape).astype(np.float32)
            part /= np.linalg.norm(part, axis=1, keepdims=True)

    def save(self, workdir: Path) -> None:
        """Everything a child process needs (it reads no SQLite: faster, and the same for a
        synthetic workload)."""
        names = {"path": self.path and str(self.path), "agent": self.agent}
        names.update({"partition": self.partition, "sessions": self.session_ids})
        (workdir / "store.json").write_text(json.dumps(names))
        np.savez(
            workdir / "store.npz",
            keyword_seqs=self.keyword.seqs,
            keyword_sessions=self.keyword.sessions,
            vector_seqs=self.vector.seqs,
            vector_sessions=self.vector.sessions,
            times=self.times,
        )
        (workdir / "texts.json").write_text(json.dumps([self.keyword.texts, self.kinds]))
        np.save(workdir / "vectors.npy", self.vector.vectors)

    @classmethod
    def load(cls, workdir: Path, *, full: bool) -> Store:
        """What :meth:`save` wrote; texts and vectors only if ``full``."""
        store = cls()
        names = json.loads((workdir / "store.json").read_text())
        store.path = names["path"] and Path(names["path"])
        store.agent, store.partition = names["agent"], names["partition"]
        store.session_ids = names["sessions"]
        arrays = np.load(workdir / "store.npz")
        store.times = arrays["times"]
        store.keyword = Corpus(arrays["keyword_seqs"], arrays["keyword_sessions"])
        store.vector = Corpus(arrays["vector_seqs"], arrays["vector_sessions"])
        if full:
            store.keyword.texts, store.kinds = json.loads((workdir / "texts.json").read_text())
            store.vector.vectors = np.load(workdir / "vectors.npy")
        return store

    def scopes(self) -> dict[str, Scope]:
        """The agent; its biggest session; a typical side session (the median-sized one)."""
        sizes = np.bincount(self.keyword.sessions, minlength=len(self.session_ids))
        by_size = np.argsort(sizes, kind="stable")
        big, side = int(by_size[-1]), int(by_size[len(by_size) // 2])
        return {
            "agent": Scope("agent"),
            "session": Scope(f"session ({sizes[side]} events)", side, self.session_ids[side]),
            "big session": Scope(f"session ({sizes[big]} events)", big, self.session_ids[big]),
        }


def make_queries(texts: dict[str, list[str]], embed: Callable[[list[str]], Any]) -> dict:
    """Every set's queries with their words and vectors (one embedding call per set)."""
    return {
        name: [
            Query(text, tuple(query_words(text)), np.asarray(vector, np.float32))
            for text, vector in zip(batch, embed(batch), strict=True)
        ]
        for name, batch in texts.items()
    }


def memlane_tokens(text: str) -> list[str]:
    """memlane's keyword tokens: FTS5's unicode61 split, folded, Porter-stemmed (given to
    bm25s so that it differs from memlane by its BM25 only). ``Words`` stems with the same
    PyStemmer; its term ids are what the engine keeps, not needed here."""
    return list(_STEMMER.stemWords(tokens(text)))


_STEMMER = Stemmer.Stemmer("porter")


# -- memlane behind the same interface ----------------------------------------------------------


class _Rows:
    """The log as memlane's engines read it (their ``_Source`` protocols), from memory: the
    engines alone, without SQLite. Nothing is ever deleted (generation 0)."""

    def __init__(self, store: Store, corpus: Corpus) -> None:
        self.store, self.corpus = store, corpus
        self.kinds = store.kinds if corpus is store.keyword else ["message"] * len(corpus.seqs)
        self.times = store.times if corpus is store.keyword else np.zeros(len(corpus.seqs))

    def _columns(self, i: int) -> tuple[int, str, str, str, int]:
        c = self.corpus
        session = self.store.session_ids[c.sessions[i]]
        return int(c.seqs[i]), session, self.store.agent, self.kinds[i], int(self.times[i])

    def keyword_rows(self, partition: str, after_seq: int, limit: int) -> list[Any]:
        start = int(np.searchsorted(self.corpus.seqs, after_seq, side="right"))
        end = min(start + limit, len(self.corpus.seqs))
        assert self.corpus.texts is not None
        return [(*self._columns(i), self.corpus.texts[i], None) for i in range(start, end)]

    def generation(self) -> int:
        return 0

    def has_keyword_rows_beyond(self, partition: str, count: int) -> bool:
        return len(self.corpus.seqs) > count

    # vectors: a row's vid is its position + 1
    def vector_rows(self, partition: str, after_vid: int, limit: int) -> list[Any]:
        end = min(after_vid + limit, len(self.corpus.seqs))
        # (the last column: whether the vector is a long event's passage; none is here)
        return [(i + 1, *self._columns(i), self._blob(i), False) for i in range(after_vid, end)]

    def _blob(self, i: int) -> bytes:
        assert self.corpus.vectors is not None
        return self.corpus.vectors[i].astype("<f4").tobytes()

    def vector_count(self, partition: str, after_vid: int) -> int:
        return len(self.corpus.seqs) - after_vid

    def vectors_of(self, vids: list[int]) -> dict[int, bytes]:
        return {vid: self._blob(vid - 1) for vid in vids}

    def deletions(self, after_id: int) -> tuple[int, int, list[Any]]:
        return 0, 0, []

    def deletion_head(self) -> int:
        return 0


class MemlaneEngine(Library):
    """``KeywordCache`` or ``VectorCache`` alone, built in memory from the rows (no disk
    format of its own here: its snapshots belong to a store, measured with the manager)."""

    writers = "(see memlane, SessionManager)"

    def __init__(self, store: Store, kind: str) -> None:
        self.store, self.kind = store, kind
        self.name = "memlane engine"

    def build(self, corpus: Corpus, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)  # built when opened

    def open(self, folder: Path, corpus: Corpus) -> None:
        self.corpus = corpus
        rows = _Rows(self.store, corpus)
        if self.kind == "keyword":
            self.keywords = KeywordCache(rows, background=False)
            self.keywords.search(
                ["warm"], [(self.store.partition, False)], "", 1, RowQuery(), content_only=True
            )
        else:
            self.vectors = VectorCache(rows)
            assert corpus.vectors is not None
            self.vectors.search(
                corpus.vectors[0], [(self.store.partition, False)], "", 1, RowQuery()
            )

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        return [seq for seq, _ in self.ranked(query, scope, k)]

    def ranked(self, query: Query, scope: Scope, k: int) -> list[tuple[int, float]]:
        partitions = [(self.store.partition, False)]
        filters = RowQuery(session_id=scope.session_id)
        if self.kind == "vector":
            found = self.vectors.search(query.vector, partitions, self.store.agent, k, filters)
            return [(hit[0], hit[1]) for hit in found]  # (a newer cache adds the vid)
        stems = self.keywords.query_stems(query.text)
        if stems is None:
            return []
        return self.keywords.search(
            stems, partitions, self.store.agent, k, filters, content_only=True
        )


class QueryVectors:
    """An embedder that answers the bench's queries with their MiniLM vectors, posing as
    MiniLM (as bench/perf.py's ReplayEmbedder does): the manager then neither runs nor
    loads the model, so its figures hold what the libraries' hold."""

    def __init__(self, queries: dict[str, list[Query]], fingerprint: str, name: str) -> None:
        self.by_text = {q.text: q.vector for batch in queries.values() for q in batch}
        self.dim = len(next(iter(self.by_text.values())))
        self.name, self.fingerprint = name, fingerprint

    def __call__(self, texts: list[str]) -> np.ndarray[Any, Any]:
        # (a text it does not know — the appended session's goal — gets some query's vector)
        known = list(self.by_text.values())
        return np.stack([self.by_text.get(t, known[len(t) % len(known)]) for t in texts])


class MemlaneManager(Library):
    """memlane as a user gets it: ``SessionManager(...).search(q, k, mode=...)``."""

    writers = "SQLite transactions: any number of processes record(); searches see them"

    def __init__(self, store: Store, kind: str, embedder: Any) -> None:
        self.store, self.kind, self.embedder = store, kind, embedder
        self.name = "memlane (SessionManager)"
        self.mode = "keyword" if kind == "keyword" else "semantic"

    def build(self, corpus: Corpus, folder: Path) -> None:
        """The store is the index; the first open builds the in-memory engines from the log
        and saves their snapshots beside the file (what the next processes load)."""
        self.open(folder, corpus)
        self.search(_ANY_QUERY, Scope("agent"), K)
        self.close()

    def open(self, folder: Path, corpus: Corpus) -> None:
        self.corpus = corpus
        url = f"sqlite:///{self.store.path}"
        self.manager = SessionManager(self.store.agent, url=url, embedder=self.embedder)

    def search(self, query: Query, scope: Scope, k: int) -> list[int]:
        hits = self.manager.search(query.text, k, mode=self.mode, session_id=scope.session_id)
        return [hit.event.seq for hit in hits]

    def ready(self) -> None:
        """Wait for the in-memory keyword index: until it is loaded (in the background),
        FTS5 answers keyword searches (bench/search_scale.py reaches it the same way)."""
        writer = getattr(self.manager, "_writer", None)
        searcher = writer.searcher if writer is not None else self.manager._searcher
        builder = getattr(getattr(searcher.store, "_keywords", None), "_builder", None)
        if builder is not None:
            builder.join()

    def close(self) -> None:
        self.ready()
        self.manager.close()

    def append(self, folder: Path, rows: Corpus) -> str:
        """100 ``record_fact`` calls and ``flush()``: durable, embedded and searchable by
        any process (vectors come from the embedder: the queries' own, re-used)."""
        session = self.manager.start_session(_APPENDED_GOAL)
        for text in _append_texts(len(rows.seqs)):
            self.manager.record_fact(session.id, text)
        self.manager.flush()
        return "100 record_fact + flush"


_APPENDED_GOAL = "appended by the bench"


def remove_appended(path: Path, embedder: Any) -> None:
    """Delete the sessions the write measurement added (also a failed run's)."""
    agent, url = _store_agent(path), f"sqlite:///{path}"
    with SessionManager(agent, url=url, embedder=embedder, background=False) as mgr:
        for session in mgr.list_sessions(limit=1_000_000):
            if session.goal == _APPENDED_GOAL:
                mgr.delete_session(session.id)


def _store_agent(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("SELECT agent_id FROM events LIMIT 1").fetchone()[0])
    finally:
        conn.close()


_ANY_QUERY = Query("what happened with the deploy pipeline?", ("happened", "deploy"), np.zeros(1))


def _append_texts(n: int) -> list[str]:
    # texts the QueryVectors embedder knows (it embeds the appended facts too)
    texts = query_texts()["short"]
    return [texts[i % len(texts)] for i in range(n)]


# -- measuring -----------------------------------------------------------------------------


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory now (``VmHWM``: at its highest). Not ``ru_maxrss``:
    Linux carries it across exec, so a child started by a big parent reports the parent's."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def timed_searches(
    lib: Library,
    queries: Sequence[Query],
    scope: Scope,
    reps: int,
    budget_s: float = REP_BUDGET_S,
) -> tuple[list[float], list[list[int]]]:
    """Each query's median latency (ms) over ``reps`` timed passes after one untimed pass
    (fewer passes once ``budget_s`` is spent, at least one), and the untimed pass's
    results."""
    results = [lib.search(query, scope, K) for query in queries]
    times: list[list[float]] = [[] for _ in queries]
    started = time.perf_counter()
    for _ in range(reps):
        for i, query in enumerate(queries):
            t = time.perf_counter()
            lib.search(query, scope, K)
            times[i].append((time.perf_counter() - t) * 1000)
        if time.perf_counter() - started > budget_s:
            break
    return [statistics.median(t) for t in times], results


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def measure(
    lib: Library,
    folder: Path,
    corpus: Corpus,
    queries: dict[str, list[Query]],
    scopes: dict[str, Scope],
    reps: int,
) -> dict[str, Any]:
    """Open ``lib``'s index from ``folder``, then every (set, scope) of :data:`PLAN`."""
    before = rss_mb()
    started = time.perf_counter()
    lib.open(folder, corpus)
    lib.search(queries["short"][0], scopes["agent"], K)
    out: dict[str, Any] = {"first_query_s": time.perf_counter() - started}
    if isinstance(lib, MemlaneManager):
        lib.ready()
        out["ready_s"] = time.perf_counter() - started
    for set_name, scope_name in PLAN:
        latencies, results = timed_searches(lib, queries[set_name], scopes[scope_name], reps)
        out[f"{scope_name}/{set_name}"] = {
            "p50": pct(latencies, 50),
            "p95": pct(latencies, 95),
            "results": results,
        }
    out["rss_added_mb"] = rss_mb() - before
    out["peak_rss_mb"] = rss_mb("VmHWM")
    return out


# -- exactness -------------------------------------------------------------------------------


class ExactVectors:
    """The exact reference: float32 cosine by numpy over every in-scope row (the vectors are
    L2-normalised). Each query's cut — the k-th best score — is computed once and kept, for
    all the systems measured."""

    def __init__(self, corpus: Corpus) -> None:
        assert corpus.vectors is not None
        self.corpus, self.vectors = corpus, corpus.vectors
        self._rows: dict[int | None, npt.NDArray[np.intp]] = {}
        self._cuts: dict[tuple[str, int | None], tuple[float, int]] = {}

    def rows(self, scope: Scope) -> npt.NDArray[np.intp]:
        if scope.session not in self._rows:
            every = np.arange(len(self.corpus.seqs))
            self._rows[scope.session] = (
                every if scope.session is None else every[self.corpus.sessions == scope.session]
            )
        return self._rows[scope.session]

    def cut(self, query: Query, scope: Scope, k: int = K) -> tuple[float, int]:
        """``(the exact k-th best score, how many results there should be)``."""
        key = (query.text, scope.session)
        if key not in self._cuts:
            rows = self.rows(scope)
            wanted = min(k, len(rows))
            scores = self.vectors[rows] @ query.vector
            kth = float(np.partition(scores, len(scores) - wanted)[-wanted]) if wanted else 0.0
            self._cuts[key] = (kth, wanted)
        return self._cuts[key]

    def scores(self, seqs: Sequence[int], query: Query, scope: Scope) -> list[float]:
        """The exact score of each of ``seqs``; -inf for a row not in the scope."""
        at = np.searchsorted(self.corpus.seqs, np.asarray(seqs, np.int64))
        inside = set(self.rows(scope).tolist()) if scope.session is not None else None
        out = []
        for seq, row in zip(seqs, at.tolist(), strict=True):
            known = row < len(self.corpus.seqs) and self.corpus.seqs[row] == seq
            if not known or (inside is not None and row not in inside):
                out.append(-math.inf)
            else:
                out.append(float(self.vectors[row] @ query.vector))
        return out

    def recall(self, found: Sequence[int], query: Query, scope: Scope, k: int = K) -> float:
        distinct = list(dict.fromkeys(found[:k]))
        kth, wanted = self.cut(query, scope, k)
        return vector_recall(self.scores(distinct, query, scope), kth, wanted)


def vector_recall(found_scores: Sequence[float], kth: float, wanted: int) -> float:
    """Share of the exact top ``wanted`` that results of these exact scores (distinct rows)
    hold, ties counted: a result counts when its exact score reaches the exact k-th best
    ``kth`` (less float32 rounding). The replayed vectors repeat, so the exact top 10 is
    often one of many equal sets."""
    if not wanted:
        return 1.0
    good = sum(score >= kth - 1e-5 for score in found_scores)
    return min(good, wanted) / wanted


def overlap(found: Sequence[int], reference: Sequence[int], k: int = K) -> float:
    """Share of the reference's top ``k`` that ``found``'s top ``k`` holds."""
    wanted = set(reference[:k])
    if not wanted:
        return 1.0 if not found else 0.0
    return len(wanted & set(found[:k])) / len(wanted)


def ndcg(found: Sequence[int], graded: Sequence[int], k: int = K) -> float:
    """nDCG@k of ``found`` where a row's gain is its place in the reference's deeper
    ranking ``graded`` (the first: 1, then falling linearly to 0 past its end)."""
    depth = max(len(graded), 1)
    gain = {seq: (depth - rank) / depth for rank, seq in enumerate(graded)}
    dcg = sum(gain.get(seq, 0.0) / math.log2(i + 2) for i, seq in enumerate(found[:k]))
    ideal = sum(gain[seq] / math.log2(i + 2) for i, seq in enumerate(graded[:k]))
    return dcg / ideal if ideal else (1.0 if not found else 0.0)


def keyword_references(
    engine: MemlaneEngine, queries: dict[str, list[Query]], scopes: dict[str, Scope]
) -> dict[str, list[list[int]]]:
    """memlane's BM25 top :data:`GRADED_DEPTH` for every (set, scope) of :data:`PLAN`."""
    return {
        f"{scope}/{name}": [
            engine.search(query, scopes[scope], GRADED_DEPTH) for query in queries[name]
        ]
        for name, scope in PLAN
    }


def exactness(
    kind: str,
    measured: dict[str, Any],
    queries: dict[str, list[Query]],
    scopes: dict[str, Scope],
    exact: ExactVectors | None,
    keyword_refs: dict[str, list[list[int]]] | None,
) -> dict[str, float]:
    """Mean recall (vectors) or overlap and nDCG (keywords) per (set, scope), and overall."""
    out: dict[str, float] = {}
    for name, scope in PLAN:
        label = f"{scope}/{name}"
        results = measured[label]["results"]
        if kind == "vector":
            assert exact is not None
            values = [
                exact.recall(found, query, scopes[scope])
                for found, query in zip(results, queries[name], strict=True)
            ]
            out[label] = float(np.mean(values))
        else:
            assert keyword_refs is not None
            refs = keyword_refs[label]
            out[label] = float(np.mean([overlap(f, r) for f, r in zip(results, refs, strict=True)]))
            out[f"ndcg {label}"] = float(
                np.mean([ndcg(f, r) for f, r in zip(results, refs, strict=True)])
            )
    keys = [f"{scope}/{name}" for name, scope in PLAN]
    out["all"] = float(np.mean([out[key] for key in keys]))
    if kind == "keyword":
        out["ndcg all"] = float(np.mean([out[f"ndcg {key}"] for key in keys]))
    return out


# -- one process per phase -------------------------------------------------------------------


def systems(store: Store, embedder: Any) -> list[Library]:
    """Every system, keyword ones first (memlane's engine first: its ranking is the keyword
    reference)."""
    managed = store.path is not None  # (a generated workload has no store to open)
    return [
        MemlaneEngine(store, "keyword"),
        *([MemlaneManager(store, "keyword", embedder)] if managed else []),
        *keyword_libraries(memlane_tokens),
        MemlaneEngine(store, "vector"),
        *([MemlaneManager(store, "vector", embedder)] if managed else []),
        *vector_libraries(),
    ]


def label(lib: Library) -> str:
    return f"{lib.kind}: {lib.name}"


def slug(lib: Library) -> str:
    return "".join(c if c.isalnum() else "-" for c in label(lib))


def save_queries(
    workdir: Path, queries: dict[str, list[Query]], fingerprint: str, name: str
) -> None:
    sets = {
        set_name: [[q.text, list(q.words)] for q in batch] for set_name, batch in queries.items()
    }
    (workdir / "queries.json").write_text(
        json.dumps({"sets": sets, "fingerprint": fingerprint, "model": name})
    )
    np.save(
        workdir / "query_vectors.npy", np.stack([q.vector for b in queries.values() for q in b])
    )


def load_queries(workdir: Path) -> tuple[dict[str, list[Query]], str, str]:
    saved = json.loads((workdir / "queries.json").read_text())
    vectors = iter(np.load(workdir / "query_vectors.npy"))
    queries = {
        set_name: [Query(text, tuple(words), next(vectors)) for text, words in batch]
        for set_name, batch in saved["sets"].items()
    }
    return queries, saved["fingerprint"], saved["model"]


def cache_folder(store: Store) -> Path:
    """The snapshot folder memlane keeps beside a SQLite file (a cache: safe to remove)."""
    return Path(str(store.path) + ".memlane-cache")


def appended_rows(corpus: Corpus, queries: dict[str, list[Query]]) -> Corpus:
    """:data:`APPENDED` new rows after the corpus's last (texts and vectors of the short
    queries, which the manager's embedder also knows)."""
    by_text = {q.text: q for q in queries["short"]}
    texts = _append_texts(APPENDED)
    return Corpus(
        np.arange(APPENDED, dtype=np.int64) + int(corpus.seqs[-1]) + 1,
        np.zeros(APPENDED, np.int32),
        texts=texts,
        vectors=np.stack([by_text[t].vector for t in texts]),
    )


def child(workdir: Path, name: str, phase: str, reps: int) -> dict[str, Any]:
    """One phase of one system, in this (fresh) process: ``build`` writes its index and
    reports the time and size; ``query`` opens it and measures (:func:`measure`)."""
    queries, fingerprint, model = load_queries(workdir)
    full = phase == "build" or name.endswith("memlane engine")
    store = Store.load(workdir, full=full)
    embedder = QueryVectors(queries, fingerprint, model)
    lib = next(lib for lib in systems(store, embedder) if label(lib) == name)
    corpus = store.keyword if lib.kind == "keyword" else store.vector
    folder = workdir / "index" / slug(lib)
    scopes = store_scopes(workdir)
    if phase == "build":
        if isinstance(lib, MemlaneManager):
            shutil.rmtree(cache_folder(store), ignore_errors=True)  # built from the log
        started = time.perf_counter()
        lib.build(corpus, folder)
        built = time.perf_counter() - started
        if isinstance(lib, MemlaneManager):
            prefix = "keywords" if lib.kind == "keyword" else "vectors"
            snapshots = [p for p in cache_folder(store).glob(f"{prefix}*") if p.is_file()]
            return {"build_s": built, "size_mb": sum(p.stat().st_size for p in snapshots) / 1e6}
        if isinstance(lib, MemlaneEngine):
            return {"size_mb": None}  # (built in memory when opened: measured there)
        return {"build_s": built, "size_mb": folder_mb(folder)}
    out = measure(lib, folder, corpus, queries, scopes, reps)
    if isinstance(lib, MemlaneEngine):
        out["build_s"] = out["first_query_s"]  # (built in memory when opened)
        if lib.kind == "keyword":
            out["references"] = keyword_references(lib, queries, scopes)
        return out
    rows = appended_rows(corpus, queries)
    if lib.name == "bm25s":  # (it rebuilds from every text)
        lib.texts = Store.load(workdir, full=True).keyword.texts  # type: ignore[attr-defined]
    started = time.perf_counter()
    out["append_note"] = lib.append(folder, rows)
    out["append_s"] = time.perf_counter() - started
    if isinstance(lib, MemlaneManager):  # the store keeps its workload for the next run
        lib.close()
        remove_appended(store.path, embedder)
    if hasattr(lib, "fallbacks"):
        out["append_note"] += f"; {lib.fallbacks} session searches fell back to exact"
    return out


def store_scopes(workdir: Path) -> dict[str, Scope]:
    return {
        name: Scope(*value)
        for name, value in json.loads((workdir / "scopes.json").read_text()).items()
    }


def run_child(workdir: Path, lib: Library, phase: str, reps: int) -> dict[str, Any]:
    args = [sys.executable, __file__, "--child", label(lib), "--phase", phase]
    args += ["--workdir", str(workdir), "--reps", str(reps)]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{label(lib)} {phase} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the report ------------------------------------------------------------------------------


def latency_table(kind: str, results: dict[str, dict[str, Any]], scopes: dict[str, Scope]) -> str:
    names = [name for name in results if name.startswith(kind)]
    # (against memlane as a user gets it; its engine alone when there is no store)
    base = results.get(f"{kind}: memlane (SessionManager)", results.get(f"{kind}: memlane engine"))
    heads = [
        f"{scopes[scope].name if scope != 'agent' else 'agent'}, {s} queries" for s, scope in PLAN
    ]
    lines = [
        f"| {kind} p50 / p95 ms | " + " | ".join(heads) + " | p50 vs memlane |",
        "|---|" + "---|" * (len(PLAN) + 1),
    ]
    for name in names:
        row = results[name]
        cells = [f"{row[f'{sc}/{s}']['p50']:.2f} / {row[f'{sc}/{s}']['p95']:.2f}" for s, sc in PLAN]
        ratio = ""
        if base is not None:
            ratios = [row[f"{sc}/{s}"]["p50"] / base[f"{sc}/{s}"]["p50"] for s, sc in PLAN]
            ratio = f"{min(ratios):.2f}–{max(ratios):.2f}×"
        lines.append(f"| {name.split(': ', 1)[1]} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def property_table(kind: str, results: dict[str, dict[str, Any]], libs: dict[str, Library]) -> str:
    exact_head = "recall@10 (tie-aware)" if kind == "vector" else "overlap@10 / nDCG@10 vs memlane"
    lines = [
        f"| {kind} | build s | on disk MB | open + 1st query s | RSS added MB | {exact_head} "
        "| 100-row durable write s | several writer processes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results.items():
        if not name.startswith(kind):
            continue
        ex = row["exactness"]
        exact = (
            f"{ex['all']:.3f}" if kind == "vector" else f"{ex['all']:.3f} / {ex['ndcg all']:.3f}"
        )
        size = "—" if row.get("size_mb") is None else f"{row['size_mb']:.0f}"
        first = f"{row['first_query_s']:.2f}"
        if "ready_s" in row:
            first += f" (in-memory ready {row['ready_s']:.2f})"
        append = "—" if "append_s" not in row else f"{row['append_s']:.3f}"
        lines.append(
            f"| {name.split(': ', 1)[1]} | {row['build_s']:.1f} | {size} | {first} "
            f"| {row['rss_added_mb']:.0f} | {exact} | {append} | {libs[name].writers} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, nargs="?")
    parser.add_argument("--build", type=int, help="first build the store, of this many events")
    parser.add_argument(
        "--synthetic", type=int, help="no store: generate this many events (engines, libraries)"
    )
    parser.add_argument(
        "--jitter", type=float, help="with --synthetic: make the replayed vectors distinct"
    )
    parser.add_argument("--only", action="append", help="systems whose label contains this")
    parser.add_argument("--reps", type=int, default=3, help="timed passes over each query set")
    parser.add_argument("--workdir", type=Path, help="where the indexes go (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.workdir, args.child, args.phase, args.reps)))
        return
    missing = missing_modules()
    if missing:
        from search_library_adapters import LIBRARIES

        print(
            f"Not installed, left out: {', '.join(LIBRARIES[m] for m in missing)}. Install with "
            "`pip install -e '.[bench-libraries]'`.",
            file=sys.stderr,
        )
    if (args.store is None) == (args.synthetic is None):
        parser.error("name a STORE or --synthetic N")
    if args.jitter and not args.synthetic:
        parser.error("--jitter changes the vectors: only with --synthetic (no store to match)")
    if args.build:
        from search_scale import build

        build(args.store, args.build)
    compare(args, missing)


def compare(args: Any, missing: list[str]) -> None:
    from memlane import MiniLMEmbedder

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memlane-libs-"))
    workdir.mkdir(parents=True, exist_ok=True)
    model = MiniLMEmbedder()
    if args.store is not None:
        remove_appended(args.store, model)  # (what a failed run may have left)
        print(f"reading {args.store} ...", file=sys.stderr, flush=True)
        store = Store.read(args.store.resolve())
    else:
        from perf import agent_texts

        print(f"generating {args.synthetic:,} events ...", file=sys.stderr, flush=True)
        sample = load_embedder(model).embed(agent_texts(2_000, seed=4))
        store = Store.synthetic(args.synthetic, sample)
        if args.jitter:
            store.jitter(args.jitter)
    store.save(workdir)
    scopes = store.scopes()
    (workdir / "scopes.json").write_text(
        json.dumps({name: [s.name, s.session, s.session_id] for name, s in scopes.items()})
    )
    queries = make_queries(query_texts(), load_embedder(model).embed)
    save_queries(workdir, queries, model.fingerprint, model.name)
    embedder = QueryVectors(queries, model.fingerprint, model.name)
    installed = [lib for lib in systems(store, embedder) if not set(requires(lib)) & set(missing)]
    if args.only:
        installed = [lib for lib in installed if any(o in label(lib) for o in args.only)]
    results: dict[str, dict[str, Any]] = {}
    refs, exact = None, None
    for lib in installed:
        print(f"[{label(lib)}] build ...", file=sys.stderr, flush=True)
        row = run_child(workdir, lib, "build", args.reps)
        print(f"[{label(lib)}] query ...", file=sys.stderr, flush=True)
        measured = run_child(workdir, lib, "query", args.reps)
        row.update(measured)
        refs = row.pop("references", refs)
        if lib.kind == "keyword" and refs is None:
            continue  # (no reference: memlane's engine was left out)
        if lib.kind == "vector" and exact is None:
            exact = ExactVectors(store.vector)
        row["exactness"] = exactness(lib.kind, row, queries, scopes, exact, refs)
        results[label(lib)] = row
        print(
            json.dumps({k: v for k, v in row.items() if not isinstance(v, dict)}), file=sys.stderr
        )
    libs = {label(lib): lib for lib in installed}
    where = "generated in memory" if store.path is None else f"{store.path}"
    if args.jitter:
        where += f", vectors jittered by {args.jitter}"
    if store.path is not None:
        where += f", {store.path.stat().st_size / 1e6:.0f} MB"
    print(
        f"\n{len(store.keyword.seqs):,} events ({len(store.vector.seqs):,} vectors; {where}), "
        f"k = {K}, {os.cpu_count()} cores\n"
    )
    for kind in ("keyword", "vector"):
        if any(name.startswith(kind) for name in results):
            print(latency_table(kind, results, scopes) + "\n")
            print(property_table(kind, results, libs) + "\n")
    if args.json:
        slim = {n: {k: v for k, v in r.items() if k != "results"} for n, r in results.items()}
        for row in slim.values():
            for key, value in row.items():
                if isinstance(value, dict) and "results" in value:
                    row[key] = {k: v for k, v in value.items() if k != "results"}
        args.json.write_text(json.dumps(slim, indent=2))


if __name__ == "__main__":
    main()
