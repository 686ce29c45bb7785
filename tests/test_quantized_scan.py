"""The approximate first passes of the vector cache's search (ranking/vectors/quantized.py: 8 bits;
in big partitions 4 bits, with 1 bit before them): they only choose candidates, the float32
re-scoring decides, so a search returns what the exact scan returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from memlane import HashEmbedder, SessionManager
from memlane.ranking import arrays
from memlane.ranking.vectors import cache as vector_cache
from memlane.ranking.vectors import quantized
from memlane.ranking.vectors.quantized import (
    approximate_scores,
    approximate_scores4,
    binarize,
    hamming_candidates,
    quantize,
    quantize4,
)


def unit_rows(count: int, dim: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_approximate_scores_follow_the_exact_ones() -> None:
    vectors = unit_rows(20_000, 384, seed=1)
    codes, scales = quantize(vectors)
    assert codes.dtype == np.uint8 and scales.shape == (20_000,)
    for query in unit_rows(20, 384, seed=2):
        exact = vectors @ query
        rough = approximate_scores(codes, scales, query)
        # proportional to the exact scores, with a small error
        assert np.corrcoef(exact, rough)[0, 1] > 0.999
        for k in (10, 50):
            candidates = np.argpartition(-rough, 4 * k)[: 4 * k]
            assert set(np.argsort(-exact)[:k]) <= set(candidates)


def test_the_4_bit_scores_follow_the_exact_ones_closely_enough_to_choose_candidates() -> None:
    vectors = unit_rows(20_000, 384, seed=1)
    codes, scales = quantize4(vectors)
    assert codes.shape == (20_000, 192) and codes.dtype == np.uint8  # two dimensions a byte
    for query in unit_rows(20, 384, seed=2):
        exact = vectors @ query
        rough = approximate_scores4(codes, scales, query)
        assert np.corrcoef(exact, rough)[0, 1] > 0.99
        for k in (10, 50):
            candidates = np.argpartition(-rough, 4 * k)[: 4 * k]
            assert set(np.argsort(-exact)[:k]) <= set(candidates)


@pytest.mark.parametrize("dim", [7, 8])
def test_4_bit_codes_pack_each_dimension_in_its_own_nibble(dim: int) -> None:
    """Dimension 2i in the high nibble, 2i + 1 in the low one, an odd last one with a zero:
    a vector along one axis scores only against that axis (the scores are proportional to
    the cosines, not equal)."""
    axes = np.eye(dim, dtype=np.float32)
    codes, scales = quantize4(axes)
    assert codes.shape == (dim, (dim + 1) // 2)
    for i, query in enumerate(axes):
        scores = approximate_scores4(codes, scales, query)
        assert scores[i] > 0 and not np.delete(scores, i).any()


def test_quantize_keeps_a_zero_vector_finite() -> None:
    codes, scales = quantize(np.zeros((2, 8), np.float32))
    assert np.isfinite(scales).all()
    assert (approximate_scores(codes, scales, np.ones(8, np.float32)) == 0).all()
    codes, scales = quantize4(np.zeros((2, 8), np.float32))
    assert (approximate_scores4(codes, scales, np.ones(8, np.float32)) == 0).all()


QUERIES = ["topic 3 and item 4", "fact 120", "item 7", "what about topic 30?"]


def many_facts(mgr: SessionManager) -> None:
    session = mgr.start_session("many facts")
    for i in range(600):
        mgr.record_fact(
            session.id, f"fact {i} about topic {i % 37} and item {i % 11}", metadata={"odd": i % 2}
        )
    mgr.flush()


def semantic_results(mgr: SessionManager, filtered: bool) -> list[list[tuple[str, float]]]:
    where = {"odd": 1} if filtered else None
    return [
        [(h.event.id, h.score) for h in mgr.search(q, k=10, mode="semantic", where=where)]
        for q in QUERIES
    ]


def in_fresh_caches(
    make_manager: object, embedder: Callable[[], HashEmbedder]
) -> Callable[[], SessionManager]:
    """``make()``: a manager with caches of its own, as a fresh process's. Managers of one
    store in a process share one engine and its caches (engine/shared.py) when they share
    the embedder object: each is given its own (the same vectors)."""
    return lambda: make_manager(embedder=embedder())  # type: ignore[operator,no-any-return]


@pytest.mark.parametrize("filtered", [False, True])
def test_a_search_returns_what_the_exact_scan_returns(
    make_manager: object, monkeypatch: pytest.MonkeyPatch, filtered: bool
) -> None:
    make = in_fresh_caches(make_manager, HashEmbedder)
    many_facts(make())
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10**9)
    exact = semantic_results(make(), filtered)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 0)  # every search: 8 bits first
    coded = make()
    assert semantic_results(coded, filtered) == exact
    (part,) = coded._writer.storage.vectors._cache._partitions.values()
    assert part.coded and part.codes.shape == (part.capacity, 384)


@pytest.fixture
def first_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The candidate count each 1-bit pass (``hamming_candidates``) was asked for."""
    asked: list[int] = []
    first_pass = vector_cache.hamming_candidates
    monkeypatch.setattr(
        vector_cache,
        "hamming_candidates",
        lambda *a, **kw: asked.append(a[2]) or first_pass(*a, **kw),
    )
    return asked


