"""Vectors are stored in half precision (ranking/vectors/codec.py): smaller rows, the same
answers, and rows written by earlier versions (float32) still read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memlane import SessionManager
from memlane.ranking.vectors.codec import (
    decode_vector,
    decode_vectors,
    encode_vector,
    vector_dim,
)
from memlane.testing import HashEmbedder


def unit(seed: int, dim: int = 384) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_a_vector_is_stored_in_half_precision_and_read_back_as_float32() -> None:
    vector = unit(1)
    blob = encode_vector(vector)
    assert len(blob) == 2 * 384 + 1  # half the float32 bytes, and the tag
    assert vector_dim(blob) == 384
    back = decode_vector(blob)
    assert back.dtype == np.float32
    assert np.array_equal(back, vector.astype(np.float16).astype(np.float32))
    assert np.abs(back - vector).max() < 1e-3
    assert abs(float(back @ vector) - 1.0) < 1e-3


def test_rows_of_earlier_versions_in_float32_still_read() -> None:
    vector = unit(2)
    legacy = vector.astype("<f4").tobytes()
    assert vector_dim(legacy) == 384
    assert np.array_equal(decode_vector(legacy), vector)
    mixed = decode_vectors([legacy, encode_vector(unit(3)), legacy], 384)
    assert mixed.shape == (3, 384) and np.array_equal(mixed[0], vector)
    assert np.array_equal(mixed[1], decode_vector(encode_vector(unit(3))))


def test_a_vector_beyond_half_precision_is_kept_in_float32() -> None:
    vector = unit(4) * 1e6  # an embedder that does not normalise
    blob = encode_vector(vector)
    assert len(blob) == 4 * 384
    assert np.array_equal(decode_vector(blob), vector)


def test_many_rows_decode_at_once_as_one_by_one() -> None:
    rows = [encode_vector(unit(seed, 16)) for seed in range(50)]
    together = decode_vectors(rows, 16)
    assert np.array_equal(together, np.stack([decode_vector(row) for row in rows]))
    assert decode_vectors([], 16).shape == (0, 16)


def test_a_store_keeps_half_precision_rows_and_finds_old_and_new(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("vectors")
        mgr.record_fact(session.id, "the staging database is PostgreSQL 16")
        mgr.flush()
        before = mgr.search("staging database", k=1, mode="semantic")[0].score
    # rewrite the row as an earlier version stored it, then add a new one
    with sqlite3.connect(db) as conn:
        (vid, blob) = conn.execute("SELECT vid, vector FROM vectors").fetchone()
        dim = vector_dim(blob)
        assert len(blob) == 2 * dim + 1
        legacy = decode_vector(blob).astype("<f4").tobytes()
        conn.execute("UPDATE vectors SET vector = ? WHERE vid = ?", (legacy, vid))
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        new = mgr.record_fact(session.id, "the deploy pipeline runs on Fridays")
        mgr.flush()
        assert [h.event.content for h in mgr.search("staging database", k=1, mode="semantic")] == [
            "the staging database is PostgreSQL 16"
        ]
        assert mgr.search("deploy pipeline Fridays", k=1, mode="semantic")[0].event.id == new.id
        # the float32 copy holds the same values: the same exact cosine
        assert mgr.search("staging database", k=1, mode="semantic")[0].score == pytest.approx(
            before, abs=1e-6
        )
