"""A deterministic, dependency-free fake embedder for tests.

Texts sharing (crudely stemmed) words get similar vectors, so search tests behave
sensibly ("I disabled two-factor auth" lands nearer "disable two-factor" than "weather in
Paris"), yet nothing is downloaded and tens of thousands of texts embed per second.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import InvalidInput

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+")
# Checked in order; the first that leaves a stem of 3+ characters is stripped.
_SUFFIXES = ("ing", "ed", "es", "ly", "s")


def _stem(word: str) -> str:
    """A crude English stemmer: enough for "disabled"/"disables"/"disable" to collide."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):  # "class", "pass" are not plurals
                break
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) >= 4:  # "disable" -> "disabl", like "disabled"
        word = word[:-1]
    return word


class HashEmbedder:
    """Bag-of-stemmed-words vectors via feature hashing; deterministic across runs.

    Each lower-cased word (``\\w+``) is crudely stemmed, hashed with BLAKE2b into one of
    ``dim`` buckets with a sign, counts are summed and the vector is L2-normalised. A text
    without words gets a fixed unit vector, so cosine similarity is always defined.
    Use it in tests instead of the real model::

        >>> embed = HashEmbedder()
        >>> a, b, c = embed(["I disabled two-factor auth", "disable two-factor",
        ...                  "weather in Paris"])
        >>> bool(a @ b > a @ c)
        True
        >>> embed(["x"]).shape
        (1, 384)
    """

    max_chars: int = 16_000

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise InvalidInput(f"HashEmbedder needs dim >= 2, got {dim}.")
        self.dim = dim
        self.name = f"hash-{dim}"
        # Per-instance cache: the bucket depends on dim. Agent logs reuse a small vocabulary,
        # so almost every word after the first few hundred texts is a dictionary hit.
        self._feature = lru_cache(maxsize=65_536)(self._hash_word)
        empty = np.zeros(dim, dtype=np.float32)
        empty[self._hash_word("\x00empty")[0]] = 1.0
        self._empty = empty

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"

    def _hash_word(self, word: str) -> tuple[int, float]:
        digest = hashlib.blake2b(_stem(word).encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return (value >> 1) % self.dim, (1.0 if value & 1 else -1.0)

    def __call__(self, texts: Sequence[str], /) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Embed ``texts``; returns float32 ``(len(texts), dim)`` rows of unit length."""
        if isinstance(texts, str):
            raise InvalidInput("HashEmbedder takes a list of texts, not a single str.")
        texts = list(texts)
        feature = self._feature
        flat: list[int] = []
        signs: list[float] = []
        for row, text in enumerate(texts):
            base = row * self.dim
            for word in _WORD.findall(text[: self.max_chars].lower()):
                bucket, sign = feature(word)
                flat.append(base + bucket)
                signs.append(sign)
        # One bincount for the whole batch instead of a numpy call per text.
        counts = np.bincount(
            np.asarray(flat, dtype=np.int64),
            weights=np.asarray(signs, dtype=np.float64),
            minlength=len(texts) * self.dim,
        ).reshape(len(texts), self.dim)
        counts = counts.astype(np.float64, copy=False)  # bincount of nothing is int64
        norms = np.linalg.norm(counts, axis=1, keepdims=True)
        np.divide(counts, norms, out=counts, where=norms > 0)
        out: np.ndarray[Any, np.dtype[np.float32]] = counts.astype(np.float32)
        # No words (or every word cancelled out): a fixed unit vector keeps cosine defined.
        out[norms[:, 0] == 0] = self._empty
        return out
