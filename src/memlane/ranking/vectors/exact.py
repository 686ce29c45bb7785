"""Exact float32 scores ``matrix @ query``, on the caller's thread when that is cheapest and
never with threads that spin afterwards.

numpy hands a matrix-vector product to OpenBLAS, which splits one of 460,800 elements or more
(1,200 rows of 384 dimensions; measured, its threshold for a threaded ``sgemv``) over every
core, and whose helper threads then busy-wait for more work for a while before they sleep. A
search re-scoring a few thousand vectors gained ~0.1 ms of wall time from the second thread and
lost a core to the spinning after it: an 8,000-token restore of a 100k-event session used
~180 ms of CPU for ~95 ms of wall time
(docs/decisions/2026-11-27-exact-scores-without-spinning-threads.md). On a loaded machine
that core is the application's. Products that big now run in
onnxruntime's ``MatMul`` (MLAS), whose threads sleep when done; smaller ones stay in numpy,
which runs them on the calling thread (no call overhead: ~0.05 ms for 1,000 rows).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .one_op import as_float32, one_op_session

__all__ = ["THREADED_FROM", "exact_scores"]

Floats = npt.NDArray[np.float32]

#: Products of this many elements or more go to onnxruntime: OpenBLAS would thread them.
THREADED_FROM = 460_800


def exact_scores(matrix: npt.NDArray[np.float32 | np.float16], query: Floats) -> Floats:
    """``matrix @ query`` in float32 (``matrix``: rows by dimensions, C-contiguous; float16
    rows, a big partition's candidates, are converted exactly first)."""
    matrix = as_float32(matrix)
    if matrix.size < THREADED_FROM:
        small: Floats = matrix @ query
        return small
    from onnx import TensorProto

    session = one_op_session("MatMul", TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.FLOAT)
    column = np.ascontiguousarray(query, dtype=np.float32).reshape(-1, 1)
    found: Floats = session.run(None, {"A": np.ascontiguousarray(matrix), "B": column})[0][:, 0]
    return found
