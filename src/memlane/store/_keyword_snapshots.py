"""Snapshots of big keyword partitions beside a SQLite file, for a new process's index.

A process builds the in-memory keyword index of a partition by tokenizing every event in it
(``_keyword_cache.py``): 24 s at 1M events, in a background thread, while searches rank with
FTS5 (~1 s a query at that size). Once a partition of more than a search's own share has
been built in the background, it is saved (its per-row columns, session links, postings and
the stems their term ids stand for; no text) as ``keywords-<digest>.asmkw`` in
``<database>.asm-cache/``, and the next process's background build loads it and tokenizes
only the events added since (and saves it again once those are a quarter of it).

A snapshot is used only while the store's generation (which moves whenever events
disappear) is the one it was written at, while the log still holds its last event where the
snapshot says, and when the process's term ids agree with the snapshot's (a process that has
indexed nothing yet adopts them; another process's ids would mean re-sorting every posting,
so its partition is built from the log instead). The folder is a cache: deleting it loses
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ._keyword import Words
from ._keyword_postings import Postings, Segment, as_counts
from ._partition_rows import RowCodes
from ._snapshot_files import SnapshotFolder, global_codes, local_codes, replace_file

__all__ = ["REWRITE_GROWTH", "KeywordSnapshots"]

log = logging.getLogger("memlane.store.snapshots")

#: the layout of a keyword snapshot; another value is ignored (and replaced)
FORMAT = 1
#: a loaded snapshot is written again once the events added since are this share of it
REWRITE_GROWTH = 0.25

# (a keyword cache partition: _keyword_cache imports this module, not the other way round)
_Partition = Any

# the per-row arrays a partition keeps besides its interned columns
_ROW_ARRAYS = (
    "seqs",
    "times",
    "lengths",
    "near_lengths",
    "far_lengths",
    "sizes",
    "prev1",
    "prev2",
    "next1",
    "next2",
    "days",
    "months",
    "years",
)
_CODED = ("sessions", "agents", "kinds")
_POSTINGS = ("own", "near", "far")


class KeywordSnapshots(SnapshotFolder):
    """The keyword snapshot files of one database (see the module docstring)."""

    prefix, suffix = "keywords", ".asmkw"

    def save(
        self, partition: str, part: _Partition, codes: RowCodes, words: Words, generation: int
    ) -> None:
        """Write ``part`` (best effort, atomically)."""
        if not self.writable:
            return
        n = part.size
        arrays: dict[str, Any] = {name: getattr(part, name)[:n] for name in _ROW_ARRAYS}
        for column in _CODED:
            local, strings = local_codes(getattr(part, column)[:n], getattr(codes, column))
            arrays[column], arrays[f"{column}_table"] = local, strings
        # each session's last two rows (the rows its next event links to)
        tails = list(part._tails.values())
        arrays["tail_last"] = np.array([last for last, _ in tails], np.int32)
        arrays["tail_before"] = np.array([before for _, before in tails], np.int32)
        segments: dict[str, int] = {}
        for kind in _POSTINGS:
            postings: Postings = getattr(part, kind)
            segments[kind] = len(postings.segments)
            for i, segment in enumerate(postings.segments):
                for field in ("terms", "offsets", "rows", "counts"):
                    arrays[f"{kind}{i}_{field}"] = getattr(segment, field)
        # (one UTF-8 blob: a fixed-width string array would be as wide as the longest stem;
        # a stem holds no NUL — text with U+0000 is refused at validation)
        blob, hashes = words.vocabulary()
        arrays["stems"] = np.frombuffer(blob, np.uint8)
        arrays["stem_hashes"] = hashes
        meta = {
            "format": FORMAT,
            "partition": partition,
            "generation": generation,
            "size": n,
            "last_seq": part.last_seq,
            "total_tokens": part.total_tokens,
            "segments": segments,
        }
        try:
            replace_file(self.path(partition), meta, arrays)
        except OSError as exc:
            log.info("keyword snapshot of %s not written: %s", partition, exc)

    def load(
        self,
        partition: str,
        generation: int,
        codes: RowCodes,
        words: Words,
        make: Callable[[], _Partition],
        last_row: Callable[[int], Any],
    ) -> _Partition | None:
        """The partition as saved, if the snapshot is current (see the module docstring;
        ``last_row(seq)`` is the log's keyword row of that seq, or None); None otherwise (a
        stale or unreadable file is removed, one of other term ids is left)."""
        path = self.path(partition)
        try:
            found = self.read(partition)
            if found is None:
                return None
            meta, saved = found
            if (
                meta is None
                or meta.get("format") != FORMAT
                or meta.get("partition") != partition
                or meta.get("generation") != generation
            ):
                self.remove(partition)
                return None
            part = make()
            size = int(meta["size"])
            row = last_row(int(meta["last_seq"])) if size else None
            if size and (
                row is None
                or str(row[1]) != str(saved["sessions_table"][saved["sessions"][-1]])
                or str(row[3]) != str(saved["kinds_table"][saved["kinds"][-1]])
            ):
                self.remove(partition)  # another database's file, or the log moved on
                return None
            # (a snapshot written before the hashes were saved has them computed now)
            hashes = saved.get("stem_hashes")
            if not words.adopt(saved["stems"].tobytes(), hashes):
                return None  # this process numbered its terms otherwise: build from the log
            for name in _ROW_ARRAYS:
                setattr(part, name, saved[name])
            for column in _CODED:
                table = getattr(codes, column)
                local, strings = saved[column], saved[f"{column}_table"]
                setattr(part, column, global_codes(local, strings, table))
            part.size = part.snapshot_size = size
            part.last_seq = int(meta["last_seq"])
            part.total_tokens = int(meta["total_tokens"])
            part._tails = {
                int(part.sessions[last]): (int(last), int(before))
                for last, before in zip(saved["tail_last"], saved["tail_before"], strict=True)
            }
            for kind in _POSTINGS:
                postings: Postings = getattr(part, kind)
                postings.segments = [
                    Segment(*(saved[f"{kind}{i}_{field}"] for field in _SEGMENT_FIELDS))
                    for i in range(int(meta["segments"][kind]))
                ]
                if kind == "own":  # (a snapshot written when own counts were float32)
                    for segment in postings.segments:
                        if segment.counts.dtype != np.uint16:
                            segment.counts = as_counts(segment.counts)
            return part
        except Exception as exc:  # unreadable: the partition is built from the log instead
            log.info("keyword snapshot %s not used: %s", path, exc)
            self.remove(partition)
            return None


_SEGMENT_FIELDS = ("terms", "offsets", "rows", "counts")
