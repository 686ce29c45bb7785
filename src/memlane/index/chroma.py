"""Vectors in ChromaDB, the log in SQLite or PostgreSQL: the product page's original design.

Install the extra: ``pip install 'memlane[chroma]'``. Select it with
``SessionManager(..., index="chroma+http://host:port")`` (a ``chroma run`` server) or
``index="chroma:///path/to/dir"`` (embedded, ``PersistentClient``).

:class:`ChromaIndex` is a :class:`~memlane.core.seams.VectorIndex`: the engine composes it
with the log store (``engine/storage.py``), which keeps everything else (the log, the
outbox, keyword search, isolation of reads) and knows nothing of Chroma.

* **Fed by the same outbox.** The worker claims outbox rows from the log, embeds them with
  *our* embedder, upserts the vectors into Chroma (ids are the events' ``seq``; metadata holds
  partition, agent, session, kind and time, carried by the claimed rows) and only then clears
  the rows from the outbox. A
  crash in between re-embeds and upserts again (idempotent). Chroma never embeds anything:
  collections are opened with ``embedding_function=None``, so it never loads a model.
* **Isolation** is the choice of collections (the scope's partitions) plus, in pools the
  agent writes without subscribing, :meth:`Scope.chroma_where
  <memlane.core.scope.Scope.chroma_where>`'s agent clause; session, kinds and time are
  Chroma ``where`` clauses too. A ``where`` on our own metadata is answered by the log (the
  events it admits, ``allowed()``) and passed as ``seq $in [...]``, or for large sets
  applied after an over-fetch.
* **Deletes reach Chroma** after the log's transaction commits; ``engine/storage.py`` keeps one
  Chroma cannot take in the log's ``meta`` and retries it from the worker's maintenance, and
  audits each collection against the log (a lost or emptied index is queued again).
  ``reindex`` drops the collections.
* **Failures are loud**: a Chroma that cannot be reached raises
  :class:`~memlane.errors.StoreUnavailable` (hybrid search then answers by keyword,
  see ``search/searcher.py``).
* **One collection per partition** (an agent's private sessions, or one pool):
  ``asm_<store id>_<hash of the partition>``, the store id kept in the log's ``meta``. A
  search limited only by its scope then needs no Chroma ``where`` at all, which keeps it on
  Chroma's HNSW fast path (measured: a ``partition $in`` filter over one 100k collection
  took ~250 ms per query; see docs/backends.md).
* **Processes**: a Chroma *server* may be shared by any number of processes and hosts.
  The *embedded* client is not safe for two processes on one folder (chroma issues #7040,
  #3792): this wrapper takes an exclusive lock on the folder, and a second process gets
  :class:`~memlane.errors.StoreBusy` naming the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..core.seams import EventFilter, OutboxRow, Tx, VectorMatch, Vectors
from ..errors import InvalidInput, SessionManagerError, StoreBusy, StoreUnavailable

__all__ = ["ChromaIndex"]

log = logging.getLogger("memlane.index.chroma")

# A `where` on our metadata is sent to Chroma as `seq $in [...]` up to this many events;
# beyond, Chroma is asked for more neighbours than k and the rest is filtered here.
_IN_LIMIT = 2_000
# When a filtered Chroma query returns fewer rows than asked and the filter admits at most
# this many, they are ranked exactly here instead (k results whenever k exist).
_EXACT_LIMIT = 20_000
# ids per Chroma delete call
_DELETE_CHUNK = 1_000


def _import_chromadb() -> Any:
    try:
        import chromadb
    except ImportError:
        raise InvalidInput(
            "The Chroma index needs its extra: pip install 'memlane[chroma]'."
        ) from None
    return chromadb


class ChromaIndex:
    """Vectors in Chroma collections, one per partition (see the module docstring).

    ``store_id`` names this store's collections (``asm_<store id>_<partition hash>``), so
    that several stores can share one Chroma server.
    """

    transactional = False
    exact = False

    def __init__(
        self,
        *,
        store_id: str,
        path: str | os.PathLike[str] | None = None,
        host: str | None = None,
        port: int = 8000,
        ssl: bool = False,
    ) -> None:
        chromadb = _import_chromadb()
        from chromadb.config import Settings

        self._lock_file: _FolderLock | None = None
        settings = Settings(anonymized_telemetry=False)
        server = host is not None
        if server:
            where = f"chroma+{'https' if ssl else 'http'}://{host}:{port}"
            try:
                self._client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
                self._client.heartbeat()
            except Exception as exc:
                raise StoreUnavailable(
                    f"Cannot reach the Chroma server at {where}: {exc}. Start it with "
                    "`chroma run --host HOST --port PORT --path DIR`, or check the URL."
                ) from exc
        else:
            assert path is not None
            folder = Path(path)
            if not folder.parent.is_dir():
                raise InvalidInput(
                    f"The folder {str(folder.parent)!r} for the Chroma index {str(folder)!r} "
                    "does not exist. Create it first (mkdir -p) or choose another path."
                )
            folder.mkdir(exist_ok=True)
            self._lock_file = _FolderLock.acquire(folder)
            where = f"chroma:///{folder}"
            self._client = chromadb.PersistentClient(path=str(folder), settings=settings)
        self.path = None if path is None or server else Path(path)
        self.location = where
        self.name = f"chroma-{'server' if server else 'embedded'}"
        #: the embedded client is one process's only (chroma issues #7040, #3792)
        self.multi_process = self.multi_host = server
        self._prefix = f"asm_{store_id}_"
        self._collections: dict[str, Any] = {}
        self._collections_lock = threading.Lock()

    def _name(self, partition: str) -> str:
        return self._prefix + hashlib.sha1(partition.encode()).hexdigest()[:16]

    def _collection(self, partition: str, *, create: bool) -> Any:
        """The partition's collection (None if it does not exist and ``create`` is false)."""
        with self._collections_lock:
            found = self._collections.get(partition)
            if found is not None:
                return found
            name = self._name(partition)
            if create:
                found = self._client.get_or_create_collection(
                    name,
                    embedding_function=None,  # our embeddings only: Chroma never loads a model
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"created_by": "memlane", "partition": partition},
                )
            else:
                try:
                    found = self._client.get_collection(name, embedding_function=None)
                except Exception as exc:
                    if _is_not_found(exc):
                        return None
                    raise  # the server is down, or worse: _mapped_errors says so
            self._collections[partition] = found
            return found

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """Chroma's and httpx's errors as the library's: the one place they are mapped."""
        try:
            yield
        except SessionManagerError:
            raise  # ours already (a bad filter, the log's own errors)
        except Exception as exc:
            if _is_not_found(exc):
                raise
            detail = str(exc).rstrip(". ")
            raise StoreUnavailable(
                f"The Chroma index at {self.location} failed: {type(exc).__name__}: {detail}. "
                "If the server is down, start it again (`chroma run ...`); the log keeps every "
                "event, and vectors written meanwhile wait in the outbox."
            ) from exc

    def _all_collections(self) -> list[Any]:
        names = [
            getattr(item, "name", item)
            for item in self._client.list_collections()
            if str(getattr(item, "name", item)).startswith(self._prefix)
        ]
        return [self._client.get_collection(name, embedding_function=None) for name in names]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
        if self._lock_file is not None:
            self._lock_file.release()
            self._lock_file = None

    # -- writes ----------------------------------------------------------------------------

    def upsert(self, tx: Tx | None, rows: Sequence[OutboxRow], vectors: Vectors) -> None:
        """Upsert one vector per row into its partition's collection (ids: :func:`_id`)."""
        with self._mapped_errors():
            by_partition: dict[str, list[int]] = {}
            for position, row in enumerate(rows):
                by_partition.setdefault(row.partition, []).append(position)
            for partition, positions in by_partition.items():

                def upsert(collection: Any, positions: list[int] = positions) -> None:
                    collection.upsert(
                        ids=[_id(rows[p]) for p in positions],
                        embeddings=vectors[positions],
                        metadatas=[_metadata(rows[p]) for p in positions],
                    )

                self._with_collection(partition, upsert)

    def _with_collection(self, partition: str, operation: Callable[[Any], Any]) -> Any:
        """Run ``operation(collection)``; once more with a fresh handle if it fails (another
        process's reindex may have dropped and re-created the collection)."""
        try:
            return operation(self._collection(partition, create=True))
        except Exception:
            with self._collections_lock:
                self._collections.pop(partition, None)
            return operation(self._collection(partition, create=True))

    def delete(self, tx: Tx | None, seqs: Sequence[int]) -> None:
        """Delete these events' vectors from every collection of the store (raises
        :class:`StoreUnavailable` while Chroma is down; the caller keeps them to retry)."""
        wanted = list(seqs)
        if not wanted:
            return
        with self._mapped_errors():
            for collection in self._all_collections():
                for start in range(0, len(wanted), _DELETE_CHUNK):
                    chunk = wanted[start : start + _DELETE_CHUNK]
                    # by the event's seq in every row's metadata: a long event's passages too
                    collection.delete(where={"seq": {"$in": chunk}})

    def clear(self, tx: Tx | None) -> None:
        """Drop every collection of the store."""
        with self._mapped_errors(), self._collections_lock:
            self._collections.clear()
            for collection in self._all_collections():
                with contextlib.suppress(Exception):  # already gone
                    self._client.delete_collection(collection.name)

    # -- reads -----------------------------------------------------------------------------

    def count(self, partition: str | None = None) -> int:
        with self._mapped_errors():
            if partition is None:
                return sum(int(c.count()) for c in self._all_collections())
            collection = self._collection(partition, create=False)
            return 0 if collection is None else int(collection.count())

    def seqs(self, partition: str) -> set[int]:
        with self._mapped_errors():
            collection = self._collection(partition, create=False)
            if collection is None:
                return set()
            return {_seq_of(i) for i in collection.get(include=[])["ids"]}

    def passage_spans(self, seqs: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
        """Not read back: the spans are in ids of per-partition collections, a round trip
        each; restore cuts long events again (the same cut: ``text/passages.py``)."""
        return {}

    def size_bytes(self) -> int:
        """What an embedded index's folder takes on disk (0 for a server)."""
        if self.path is None:
            return 0
        return sum(file.stat().st_size for file in self.path.rglob("*") if file.is_file())

    def search(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
        allowed: Callable[[], Sequence[int]],
    ) -> list[VectorMatch]:
        """The best ``k`` events, each by its best passage; an index that cannot be reached
        raises :class:`StoreUnavailable` (never an empty answer that looks like "nothing
        found")."""
        with self._mapped_errors():
            return self._search(query, flt, partitions, k, allowed)

    def _search(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
        allowed_by_log: Callable[[], Sequence[int]],
    ) -> list[VectorMatch]:
        if flt.scope is None:
            raise InvalidInput("A Chroma search needs a scope.")
        clauses: list[dict[str, Any]] = []
        if flt.session_id is not None:
            clauses.append({"session": flt.session_id})
        if flt.kinds:
            clauses.append({"kind": {"$in": list(flt.kinds)}})
        if flt.since_us is not None:
            clauses.append({"time": {"$gte": flt.since_us}})
        if flt.until_us is not None:
            clauses.append({"time": {"$lt": flt.until_us}})
        allowed: set[int] | None = None
        if flt.needs_log:
            allowed = set(allowed_by_log())
            if not allowed:
                return []
            if len(allowed) <= _IN_LIMIT:
                clauses.append({"seq": {"$in": sorted(allowed)}})
                allowed = None
        found: list[VectorMatch] = []
        for partition, owner_only in partitions:
            scoped = flt.scope.chroma_where(owner_only)  # isolation inside the collection
            where = [scoped, *clauses] if scoped else clauses

            def search(collection: Any, where: list[dict[str, Any]] = where) -> list[VectorMatch]:
                return self._search_one(collection, query, where, k, allowed)

            found.extend(self._in_collection(partition, search))
        found.sort(key=lambda match: (-match.score, match.seq))
        return found[:k]

    def _in_collection(
        self, partition: str, search: Callable[[Any], list[VectorMatch]]
    ) -> list[VectorMatch]:
        """``search(collection)`` of the partition's collection, ``[]`` when it has none. A
        handle that another process's reindex left stale (the collection dropped, perhaps
        made again) is fetched afresh once."""
        for attempt in (1, 2):
            collection = self._collection(partition, create=False)
            if collection is None:
                return []
            try:
                return search(collection)
            except Exception as exc:
                if not _is_not_found(exc):
                    raise
                with self._collections_lock:
                    self._collections.pop(partition, None)
                if attempt == 2:
                    return []  # gone again meanwhile: nothing to find there now
        return []

    def _search_one(
        self,
        collection: Any,
        query: Vectors,
        clauses: list[dict[str, Any]],
        k: int,
        allowed: set[int] | None,
    ) -> list[VectorMatch]:
        """The collection's best ``k`` events, each by its best row; more neighbours are
        asked for while a filter or a long event's several passages leave fewer than k."""
        where = None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
        n = k if allowed is None else min(4 * k, len(allowed))
        while True:
            found = self._query(collection, query, where, n)
            if where is not None and len(found) < n:
                # Chroma's filtered HNSW can come back short of rows that match (seen with a
                # time window over a tenth of a collection): rank what the filter admits
                found = self._exact(collection, query, where, n, found)
            best: dict[int, VectorMatch] = {}
            for match in found:  # best first: an event's first row is its best
                if allowed is None or match.seq in allowed:
                    best.setdefault(match.seq, match)
            if len(best) >= k or len(found) < n:
                return list(best.values())
            n *= 4

    @staticmethod
    def _exact(
        collection: Any,
        query: Vectors,
        where: dict[str, Any],
        n: int,
        found: list[VectorMatch],
    ) -> list[VectorMatch]:
        matching = collection.get(where=where, include=[])["ids"]
        if len(matching) <= len(found) or len(matching) > _EXACT_LIMIT:
            return found
        rows = collection.get(ids=matching, include=["embeddings"])
        matrix = np.asarray(rows["embeddings"], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
        scores = (matrix @ np.asarray(query, dtype=np.float32)) / np.maximum(norms, 1e-12)
        ranked = sorted(zip(rows["ids"], scores.tolist(), strict=True), key=lambda p: -p[1])
        return [_match(i, float(score)) for i, score in ranked[:n]]

    @staticmethod
    def _query(
        collection: Any, query: Vectors, where: dict[str, Any] | None, n: int
    ) -> list[VectorMatch]:
        result = collection.query(
            query_embeddings=[query], n_results=n, where=where, include=["distances"]
        )
        ids = result["ids"][0] if result["ids"] else []
        distances = result["distances"][0] if result["distances"] else []
        return [_match(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]


def _id(row: OutboxRow) -> str:
    """A vector's id in its collection: the event's seq, and for a passage its number and
    span too (``"seq:part:start:stop"``), so a search's answer says which passage it was
    without reading metadata."""
    if not row.stop:
        return str(row.seq)
    return f"{row.seq}:{row.part}:{row.start}:{row.stop}"


def _seq_of(vector_id: str) -> int:
    return int(vector_id.split(":", 1)[0])


def _match(vector_id: str, score: float) -> VectorMatch:
    seq, *passage = (int(part) for part in vector_id.split(":"))
    return VectorMatch(seq, score, *passage)


def _metadata(row: OutboxRow) -> dict[str, Any]:
    """What Chroma keeps beside each vector: enough to filter by scope, session, kind, time."""
    return {
        "seq": row.seq,
        "part": row.part,
        "partition": row.partition,
        "agent": row.agent_id,
        "session": row.session_id,
        "kind": row.kind,
        "time": row.created_us,
    }


def _is_not_found(exc: BaseException) -> bool:
    """Chroma's "no such collection" (NotFoundError; older releases raise ValueError)."""
    name = type(exc).__name__
    return name == "NotFoundError" or (isinstance(exc, ValueError) and "does not exist" in str(exc))


class _FolderLock:
    """An exclusive lock on an embedded Chroma folder, held by one process (shared by the
    stores of that process, counted)."""

    _held: ClassVar[dict[str, _FolderLock]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, key: str, handle: Any) -> None:
        self.key, self.handle, self.count = key, handle, 1

    @classmethod
    def acquire(cls, folder: Path) -> _FolderLock:
        import fcntl

        key = str(folder.resolve())
        with cls._guard:
            held = cls._held.get(key)
            if held is not None:
                held.count += 1
                return held
            handle = open(folder / ".asm-lock", "a+")  # noqa: SIM115 (held until release())
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                raise StoreBusy(
                    f"The embedded Chroma index {str(folder)!r} is open in another process, "
                    "and Chroma's embedded client is not safe for several processes. Use a "
                    "Chroma server (`chroma run`, index='chroma+http://host:port') to share it."
                ) from None
            lock = cls._held[key] = _FolderLock(key, handle)
            return lock

    def release(self) -> None:
        with self._guard:
            self.count -= 1
            if self.count == 0:
                del self._held[self.key]
                self.handle.close()
