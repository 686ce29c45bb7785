"""Snapshots of vector partitions beside a SQLite file: of big ones for a process's first
search, and of any the process's cache limit drops, for their next search.

A new process's first semantic search reads every vector of its partitions from the log to
build the in-memory codes (``_vector_cache.py``): ~0.3 s more at 100k events than from a
snapshot, ~25 s at 1M. A partition of :data:`~memlane.ranking.vectors.cache.SNAPSHOT_FROM`
rows or more is therefore saved, once built, as one file (its codes — 8 or 4 bits —, scales
and filter columns, their signs and where the store keeps each vector, and its vectors (in
half precision, as the store and the partition keep them) while the partition keeps them in
memory; no text) in the
folder ``<database>.memlane-cache/``; the next process loads it and reads from the log only the
vectors added since. A partition of any size is saved too when the cache limit drops it
(``VectorCache._keep_on_disk``: a small one has no codes, its vectors are the file), and read
back from its file at its next search.

A snapshot is used only while the vector index was not cleared since it was written and the
store's deletion log still reaches back to it (the vectors deleted since are then marked
dead), and while the log still holds its last vector where the snapshot says; otherwise it
is removed and the partition is read again. The
files are a cache: deleting the folder loses nothing. Writing one is best effort (a
read-only folder, a full disk: the search goes on without it).

A file records the store's generation its partition was first read from the log at (its
*stamp*). An erasure marks the partitions it touched with the generation it ends at
(``SqliteStore.scrub``): a snapshot stamped before that mark is never written (checked before
and after the write, ``_snapshot_files.py``) nor used — a process that had the partition in
memory keeps the erased vectors as dead rows, and must not save them again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..partition_rows import RowCodes
from ..snapshot_files import SnapshotFolder, global_codes, local_codes
from .codec import fits_half

# (a vector cache partition: _vector_cache imports this module, not the other way round)
_Partition = Any

__all__ = ["VectorSnapshots"]

log = logging.getLogger("memlane.store.snapshots")

#: the layout of a snapshot file; another value is ignored (and replaced)
FORMAT = 6  # 5: a partition past IN_MEMORY_UNDER rows keeps 4-bit codes; 6: float16 vectors
#: a snapshot is written again once its partition has grown by this share
REWRITE_GROWTH = 0.25
#: ... but a process writes a partition's snapshot at most this often: a store deleted from
#: between searches (upserts: record(replace=...)) rebuilds its partitions each time, and
#: should not rewrite a file of hundreds of megabytes each time too
REWRITE_SECONDS = 60.0


class VectorSnapshots(SnapshotFolder):
    """The snapshot files of one database's vector partitions (see the module docstring)."""

    prefix, suffix = "vectors", ".asmvec"

    def __init__(
        self,
        folder: Path,
        *,
        writable: bool = True,
        stamp: Callable[[], int] | None = None,
        current: Callable[[str, int], bool] | None = None,
    ) -> None:
        super().__init__(folder, writable=writable, stamp=stamp, current=current)
        self._written: dict[str, float] = {}  # partition -> when this process last wrote it

    def load(
        self, partition: str, cleared: int, codes: RowCodes, make: Callable[[int], _Partition]
    ) -> tuple[_Partition, int] | None:
        """``(partition, seen)`` as saved — ``seen`` being the deletion log's id its dead
        rows are marked up to — if the snapshot was written since the index's last clear and
        no erasure touched the partition since its stamp (``make(dim)`` builds an empty
        partition); None otherwise (a stale or unreadable file is removed)."""
        path = self.path(partition)
        try:
            found = self.read(partition)
            if found is None:
                return None
            meta, saved = found
            if meta is None:
                raise _Stale
            stamp = int(meta.get("stamp", -1))
            if (
                meta.get("format") != FORMAT
                or meta.get("partition") != partition
                or meta.get("cleared") != cleared
                or not self.current(partition, stamp)
            ):
                raise _Stale
            part = make(int(meta["dim"]))
            part.stamp = stamp
            size = int(meta["size"])
            part.in_memory = "matrix" in saved
            # (float16 as saved, as a partition this big keeps it; float32 if saved so: a
            # component beyond half precision's range)
            part.matrix = saved["matrix"] if part.in_memory else np.zeros((0, part.dim), np.float32)
            part.half_ok = part.matrix.dtype == np.float16
            part.coded = "codes" in saved  # (a small partition the cache limit dropped: none)
            if not part.coded and not part.in_memory:
                raise _Stale
            if part.coded:
                part.codes = np.ascontiguousarray(saved["codes"])
                part.signs = np.ascontiguousarray(saved["signs"])
                part.scales = saved["scales"]
            part.vids = saved["vids"]
            # (a file from before the flag: every row may be a passage, its span then read)
            part.passages = saved.get("passages", np.ones(size, np.bool_))
            part.seqs = saved["seqs"]
            part.times = saved["times"]
            part.live = saved["live"]
            part.dead = int(size - np.count_nonzero(part.live))
            for column, table in (
                ("sessions", codes.sessions),
                ("agents", codes.agents),
                ("kinds", codes.kinds),
            ):
                setattr(part, column, global_codes(saved[column], saved[f"{column}_table"], table))
            part.size = size
            part.last_vid = int(meta["last_vid"])
            part.snapshot_size = size
            return part, int(meta["seen"])
        except _Stale:
            pass
        except Exception as exc:  # unreadable: the partition is read from the log instead
            log.info("vector snapshot %s not used: %s", path, exc)
        self.remove(partition)
        return None

    def save(
        self, partition: str, part: _Partition, codes: RowCodes, cleared: int, seen: int
    ) -> None:
        """Write ``part`` (best effort, atomically: another process reads a whole file or
        none), unless an erasure touched the partition since its stamp."""
        if not self.writable:
            return
        if not self._allowed(partition, part.stamp):
            part.erased = True  # (for good: an erasure's mark never moves back)
            return
        last = self._written.get(partition)
        if last is not None and time.monotonic() - last < REWRITE_SECONDS:
            return
        n = part.size
        arrays: dict[str, Any] = {
            **({"matrix": _half(part.matrix[:n])} if part.in_memory else {}),
            # (a partition too small to be ranked by codes keeps none: a dropped one, saved)
            **(
                {"codes": part.codes[:n], "signs": part.signs[:, :n], "scales": part.scales[:n]}
                if part.coded
                else {}
            ),
            "vids": part.vids[:n],
            "passages": part.passages[:n],
            "seqs": part.seqs[:n],
            "times": part.times[:n],
            "live": part.live[:n],
        }
        for column, table in (
            ("sessions", codes.sessions),
            ("agents", codes.agents),
            ("kinds", codes.kinds),
        ):
            arrays[column], arrays[f"{column}_table"] = local_codes(
                getattr(part, column)[:n], table
            )
        meta = {
            "format": FORMAT,
            "partition": partition,
            "cleared": cleared,
            "seen": seen,
            "dim": part.dim,
            "size": n,
            "last_vid": part.last_vid,
            "stamp": part.stamp,
        }
        if not self.write(partition, meta, arrays, part.stamp):
            return
        self._written[partition] = time.monotonic()
        part.snapshot_size = n


def _half(matrix: Any) -> Any:
    """The float32 copy as the store keeps its vectors (``codec.py``): in half precision,
    which holds them exactly (rows an earlier version stored in float32 are rounded), unless
    a component is beyond half precision's range."""
    return matrix.astype(np.float16, copy=False) if fits_half(matrix) else matrix


class _Stale(Exception):
    """A snapshot from before the index's last clear, or of another format or partition."""
