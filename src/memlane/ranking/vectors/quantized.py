"""First passes over many vectors in 8 bits (one byte per dimension) or 4, scored by onnxruntime.

A cosine scan of 100k by 384 float32 vectors reads 154 MB and takes ~5 ms on this machine,
bound by memory, not arithmetic. The same rows as bytes are a quarter of that, and
onnxruntime's ``MatMulInteger`` (MLAS's u8-by-s8 kernels) scores them in ~1.5 ms; numpy has no
integer kernel that fast, and float16 (half the bytes) converts at ~50 ms per 100k rows. The
8-bit scores only choose candidates: the vector cache re-scores those exactly in float32
(``_vector_cache.py``), so a result's score is always its exact cosine.

Each row is scaled to use the whole byte range (``code = round(v · 127 / max|v|) + 128``), so
the error of a dot product is about 0.4% of the row's largest component times the query's;
rows whose 8-bit score ranks them outside the candidates would have needed an exact score
within that error of the k-th best. Measured recall of the exact top 50 within 4 k candidates:
1.0 on random unit vectors and on the LoCoMo development vectors (tests/test_vector_index.py).

Partitions too big to keep float32 vectors in memory keep 4-bit codes instead (half the bytes:
~180 MB less at 1M MiniLM vectors), packed two to a byte. Their error is ~18 times the 8-bit
one, but they only ever rank what a cheaper pass left — the 1-bit pass's candidates, or a
filtered search's rows — and ``4 k`` of those go on to the exact re-scoring. Measured on real
MiniLM vectors (``bench/quantized_recall.py``, 40k rows, the LoCoMo development questions):
recall of the exact top k among the ``4 k`` candidates 1.0 at k = 10, 60 and 166, alone or
after the 1-bit pass, the same as the 8-bit codes'.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..arrays import bit_counts
from .one_op import one_op_session

__all__ = [
    "approximate_scores",
    "approximate_scores4",
    "binarize",
    "hamming_candidates",
    "quantize",
    "quantize4",
]

Codes = npt.NDArray[np.uint8]
Floats = npt.NDArray[np.float32]

# hamming_candidates' cut from a sample of the rows (see there)
_SAMPLED_FROM = 131_072
_SAMPLE_STEP = 16
_SAMPLE_MARGIN = 1.1


#: the query's int8 range in the 8-bit scan (see approximate_scores)
_QUERY_LEVELS = 63.0


def quantize(vectors: Floats) -> tuple[Codes, Floats]:
    """``(codes, scales)``: unsigned bytes per dimension and, per row, the factor that turns
    a code dot product back into the row's scale (``max|v| / 127``)."""
    largest = np.abs(vectors).max(axis=1)
    largest[largest == 0] = 1.0
    scaled = np.rint(vectors * (127.0 / largest)[:, None])
    return (scaled + 128).astype(np.uint8), (largest / 127.0).astype(np.float32)


def approximate_scores(codes: Codes, scales: Floats, query: Floats) -> Floats:
    """Approximately ``vectors @ query`` for the rows ``quantize`` turned into ``codes`` and
    ``scales`` (proportional to it, which is all a ranking needs)."""
    largest = float(np.abs(query).max()) or 1.0
    # ±63, not ±127: MLAS's AVX2 kernel (vpmaddubsw) adds two u8·s8 products into an int16
    # that saturates past 32,767 (255 · 127 · 2 = 64,770). With 63 it cannot (32,130); the
    # scores' correlation with the exact ones on an AVX2-only CPU went 0.9942 -> 0.9998 at
    # worst (tests/test_quantized_scan.py), and VNNI CPUs lose nothing a ranking would see.
    q = np.rint(query * (_QUERY_LEVELS / largest)).astype(np.int8)
    raw: npt.NDArray[np.int32] = _session().run(None, {"A": codes, "B": q.reshape(-1, 1)})[0]
    # the codes are offset by 128: remove 128 · Σq from every row's sum
    unshifted = (raw[:, 0] - 128 * int(q.astype(np.int32).sum())).astype(np.float32)
    scores: Floats = unshifted * scales
    return scores


