"""A long event cut into passages (text/passages.py): spans of the text, each within the
passage size, covering every word, cut at structure."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.text.chunking import estimate_tokens
from memlane.text.passages import MAX_PASSAGES, passage_spans


def _words_of(text: str) -> list[str]:
    return text.split()


def _covered(text: str, spans: list[tuple[int, int]]) -> str:
    """The text's words, read through the spans (overlaps removed)."""
    seen = [False] * len(text)
    for start, stop in spans:
        for i in range(start, stop):
            seen[i] = True
    return "".join(ch if seen[i] else " " for i, ch in enumerate(text))


def test_short_text_needs_no_passages() -> None:
    assert passage_spans("A short answer.") == []
    assert passage_spans("word " * 200, window=256) == []


def test_every_word_is_in_a_passage_within_the_size() -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "refund", "policy", "42", "db-7"]
    paragraphs = [
        " ".join(rng.choice(words) for _ in range(rng.randint(5, 120))) + "." for _ in range(40)
    ]
    text = "\n\n".join(paragraphs)
    spans = passage_spans(text, window=128, size=60, limit=1000)
    assert len(spans) > 5
    assert spans == sorted(spans)
    for start, stop in spans:
        assert 0 <= start < stop <= len(text)
        assert estimate_tokens(text[start:stop]) <= 60
        assert text[start:stop] == text[start:stop].strip()
    assert _words_of(_covered(text, spans)) == _words_of(text)


def test_fenced_code_stays_whole_when_it_fits() -> None:
    code = "```python\ndef pay(invoice):\n\n    return invoice.total\n```"
    text = "Intro paragraph. " * 60 + "\n\n" + code + "\n\n" + "Outro words here. " * 60
    spans = passage_spans(text, window=128, size=100)
    assert any(code in text[start:stop] for start, stop in spans)


def test_log_lines_are_cut_between_lines() -> None:
    text = "\n".join(
        f"2024-05-01 12:00:{i:02d} ERROR worker-{i} timed out after 30s" for i in range(60)
    )
    spans = passage_spans(text, window=128, size=80)
    for start, stop in spans:
        assert start == 0 or text[start - 1] == "\n"
        assert stop == len(text) or text[stop] == "\n"


def test_flattened_json_is_cut_at_its_fields() -> None:
    text = "; ".join(f"rows.{i}.status: ok host-{i}" for i in range(200))
    spans = passage_spans(text, window=128, size=80)
    assert len(spans) > 3
    for start, _stop in spans[1:]:
        assert text[start:].startswith("rows.")


def test_passages_overlap_by_a_short_piece() -> None:
    text = " ".join(f"Sentence number {i} is short." for i in range(200))
    spans = passage_spans(text, window=128, size=60)
    overlaps = sum(1 for (_, stop), (start, _) in itertools.pairwise(spans) if start < stop)
    assert overlaps == len(spans) - 1


def test_a_huge_event_is_cut_to_the_limit() -> None:
    text = "word " * 2_000_000
    spans = passage_spans(text, window=256)
    assert len(spans) == MAX_PASSAGES


def test_a_single_huge_word_is_cut() -> None:
    text = "x" * 20_000
    spans = passage_spans(text, window=128, size=100)
    assert spans and all(estimate_tokens(text[a:b]) <= 100 for a, b in spans)


def test_a_window_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        passage_spans("text " * 100, window=10)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="abc xyz.;\n", min_size=0, max_size=300),
            st.just("```\ncode line\n\nmore code\n```"),
        ),
        max_size=30,
    )
)
def test_spans_are_ordered_within_bounds_and_cover_every_word(blocks: list[str]) -> None:
    text = "\n\n".join(blocks)
    spans = passage_spans(text, window=48, size=30)
    for start, stop in spans:
        assert 0 <= start < stop <= len(text)
    starts = [start for start, _ in spans]
    assert starts == sorted(set(starts))
    if spans:
        assert _words_of(_covered(text, spans)) == _words_of(text)


