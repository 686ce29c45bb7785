"""Knowledge memory on the write path: ``ingest`` a document as searchable chunks,
``delete_document``; ``SessionManager`` inherits it.

A document's chunks (``text/chunking.py``) are events of kind ``knowledge`` in the agent's
knowledge session (one per agent and pool, created on first use), so they are searched
(``kinds=["knowledge"]``), exported, imported and migrated like every event. Each chunk keeps
its document's id and name, its position, the digest of its text and the document version
that added it. Re-ingesting compares digests: unchanged chunks are left alone (nothing is
embedded again), new ones are added, vanished ones deleted from the log and every index —
all in one transaction, so a search sees the old version or the new one, never half of each.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..core import canonical_json
from ..core.observed import observed
from ..errors import DocumentNotFound, InvalidInput, shown
from ..events import Event, Session
from ..memory import DOC_USER, KNOWLEDGE_SESSION
from ..records.validate import identifier, path_of, prepare_event
from ..store.base import EventFilter, SessionFilter
from ..text.chunking import Chunk, chunk_markdown, window_of
from ..write.path import Writer
from ..write.sessions import Sessions

__all__ = ["DocumentInfo", "IngestResult", "KnowledgeMemory"]

#: the most a document may hold, in characters (a larger one is refused, not truncated)
MAX_DOCUMENT_CHARS = 50_000_000

Chunker = Callable[[str], Iterable[Any]]


@dataclass(frozen=True)
class DocumentInfo:
    """One document of the agent's knowledge (:meth:`KnowledgeMemory.documents`)."""

    document_id: str
    name: str
    version: int
    chunks: int
    pool: str | None
    updated_at: datetime


@dataclass(frozen=True)
class IngestResult:
    """What :meth:`KnowledgeMemory.ingest` did to one document."""

    document_id: str
    name: str
    version: int
    added: int
    unchanged: int
    removed: int


