"""The agent-memory systems of bench/peers.py behind one small interface.

Every system is driven through its public API with the same embedder object (``embed``: a
``list[str] -> float32 rows`` callable, memlane's MiniLM in a real run), wrapped in the
system's own embedding interface. A *scope* is what one agent or user owns (one LoCoMo
conversation, or the whole scaled store); a row's ``key`` comes back from ``search`` so the
harness can score it. Nothing is imported at module level beyond numpy and memlane's own
types: a peer that is not installed is simply not offered (``available``).

How each peer is set up, and why:

- **memlane**: one ``SessionManager`` per scope on one SQLite file; the default
  ``background=True`` (the worker embeds), and ``background=False`` as a second column;
  ``search(q, k)`` is its default hybrid search; context is ``restore(session, B, query=q)``.
- **LangGraph InMemoryStore** / **SqliteStore**: ``index={"dims", "embed": callable,
  "fields": ["text"]}`` (the text field only, not the whole JSON value); the namespace is
  ``("memories", scope)``. SqliteStore's vectors are in sqlite-vec (cosine, brute force); its
  connection comes from ``pysqlite3`` because this Python's ``sqlite3`` cannot load
  extensions — the same SQLite API, a newer library.
- **mem0**: ``Memory`` on local Qdrant (on disk) and its SQLite history, ``add(...,
  infer=False)`` (no LLM: each message stored as is), ``search(..., filters={"user_id":
  scope}, threshold=0)`` so that it returns k results like the others. Its embedder is
  replaced after construction by one that calls ``embed`` (mem0's config accepts only its
  named providers); its LLM client is configured but never called.
- **Chroma**: ``PersistentClient``, one collection per scope, HNSW with cosine space, an
  ``EmbeddingFunction`` that calls ``embed``.
- **LlamaIndex**: ``VectorMemory`` (one message a node: ``batch_by_user_message=False``) on
  the core ``SimpleVectorStore``, persisted with ``storage_context.persist``. Its newer
  ``Memory`` + ``VectorMemoryBlock`` needs a vector store that keeps text, which the core
  package does not have (every such store is another package and most are servers), and it
  embeds whole flushed batches of messages, not turns.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]

#: rows handed to a bulk load at once (every peer's batch API takes this many)
CHUNK = 500


@dataclass(frozen=True)
class Row:
    """One turn as every system receives it."""

    key: str  # unique within its scope
    text: str
    role: str  # "user" or "assistant"
    session: str  # the session it belongs to within its scope (memlane uses it)
    created_at: datetime


def folder_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (SQLite's -wal and -shm included)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class System:
    """One system under test, on its own folder."""

    name = ""
    #: the modules it imports (a missing one takes it out of the run, named)
    requires: tuple[str, ...] = ()
    #: False for a store that keeps nothing on disk (no disk figure, no cold start)
    persistent = True
    #: False: measured in the LoCoMo phase only
    scaled = True

    def __init__(self, folder: Path, embed: Embed, dim: int) -> None:
        self.folder = folder
        self.embed = embed
        self.dim = dim
        folder.mkdir(parents=True, exist_ok=True)

    @classmethod
    def available(cls) -> bool:
        return all(importlib.util.find_spec(module) is not None for module in cls.requires)

    def add(self, scope: str, row: Row) -> None:
        """Write one turn as an agent would while it runs."""
        raise NotImplementedError

    def load(self, scope: str, rows: Sequence[Row]) -> None:
        """Write many turns by the fastest public path (building the scaled stores)."""
        for row in rows:
            self.add(scope, row)

    def settle(self) -> None:
        """Wait until everything written is searchable and durable (part of ingest time)."""

    def search(self, scope: str, query: str, k: int) -> list[str]:
        """The keys of the ``k`` best rows, best first."""
        raise NotImplementedError

    def context(self, scope: str, query: str, budget: int) -> str | None:
        """The system's own context for ``query`` within ``budget`` tokens, or None when it
        has no such call (the harness then packs its search results)."""
        return None

    def close(self) -> None:
        pass


# -- memlane -------------------------------------------------------------------------------


class Memlane(System):
    name = "memlane"
    requires = ("memlane",)
    background = True

    def __init__(self, folder: Path, embed: Embed, dim: int) -> None:
        super().__init__(folder, embed, dim)
        self.db = folder / "memlane.db"
        self.managers: dict[str, Any] = {}
        self.sessions: dict[tuple[str, str], str] = {}

    def _manager(self, scope: str) -> Any:
        if scope not in self.managers:
            from memlane import SessionManager

            self.managers[scope] = SessionManager(
                scope, self.db, embedder=self.embed, background=self.background
            )
        return self.managers[scope]

    def _session(self, scope: str, name: str) -> str:
        if (scope, name) not in self.sessions:
            opened = self._manager(scope).start_session(f"Conversation {scope}, {name}")
            self.sessions[(scope, name)] = opened.id
        return self.sessions[(scope, name)]

    def add(self, scope: str, row: Row) -> None:
        self._manager(scope).add_message(
            self._session(scope, row.session),
            row.role,
            row.text,
            metadata={"key": row.key},
            created_at=row.created_at,
        )

    def load(self, scope: str, rows: Sequence[Row]) -> None:
        mgr = self._manager(scope)
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            by_session: dict[str, list[dict[str, Any]]] = {}
            for row in chunk:
                by_session.setdefault(row.session, []).append(
                    {
                        "kind": "message",
                        "role": row.role,
                        "content": row.text,
                        "metadata": {"key": row.key},
                        "created_at": row.created_at,
                    }
                )
            for session, events in by_session.items():
                mgr.record_many(self._session(scope, session), events)

    def settle(self) -> None:
        for mgr in self.managers.values():
            mgr.flush()

    def search(self, scope: str, query: str, k: int) -> list[str]:
        hits = self._manager(scope).search(query, k=k)
        return [str(hit.event.metadata.get("key", "")) for hit in hits]

    def context(self, scope: str, query: str, budget: int) -> str | None:
        sessions = [sid for (owner, _), sid in self.sessions.items() if owner == scope]
        if len(sessions) != 1:
            return None  # restore reads one session: the harness's LoCoMo scopes have one
        return str(self._manager(scope).restore(sessions[0], budget, query=query).text)

    def close(self) -> None:
        for mgr in self.managers.values():
            mgr.close()
        self.managers.clear()


class MemlaneSync(Memlane):
    name = "memlane (background=False)"
    background = False
    #: the scaled stores are bulk-loaded (record_many): the same as the default's
    scaled = False


# -- LangGraph -----------------------------------------------------------------------------


class _LangGraph(System):
    """The two LangGraph stores share everything but their constructor."""

    requires = ("langgraph",)
    store: Any

    def _index(self) -> dict[str, Any]:
        embed = self.embed
        return {
            "dims": self.dim,
            "embed": lambda texts: np.asarray(embed(list(texts))).tolist(),
            "fields": ["text"],
        }

    def add(self, scope: str, row: Row) -> None:
        self.store.put(("memories", scope), row.key, {"text": row.text, "role": row.role})

    def load(self, scope: str, rows: Sequence[Row]) -> None:
        from langgraph.store.base import PutOp

        # A batch must not hold one text twice: InMemoryStore (langgraph 1.2.24) embeds each
        # distinct text once and then fails ("Number of embeddings ... does not match number
        # of indices"). The scaled store repeats every text once a copy, so batches break there.
        batch: list[Any] = []
        texts: set[str] = set()
        for row in rows:
            if len(batch) == CHUNK or row.text in texts:
                self.store.batch(batch)
                batch, texts = [], set()
            batch.append(PutOp(("memories", scope), row.key, {"text": row.text, "role": row.role}))
            texts.add(row.text)
        if batch:
            self.store.batch(batch)

    def search(self, scope: str, query: str, k: int) -> list[str]:
        return [item.key for item in self.store.search(("memories", scope), query=query, limit=k)]


class LangGraphInMemory(_LangGraph):
    name = "LangGraph InMemoryStore"
    persistent = False

    def __init__(self, folder: Path, embed: Embed, dim: int) -> None:
        super().__init__(folder, embed, dim)
        from langgraph.store.memory import InMemoryStore

        self.store = InMemoryStore(index=self._index())  # type: ignore[arg-type]


class LangGraphSqlite(_LangGraph):
    name = "LangGraph SqliteStore"
    requires = ("langgraph.store.sqlite", "sqlite_vec", "pysqlite3")

    def __init__(self, folder: Path, embed: Embed, dim: int) -> None:
        super().__init__(folder, embed, dim)
        from langgraph.store.sqlite import SqliteStore
        from pysqlite3 import dbapi2

        # as SqliteStore.from_conn_string opens it, but with an extension-capable sqlite3
        self.conn = dbapi2.connect(
            str(folder / "store.db"), check_same_thread=False, isolation_level=None
        )
        self.store = SqliteStore(self.conn, index=self._index())  # type: ignore[arg-type]
        self.store.setup()

    def close(self) -> None:
        self.conn.close()


# -- mem0 ----------------------------------------------------------------------------------


class Mem0(System):
    name = "mem0"
    requires = ("mem0", "qdrant_client")

    def __init__(self, folder: Path, embed: Embed, dim: int) -> None:
        super().__init__(folder, embed, dim)
        os.environ["MEM0_TELEMETRY"] = "False"  # no network: read when mem0 is imported
        os.environ.setdefault("MEM0_DIR", str(folder / "mem0-home"))
        from mem0 import Memory
        from mem0.embeddings.base import EmbeddingBase

        class SharedEmbedder(EmbeddingBase):
            def embed(self, text: Any, memory_action: Any = None) -> list[float]:
                return [float(x) for x in embed([str(text)])[0]]

            def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
                return np.asarray(embed([str(t) for t in texts])).tolist()

        self.memory = Memory.from_config(
            {
                "vector_store": {
                    "provider": "qdrant",
                    "config": {
                        "collection_name": "peers",
                        "path": str(folder / "qdrant"),
                        "embedding_model_dims": dim,
                        "on_disk": True,
                    },
                },
                # constructed, never called: infer=False makes no LLM call
                "llm": {"provider": "openai", "config": {"api_key": "unused"}},
                "embedder": {
                    "provider": "openai",
                    "config": {"api_key": "unused", "embedding_dims": dim},
                },
                "history_db_path": str(folder / "history.db"),
            }
        )
        self.memory.embedding_model = SharedEmbedder()

    def add(self, scope: str, row: Row) -> None:
        self.memory.add(
            [{"role": row.role, "content": row.text}],
            user_id=scope,
            metadata={"key": row.key},
            infer=False,
        )

    def load(self, scope: str, rows: Sequence[Row]) -> None:
        # add() with a list of messages stores each as its own memory: the bulk path. The
        # metadata is per call, so the scaled store's rows carry no key (not scored there).
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            self.memory.add(
                [{"role": row.role, "content": row.text} for row in chunk],
                user_id=scope,
                infer=False,
            )

    def search(self, scope: str, query: str, k: int) -> list[str]:
        found = self.memory.search(query, top_k=k, filters={"user_id": scope}, threshold=0.0)
        results = found["results"] if isinstance(found, dict) else found
        return [str((item.get("metadata") or {}).get("key", "")) for item in results]

    def close(self) -> None:
        client = getattr(self.memory.vector_store, "client", None)
        if client is not None:
            client.close()


# -- Chroma --------------------------------------------------------------------------------


class Chroma(System):
    name = "Chroma"
    requires = ("chromadb",)

    def __init__(self, folder: Path, embed: Embed, dim: int) -> None:
        super().__init__(folder, embed, dim)
        import chromadb
        from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
        from chromadb.config import Settings

        class SharedEmbedding(EmbeddingFunction[Documents]):
            def __init__(self) -> None:
                pass

            def __call__(self, input: Documents) -> Embeddings:
                return list(embed(list(input)))

            @staticmethod
            def name() -> str:
                return "memlane-minilm"

            def get_config(self) -> dict[str, Any]:
                return {}

            @staticmethod
            def build_from_config(config: dict[str, Any]) -> SharedEmbedding:
                return SharedEmbedding()

            def default_space(self) -> Any:
                return "cosine"

        self.function = SharedEmbedding()
        self.client = chromadb.PersistentClient(
            path=str(folder / "chroma"), settings=Settings(anonymized_telemetry=False)
        )
        self.collections: dict[str, Any] = {}

    def _collection(self, scope: str) -> Any:
        if scope not in self.collections:
            self.collections[scope] = self.client.get_or_create_collection(
                f"scope-{scope}",  # Chroma's names need 3+ characters
                embedding_function=self.function,  # type: ignore[arg-type]
                configuration={"hnsw": {"space": "cosine"}},
            )
        return self.collections[scope]

    def add(self, scope: str, row: Row) -> None:
        self._collection(scope).add(ids=[row.key], documents=[row.text])

    def load(self, scope: str, rows: Sequence[Row]) -> None:
        collection = self._collection(scope)
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            collection.add(ids=[r.key for r in chunk], documents=[r.text for r in chunk])

    def search(self, scope: str, query: str, k: int) -> list[str]:
        collection = self._collection(scope)
        found = collection.query(query_texts=[query], n_results=min(k, collection.count()))
        return [str(key) for key in found["ids"][0]]

    def close(self) -> None:
        self.client.clear_system_cache()  # releases the files; PersistentClient has no close


# -- LlamaIndex ----------------------------------------------------------------------------


class LlamaIndexMemory(System):
    name = "LlamaIndex VectorMemory"
    requires = ("llama_index.core",)

    def __init__(self, folder: Path, embed: Embed, dim: int) -> None:
        super().__init__(folder, embed, dim)
        from llama_index.core.base.embeddings.base import BaseEmbedding
        from llama_index.core.bridge.pydantic import PrivateAttr

        class SharedEmbedding(BaseEmbedding):
            _embed: Any = PrivateAttr()

            def __init__(self) -> None:
                super().__init__(model_name="all-MiniLM-L6-v2")
                self._embed = embed

            def _get_query_embedding(self, query: str) -> list[float]:
                return np.asarray(self._embed([query])[0]).tolist()  # type: ignore[no-any-return]

            async def _aget_query_embedding(self, query: str) -> list[float]:
                return self._get_query_embedding(query)

            def _get_text_embedding(self, text: str) -> list[float]:
                return self._get_query_embedding(text)

            def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
                return np.asarray(self._embed(texts)).tolist()  # type: ignore[no-any-return]

        self.embedding = SharedEmbedding()
        self.memories: dict[str, Any] = {}

    def _memory(self, scope: str) -> Any:
        if scope not in self.memories:
            from llama_index.core import StorageContext, load_index_from_storage
            from llama_index.core.memory import VectorMemory

            stored = self.folder / scope
            if (stored / "docstore.json").exists():
                index = load_index_from_storage(
                    StorageContext.from_defaults(persist_dir=str(stored)),
                    embed_model=self.embedding,
                )
                memory = VectorMemory(vector_index=index, batch_by_user_message=False)
            else:
                memory = VectorMemory.from_defaults(embed_model=self.embedding)
                memory.batch_by_user_message = False
            self.memories[scope] = memory
        return self.memories[scope]

    def _message(self, row: Row) -> Any:
        from llama_index.core.llms import ChatMessage

        return ChatMessage(role=row.role, content=row.text, additional_kwargs={"key": row.key})

    def add(self, scope: str, row: Row) -> None:
        self._memory(scope).put(self._message(row))

    def settle(self) -> None:
        # what makes it durable: the whole index written out as JSON
        for scope, memory in self.memories.items():
            memory.vector_index.storage_context.persist(persist_dir=str(self.folder / scope))

    def search(self, scope: str, query: str, k: int) -> list[str]:
        memory = self._memory(scope)
        memory.retriever_kwargs = {"similarity_top_k": k}
        return [
            str(message.additional_kwargs.get("key", "")) for message in memory.get(input=query)
        ]


#: every system, in table order; the first is ours
SYSTEMS: dict[str, type[System]] = {
    cls.name: cls
    for cls in (
        Memlane,
        MemlaneSync,
        LangGraphInMemory,
        LangGraphSqlite,
        Mem0,
        Chroma,
        LlamaIndexMemory,
    )
}
OURS = (Memlane.name, MemlaneSync.name)