def same_above_ties(
    found: list[list[tuple[str, float]]], exact: list[list[tuple[str, float]]]
) -> None:
    """The same cosines, and the same events above the last one: among rows tied with it
    (the hash vectors tie often; turned, up to the half precision they are stored in: ~2e-5
    apart) any may make the cut."""
    for got, want in zip(found, exact, strict=True):
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)
        last = want[-1][1] + 1e-4
        assert [e for e, s in got if s > last] == [e for e, s in want if s > last]


class RotatedHashEmbedder(HashEmbedder):
    """The hash embedder's vectors turned by a fixed random rotation: the same cosines, but
    dense, as a real model's are (the hash vectors' few nonzero components leave most sign
    bits meaningless to the 1-bit pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "rotated-hash-384"
        gaussian = np.random.default_rng(0).standard_normal((self.dim, self.dim))
        self._rotation = np.linalg.qr(gaussian)[0].astype(np.float32)

    def __call__(self, texts: Sequence[str], /) -> np.ndarray[Any, np.dtype[np.float32]]:
        rotated: np.ndarray[Any, np.dtype[np.float32]] = super().__call__(texts) @ self._rotation
        return rotated


@pytest.mark.parametrize("filtered", [False, True])
@pytest.mark.parametrize("bits", [False, True])
def test_a_big_partition_re_scores_from_the_store(
    make_manager: object,
    monkeypatch: pytest.MonkeyPatch,
    first_passes: list[int],
    filtered: bool,
    bits: bool,
) -> None:
    """A partition of IN_MEMORY_UNDER rows or more keeps only 4-bit codes: its candidates are
    re-scored with their float32 vectors read from the store, and the results (events and
    exact cosines) equal the all-in-memory scan's — with the 1-bit pass before the 4-bit one
    too (BITS_FROM rows or more)."""
    make = in_fresh_caches(make_manager, RotatedHashEmbedder if bits else HashEmbedder)
    many_facts(make())
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10**9)
    exact = semantic_results(make(), filtered)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 100)  # a new cache: codes only
    monkeypatch.setattr(vector_cache, "IN_MEMORY_UNDER", 100)
    monkeypatch.setattr(vector_cache, "BITS_FROM", 100 if bits else 10**9)
    monkeypatch.setattr(vector_cache, "_BIT_FLOOR", 0)
    monkeypatch.setattr(vector_cache, "_BIT_CANDIDATES", 20)  # 200 of the 601 rows
    monkeypatch.setattr(vector_cache, "_BIT_SHARE", 1)  # (however large a share)
    codes_only = make()
    found = semantic_results(codes_only, filtered)
    if not bits:
        assert found == exact
    else:
        same_above_ties(found, exact)
    assert bool(first_passes) == bits
    (part,) = codes_only._writer.storage.vectors._cache._partitions.values()
    assert not part.in_memory and part.matrix.size == 0 and part.size == 601
    assert part.codes.shape[1] == 384 // 2  # 4 bits a dimension


def test_a_partition_growing_past_the_in_memory_size_keeps_its_results(
    make_manager: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition read while small (float32 and 8-bit codes), then grown past
    IN_MEMORY_UNDER in the same process: its rows so far are turned into 4-bit codes, the
    new ones join them, and searches return what the exact scan returns."""
    make = in_fresh_caches(make_manager, RotatedHashEmbedder)
    mgr = make()
    many_facts(mgr)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10**9)
    first = semantic_results(mgr, filtered=False)
    (part,) = mgr._writer.storage.vectors._cache._partitions.values()
    assert part.in_memory and part.codes.shape[1] == 384
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 100)
    monkeypatch.setattr(vector_cache, "IN_MEMORY_UNDER", 700)  # crossed by the growth below
    session = mgr.start_session("more facts")
    for i in range(200):
        mgr.record_fact(session.id, f"later fact {i} about topic {i % 37} and item {i % 5}")
    mgr.flush()
    grown = semantic_results(mgr, filtered=False)
    assert not part.in_memory and part.size == 802 and part.codes.shape == (part.capacity, 192)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10**9)
    assert semantic_results(make(), filtered=False) == grown  # a new cache, scanned exactly
    assert grown != first  # (the later facts are found)


