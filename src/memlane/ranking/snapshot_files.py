"""The file layout of the search caches' snapshots (``<database>.memlane-cache/``).

A snapshot file starts with :data:`_MAGIC`, then its header's length (8 bytes, little
endian), the header (JSON: the cache's own metadata, and where each array lies), and the
arrays, each at an offset aligned to :data:`_ALIGN`. A big file is read with one
``numpy.fromfile`` per array (a small one in one read): loading the 1M-event vector
partition's 0.45 GB took 1 to 4 s as an ``.npz`` (a zip: CRCs, chunked copies), ~0.25 s so.
Columns of interned strings (sessions, agents, kinds) are
saved with their own codes and strings (:func:`local_codes`), since codes are per process.

Erasure (``privacy/erasure.py``) must leave no file that holds an erased user's data, in any process
(docs/decisions/2026-11-23-search-caches-across-processes.md). Every snapshot is written from a
partition built at some *stamp* (the store's generation, read before the partition's rows) and is
kept only while :meth:`SnapshotFolder.current` says that stamp is still good, asked before the file
is written and again after it is in place (a write racing an erasure either sees it and removes its
own file, or was in place before the erasure's scrub, which removes it). A write goes to a
temporary file first (``tmp-<pid>-*.tmp``); one a killed process left behind is removed when
a store next opens the folder (:func:`remove_temporary`), and erasure removes all of them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .partition_rows import Codes

__all__ = [
    "ORPHAN_SECONDS",
    "SnapshotFolder",
    "global_codes",
    "local_codes",
    "partition_digest",
    "read_arrays",
    "remove_temporary",
    "replace_file",
    "write_arrays",
]

log = logging.getLogger("memlane.store.snapshots")

_MAGIC = b"ASMVECS\x00"
_ALIGN = 64
# files whose arrays take at most this many bytes are read in one call (read_arrays)
_READ_WHOLE_BYTES = 8 << 20
#: a temporary file whose writer cannot be told dead (another user's process, an older
#: version's name) is an orphan once it has not changed for this long: writing the biggest
#: snapshot (0.45 GB) takes seconds
ORPHAN_SECONDS = 600.0
# what replace_file names its temporary files (the writer's pid first); mkstemp's default
# ("tmp" and random letters) is what earlier versions left
_TEMPORARY = re.compile(r"tmp(?:-(\d+)-)?.*\.tmp")


def write_arrays(file: Any, meta: dict[str, Any], arrays: dict[str, np.ndarray[Any, Any]]) -> None:
    """``meta`` and ``arrays`` in the layout of the module docstring."""
    contiguous = {name: np.ascontiguousarray(array) for name, array in arrays.items()}
    layout: dict[str, dict[str, Any]] = {}
    offset = 0
    for name, array in contiguous.items():
        layout[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    header = json.dumps({"meta": meta, "arrays": layout}).encode()
    start = -(-(len(_MAGIC) + 8 + len(header)) // _ALIGN) * _ALIGN
    file.write(_MAGIC + len(header).to_bytes(8, "little") + header)
    file.write(b"\0" * (start - len(_MAGIC) - 8 - len(header)))
    for name, array in contiguous.items():
        file.seek(start + layout[name]["offset"])
        file.write(array.reshape(-1).view(np.uint8).data)
    file.truncate(start + offset)


def read_arrays(file: Any) -> tuple[dict[str, Any] | None, dict[str, np.ndarray[Any, Any]]]:
    """``(meta, arrays)`` of a file :func:`write_arrays` wrote; ``(None, {})`` for a file of
    another kind."""
    if file.read(len(_MAGIC)) != _MAGIC:
        return None, {}
    header = json.loads(file.read(int.from_bytes(file.read(8), "little")))
    start = -(-file.tell() // _ALIGN) * _ALIGN
    # A small file is read in one call and its arrays copied out (a seek and a fromfile an
    # array took 1.8 ms for a 1,000-event keyword partition's 27, against 0.2 for the bytes:
    # dropped partitions are read again at most searches). Copies, not views: a view kept
    # after the others were replaced would hold the whole file.
    file.seek(start)
    body = file.read(_READ_WHOLE_BYTES + 1)
    whole = len(body) <= _READ_WHOLE_BYTES
    arrays = {}
    for name, where in header["arrays"].items():
        dtype, shape = np.dtype(where["dtype"]), tuple(where["shape"])
        count = math.prod(shape)  # (1 for a scalar's empty shape)
        offset = where["offset"]
        if whole:
            if offset + count * dtype.itemsize > len(body):
                raise ValueError(f"snapshot truncated at {name}")
            array = np.frombuffer(body, dtype, count, offset).copy()
        else:
            file.seek(start + offset)
            array = np.fromfile(file, dtype=dtype, count=count)
            if array.size != count:
                raise ValueError(f"snapshot truncated at {name}")
        arrays[name] = array.reshape(shape)
    return header["meta"], arrays


def local_codes(column: np.ndarray[Any, Any], codes: Codes) -> tuple[Any, Any]:
    """A column of this process's codes as the snapshot's own (0, 1, ...) and their strings."""
    used, local = np.unique(column, return_inverse=True)
    strings = list(codes.index)  # codes are handed out in order: position = code
    return local.astype(np.int32), np.array([strings[int(code)] for code in used], dtype=str)


def global_codes(local: Any, table: Any, codes: Codes) -> np.ndarray[Any, Any]:
    """A saved column in this process's codes."""
    mapping = np.array([codes.code(str(value)) for value in table], dtype=np.int32)
    return mapping[local] if len(mapping) else np.zeros(len(local), np.int32)


