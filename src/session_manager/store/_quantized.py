"""A first pass over many vectors in 8 bits: one byte per dimension, scored by onnxruntime.

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
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["approximate_scores", "binarize", "hamming_candidates", "quantize"]

Codes = npt.NDArray[np.uint8]
Floats = npt.NDArray[np.float32]

_SESSION: Any = None
_SESSION_LOCK = threading.Lock()


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
    q = np.rint(query * (127.0 / largest)).astype(np.int8)
    raw: npt.NDArray[np.int32] = _session().run(None, {"A": codes, "B": q.reshape(-1, 1)})[0]
    # the codes are offset by 128: remove 128 · Σq from every row's sum
    unshifted = (raw[:, 0] - 128 * int(q.astype(np.int32).sum())).astype(np.float32)
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
    """The rows whose signs differ least from the query's: at least ``count`` of them (all
    tied with the last), ascending. ``signs`` is ``(words, rows)`` — one contiguous array per
    64-bit word, which numpy scans twice as fast as rows of words — and ``query`` one row of
    :func:`binarize`; ``excluded`` rows are never candidates."""
    words, rows = signs.shape
    if rows <= count:
        return np.flatnonzero(~excluded) if excluded is not None else np.arange(rows)
    distance = np.zeros(rows, np.uint16)
    for word in range(words):
        np.add(distance, np.bitwise_count(signs[word] ^ query[word]), out=distance)
    top = 64 * words + 1
    if excluded is not None:
        distance[excluded] = top
    # the count-th smallest distance, from a histogram (one pass; no sort of a million rows)
    reach = np.cumsum(np.bincount(distance, minlength=top + 1))
    limit = min(int(np.searchsorted(reach, count)), top - 1)
    return np.flatnonzero(distance <= limit)


def _session() -> Any:
    """One ``MatMulInteger`` graph per process (onnxruntime sessions may run concurrently)."""
    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is None:
            import onnxruntime
            from onnx import TensorProto, helper

            a = helper.make_tensor_value_info("A", TensorProto.UINT8, [None, None])
            b = helper.make_tensor_value_info("B", TensorProto.INT8, [None, 1])
            y = helper.make_tensor_value_info("Y", TensorProto.INT32, [None, 1])
            graph = helper.make_graph(
                [helper.make_node("MatMulInteger", ["A", "B"], ["Y"])], "scan", [a, b], [y]
            )
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
            model.ir_version = 9  # what every supported onnxruntime reads
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            # idle threads sleep instead of spinning (they would take a core from the caller)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            _SESSION = onnxruntime.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        return _SESSION
