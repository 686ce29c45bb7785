"""Snapshots of keyword partitions beside a SQLite file: of big ones for a new process's index,
and of any the process's cache limit drops, for their next search.

A process builds the in-memory keyword index of a partition by tokenizing every event in it
(``_keyword_cache.py``): 24 s at 1M events, in a background thread, while searches rank with
FTS5 (~1 s a query at that size). Once a partition of more than a search's own share has
been built in the background, it is saved (its per-row columns, session links, postings and
the stems their term ids stand for; no text) as ``keywords-<digest>.asmkw`` in
``<database>.memlane-cache/``, and the next process's background build loads it and tokenizes
only the events added since (and saves it again once those are a quarter of it). A partition
of any size is saved too when the cache limit drops it (``KeywordCache._keep_on_disk``), and
read back from its file at its agent's next search.

A snapshot holds the stems of its own partition's rows and nothing else: the process's
vocabulary (:class:`~memlane.ranking.keyword.terms.Words`) also holds every other partition's
stems, and the words of its searches, and keeps those of events deleted or erased since
(an erased user's words were saved again in every partition's file). Its postings
are saved with term ids of its own (the partition's terms in the process's order), and a
process that loads it takes its stems as its first term ids if it has indexed nothing yet,
or renumbers the postings into its own ids otherwise (a reordering of each term's run of
postings, not a re-sort).

A snapshot is used only while the store's generation (which moves whenever events
disappear, and at every erasure) is the one it was written at, and while the log still holds
its last event where the snapshot says; it is written only while that generation is still
the store's, checked before and after the write (``_snapshot_files.py``: a write racing an
erasure never leaves a file). The folder is a cache: deleting it loses nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ..partition_rows import RowCodes
from ..snapshot_files import SnapshotFolder, global_codes, local_codes
from .postings import Postings, Segment
from .terms import Words

__all__ = ["REWRITE_GROWTH", "KeywordSnapshots"]

log = logging.getLogger("memlane.store.snapshots")

#: the layout of a keyword snapshot; another value is ignored (and replaced)
FORMAT = 2  # 2: the stems of the partition's own terms only, and term ids of its own
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
        """Write ``part`` (best effort, atomically), built at ``generation``, unless the
        store has moved past it (see the module docstring)."""
        if not self.writable or not self._allowed(partition, generation):
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
        # The partition's own terms, numbered in the process's order: each segment's terms
        # stay sorted under that numbering.
        every: list[Segment] = [s for kind in _POSTINGS for s in getattr(part, kind).segments]
        used = np.unique(np.concatenate([s.terms for s in every])) if every else _NO_TERMS
        segments: dict[str, int] = {}
        for kind in _POSTINGS:
            postings: Postings = getattr(part, kind)
            segments[kind] = len(postings.segments)
            for i, segment in enumerate(postings.segments):
                arrays[f"{kind}{i}_terms"] = np.searchsorted(used, segment.terms).astype(np.int32)
                for field in ("offsets", "rows", "counts"):
                    arrays[f"{kind}{i}_{field}"] = getattr(segment, field)
        # (one UTF-8 blob: a fixed-width string array would be as wide as the longest stem;
        # a stem holds no NUL — text with U+0000 is refused at validation)
        blob, hashes = words.vocabulary(used)
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
        self.write(partition, meta, arrays, generation)

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
        stale or unreadable file is removed)."""
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
            # the snapshot's term ids as this process's (None: the same)
            renumber = words.adopt(saved["stems"].tobytes(), saved["stem_hashes"])
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
                if renumber is not None:
                    postings.segments = [s.renumbered(renumber) for s in postings.segments]
            return part
        except Exception as exc:  # unreadable: the partition is built from the log instead
            log.info("keyword snapshot %s not used: %s", path, exc)
            self.remove(partition)
            return None


_SEGMENT_FIELDS = ("terms", "offsets", "rows", "counts")
_NO_TERMS = np.zeros(0, np.int32)