@pytest.mark.parametrize("numpy_1", [False, True])
@pytest.mark.parametrize("sampled", [False, True])
def test_the_1_bit_pass_keeps_the_rows_nearest_in_hamming_distance(
    monkeypatch: pytest.MonkeyPatch, sampled: bool, numpy_1: bool
) -> None:
    """At least ``count`` rows, every row as near as the farthest kept one, none excluded;
    the cut exact, or — read from a sample of the rows — the exact cut's rows and at most a
    few more. Also as on NumPy 1.x, which has no ``np.bitwise_count``."""
    if sampled:
        monkeypatch.setattr(quantized, "_SAMPLED_FROM", 1_000)
    if numpy_1:
        monkeypatch.setattr(arrays, "_HAS_BITWISE_COUNT", False)
    rows = unit_rows(5_000, 384, seed=4)
    signs = np.ascontiguousarray(binarize(quantize(rows)[0]).T)
    query = binarize(quantize(rows[:1])[0])[0]
    distance = np.array(
        [sum(int(w).bit_count() for w in signs[:, i] ^ query) for i in range(5_000)]
    )
    excluded = np.zeros(5_000, np.bool_)
    excluded[::3] = True  # row 0, the query itself, among them
    kept = hamming_candidates(signs, query, 300, excluded)
    assert len(kept) >= 300 and not excluded[kept].any()
    allowed = np.flatnonzero(~excluded)
    assert set(kept) == set(allowed[distance[allowed] <= distance[kept].max()])
    exact_cut = np.sort(distance[allowed])[299]
    if sampled:
        assert distance[kept].max() >= exact_cut and len(kept) < 2 * 300
    else:
        assert distance[kept].max() == exact_cut
    assert len(hamming_candidates(signs, query, 10_000)) == 5_000  # (fewer rows than asked)


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_capacity_reserved_for_later_rows_costs_no_memory_until_written() -> None:
    """A partition grows its arrays geometrically (a 1M-row one that gains a row reserves
    room for 2M); the room for rows not yet written is left to the kernel's zero pages, so
    it is not resident. Reserving a million rows here: ~230 MB of arrays, ~1 MB written (the
    live flags, which start True)."""
    part = vector_cache._Partition(384)
    before = _resident_bytes()
    part.reserve(1_000_000)
    assert part.capacity >= 1_000_000 and part.codes.nbytes >= 192_000_000
    assert _resident_bytes() - before < 32 * 1024 * 1024


