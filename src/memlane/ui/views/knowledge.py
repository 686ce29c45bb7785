"""The documents in an agent's knowledge (:meth:`SessionManager.ingest`): name, version,
chunks, pool and when last updated; and one document's chunks, each with the version it was
written in (a new version re-writes only the chunks that changed)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidInput
from ..templates import templates
from .forms import source, text

__all__ = ["CHUNKS", "knowledge_page"]

#: At most this many chunks of a document are shown.
CHUNKS = 500


def knowledge_page(request: Request) -> Response:
    src = source(request)
    asked = text(request, "agent")
    agents = src.agents()
    agent = src.agent_for(asked) if asked is not None or len(agents) == 1 or src.agent else None
    documents = src.documents(agent) if agent is not None else None
    document = text(request, "document")
    shown = None
    chunks = None
    if document is not None and documents is not None:
        shown = next((doc for doc in documents if doc.document_id == document), None)
        if shown is None:
            raise InvalidInput(f"Agent {agent!r} has no document {document!r}.")
        chunks = src.chunks(agent, document, limit=CHUNKS)
    return templates.TemplateResponse(
        request,
        "knowledge.html",
        {
            "agent": agent or "",
            "agents": agents,
            "fixed_agent": src.agent,
            "documents": documents,
            "shown": shown,
            "chunks": chunks,
            "limit": CHUNKS,
        },
    )
