"""The documents in an agent's knowledge (:meth:`SessionManager.ingest`): name, version,
chunks, pool and when last updated; and one document's chunks, each with the version it was
written in, its versions (how many of each one's chunks the current version still holds)
and the chunks of one version. A new version re-writes only the chunks that changed and
deletes the ones it no longer has: the chunks an older version had and a later one removed
are not in the store, so no page can show them (the page says so)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidInput
from ...events import Event
from ..templates import templates
from .forms import integer, source, text

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
    versions: list[tuple[int, int]] = []
    version = 0
    if document is not None and documents is not None:
        shown = next((doc for doc in documents if doc.document_id == document), None)
        if shown is None:
            raise InvalidInput(f"Agent {agent!r} has no document {document!r}.")
        chunks = src.chunks(agent, document, limit=CHUNKS)
        versions = _versions(chunks, shown.version)
        version = integer(request, "version", 0, low=0, high=shown.version, what="The version")
        if version:
            chunks = [e for e in chunks if _version_of(e) == version]
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
            "versions": versions,
            "version": version,
        },
    )


def _version_of(chunk: Event) -> int:
    """The document version that wrote ``chunk`` (1 for chunks older than versions)."""
    value = chunk.metadata.get("doc_version", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _versions(chunks: list[Event], current: int) -> list[tuple[int, int]]:
    """``(version, how many of the chunks it wrote are still the document's)``, newest first,
    for every version from 1 to ``current``."""
    written = [_version_of(chunk) for chunk in chunks]
    return [(version, written.count(version)) for version in range(current, 0, -1)]