def test_copies_of_one_vector_do_not_make_a_big_partition_read_them_all(
    make_manager: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One text recorded 600 times: its copies tie in their codes, and a big partition reads
    each candidate's vector from the store. It reads a bounded number of them, and returns
    what the exact scan returns (ties go to the earliest copies)."""
    make = in_fresh_caches(make_manager, RotatedHashEmbedder)
    mgr = make()
    session = mgr.start_session("copies")
    for i in range(100):
        mgr.record_fact(session.id, f"fact {i} about topic {i % 37} and item {i % 11}")
    for _ in range(600):
        mgr.record_fact(session.id, "the nightly backup finished without errors")
    mgr.flush()
    query = "nightly backup finished"
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10**9)
    exact = [(h.event.id, h.score) for h in mgr.search(query, k=10, mode="semantic")]
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 100)  # a new cache: codes only
    monkeypatch.setattr(vector_cache, "IN_MEMORY_UNDER", 100)
    codes_only = make()
    store = codes_only._writer.storage.vectors
    read: list[int] = []
    vectors_of = store.vectors_of
    monkeypatch.setattr(
        store, "vectors_of", lambda vids: read.append(len(vids)) or vectors_of(vids)
    )
    found = [(h.event.id, h.score) for h in codes_only.search(query, k=10, mode="semantic")]
    assert found == exact
    assert read and max(read) <= 2 * (2 * 10 + 64)  # (before: all 600 copies)


def test_a_sampled_cut_that_keeps_too_few_rows_is_widened(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample (every 16th row) holds only exact matches, the other rows are far: the
    sampled cut would keep 313 rows where 400 are asked for, so it is widened to the next
    distances until enough are in."""
    monkeypatch.setattr(quantized, "_SAMPLED_FROM", 1_000)
    rows = unit_rows(5_000, 384, seed=6)
    signs = binarize(quantize(rows)[0])
    query = signs[0].copy()
    signs[::16] = query  # the sampled rows: distance 0
    columns = np.ascontiguousarray(signs.T)
    distance = np.array([int(np.bitwise_count(columns[:, i] ^ query).sum()) for i in range(5_000)])
    kept = hamming_candidates(columns, query, 400)
    assert len(kept) >= 400
    assert set(kept) == set(np.flatnonzero(distance <= distance[kept].max()))
    assert distance[kept].max() == np.sort(distance)[399]  # (widened one distance at a time)


def _partition_of(vectors: np.ndarray) -> Any:
    """A vector cache partition holding ``vectors`` (seq i + 1 for row i)."""
    from memlane.ranking.vectors.quantized import binarize, quantize

    part = vector_cache._Partition(vectors.shape[1])
    part.reserve(len(vectors), exact=True)
    n = len(vectors)
    part.matrix[:n] = vectors
    if part.coded:  # (a partition under APPROXIMATE_FROM keeps no codes)
        codes, scales = quantize(vectors)
        part.codes[:n], part.scales[:n] = codes, scales
        part.signs[:, :n] = binarize(codes).T
    part.vids[:n] = part.seqs[:n] = np.arange(1, n + 1)
    part.size = n
    return part


@pytest.mark.parametrize("approximate_from", [100, 10**9])
@pytest.mark.parametrize("share", [0.9, 0.3])
def test_a_filter_of_most_rows_ranks_as_a_partition_of_only_those(
    monkeypatch: pytest.MonkeyPatch, share: float, approximate_from: int
) -> None:
    """A session that is most of its partition is scanned whole with the other rows scored
    -inf (no copy of its codes or vectors); a small one by its rows. Either way, by codes
    first or exactly, the result is the one a partition holding only the chosen rows gives."""
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", approximate_from)
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(3_000, 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = np.flatnonzero(rng.random(len(vectors)) < share)
    whole, alone = _partition_of(vectors), _partition_of(vectors[rows])
    for seed in range(5):
        query = vectors[rows[seed * 7]] + 0.3 * rng.normal(size=64).astype(np.float32)
        query /= np.linalg.norm(query)
        positions, scores = whole.scores(rows, query, 20, None)
        expected_positions, expected = alone.scores(None, query, 20, None)
        assert set(positions) <= set(rows)
        assert list(positions) == list(rows[expected_positions])
        assert scores == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("filtered", [False, True])
def test_a_big_partition_keeps_half_precision_and_the_same_exact_scores(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, filtered: bool
) -> None:
    """A partition ranked by its codes keeps its exact vectors in float16 — the store's own
    values, so every cosine is the same to the last bit — at half the memory."""
    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        many_facts(mgr)
        monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10**9)  # float32, every row
        exact = semantic_results(mgr, filtered)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 100)
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        assert semantic_results(mgr, filtered) == exact
        (part,) = mgr._engine.storage.vectors._cache._partitions.values()
        assert part.matrix.dtype == np.float16


