"""Vectors in ChromaDB, the log in SQLite or PostgreSQL: the product page's original design.

Install the extra: ``pip install 'agent-session-manager[chroma]'``. Select it with
``SessionManager(..., index="chroma+http://host:port")`` (a ``chroma run`` server) or
``index="chroma:///path/to/dir"`` (embedded, ``PersistentClient``).

:class:`ChromaIndexedStore` wraps the log's store and replaces its vector projection; every
other operation (the log, the outbox, keyword search, isolation) is the log store's own.

* **Fed by the same outbox.** The worker claims outbox rows from the log, embeds them with
  *our* embedder, upserts the vectors into Chroma (ids are the events' ``seq``; metadata holds
  partition, agent, session, kind and time) and only then clears the rows from the outbox. A
  crash in between re-embeds and upserts again (idempotent). Chroma never embeds anything:
  collections are opened with ``embedding_function=None``, so it never loads a model.
* **Isolation** is the choice of collections (the scope's partitions) plus, in pools the
  agent writes without subscribing, :meth:`Scope.chroma_where
  <session_manager._scope.Scope.chroma_where>`'s agent clause; session, kinds and time are
  Chroma ``where`` clauses too. A ``where`` on our own metadata is answered by the log (the
  events it admits) and passed as ``seq $in [...]``, or for large sets applied after an
  over-fetch.
* **Deletes reach Chroma** after the log's transaction commits (a crash in between leaves
  vectors of deleted events, which searches drop because the log no longer has them); one
  Chroma cannot take then waits in the log's ``meta`` and is retried by the worker's
  maintenance. ``reindex`` drops and rebuilds the collections.
* **Failures are loud**: a Chroma that cannot be reached raises
  :class:`~session_manager.errors.StoreUnavailable` (hybrid search then answers by keyword,
  see ``_search.py``); the worker audits each collection against the log and queues again
  what a lost or emptied index no longer holds.
* **One collection per partition** (an agent's private sessions, or one pool):
  ``asm_<store id>_<hash of the partition>``, the store id kept in the log's ``meta``. A
  search limited only by its scope then needs no Chroma ``where`` at all, which keeps it on
  Chroma's HNSW fast path (measured: a ``partition $in`` filter over one 100k collection
  took ~250 ms per query; see docs/backends.md).
* **Processes**: a Chroma *server* may be shared by any number of processes and hosts.
  The *embedded* client is not safe for two processes on one folder (chroma issues #7040,
  #3792): this wrapper takes an exclusive lock on the folder, and a second process gets
  :class:`~session_manager.errors.StoreBusy` naming the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .._scope import partition_of
from ..errors import InvalidInput, SessionManagerError, StoreBusy, StoreUnavailable
from ..store.base import EventFilter, OutboxBatch, Store, Vectors

__all__ = ["ChromaIndexedStore"]

log = logging.getLogger("session_manager.index.chroma")

#: deletes the index missed (Chroma was down when the log's delete committed), kept in the
#: log's ``meta`` until the worker's maintenance gets them through
_PENDING_DELETES = "chroma_pending_deletes"
#: how often the worker compares each collection with the log (a lost or partial index)
_AUDIT_SECONDS = 60.0

# A `where` on our metadata is sent to Chroma as `seq $in [...]` up to this many events;
# beyond, Chroma is asked for more neighbours than k and the rest is filtered here.
_IN_LIMIT = 2_000
# When a filtered Chroma query returns fewer rows than asked and the filter admits at most
# this many, they are ranked exactly here instead (k results whenever k exist).
_EXACT_LIMIT = 20_000


def _import_chromadb() -> Any:
    try:
        import chromadb
    except ImportError:
        raise InvalidInput(
            "The Chroma index needs its extra: pip install 'agent-session-manager[chroma]'."
        ) from None
    return chromadb


class ChromaIndexedStore:
    """A log store whose vectors live in a Chroma collection (see the module docstring)."""

    def __init__(
        self,
        log: Store,
        *,
        path: str | os.PathLike[str] | None = None,
        host: str | None = None,
        port: int = 8000,
        ssl: bool = False,
    ) -> None:
        chromadb = _import_chromadb()
        from chromadb.config import Settings

        self._log = log
        self._lock_file: Any = None
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
        self.location = f"{log.location} + {where}"
        self.capabilities = replace(
            log.capabilities,
            name=f"{log.capabilities.name}+chroma-{'server' if server else 'embedded'}",
            multi_process=log.capabilities.multi_process and server,
            multi_host=log.capabilities.multi_host and server,
            exact_vectors=False,
            transactional_vectors=False,
        )
        self._where = where
        self._prefix = f"asm_{self._store_id()}_"
        self._collections: dict[str, Any] = {}
        self._collections_lock = threading.Lock()
        self._audited_at = 0.0  # the worker's first maintenance audits the index

    def __getattr__(self, name: str) -> Any:
        # everything but the vector projection is the log store's own
        return getattr(self._log, name)

    def _store_id(self) -> str:
        found = self._log.get_meta("store_id")
        if found is None:
            with self._log.atomic() as tx:
                found = self._log.get_meta("store_id", tx)
                if found is None:
                    found = uuid.uuid4().hex
                    self._log.set_meta(tx, "store_id", found)
        return found

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
                    metadata={"created_by": "agent-session-manager", "partition": partition},
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
                f"The Chroma index at {self._where} failed: {type(exc).__name__}: {detail}. If "
                "the server is down, start it again (`chroma run ...`); the log keeps every "
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
        try:
            self._log.close()
        finally:
            with contextlib.suppress(Exception):
                self._client.close()
            if self._lock_file is not None:
                self._lock_file.release()
                self._lock_file = None

    # -- the vector projection -------------------------------------------------------------

    @contextmanager
    def claim_outbox(
        self, limit: int, partitions: Sequence[str] | None = None, *, force: bool = False
    ) -> Iterator[_ChromaBatch]:
        with self._log.claim_outbox(limit, partitions, force=force) as batch:
            yield _ChromaBatch(self, batch, batch.rows)

    def maintenance(self) -> None:
        """The log's housekeeping, then the index's: retry deletes Chroma missed, and now and
        then compare each collection with the log (a lost or emptied index is rebuilt)."""
        self._log.maintenance()
        self._retry_deletes()
        if time.monotonic() - self._audited_at >= _AUDIT_SECONDS:
            self.audit()
            self._audited_at = time.monotonic()

    def _upsert(self, rows: list[tuple[int, str, str]], vectors: Vectors) -> None:
        with self._mapped_errors():
            self._upsert_rows(rows, vectors)

    def _upsert_rows(self, rows: list[tuple[int, str, str]], vectors: Vectors) -> None:
        details = self._log.outbox_details([seq for seq, _, _ in rows])
        keep = [i for i, (seq, _, _) in enumerate(rows) if seq in details]
        if not keep:
            return
        metadatas = []
        for i in keep:
            seq, partition, _ = rows[i]
            session_id, agent_id, kind, created_us = details[seq]
            metadatas.append(
                {
                    "seq": seq,
                    "partition": partition,
                    "agent": agent_id,
                    "session": session_id,
                    "kind": kind,
                    "time": created_us,
                }
            )
        by_partition: dict[str, list[int]] = {}
        for position, i in enumerate(keep):
            by_partition.setdefault(rows[i][1], []).append(position)
        for partition, positions in by_partition.items():
            chosen = [keep[p] for p in positions]

            def upsert(
                collection: Any, chosen: list[int] = chosen, at: list[int] = positions
            ) -> None:
                collection.upsert(
                    ids=[str(rows[i][0]) for i in chosen],
                    embeddings=vectors[chosen],
                    metadatas=[metadatas[p] for p in at],
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

    def vector_search(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, cosine)``; an index that cannot be reached raises
        :class:`StoreUnavailable` (never an empty answer that looks like "nothing found")."""
        with self._mapped_errors():
            return self._vector_search(query, flt, partitions, k)

    def _vector_search(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
    ) -> list[tuple[int, float]]:
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
        if flt.where or flt.exclude_kinds or flt.status or flt.min_importance is not None:
            allowed = set(self._log.select_seqs(flt))
            if not allowed:
                return []
            if len(allowed) <= _IN_LIMIT:
                clauses.append({"seq": {"$in": sorted(allowed)}})
                allowed = None
        found: list[tuple[int, float]] = []
        for partition, owner_only in partitions:
            collection = self._collection(partition, create=False)
            if collection is None:
                continue
            scoped = flt.scope.chroma_where(owner_only)  # isolation inside the collection
            where = [scoped, *clauses] if scoped else clauses
            found.extend(self._search_one(collection, query, where, k, allowed))
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found[:k]

    def _search_one(
        self,
        collection: Any,
        query: Vectors,
        clauses: list[dict[str, Any]],
        k: int,
        allowed: set[int] | None,
    ) -> list[tuple[int, float]]:
        where = None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
        n = k if allowed is None else min(4 * k, len(allowed))
        while True:
            found = self._query(collection, query, where, n)
            if where is not None and len(found) < n:
                # Chroma's filtered HNSW can come back short of rows that match (seen with a
                # time window over a tenth of a collection): rank what the filter admits
                found = self._exact(collection, query, where, n, found)
            if allowed is None:
                return found
            kept = [pair for pair in found if pair[0] in allowed]
            if len(kept) >= k or len(found) < n:
                return kept
            n *= 4  # not enough survived the filter: ask for more neighbours

    @staticmethod
    def _exact(
        collection: Any,
        query: Vectors,
        where: dict[str, Any],
        n: int,
        found: list[tuple[int, float]],
    ) -> list[tuple[int, float]]:
        matching = collection.get(where=where, include=[])["ids"]
        if len(matching) <= len(found) or len(matching) > _EXACT_LIMIT:
            return found
        rows = collection.get(ids=matching, include=["embeddings"])
        matrix = np.asarray(rows["embeddings"], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
        scores = (matrix @ np.asarray(query, dtype=np.float32)) / np.maximum(norms, 1e-12)
        ranked = sorted(zip(rows["ids"], scores.tolist(), strict=True), key=lambda p: -p[1])
        return [(int(i), float(score)) for i, score in ranked[:n]]

    @staticmethod
    def _query(
        collection: Any, query: Vectors, where: dict[str, Any] | None, n: int
    ) -> list[tuple[int, float]]:
        result = collection.query(
            query_embeddings=[query], n_results=n, where=where, include=["distances"]
        )
        ids = result["ids"][0] if result["ids"] else []
        distances = result["distances"][0] if result["distances"] else []
        return [(int(i), 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]

    # -- deletes and rebuilds reach Chroma -------------------------------------------------

    def delete_session(self, tx: Any, session_id: str) -> int:
        owner = self._log.session_owner(session_id)
        count = self._log.delete_session(tx, session_id)
        if owner is not None:  # its vectors live in one collection: the session's partition
            item = ["session", session_id, partition_of(*owner)]
            tx.on_commit(lambda: self._delete_after_commit([item]))
        return count

    def delete_events(self, tx: Any, flt: EventFilter) -> int:
        seqs = self._log.select_seqs(flt)
        count = self._log.delete_events(tx, flt)
        if seqs:
            tx.on_commit(lambda: self._delete_after_commit([["seqs", [str(s) for s in seqs]]]))
        return count

    def _delete_after_commit(self, deletes: list[list[Any]]) -> None:
        """The log's delete committed: the index follows. If Chroma cannot take it now, the
        delete is kept in the log and retried by the worker — never reported as a failure of
        a delete that happened (searches drop vectors the log no longer has meanwhile)."""
        try:
            self._apply_deletes(deletes)
        except Exception as exc:
            log.warning("Chroma missed a delete (%s); the worker retries it", exc)
            with self._log.atomic() as tx:
                pending = json.loads(self._log.get_meta(_PENDING_DELETES, tx) or "[]")
                self._log.set_meta(tx, _PENDING_DELETES, json.dumps(pending + deletes))

    def _retry_deletes(self) -> None:
        pending = json.loads(self._log.get_meta(_PENDING_DELETES) or "[]")
        if not pending:
            return
        self._apply_deletes(pending)  # raises while Chroma is still down: kept for later
        with self._log.atomic() as tx:  # drop what was applied, keep what came meanwhile
            now = json.loads(self._log.get_meta(_PENDING_DELETES, tx) or "[]")
            self._log.set_meta(tx, _PENDING_DELETES, json.dumps(now[len(pending) :]))

    def _apply_deletes(self, deletes: list[list[Any]]) -> None:
        """``["session", id, partition]`` deletes a session's vectors from its partition's
        collection; ``["seqs", [ids]]`` deletes events' vectors wherever they are."""
        with self._mapped_errors():
            everywhere: list[Any] | None = None
            for item in deletes:
                if item[0] == "session":
                    collection = self._collection(item[2], create=False)
                    if collection is not None:
                        collection.delete(where={"session": item[1]})
                    continue
                if everywhere is None:
                    everywhere = self._all_collections()
                for collection in everywhere:
                    for start in range(0, len(item[1]), 1_000):
                        collection.delete(ids=item[1][start : start + 1_000])

    def audit(self) -> int:
        """Compare every partition's collection with the log; queue again (for the worker
        to embed) the events whose vectors are missing — a Chroma that lost its data, or a
        collection dropped and re-created, is rebuilt from the log. Returns how many."""
        queued = 0
        with self._mapped_errors():
            for partition in self._log.vector_partitions():
                expected = self._log.embedded_seqs(partition)
                collection = self._collection(partition, create=True)
                if int(collection.count()) >= len(expected):
                    continue
                present = {int(i) for i in collection.get(include=[])["ids"]}
                missing = sorted(set(expected) - present)
                if missing:
                    log.warning(
                        "the Chroma index lacks %d vectors of %s; queued to embed again",
                        len(missing),
                        partition,
                    )
                    queued += self._log.requeue(missing)
        return queued

    def requeue_all(self) -> int:
        count = self._log.requeue_all()
        with self._collections_lock:
            self._collections.clear()
            for collection in self._all_collections():
                with contextlib.suppress(Exception):  # already gone
                    self._client.delete_collection(collection.name)
        return count

    def stats(self) -> dict[str, Any]:
        stats = self._log.stats()
        stats["vectors"] = sum(int(c.count()) for c in self._all_collections())
        if self.path is not None:
            stats["size_bytes"] = int(stats["size_bytes"]) + sum(
                file.stat().st_size for file in self.path.rglob("*") if file.is_file()
            )
        return stats


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


@dataclass
class _ChromaBatch:
    owner: ChromaIndexedStore
    batch: OutboxBatch
    rows: list[tuple[int, str, str]]

    def store_vectors(self, vectors: Vectors, register: Callable[[Any], None]) -> None:
        self.owner._upsert(self.batch.rows, vectors)
        self.batch.done(register)

    def done(self, register: Callable[[Any], None]) -> None:
        self.batch.done(register)