class KnowledgeMemory:
    """Documents for retrieval (see the module docstring), kept through the writer in
    sessions of their own (``sessions.session_for``)."""

    def __init__(self, writer: Writer, sessions: Sessions) -> None:
        self._writer = writer
        self._sessions = sessions
        self.agent_id = writer.agent_id
        self.scope = writer.scope
        self._observer = writer.observer

    @observed("ingest")
    def ingest(
        self,
        source: str | os.PathLike[str] | None = None,
        text: str | None = None,
        *,
        name: str | None = None,
        pool: str | None = None,
        chunker: Chunker | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> IngestResult:
        """Add a document (a UTF-8 file at ``source``, or ``text`` with a ``name``) to the
        agent's knowledge as chunks that fit the embedder's window; ingesting it again adds
        only what changed. ``name`` identifies the document (default: the file's absolute
        path); ``pool`` shares it; ``chunker(text)`` (chunk texts or
        :class:`~memlane.text.chunking.Chunk` s) replaces the Markdown-aware default.
        ``user_id``: the user the document came from or is about (an upload): erasing that
        user (:meth:`erase_user`) deletes it too.

        >>> mgr.ingest("docs/runbook.md")  # doctest: +SKIP
        IngestResult(document_id='...', name='/srv/docs/runbook.md', version=1, added=14, ...)
        >>> mgr.search("how do I rotate the keys?", kinds=["knowledge"])  # doctest: +SKIP
        """
        name, body = _document(source, text, name)
        if pool is not None:
            pool = identifier(pool, "pool")
        if user_id is not None:
            user_id = identifier(user_id, "user_id")
        owner = {} if user_id is None else {DOC_USER: user_id}
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
        # redacted whole, before it is cut: one numbering for the document, and the chunks'
        # digests (what re-ingesting compares) are of what is stored
        redaction = self._writer.redaction()
        if redaction is not None:
            body = redaction.text(body)
        chunks = self._chunks(body, chunker)
        document_id = hashlib.sha256(json.dumps([pool, name]).encode()).hexdigest()[:24]
        digests = _digests(chunks)
        session = self._knowledge_session(pool)
        with self._writer.write() as tx:
            session_id, _, shared = self._writer.owned(tx, session.id)
            mine = EventFilter(
                None, session_id=session_id, kinds=("knowledge",), where={"doc_id": document_id}
            )
            stored = self._writer.log.events(mine, tx=tx)
            known = {str(event.metadata.get("chunk_digest")): event for event in stored}
            version = max((int(e.metadata.get("doc_version", 1)) for e in stored), default=0)
            new = [i for i, digest in enumerate(digests) if digest not in known]
            gone = sorted(set(known) - set(digests))
            if new or gone or not stored:
                version += 1
            for position in new:
                chunk = chunks[position]
                meta = {
                    **(metadata or {}),
                    "doc_id": document_id,
                    "document": name,
                    "chunk": position,
                    "chunk_digest": digests[position],
                    "headings": list(chunk.headings),
                    "doc_version": version,
                    **owner,
                }
                prepared = prepare_event(
                    "knowledge", chunk.embedded, None, None, None, meta, None,
                    self._writer.count_tokens, redaction=redaction,
                )  # fmt: skip
                self._writer.insert(tx, session_id, shared, prepared, None)
            for position, digest in enumerate(digests):  # kept chunks may have moved
                event = known.get(digest)
                if event is None:
                    continue
                meta = {**event.metadata, "chunk": position, **owner}
                if meta != event.metadata:  # moved, or now attributed to a user
                    self._writer.log.set_event_metadata(
                        tx, event.id, canonical_json.dumps(meta, "metadata")
                    )
            if gone:  # from the log and every index, in this transaction
                vanished = {"doc_id": document_id, "chunk_digest": {"$in": gone}}
                self._writer.storage.delete_events(tx, replace(mine, where=vanished))
        if new:
            self._writer.indexer.notify()
            self._writer.count_redactions(redaction)
        return IngestResult(
            document_id, name, version, len(new), len(digests) - len(new), len(gone)
        )

    def documents(self) -> list[DocumentInfo]:
        """The documents in this agent's knowledge and its subscribed pools', by name."""
        found: dict[str, list[Event]] = {}
        marked = SessionFilter(self.scope, marked=KNOWLEDGE_SESSION)
        pools = {s.id: s.shared_pool for s in self._writer.log.sessions(marked, limit=None)}
        for session_id in pools:
            chunks = EventFilter(self.scope, session_id=session_id, kinds=("knowledge",))
            for event in self._writer.log.events(chunks, previews=True):
                found.setdefault(str(event.metadata.get("doc_id")), []).append(event)
        infos = [
            DocumentInfo(
                document_id=doc_id,
                name=str(events[0].metadata.get("document")),
                version=max(int(e.metadata.get("doc_version", 1)) for e in events),
                chunks=len(events),
                pool=pools[events[0].session_id],
                updated_at=max(e.created_at for e in events),
            )
            for doc_id, events in found.items()
        ]
        return sorted(infos, key=lambda info: (info.name, info.document_id))

    def delete_document(self, document_id: str) -> int:
        """Delete a document's chunks from the log and every index; return how many."""
        document_id = identifier(document_id, "document_id")
        with self._writer.write() as tx:
            found = self._writer.log.events(
                EventFilter(self.scope, kinds=("knowledge",), where={"doc_id": document_id}),
                tx=tx,
                limit=1,
            )
            if not found:
                raise DocumentNotFound(
                    f"No document {document_id!r} in the knowledge of agent {self.agent_id!r} "
                    "(ingest returns the id)."
                )
            self._writer.owned(tx, found[0].session_id, allow_closed=True)
            return self._writer.storage.delete_events(
                tx,
                EventFilter(
                    None,
                    session_id=found[0].session_id,
                    kinds=("knowledge",),
                    where={"doc_id": document_id},
                ),
            )

    # -- the parts -------------------------------------------------------------------------

    def _chunks(self, body: str, chunker: Chunker | None) -> list[Chunk]:
        """The document's chunks: the caller's chunker's, or the Markdown-aware default
        counting with the embedder's own tokenizer when it has one."""
        if chunker is None:
            count, window = window_of(self._writer.indexer.embedder.embedder)
            return chunk_markdown(body, count, window)
        if not callable(chunker):
            raise InvalidInput(f"chunker must be a callable text -> chunks, got {shown(chunker)}.")
        made: list[Chunk] = []
        produced = chunker(body)
        if isinstance(produced, str) or not isinstance(produced, Iterable):
            raise InvalidInput(
                f"The chunker returned {shown(produced)}; it must return a list of str or "
                "Chunk items."
            )
        for i, item in enumerate(produced):
            if isinstance(item, str):
                item = Chunk(item)
            if (
                not isinstance(item, Chunk)
                or not isinstance(item.text, str)
                or not item.text.strip()
                or not isinstance(item.headings, tuple | list)
                or not all(isinstance(heading, str) for heading in item.headings)
            ):
                raise InvalidInput(
                    f"The chunker's chunk {i} is {shown(item)}: it must give non-empty str or "
                    "Chunk items (a str text, str headings)."
                )
            made.append(item)
        return made

    def _knowledge_session(self, pool: str | None) -> Session:
        name = json.dumps([self.agent_id, pool, "knowledge"])
        key = "asm-knowledge-" + hashlib.sha256(name.encode()).hexdigest()[:32]
        return self._sessions.session_for(
            key,
            goal=f"Knowledge documents of agent {self.agent_id}",
            metadata={"asm": KNOWLEDGE_SESSION},
            shared_pool=pool,
        )


def _document(
    source: str | os.PathLike[str] | None, text: str | None, name: str | None
) -> tuple[str, str]:
    """``(name, text)`` of the document to ingest, read and checked."""
    if (source is None) == (text is None):
        raise InvalidInput("ingest takes a source file or a text (exactly one of them).")
    if source is not None:
        path = path_of(source, "source")
        try:
            if not path.is_file():
                raise InvalidInput(f"{str(path)!r} is not a file to ingest (missing, or a folder).")
            if path.stat().st_size > 4 * MAX_DOCUMENT_CHARS:  # (UTF-8: at most 4 bytes each)
                raise InvalidInput(
                    f"{str(path)!r} holds {path.stat().st_size:,} bytes, more than a document "
                    f"of at most {MAX_DOCUMENT_CHARS:,} characters can. Split it first."
                )
            raw = path.read_bytes()
        except OSError as exc:  # (permission denied, a name too long)
            raise InvalidInput(f"{str(path)!r} cannot be read: {exc.strerror or exc}.") from None
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"{str(path)!r} is not UTF-8 text (byte {exc.start}: "
                f"{raw[exc.start : exc.start + 4]!r}); convert it to UTF-8 first (e.g. iconv "
                "-f latin1 -t utf-8)."
            ) from None
        name = identifier(name, "name") if name is not None else str(path.resolve())
    else:
        if not isinstance(text, str):
            raise InvalidInput(f"text must be a str, got {type(text).__name__}.")
        if name is None:
            raise InvalidInput(
                "ingest(text=...) needs name=...: the document's name, which a later ingest of "
                "the same document gives again."
            )
        name, body = identifier(name, "name"), text
    if not body.strip():
        raise InvalidInput(f"Document {name!r} is empty: nothing to ingest.")
    if len(body) > MAX_DOCUMENT_CHARS:
        raise InvalidInput(
            f"Document {name!r} has {len(body):,} characters; at most {MAX_DOCUMENT_CHARS:,}. "
            "Split it into several documents."
        )
    return name, body


def _digests(chunks: list[Chunk]) -> list[str]:
    """A digest per chunk: its embedded text, and which repeat of that text it is."""
    seen: dict[str, int] = {}
    digests = []
    for chunk in chunks:
        base = hashlib.sha256(chunk.embedded.encode()).hexdigest()[:24]
        seen[base] = seen.get(base, 0) + 1
        digests.append(f"{base}.{seen[base]}")
    return digests
