"""LangChain's retriever over this library's search: :class:`SessionRetriever`, for the
LangChain adapters (:mod:`memlane.integrations.langchain`, which exports it). Apart from the
agent middleware because a retriever only reads: it records nothing and needs only
``langchain_core``. Not part of the public API: import the class from
:mod:`memlane.integrations.langchain`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union

from ..aio import AsyncSessionManager
from ..errors import InvalidInput, SessionNotFound
from ..events import Hit
from ..manager import SessionManager
from . import require

require("langchain_core", "langchain")

from langchain_core.callbacks import (  # noqa: E402  (after the check that names the extra)
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

from ._langchain_messages import _off_loop, _sync_of  # noqa: E402

__all__ = ["SessionRetriever"]

SearchMode = Literal["hybrid", "semantic", "keyword"]


class SessionRetriever(BaseRetriever):
    """This library's search as a LangChain retriever: each hit is a ``Document`` whose
    ``page_content`` is the event's content and whose metadata carries ``event_id``,
    ``session_id``, ``agent_id``, ``kind``, ``created_at`` (ISO 8601, UTC), ``score``,
    ``importance``, ``tags``, ``role`` (messages) and the event's own ``event_metadata``.

    ``key``: one session (a key or id), or ``None`` for every session the agent may read
    (its own and its subscribed pools'); a key with no session yet finds nothing. ``k``,
    ``mode``, ``kinds``, ``where`` are :meth:`~memlane.SessionManager.search`'s and
    may also be given per call: ``retriever.invoke("query", k=3)``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    manager: Union[SessionManager, AsyncSessionManager]  # noqa: UP007  (pydantic, 3.10)
    key: str | None = None
    k: int = Field(default=4, ge=1)
    mode: SearchMode = "hybrid"
    kinds: str | list[str] | None = None
    where: dict[str, Any] | None = None

    def _search_args(self, query: str, overrides: Mapping[str, Any]) -> dict[str, Any] | None:
        unknown = set(overrides) - {"k", "mode", "kinds", "where"}
        if unknown:
            raise InvalidInput(
                f"SessionRetriever takes k, mode, kinds and where per call, not "
                f"{', '.join(sorted(unknown))}."
            )
        if not query.strip():
            return None
        return {
            "query": query,
            "k": overrides.get("k", self.k),
            "mode": overrides.get("mode", self.mode),
            "kinds": overrides.get("kinds", self.kinds),
            "where": overrides.get("where", self.where),
            "session_id": self.key,
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        args = self._search_args(query, overrides)
        if args is None:
            return []
        return _documents(_search(_sync_of(self.manager), args))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        args = self._search_args(query, overrides)
        if args is None:
            return []
        manager = self.manager
        if not isinstance(manager, AsyncSessionManager):
            return _documents(await _off_loop(manager, lambda m: _search(m, args)))
        try:
            return _documents(await manager.search(args.pop("query"), args.pop("k"), **args))
        except SessionNotFound:
            return []


def _search(manager: SessionManager, args: dict[str, Any]) -> list[Hit]:
    args = dict(args)
    try:
        return manager.search(args.pop("query"), args.pop("k"), **args)
    except SessionNotFound:
        return []


def _documents(hits: Sequence[Hit]) -> list[Document]:
    documents = []
    for hit in hits:
        event = hit.event
        metadata: dict[str, Any] = {
            "event_id": event.id,
            "session_id": event.session_id,
            "agent_id": event.agent_id,
            "kind": event.kind,
            "created_at": event.created_at.isoformat(),
            "score": hit.score,
            "importance": event.importance,
            "tags": list(event.tags),
            "event_metadata": dict(event.metadata),
        }
        if event.role is not None:
            metadata["role"] = event.role
        documents.append(Document(page_content=event.content, metadata=metadata, id=event.id))
    return documents