def test_passages_survive_export_and_import(
    tmp_path: Path,
) -> None:
    """Vectors are not exported: an imported long event is embedded again, as passages, and
    found by the passage that answers."""
    from memlane import SessionManager
    from memlane.admin import StoreAdmin
    from memlane.testing import HashEmbedder

    planted = "The failover runbook says to promote replica db-7 before draining the queue."
    body = [f"Paragraph {i} is about office plants and the lunch menu." for i in range(60)]
    body.insert(40, planted)
    essay = "\n\n".join(body)
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    with SessionManager("a", source, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("notes")
        long = mgr.add_message(session.id, "assistant", essay)
    with StoreAdmin(source, embedder=HashEmbedder()) as admin:
        records = list(admin.export())
    with StoreAdmin(target, embedder=HashEmbedder()) as admin:
        admin.import_records(records)
    with SessionManager("a", target, embedder=HashEmbedder(), background=False) as mgr:
        hit = mgr.search(planted, k=1, mode="semantic")[0]
        assert hit.event.id == long.id and hit.passage is not None
        assert planted in hit.passage.text
    with StoreAdmin(target, embedder=HashEmbedder()) as admin:
        assert admin.stats().vectors > 3  # one per passage, and the goal's


def test_a_store_from_before_passages_keeps_its_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's 0013_passages rebuilds the vectors table: every vector and its vid kept (the
    caches and their snapshots point at vids), searches as before, new long events cut."""
    import sqlite3

    import numpy as np

    from memlane import SessionManager
    from memlane.store import sqlite as store_sqlite
    from memlane.testing import HashEmbedder

    db = tmp_path / "old.db"
    names = [name for name, _ in store_sqlite.MIGRATIONS]
    before = store_sqlite.MIGRATIONS[: names.index("0013_passages")]
    with monkeypatch.context() as patch:
        patch.setattr(store_sqlite, "MIGRATIONS", before)
        with SessionManager("a", db, embedder=HashEmbedder(), background=False) as old:
            session = old.start_session("legacy")
            fact = old.record_fact(session.id, "the staging database is PostgreSQL 16")
    # vectors as the old schema held them: one per event, no passage columns
    with sqlite3.connect(db) as conn:
        queued = conn.execute("SELECT seq, partition FROM outbox ORDER BY seq").fetchall()
        texts = [
            conn.execute("SELECT content FROM events WHERE seq = ?", (seq,)).fetchone()[0]
            for seq, _ in queued
        ]
        vectors = HashEmbedder()(texts)
        for (seq, partition), vector in zip(queued, vectors, strict=True):
            blob = np.asarray(vector, "<f4").tobytes()
            conn.execute(
                "INSERT INTO vectors (seq, partition, vector) VALUES (?, ?, ?)",
                (seq, partition, blob),
            )
        conn.execute("DELETE FROM outbox")
        old_rows = conn.execute("SELECT vid, seq, vector FROM vectors ORDER BY vid").fetchall()
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        assert mgr.pending_embeddings() == 0
        hit = mgr.search("staging database", k=1, mode="semantic")[0]
        assert hit.event.id == fact.id and hit.passage is None
        essay = "\n\n".join(f"Paragraph {i} on release notes and checklists." for i in range(80))
        long = mgr.add_message(session.id, "assistant", essay)
        mgr.flush()
    with sqlite3.connect(db) as conn:
        kept = conn.execute(
            "SELECT vid, seq, vector FROM vectors WHERE seq != ? ORDER BY vid", (long.seq,)
        ).fetchall()
        assert kept == old_rows
        parts = conn.execute(
            "SELECT part, start, stop FROM vectors WHERE seq = ? ORDER BY part", (long.seq,)
        ).fetchall()
        assert len(parts) > 2 and parts[0][1] == 0 and all(stop > start for _, start, stop in parts)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # the deletion log still follows the table (the trigger was made again)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM events WHERE seq = ?", (long.seq,))
        logged = conn.execute(
            "SELECT count(*) FROM deleted_vectors WHERE seq = ?", (long.seq,)
        ).fetchone()[0]
        assert logged == len(parts)


# -- one encoding instead of one per piece (Cutter.offsets) ---------------------------------------

#: texts that stress the two ways a cut can fall inside a word: halves of a word longer than a
#: passage, and characters the tokenizer drops (controls) or reads as one word with their
#: neighbours, besides structure, accents, CJK and emoji
_STRESS = st.lists(
    st.sampled_from(
        [
            "word",
            "Unaffable",
            " ",
            "  ",
            "\n",
            "\n\n",
            "\t",
            ".",
            "; ",
            "! ",
            "```",
            "déjà",
            "東京",
            "😀",
            "\x1c",
            "\x00",
            "https://example.com/a/b?c=1",
            "x" * 300,
            "0123456789" * 7,
        ]
    ),
    min_size=50,
    max_size=600,
).map("".join)


@pytest.mark.real_model
@settings(max_examples=60, deadline=None)
@given(_STRESS)
def test_one_encoding_cuts_as_counting_each_piece_does(text: str) -> None:
    """MiniLM's offsets give the very spans its per-piece count gives: the index and restore
    cut with whichever the embedder offers, and must agree with stores cut before."""
    from memlane import MiniLMEmbedder
    from memlane.text.passages import Cutter

    embedder = _minilm(MiniLMEmbedder)
    by_piece = Cutter(embedder.count_tokens, 64)
    by_offsets = Cutter.of(embedder)
    assert by_offsets.offsets is not None
    assert passage_spans(text, by_piece.count, 64, size=40) == passage_spans(
        text, by_offsets.count, 64, size=40, offsets=by_offsets.offsets
    )


_MINILM: list[object] = []


def _minilm(make: type) -> object:
    if not _MINILM:
        _MINILM.append(make())
    return _MINILM[0]


def _toy_pieces(text: str) -> list[tuple[int, int, int]]:
    """A tokenizer whose words are runs of letters, cut into pieces of up to 3 letters (so a
    piece alone may count otherwise than inside its word: "abcd" is 2, "bcd" 1)."""
    found = []
    for word, match in enumerate(__import__("re").finditer(r"[a-z]+", text)):
        for at in range(match.start(), match.end(), 3):
            found.append((at, min(at + 3, match.end()), word))
    return found


def test_a_piece_cut_inside_a_word_is_counted_alone() -> None:
    """Where a cut falls inside a word (halves of one too long to fit), the encoding's pieces
    are not what the piece alone gives: it is counted alone, and the spans stay the same."""
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(_toy_pieces(text))

    text = " ".join(["abcdefghij" * 30] + ["word"] * 200)
    by_piece = passage_spans(text, count, 64, size=30)
    calls.clear()
    by_offsets = passage_spans(text, count, 64, size=30, offsets=_toy_pieces)
    assert by_offsets == by_piece
    # the long word's halves were counted alone; the words between spaces never were
    assert calls and all(set(piece) <= set("abcdefghij") for piece in calls)