def replace_file(path: Path, meta: dict[str, Any], arrays: dict[str, Any]) -> None:
    """Write ``path`` atomically (another process reads a whole file or none), creating its
    folder (private) if needed; an ``OSError`` (a read-only folder, a full disk) is the
    caller's to treat as best effort."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f"tmp-{os.getpid()}-", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as file:
            write_arrays(file, meta, arrays)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie does; another user's answers EPERM)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_temporary(folder: Path, *, every: bool = False) -> list[str]:
    """Remove the temporary files of snapshot writes in ``folder`` whose writer is gone (a
    process killed mid-write leaves a partial snapshot, text-derived data nothing else would
    ever remove): those of a process that no longer exists, and any unchanged for
    :data:`ORPHAN_SECONDS`; ``every``: all of them (erasure: a live writer's save then fails,
    which it treats as best effort). Returns what could not be removed."""
    failed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return failed
    except OSError as exc:
        return [f"{folder} ({exc.strerror or exc})"]
    now = time.time()
    for entry in entries:
        match = _TEMPORARY.fullmatch(entry.name)
        if match is None:
            continue
        if not every:
            pid = int(match[1]) if match[1] else None
            if pid == os.getpid():
                continue  # this process's own write, in another thread
            try:
                stale = now - entry.stat(follow_symlinks=False).st_mtime > ORPHAN_SECONDS
            except OSError:
                continue  # (gone meanwhile: its write finished)
            if not stale and (pid is None or _alive(pid)):
                continue
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failed.append(f"{entry.path} ({exc.strerror or exc})")
    return failed


def partition_digest(partition: str) -> str:
    """What names a partition's snapshot files (of every kind) in the folder."""
    return hashlib.sha256(partition.encode()).hexdigest()[:24]


class SnapshotFolder:
    """One kind of snapshot file of one database: a file per partition, named by a digest of
    the partition with the kind's :attr:`prefix` and :attr:`suffix`.

    ``stamp()`` is the store's generation (what a partition built from the log is stamped
    with, read before its rows); ``current(partition, stamp)`` says whether data of
    ``partition`` read from the log at ``stamp`` may be on disk now (without it, always)."""

    prefix = ""
    suffix = ""

    def __init__(
        self,
        folder: Path,
        *,
        writable: bool = True,
        stamp: Callable[[], int] | None = None,
        current: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.folder = folder
        #: False for a store opened read-only: its snapshots are read, never written or
        #: removed (a read-only view leaves no files behind)
        self.writable = writable
        self._stamp = stamp
        self._current = current

    def stamp(self) -> int:
        """The stamp of data read from the log from now on (see the class docstring)."""
        return self._stamp() if self._stamp is not None else 0

    def current(self, partition: str, stamp: int) -> bool:
        """Whether a snapshot of ``partition`` built at ``stamp`` may be kept (and used)."""
        return self._current is None or self._current(partition, stamp)

    def write(
        self, partition: str, meta: dict[str, Any], arrays: dict[str, Any], stamp: int
    ) -> bool:
        """Write the partition's file (best effort, atomically) if :meth:`current` allows it,
        before and after: a file it no longer allows once in place is removed. Whether the
        file was written and kept."""
        if not self.writable or not self._allowed(partition, stamp):
            return False
        path = self.path(partition)
        try:
            replace_file(path, meta, arrays)
        except OSError as exc:
            log.info("snapshot of %s not written: %s", partition, exc)
            return False
        if self._allowed(partition, stamp):
            return True
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return False

    def _allowed(self, partition: str, stamp: int) -> bool:
        """:meth:`current`, False when it cannot be asked (the store failed: not known to be
        allowed)."""
        try:
            return self.current(partition, stamp)
        except Exception as exc:
            log.info("snapshot of %s not kept: %s", partition, exc)
            return False

    def path(self, partition: str) -> Path:
        return self.folder / f"{self.prefix}-{partition_digest(partition)}{self.suffix}"

    def read(self, partition: str) -> tuple[dict[str, Any] | None, dict[str, Any]] | None:
        """:func:`read_arrays` of the partition's file; None when there is none."""
        path = self.path(partition)
        if not path.exists():
            return None
        with path.open("rb") as file:
            return read_arrays(file)

    def remove(self, partition: str) -> None:
        if not self.writable:
            return
        with contextlib.suppress(OSError):
            self.path(partition).unlink(missing_ok=True)