def test_vectors_half_precision_cannot_hold_keep_a_partition_in_float32(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row past ±65,504 (a store written by an earlier version, in float32) turns the
    matrix back to float32, for good: the exact scores stay the stored vectors' own."""
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 4)
    part = vector_cache._Partition(3)
    part.reserve(8)
    assert part.matrix.dtype == np.float16
    part.keep(0, np.array([[0.5, 0.25, 0.0]], np.float32))
    part.keep(1, np.array([[1e6, 0.0, 1.0]], np.float32))
    assert part.matrix.dtype == np.float32 and part.matrix[1, 0] == 1e6
    assert part.matrix[0, 1] == 0.25
    part.reserve(64)
    assert part.matrix.dtype == np.float32


@pytest.mark.parametrize("filtered", [False, True])
def test_a_partition_in_memory_takes_the_1_bit_pass_from_bits_from_rows(
    make_manager: object, monkeypatch: pytest.MonkeyPatch, first_passes: list[int], filtered: bool
) -> None:
    """From BITS_FROM rows a partition that keeps its exact vectors (in float16) ranks the
    rows' signs first, then the 8-bit codes of the best 200·k, then re-scores exactly: the
    same cosines and the same events above the last one as the exact scan (dense vectors)."""
    make = in_fresh_caches(make_manager, RotatedHashEmbedder)
    many_facts(make())
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10**9)
    exact = semantic_results(make(), filtered)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 100)
    monkeypatch.setattr(vector_cache, "BITS_FROM", 100)
    monkeypatch.setattr(vector_cache, "_BIT_FLOOR", 0)
    monkeypatch.setattr(vector_cache, "_BIT_CANDIDATES_IN_MEMORY", 20)  # 200 of the 601 rows
    monkeypatch.setattr(vector_cache, "_BIT_SHARE", 1)  # (however large a share)
    manager = make()
    same_above_ties(semantic_results(manager, filtered), exact)
    assert first_passes and set(first_passes) == {200}  # 20 · k, k = 10
    (part,) = manager._writer.storage.vectors._cache._partitions.values()
    assert part.in_memory and part.matrix.dtype == np.float16
    # candidates that would be more than an eighth of the rows: no 1-bit pass (copying their
    # codes out would cost more than the 8-bit pass over every row), the same results
    monkeypatch.setattr(vector_cache, "_BIT_SHARE", 8)
    first_passes.clear()
    for got, want in zip(semantic_results(make(), filtered), exact, strict=True):
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)
    assert first_passes == []


