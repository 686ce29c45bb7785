"""Hybrid search over long events: the keyword half's best passage, and which passage a hit
shows (docs/decisions/2026-11-28-long-events-by-their-best-passage.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.errors import StoreUnavailable
from memlane.events import Event
from memlane.search import passage_terms
from memlane.search import searcher as searcher_module
from memlane.search.searcher import Searcher
from memlane.testing import HashEmbedder
from memlane.testing.long_event_conformance import (
    _EXPIRY_ANSWER,
    _EXPIRY_QUESTION,
    _notes,
    expiry_session,
)
from memlane.text.passages import Cutter

PLANTED = _EXPIRY_ANSWER


@pytest.fixture
def mgr(tmp_path: Path) -> Any:
    with SessionManager("agent", tmp_path / "s.db", embedder=HashEmbedder()) as manager:
        yield manager


def planted_span(answer: Event) -> tuple[int, int]:
    spans = Cutter.of(HashEmbedder()).spans(answer.content)
    return next((a, b) for a, b in spans if PLANTED in answer.content[a:b])


def test_a_hit_found_by_keyword_alone_shows_its_best_passage(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the vector index down, hybrid search answers by keyword: a long event's hit
    still says where it matched (it showed no passage: only the semantic half gave one)."""
    session_id, answer = expiry_session(mgr)

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the vector index is down (test)")

    monkeypatch.setattr(Searcher, "_semantic", down)
    hits = mgr.search(_EXPIRY_QUESTION, k=3, session_id=session_id)
    assert hits[0].event.id == answer.id and hits[0].ranks == {"keyword": 1}
    passage = hits[0].passage
    assert passage is not None and PLANTED in passage.text
    assert (passage.start, passage.stop) == planted_span(answer)


@pytest.mark.parametrize("semantic_place", [1, 3])
def test_a_hit_shows_the_passage_of_the_ranking_that_placed_it_higher(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch, semantic_place: int
) -> None:
    """Both halves found the long answer, each by its own passage: the hit shows the
    semantic half's when it placed the event at least as high, else the keyword half's
    (before a line holding the query's words may take its place: the test below)."""
    monkeypatch.setattr(searcher_module, "_LINES_FIRST", False)
    session_id, answer = expiry_session(mgr)
    others = [e.seq for e in mgr.events(session_id) if e.seq != answer.seq][:2]
    first = Cutter.of(HashEmbedder()).spans(answer.content)[0]

    def semantic(self: Searcher, query: str, depth: int, flt: Any, partitions: Any,
                 waiting: list[int], spans: dict[int, tuple[int, int]]) -> Any:  # fmt: skip
        spans[answer.seq] = first
        ranking = [*others[: semantic_place - 1], answer.seq]
        return [(seq, 1.0 - i / 10) for i, seq in enumerate(ranking)]

    monkeypatch.setattr(Searcher, "_semantic", semantic)
    hit = next(h for h in mgr.search(_EXPIRY_QUESTION, k=5, session_id=session_id)
               if h.event.id == answer.id)  # fmt: skip
    assert hit.ranks == {"semantic": semantic_place, "keyword": 1}
    assert hit.passage is not None
    expected = first if semantic_place == 1 else planted_span(answer)
    assert (hit.passage.start, hit.passage.stop) == expected


