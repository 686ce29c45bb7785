"""The file layout of the search caches' snapshots (``<database>.asm-cache/``).

A snapshot file starts with :data:`_MAGIC`, then its header's length (8 bytes, little
endian), the header (JSON: the cache's own metadata, and where each array lies), and the
arrays, each at an offset aligned to :data:`_ALIGN`. It is read with one ``numpy.fromfile``
per array: loading the 1M-event vector partition's 0.45 GB took 1 to 4 s as an ``.npz`` (a zip:
CRCs, chunked copies), ~0.25 s so. Columns of interned strings (sessions, agents, kinds) are
saved with their own codes and strings (:func:`local_codes`), since codes are per process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ._partition_rows import Codes

__all__ = [
    "SnapshotFolder",
    "global_codes",
    "local_codes",
    "partition_digest",
    "read_arrays",
    "replace_file",
    "write_arrays",
]

_MAGIC = b"ASMVECS\x00"
_ALIGN = 64


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
    arrays = {}
    for name, where in header["arrays"].items():
        dtype, shape = np.dtype(where["dtype"]), tuple(where["shape"])
        file.seek(start + where["offset"])
        count = int(np.prod(shape)) if shape else 1
        arrays[name] = np.fromfile(file, dtype=dtype, count=count).reshape(shape)
        if arrays[name].size != count:
            raise ValueError(f"snapshot truncated at {name}")
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
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            write_arrays(file, meta, arrays)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def partition_digest(partition: str) -> str:
    """What names a partition's snapshot files (of every kind) in the folder."""
    return hashlib.sha256(partition.encode()).hexdigest()[:24]


class SnapshotFolder:
    """One kind of snapshot file of one database: a file per partition, named by a digest of
    the partition with the kind's :attr:`prefix` and :attr:`suffix`."""

    prefix = ""
    suffix = ""

    def __init__(self, folder: Path, *, writable: bool = True) -> None:
        self.folder = folder
        #: False for a store opened read-only: its snapshots are read, never written or
        #: removed (a read-only view leaves no files behind)
        self.writable = writable

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
