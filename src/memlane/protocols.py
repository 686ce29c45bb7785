"""What users plug in: embedders, token counters and summarisers.

Each is a :class:`typing.Protocol`; any object or plain callable of the right shape works,
no subclassing needed.

>>> def my_embedder(texts: list[str]) -> list[list[float]]:  # e.g. a call to an API
...     return [[1.0, 0.0] for _ in texts]
>>> mgr = SessionManager(agent_id="a", db_path="s.db", embedder=my_embedder)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Embedder", "Summarizer", "TokenCounter"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: ``list[str] -> (len(texts), dim)`` floats.

    Optional attributes are used when present: ``name`` (str, recorded in the store so that
    vectors from different embedders are never mixed), ``dim`` (int), ``max_chars`` (int:
    text beyond it is not embedded, which keeps megabyte-sized events cheap) and
    ``releases_gil`` (``True`` when its work runs outside the GIL, as a native model's does:
    the background worker then computes it at idle priority; otherwise at normal priority,
    since a thread at idle priority that holds the GIL stalls every thread of the process).
    ``count_tokens(text) -> int`` with ``max_tokens`` (int) say what the model reads: a text
    past that window is indexed as passages cut with that count; ``token_offsets(text)``
    (each word piece's ``(start, stop, word)``, as :meth:`memlane.MiniLMEmbedder.token_offsets`
    gives) lets the cut count a text once instead of piece by piece.
    """

    def __call__(self, texts: list[str], /) -> Any: ...


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a text the way the target model does."""

    def __call__(self, text: str, /) -> int: ...


@runtime_checkable
class Summarizer(Protocol):
    """Shortens ``text`` so that it fits ``max_tokens``; may call an LLM.

    restore() still verifies the result against the budget and falls back to its own
    head-and-tail summary when a summariser returns something too long.
    """

    def __call__(self, text: str, max_tokens: int, /) -> str: ...


def describe(obj: Sequence[Any] | object) -> str:
    """A short, stable name for a user-supplied callable (used in error messages)."""
    name = getattr(obj, "name", None)
    if isinstance(name, str):
        return name
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{qualname}"