def quantize4(vectors: Floats) -> tuple[Codes, Floats]:
    """``(codes, scales)`` in 4 bits per dimension, two dimensions a byte — dimension ``2i``
    in the high nibble of byte ``i``, ``2i + 1`` in the low one (an odd last dimension is
    paired with a zero): ``code = round(v · 7 / max|v|) + 8``, so 1..15, and ``scales`` as
    in :func:`quantize` (``max|v| / 7``). Half the memory of :func:`quantize`'s bytes; as a
    second pass after the 1-bit one it keeps the same candidates (see the module docstring).
    """
    largest = np.abs(vectors).max(axis=1)
    largest[largest == 0] = 1.0
    nibbles = (np.rint(vectors * (7.0 / largest)[:, None]) + 8).astype(np.uint8)
    if nibbles.shape[1] % 2:
        nibbles = np.pad(nibbles, ((0, 0), (0, 1)), constant_values=8)
    packed: Codes = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    return packed, (largest / 7.0).astype(np.float32)


def approximate_scores4(packed: Codes, scales: Floats, query: Floats) -> Floats:
    """:func:`approximate_scores` for the codes of :func:`quantize4`: the high nibbles
    against the query's even dimensions plus the low ones against its odd dimensions (two
    ``MatMulInteger`` runs over half-width arrays: no interleaving copy)."""
    largest = float(np.abs(query).max()) or 1.0
    q = np.rint(query * (127.0 / largest)).astype(np.int8)
    if len(q) % 2:
        q = np.append(q, np.int8(0))
    session = _session()
    high: npt.NDArray[np.int32] = session.run(
        None, {"A": packed >> 4, "B": np.ascontiguousarray(q[0::2, None])}
    )[0]
    low: npt.NDArray[np.int32] = session.run(
        None, {"A": packed & 15, "B": np.ascontiguousarray(q[1::2, None])}
    )[0]
    # the codes are offset by 8: remove 8 · Σq from every row's sum
    unshifted = (high[:, 0] + low[:, 0] - 8 * int(q.astype(np.int32).sum())).astype(np.float32)
    scores: Floats = unshifted * scales
    return scores


def binarize(codes: Codes) -> npt.NDArray[np.uint64]:
    """The signs of rows of 8-bit codes (:func:`quantize`) as bits, packed into 64-bit
    words: ``(rows, ceil(dim / 64))``. A component that rounds to 0 counts as negative, for
    rows and queries alike."""
    dim = codes.shape[1]
    words = -(-dim // 64)
    packed = np.zeros((len(codes), words * 8), np.uint8)
    packed[:, : -(-dim // 8)] = np.packbits(codes > 128, axis=1, bitorder="little")
    return packed.view("<u8").astype(np.uint64, copy=False)


def hamming_candidates(
    signs: npt.NDArray[np.uint64],
    query: npt.NDArray[np.uint64],
    count: int,
    excluded: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.intp]:
    """The rows whose signs differ least from the query's: at least ``count`` of them, every
    row as near as the farthest one kept, ascending. ``signs`` is ``(words, rows)`` — one
    contiguous array per 64-bit word, which numpy scans twice as fast as rows of words — and
    ``query`` one row of :func:`binarize`; ``excluded`` rows are never candidates.

    The cut is the count-th smallest distance, read from a histogram; past
    :data:`_SAMPLED_FROM` rows, a histogram of every :data:`_SAMPLE_STEP`-th row, aimed a
    little past the count (:data:`_SAMPLE_MARGIN`) and widened should it keep too few: a
    histogram of all of a million rows cost 2.8 of the pass's 8.5 ms. It keeps a few more
    rows than the exact cut, never fewer."""
    words, rows = signs.shape
    if rows <= count:
        return np.flatnonzero(~excluded) if excluded is not None else np.arange(rows)
    distance = np.zeros(rows, np.uint16)
    for word in range(words):
        np.add(distance, bit_counts(signs[word] ^ query[word]), out=distance)
    top = 64 * words + 1
    if excluded is not None:
        distance[excluded] = top
    step = _SAMPLE_STEP if rows >= _SAMPLED_FROM else 1
    aim = count if step == 1 else int(count * _SAMPLE_MARGIN / step) + 1
    reach = np.cumsum(np.bincount(distance[::step], minlength=top + 1))
    limit = min(int(np.searchsorted(reach, aim)), top - 1)
    kept = np.flatnonzero(distance <= limit)
    while len(kept) < count and limit < top - 1:  # (the sample fell short: rare)
        limit += 1
        kept = np.flatnonzero(distance <= limit)
    return kept


def _session() -> Any:
    """The ``MatMulInteger`` graph (u8 codes by an s8 column: i32 sums)."""
    from onnx import TensorProto

    return one_op_session("MatMulInteger", TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32)