def test_half_precision_rows_convert_to_float32_bit_for_bit() -> None:
    """Big float16 matrices convert in onnxruntime (4 times numpy's speed): the very values
    numpy gives, subnormals, signed zeros and extremes included, so re-scored cosines stay
    the stored vectors' own."""
    from memlane.ranking.vectors.one_op import CAST_FROM, as_float32

    rng = np.random.default_rng(7)
    rows = rng.standard_normal((CAST_FROM // 64 + 3, 384)).astype(np.float16)
    rows[0, :6] = [0.0, -0.0, 6.0e-8, -6.0e-8, 65504.0, -65504.0]  # (6e-8: a subnormal)
    converted = as_float32(rows[::2])  # (a strided view too)
    assert converted.dtype == np.float32
    assert np.array_equal(converted.view(np.uint32), rows[::2].astype(np.float32).view(np.uint32))
    small = rows[:3]
    assert np.array_equal(as_float32(small), small.astype(np.float32))
    same = rows.astype(np.float32)
    assert as_float32(same) is same


def _stored_cosines(mgr: SessionManager, query: str) -> dict[str, float]:
    """Every event's cosine with ``query``, from the vectors as the store keeps them."""
    import sqlite3

    from memlane.ranking.vectors.codec import decode_vectors

    with sqlite3.connect(mgr.db_path) as conn:
        rows = conn.execute(
            "SELECT e.id, v.vector FROM vectors v JOIN events e ON e.seq = v.seq"
        ).fetchall()
    matrix = decode_vectors([blob for _, blob in rows], 384)
    (vector,) = mgr._writer.indexer.embedder([query])
    scores = matrix @ vector.astype(np.float32)
    return {event: float(score) for (event, _), score in zip(rows, scores, strict=True)}


def test_a_small_partition_keeps_half_precision_and_no_codes(
    make_manager: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under HALF_UNDER rows a partition holds the stored float16 values and no codes (a
    process of many agents holds many such partitions); its scores are still the exact
    cosines of the stored vectors, in float32. Growing past HALF_UNDER turns it to float32,
    past APPROXIMATE_FROM gives it codes: both as a fresh load would have them."""
    make = in_fresh_caches(make_manager, RotatedHashEmbedder)
    mgr = make()
    many_facts(mgr)
    found = mgr.search(QUERIES[0], k=10, mode="semantic")
    (part,) = mgr._writer.storage.vectors._cache._partitions.values()
    assert part.matrix.dtype == np.float16 and not part.coded and part.codes.size == 0
    assert part.nbytes() < part.capacity * 384 * 2 + part.capacity * 64
    exact = _stored_cosines(mgr, QUERIES[0])
    assert [h.score for h in found] == pytest.approx([exact[h.event.id] for h in found], abs=1e-6)
    assert {h.event.id for h in found} == set(sorted(exact, key=lambda e: -exact[e])[:10])

    monkeypatch.setattr(vector_cache, "HALF_UNDER", 1_000)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 1_000)  # crossed by the growth below
    assert part.capacity < 1_000
    session = mgr.start_session("more facts")
    for i in range(400):
        mgr.record_fact(session.id, f"later fact {i} about topic {i % 37} and item {i % 5}")
    mgr.flush()
    grown = semantic_results(mgr, filtered=False)
    assert part.matrix.dtype == np.float32 and part.coded and part.size == 1_002
    fresh = make()
    assert semantic_results(fresh, filtered=False) == grown
    (loaded,) = fresh._writer.storage.vectors._cache._partitions.values()
    assert loaded.coded and loaded.matrix.dtype == np.float32
    n = part.size
    assert np.array_equal(part.matrix[:n], loaded.matrix[:n])
    assert np.array_equal(part.codes[:n], loaded.codes[:n])
    assert np.array_equal(part.scales[:n], loaded.scales[:n])
    assert np.array_equal(part.signs[:, :n], loaded.signs[:, :n])


@pytest.mark.parametrize("seed", range(6))
def test_the_best_distinct_rows_of_an_exact_scan_are_those_a_full_sort_gives(seed: int) -> None:
    """An exact scan's rows are chosen in growing steps, not by sorting all of them: the
    events (and each one's best row) must be the full sort's, with many rows an event (a
    long event's passages) and tied scores."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 3_000))
    seqs = rng.integers(0, max(2, n // int(rng.integers(1, 40))), size=n).astype(np.int64)
    scores = rng.integers(0, 60, size=n).astype(np.float32) / 60  # (many ties)
    positions = rng.permutation(n * 2)[:n].astype(np.intp)  # (positions a partition chose)
    where = np.full(n * 2, -1, np.int64)
    where[positions] = seqs
    for k in (1, 5, 37, n):
        got, got_scores = vector_cache._best_distinct(where, positions, scores, k)
        want, want_scores = vector_cache._first_of_each(where, positions, scores)
        assert len(got) >= min(k, len(want))
        assert list(got[:k]) == list(want[:k])
        assert list(got_scores[:k]) == list(want_scores[:k])
        assert len(set(where[got])) == len(got)  # (each event once)
