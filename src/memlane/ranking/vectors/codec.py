"""How a vector is kept as bytes in a SQLite store (the ``vectors`` table's BLOBs), and how
the caches read PostgreSQL's (its ``halfvec`` column is read into the same half-precision
form: ``store/_pg_feed.py``).

A vector is stored in half precision: 2 bytes a dimension and one tag byte (``0x02``) at the
end, 769 bytes for MiniLM's 384 dimensions instead of 1,536 in float32. A sentence
embedding's components carry about three significant digits of information; half precision
keeps 3.3, and changed no answer of the LoCoMo benchmark's searches nor restore's figures
(docs/decisions/2026-11-27-vectors-in-half-precision.md). Scores are computed in float32
from the stored values, so every cosine a search returns is still the exact one of the
vectors it keeps.

Rows written before (``<f4``, a multiple of 4 bytes) are read as they are, so a store never
needs a migration: ``reindex`` rewrites them in the new form. The tag makes the two
unambiguous without knowing the dimension: a half-precision row has an odd length. A vector
that half precision cannot hold (a component beyond ±65,504, from an embedder that does not
normalise) is kept in float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .one_op import as_float32

__all__ = [
    "HALF_TAG",
    "decode_stored",
    "decode_vector",
    "decode_vectors",
    "encode_vector",
    "fits_half",
    "vector_dim",
]

Matrix = npt.NDArray[np.float32]

#: the byte that ends a half-precision row (PostgreSQL's ``halfvec`` values are read into it)
HALF_TAG = b"\x02"
_HALF_MAX = float(np.finfo(np.float16).max)


def fits_half(vectors: npt.NDArray[Any]) -> bool:
    """Whether half precision can hold every component of ``vectors`` (±65,504)."""
    return bool(np.abs(vectors).max(initial=0.0) <= _HALF_MAX)


def encode_vector(vector: npt.NDArray[Any]) -> bytes:
    """The bytes a vector is stored as: little-endian float16 and the tag, or float32 if
    half precision would overflow it."""
    if not fits_half(vector):
        return np.ascontiguousarray(vector, dtype="<f4").tobytes()
    return np.ascontiguousarray(vector, dtype="<f2").tobytes() + HALF_TAG


def vector_dim(blob: bytes) -> int:
    """The dimension of a stored vector."""
    return (len(blob) - 1) // 2 if len(blob) % 2 else len(blob) // 4


def decode_vector(blob: bytes) -> Matrix:
    """One stored vector as float32."""
    if len(blob) % 2:
        return np.frombuffer(blob, "<f2", count=(len(blob) - 1) // 2).astype(np.float32)
    return np.frombuffer(blob, "<f4").astype(np.float32)


def decode_vectors(blobs: Sequence[bytes], dim: int) -> Matrix:
    """Stored vectors of one dimension as a float32 matrix, a row each (half and single
    precision rows may be mixed: a store written by an earlier version)."""
    converted: Matrix = as_float32(decode_stored(blobs, dim))
    return converted


def decode_stored(blobs: Sequence[bytes], dim: int) -> npt.NDArray[np.float32 | np.float16]:
    """:func:`decode_vectors`, but float16 when every row is stored so: the values
    themselves, without a conversion."""
    if not blobs:
        return np.zeros((0, dim), np.float32)
    half = 2 * dim + 1
    if all(len(blob) == half for blob in blobs):  # (the common case: one pass)
        joined = np.frombuffer(b"".join(blobs), np.uint8).reshape(len(blobs), half)
        return joined[:, :-1].copy().view("<f2").astype(np.float16, copy=False)
    if all(len(blob) == 4 * dim for blob in blobs):
        return np.frombuffer(b"".join(blobs), "<f4").reshape(len(blobs), dim).astype(np.float32)
    out = np.empty((len(blobs), dim), np.float32)
    for i, blob in enumerate(blobs):
        out[i] = decode_vector(blob)
    return out
