"""Embedders: text in, unit-length float32 vectors out.

* :class:`MiniLMEmbedder` — the default: all-MiniLM-L6-v2 on onnxruntime, no torch.
* :class:`HashEmbedder` — a deterministic fake for tests, no model at all.
* :class:`SentenceTransformerEmbedder` — any sentence-transformers model (extra
  ``[sentence-transformers]``).
* Any callable ``list[str] -> vectors`` (numpy array or list of lists), e.g. an API call.

:func:`load_embedder` wraps whichever of these is configured in a :class:`LoadedEmbedder`,
which is what the rest of the library talks to: it cuts over-long texts, validates what a
user's callable returns and normalises it, and exposes the name, dimension and fingerprint
the store records so that vectors from different embedders are never mixed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidInput
from ..protocols import describe
from .hashing import HashEmbedder
from .minilm import MiniLMEmbedder
from .sentence_transformers import SentenceTransformerEmbedder

__all__ = [
    "DEFAULT_MAX_CHARS",
    "HashEmbedder",
    "LoadedEmbedder",
    "MiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "load_embedder",
]

#: Characters of a text that are embedded when the embedder declares no ``max_chars``.
DEFAULT_MAX_CHARS = 16_000

Vectors = np.ndarray[Any, np.dtype[np.float32]]


class LoadedEmbedder:
    """A configured embedder plus what the store needs to know about it.

    Build it with :func:`load_embedder`. :meth:`embed` accepts any list of texts and
    always returns a C-contiguous float32 ``(len(texts), dim)`` array of L2-normalised
    rows (rows that came back all zero stay zero), or raises
    :class:`~memlane.errors.InvalidInput` naming what the wrapped callable did
    wrong.

    >>> loaded = load_embedder(lambda texts: [[3.0, 4.0] for _ in texts])
    >>> loaded.embed(["a", "b"])[0]
    array([0.6, 0.8], dtype=float32)
    >>> loaded.dim
    2
    """

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        name = getattr(embedder, "name", None)
        self.name: str = name if isinstance(name, str) else describe(embedder)
        max_chars = getattr(embedder, "max_chars", None)
        self.max_chars: int = (
            max_chars if isinstance(max_chars, int) and max_chars > 0 else DEFAULT_MAX_CHARS
        )
        #: the embedder computes outside the GIL (a native model), so the worker may give
        #: its calls idle priority; see :attr:`MiniLMEmbedder.releases_gil`
        self.releases_gil: bool = getattr(embedder, "releases_gil", False) is True
        self._dim: int | None = None
        self._dim_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LoadedEmbedder({self.embedder!r})"

    @property
    def dim(self) -> int | None:
        """The vector dimension: the embedder's ``dim``, else learnt from the first call."""
        if self._dim is None:
            # Read lazily: for SentenceTransformerEmbedder it loads the model.
            declared = getattr(self.embedder, "dim", None)
            if isinstance(declared, int) and not isinstance(declared, bool):
                self._dim = declared
        return self._dim

    @property
    def fingerprint(self) -> str:
        """The embedder's ``fingerprint`` if it has one (it locates model files), else its name."""
        fingerprint = getattr(self.embedder, "fingerprint", None)
        return fingerprint if isinstance(fingerprint, str) else self.name

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` and return validated, L2-normalised float32 rows.

        >>> load_embedder(HashEmbedder(dim=8)).embed(["hello world"]).shape
        (1, 8)
        """
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a list of texts, not a single str.")
        texts = [text[: self.max_chars] for text in texts]
        dim = self.dim
        if not texts:  # never call the user's function (perhaps a paid API) with nothing
            return np.zeros((0, dim or 0), dtype=np.float32)
        raw = self.embedder(texts)
        who = f"Embedder {self.name!r}"
        try:
            # Overflow to inf is reported below as "non-finite", not as a numpy warning.
            with np.errstate(over="ignore", invalid="ignore"):
                vectors = np.array(raw, dtype=np.float32, order="C", copy=True)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                f"{who} returned something that is not a list of equal-length float vectors "
                f"({type(raw).__name__}: {exc})."
            ) from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(texts) or vectors.shape[1] == 0:
            raise InvalidInput(
                f"{who} returned an array of shape {vectors.shape} for {len(texts)} texts; "
                f"it must return one non-empty vector per text, shape ({len(texts)}, dim)."
            )
        if dim is not None and vectors.shape[1] != dim:
            raise InvalidInput(
                f"{who} returned vectors of dimension {vectors.shape[1]}, but its dimension "
                f"is {dim}. An embedder must always return vectors of the same size."
            )
        if not np.isfinite(vectors).all():
            bad = int(np.flatnonzero(~np.isfinite(vectors).all(axis=1))[0])
            raise InvalidInput(f"{who} returned NaN or infinite values (for text {bad}).")
        if dim is None:
            with self._dim_lock:
                if self._dim is None:
                    self._dim = int(vectors.shape[1])
        # Norms in float64: squares of large float32 values would overflow to inf.
        wide = vectors.astype(np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", wide, wide))[:, None]
        np.divide(wide, norms, out=wide, where=norms > 0)
        return np.ascontiguousarray(wide, dtype=np.float32)

    __call__ = embed


def load_embedder(spec: Any = None) -> LoadedEmbedder:
    """Turn an embedder specification into a :class:`LoadedEmbedder`.

    ``spec`` is ``None`` (the default :class:`MiniLMEmbedder`; nothing is loaded until the
    first embedding), one of this package's embedders, an existing :class:`LoadedEmbedder`
    (returned unchanged), or any callable taking a list of texts and returning one vector
    per text.

    >>> load_embedder(HashEmbedder()).name
    'hash-384'
    >>> load_embedder(None).name
    'sentence-transformers/all-MiniLM-L6-v2@onnx-fp32'
    >>> def api(texts: list[str]) -> list[list[float]]:
    ...     return [[float(len(t)), 1.0] for t in texts]
    >>> load_embedder(api).embed(["abc"]).shape
    (1, 2)
    """
    if spec is None:
        return LoadedEmbedder(MiniLMEmbedder())
    if isinstance(spec, LoadedEmbedder):
        return spec
    if isinstance(spec, type):
        raise InvalidInput(
            f"Got the class {spec.__qualname__}; pass an instance, e.g. {spec.__qualname__}()."
        )
    if not callable(spec):
        raise InvalidInput(
            f"An embedder must be callable as embedder(list_of_texts) -> vectors; got a "
            f"{type(spec).__name__}."
        )
    return LoadedEmbedder(spec)