def test_a_hit_shows_the_passage_whose_line_holds_the_querys_words(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table's row that names both things a question asks about is shown, not the passage
    either ranking scored best (one holding each word more often, in different rows)."""
    rows = ["sku,product,warehouse,on_hand"]
    for n in range(400):
        product = "folding laundry basket" if n % 3 == 0 and n < 200 else "bamboo yoga mat"
        place = "Zaragoza" if n % 3 == 1 and n < 200 else ("Lodz", "Milan")[n % 2]
        rows.append(f"SK-{n:05d},{product},{place},{(n * 37) % 4000}")
    answer = "OK-33722,folding laundry basket,Zaragoza,1868"
    rows.insert(250, answer)
    session_id = mgr.start_session("Count the stock").id
    event = mgr.record_tool_output(session_id, "\n".join(rows), tool="inventory")
    mgr.add_message(session_id, "user", "Thanks, the report is in.")
    mgr.flush()
    question = "How many folding laundry basket units are on hand in Zaragoza?"
    hit = next(h for h in mgr.search(question, k=3, session_id=session_id)
               if h.event.id == event.id)  # fmt: skip
    assert hit.passage is not None and answer in hit.passage.text
    monkeypatch.setattr(searcher_module, "_LINES_FIRST", False)
    before = next(h for h in mgr.search(question, k=3, session_id=session_id)
                  if h.event.id == event.id)  # fmt: skip
    assert before.passage is not None and answer not in before.passage.text


def test_keyword_mode_and_restore_rank_whole_events(mgr: SessionManager) -> None:
    """Only hybrid search scores long events by their passages: keyword mode ranks an
    event's own words whole (as FTS5 does), and restore's relevant section ranks whole events
    (measured: passages there moved its evidence by -1.6 to +1.0 points)."""
    session_id, answer = expiry_session(mgr)
    hybrid = mgr.search(_EXPIRY_QUESTION, k=10, session_id=session_id)
    keyword = mgr.search(_EXPIRY_QUESTION, k=10, session_id=session_id, mode="keyword")
    found = next(h for h in hybrid if h.event.id == answer.id)
    assert (found.ranks or {}).get("keyword") == 1
    assert [h.event.id for h in keyword].index(answer.id) > 0
    searcher = mgr._writer.searcher
    whole = searcher.search(_EXPIRY_QUESTION, 10, session_id=session_id, by_passages=False)
    assert (next(h for h in whole if h.event.id == answer.id).ranks or {})["keyword"] > 1


def test_an_erasure_forgets_the_passages_kept_of_the_erased_text(mgr: SessionManager) -> None:
    """Search keeps each long candidate's passages and word counts for the next searches;
    they are derived from the text, so erasing its user lets go of them (as of the stemmed
    tokens): none of the erased words stays in the process's kept analyses."""
    from memlane.search import passage_terms

    secret = "zygomorphic"
    session = mgr.start_session("notes", user_id="u-erased")
    mgr.add_message(session.id, "assistant", _notes("invoice-api", {12: f"The {secret} key."}))
    mgr.flush()
    assert mgr.search(f"{secret} key", k=3)[0].passage is not None
    kept = [a for a in passage_terms._ANALYSES.values() if a is not None]
    assert any(porter in terms for a in kept for terms in a.terms for porter in ("zygomorph",))
    mgr.erase_user("u-erased")
    kept = [a for a in passage_terms._ANALYSES.values() if a is not None]
    assert not any("zygomorph" in terms for a in kept for terms in a.terms)
    assert secret not in passage_terms._STEMS


def test_scoring_by_passages_reads_no_payload(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The passages are cut from an event's content: the candidates are read without their
    payloads (a JSON output's may be megabytes: 20 outputs of 0.9 MB made a search's p95 79
    ms instead of 13). Only the hits returned are read whole."""
    session = mgr.start_session("nightly tests")
    for n in range(4):
        rows = [{"test": f"tests/test_{i}.py::case", "outcome": "passed"} for i in range(400)]
        rows[n * 7]["outcome"] = "failed"
        mgr.record_tool_output(session.id, {"run": n, "rows": rows}, tool="pytest")
        mgr.add_message(session.id, "user", f"run {n}: which test failed?")
    mgr.flush()
    store = mgr._writer.searcher.store
    read = store.events_by_seq
    whole: list[int] = []
    previewed: list[int] = []

    def spy(seqs: Any, *, previews: bool = False) -> Any:
        (previewed if previews else whole).append(len(seqs))
        return read(seqs, previews=previews)

    contents = store.event_contents
    texts: list[int] = []

    def text_spy(seqs: Any) -> Any:
        texts.append(len(seqs))
        return contents(seqs)

    monkeypatch.setattr(store, "events_by_seq", spy)
    monkeypatch.setattr(store, "event_contents", text_spy)
    hits = mgr.search("which test failed in the pytest run outcome?", k=2, session_id=session.id)
    assert len(hits) == 2
    assert whole == [2]  # the hits only
    assert texts and max(texts) >= 4  # (the outputs, long candidates, were scored: ids
    # and contents only)


def test_a_day_named_in_words_finds_its_iso_date_in_a_listing(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "The dump from March 5" finds ``billing-2026-03-05.sql.gz``: the day's ISO words are
    asked for too, and the listing's line holding them and the database's name is shown."""
    session_id = mgr.start_session("Keep the backups tidy").id
    lines = []
    for day in range(1, 29):
        for db in ("billing", "orders", "users"):
            size = 1_000_000 + day * 7_919 + len(db) * 104_729
            lines.append(
                f"-rw-r--r-- 1 pg pg {size:>10} Feb {day:2d} 02:00 {db}-2026-02-{day:02d}.sql.gz"
            )
    for extension in ("log", "tar", "csv.gz", "md5"):  # that day's other billing files
        lines.insert(
            14, f"-rw-r--r-- 1 pg pg       4096 Feb  5 02:00 billing-2026-02-05.{extension}"
        )
    answer = "-rw-r--r-- 1 pg pg   48213377 Mar  5 02:00 billing-2026-03-05.sql.gz"
    lines.insert(60, answer)
    listing = mgr.record_tool_output(session_id, "\n".join(lines), tool="shell")
    for n in range(30):
        mgr.add_message(session_id, "assistant", f"The billing dump number {n} is verified.")
    mgr.flush()
    question = "How big was the billing database dump from March 5?"
    hits = mgr.search(question, k=10, session_id=session_id)
    found = next(h for h in hits if h.event.id == listing.id)
    assert found.passage is not None and answer in found.passage.text
    context = mgr.restore(session_id, 600, query=question)
    assert answer.split()[-1] in context.text
    for module in (searcher_module, passage_terms):  # the keyword query and the passage
        monkeypatch.setattr(module, "with_days_as_written", lambda text: text)
    before = mgr.search(question, k=10, session_id=session_id)
    assert all(
        h.passage is None or answer not in h.passage.text
        for h in before
        if h.event.id == listing.id
    )
