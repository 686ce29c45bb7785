"""The long-event part of the conformance suite: on every backend, events past each size at
which the library changes how it stores or indexes an event — plain text and JSON tool
outputs — are recorded, embedded, searched and reindexed, and the events around them can
still be recorded, embedded, deleted and expired, with ``health()`` staying ok; and a large
event's exact token count, preview and keyword text are the worker's, never the caller's.

The sizes are the library's own thresholds, read from where they are defined:

- :data:`~memlane.core.searchable.CONTENT_CHARS` (4,000): a flattened JSON output is cut there
  and searched whole (``derived_content``); from there on the SQL of both stores asks
  whether an event's whole text is more than its content;
- the embedder's ``DEFAULT_MAX_CHARS`` (16,000): the text embedded is cut there;
- :data:`~memlane.text.shrink.PREVIEW_THRESHOLD` (32,768): past it an event is digested by the
  worker (``deferred``), its payload previewed and, in SQLite, stored apart;
- the PostgreSQL store's ``TSVECTOR_CHARS`` (300,000): its tsvector holds no more.

:class:`~memlane.testing.BackendConformance` inherits these tests; they use its
``make`` and ``backend`` fixtures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from ..core.canonical_json import dumps
from ..core.searchable import CONTENT_CHARS
from ..embed import DEFAULT_MAX_CHARS
from ..embed.hashing import HashEmbedder
from ..events import Event
from ..manager import SessionManager
from ..text.passages import Cutter
from ..text.shrink import PREVIEW_THRESHOLD
from ..write.reads import SearchMode

__all__ = ["LONG_EVENT_SIZES", "LongEventConformance"]

ManagerFactory = Callable[..., SessionManager]

#: the PostgreSQL store's tsvector bound (``store.postgres.TSVECTOR_CHARS``), written out so
#: that the suite imports nothing of a backend it may not test
_TSVECTOR_CHARS = 300_000

#: the sizes (characters) the suite records events at: each threshold, and one past it
LONG_EVENT_SIZES = (
    CONTENT_CHARS,
    DEFAULT_MAX_CHARS + 1,
    PREVIEW_THRESHOLD + 1,
    _TSVECTOR_CHARS + 1,
)

#: long enough for the reads that must still see the neighbours, on a loaded CI machine
_TTL = timedelta(seconds=1.5)

# one word per long event, found nowhere else (letters only: every tokenizer keeps it whole)
_MARKERS = ("aardwolf", "binturong", "capybara", "dugong", "echidna", "fossa", "gharial", "hoatzin")


def _text_of(chars: int, marker: str) -> str:
    """``chars`` characters of distinct words, ``marker`` near the start and in the middle."""
    words = [f"w{i:07d}" for i in range(chars // 9 + 2)]
    words[3] = words[len(words) // 2] = marker
    text = " ".join(words)[:chars]
    assert len(text) == chars and text.count(marker) == 2
    return text


def _rows_of(chars: int, marker: str) -> dict[str, Any]:
    """A JSON output of at least ``chars`` characters, ``marker`` in its middle row."""
    count = chars // 40 + 2
    rows = [{"id": i, "host": f"db-{i % 7}", "note": f"n{i:07d}"} for i in range(count)]
    rows[len(rows) // 2]["note"] = marker
    payload = {"rows": rows}
    while len(dumps(payload)) < chars:
        rows.append({"id": len(rows), "host": "db-0", "note": "padding"})
    return payload


@dataclass
class _Case:
    """One long event and its neighbours, in a session of its own."""

    label: str
    marker: str
    long: Event
    session_id: str
    following: Event | None = None
    expiring: tuple[str, ...] = ()


def _wait_past(moment: datetime) -> None:
    left = (moment - datetime.now(timezone.utc)).total_seconds()
    if left > 0:
        time.sleep(left + 0.05)


_PLANTED = "The failover runbook says to promote replica db-7 before draining the queue."


def _essay(planted: str, topic: str = "office plants", paragraphs: int = 60) -> str:
    """A long message whose ``planted`` sentence sits two thirds of the way in, far past
    what an embedder reads of a text whole."""
    body = [f"Paragraph {i} is about {topic} and the lunch menu." for i in range(paragraphs)]
    body.insert(paragraphs * 2 // 3, planted)
    return "\n\n".join(body)


_SERVICES = ("billing-api", "search-api", "auth-api", "ledger-api", "mailer-api", "reports-api")
_EXPIRY_QUESTION = "What value did we set for SESSION_EXPIRY_HOURS in checkout-api?"


def _notes(topic: str, planted: dict[int, str]) -> str:
    """A long message of 40 paragraphs on ``topic``, with ``planted`` paragraphs inserted at
    their positions (from the highest: each keeps its place)."""
    body = [
        f"Paragraph {i} walks through the {topic} rollout notes and the lunch menu."
        for i in range(40)
    ]
    for at in sorted(planted, reverse=True):
        body.insert(at, planted[at])
    return "\n\n".join(body)


_EXPIRY_ANSWER = "For checkout-api we set SESSION_EXPIRY_HOURS to 36."


def expiry_session(mgr: SessionManager) -> tuple[str, Event]:
    """A session where the answer to :data:`_EXPIRY_QUESTION` is one paragraph of a long
    note, among six long notes that set the key for other services and name checkout-api
    paragraphs away, and 40 short turns; returns the session's id and the answering note."""
    session = mgr.start_session("expiry settings")
    for n, service in enumerate(_SERVICES):
        elsewhere = {
            20: f"We set SESSION_EXPIRY_HOURS to {n + 10} for {service} after the review.",
            36: "The checkout-api team asked about the value we set, we said later.",
        }
        mgr.add_message(session.id, "assistant", _notes(service, elsewhere))
    answer = mgr.add_message(session.id, "assistant", _notes("invoice-api", {27: _EXPIRY_ANSWER}))
    for n in range(40):
        mgr.add_message(session.id, "user", f"Thanks, question {n} about the office plants.")
    mgr.flush()
    return session.id, answer


class LongEventConformance:
    """Events past every size threshold on one backend (a mixin of ``BackendConformance``)."""

    def test_a_long_event_is_ranked_by_keyword_with_its_best_passage(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        """The keyword half of hybrid search scores a long event by its best passage too:
        six long notes each set SESSION_EXPIRY_HOURS for another service and mention
        checkout-api paragraphs away; the one whose single paragraph sets it for checkout-api
        holds fewer of the question's words in all, and came third by its whole text. It
        comes first, on every backend that ranks keywords in memory, and shows that
        paragraph's passage."""
        mgr = make()
        session_id, answer = expiry_session(mgr)
        hits = mgr.search(_EXPIRY_QUESTION, k=5, session_id=session_id)
        found = {hit.event.id: hit for hit in hits}
        assert answer.id in found, [hit.event.content[:40] for hit in hits]
        if "search_cache=off" not in backend.url:  # (PostgreSQL ranks by ts_rank without it)
            hit = found[answer.id]
            ranks = hit.ranks or {}
            assert ranks.get("keyword") == 1, ranks
            # ranked higher by keyword than by meaning: the hit shows the keyword half's
            # best passage, the one holding the question's words
            if ranks["keyword"] < ranks.get("semantic", 99):
                assert hit.passage is not None and _EXPIRY_ANSWER in hit.passage.text, hit.passage
                assert answer.content[hit.passage.start : hit.passage.stop] == hit.passage.text

    def test_long_events_are_found_by_their_passages(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        """A long event is indexed as passages on every backend: found by its passage (which
        the hit names), once; its passages are rebuilt by a reindex, invisible to another
        agent, and gone with the event and with its user's erasure."""
        mgr = make()
        session = mgr.start_session("passages", user_id="u-passages")
        essay = mgr.add_message(session.id, "assistant", _essay(_PLANTED))
        others = [
            mgr.add_message(session.id, "user", _essay(f"{topic} fact.", topic))
            for topic in ("gardens", "invoices", "roadmaps")
        ]
        mgr.flush()
        admin = backend.admin()
        try:
            with_passages = admin.stats().vectors
            # several vectors per long event (the goal has one)
            assert with_passages > 3 * (len(others) + 1), with_passages

            def found(manager: SessionManager, mode: SearchMode) -> list[Any]:
                return list(manager.search(_PLANTED, k=4, mode=mode))

            modes: tuple[SearchMode, ...] = ("semantic", "hybrid")
            for mode in modes:
                hits = found(mgr, mode)
                assert hits[0].event.id == essay.id, mode
                assert [h.event.id for h in hits].count(essay.id) == 1, mode
                passage = hits[0].passage
                assert passage is not None and _PLANTED in passage.text, (mode, passage)
                assert essay.content[passage.start : passage.stop] == passage.text
                assert passage.start > 1_000  # (not the event's opening)
            assert essay.id not in {h.event.id for h in found(make("someone-else"), "semantic")}
            # the spans restore reads back instead of cutting again: the index's, in order
            # (an index that cannot say answers nothing, and restore cuts them)
            storage = admin._storage
            indexed = storage.passage_spans([essay.seq, *(e.seq for e in others)])
            if indexed:
                cutter = Cutter.of(HashEmbedder())  # (the backends' embedder)
                assert indexed == {e.seq: cutter.spans(e.content) for e in (essay, *others)}
                assert (passage.start, passage.stop) in indexed[essay.seq]
            else:
                assert not storage.vectors.transactional  # (Chroma's)

            admin.reindex()
            mgr.flush()
            assert admin.stats().vectors == with_passages
            hit = found(mgr, "semantic")[0]
            assert hit.event.id == essay.id and hit.passage is not None
            assert _PLANTED in hit.passage.text

            deleted = mgr.delete_event(others[0].id)
            assert deleted.id == others[0].id
            after_delete = admin.stats().vectors
            assert after_delete < with_passages - 2  # its passages went with it
            admin.erase_user("u-passages")
            assert admin.stats().vectors == 0
            assert found(mgr, "semantic") == []
        finally:
            admin.close()

    def test_long_events_and_their_neighbours_record_delete_expire_and_search(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        """A long event does not jam the embedding queue, its neighbours' deletes or the
        expiry sweep (PostgreSQL failed on each with a NOT NULL violation for
        a plain message of 4,000 characters or more), and is found by search after all of
        them and after a reindex."""
        mgr = make()
        cases: list[_Case] = []
        markers = iter(_MARKERS)
        for chars in LONG_EVENT_SIZES:
            for shape in ("text", "json"):
                marker = next(markers)
                session = mgr.start_session(f"long {shape} of {chars:,} characters")
                before = mgr.add_message(session.id, "user", "a short-lived question", ttl=_TTL)
                if shape == "text":
                    long = mgr.add_message(session.id, "tool", _text_of(chars, marker))
                else:
                    payload = _rows_of(chars, marker)
                    long = mgr.record_tool_output(session.id, payload, tool="scan")
                    assert long.payload == payload
                cases.append(
                    _Case(f"{shape} {chars:,}", marker, long, session.id, expiring=(before.id,))
                )
        mgr.flush()  # the long events embedded, before anything follows them
        expires: datetime | None = None
        for case in cases:
            case.following = mgr.add_message(case.session_id, "user", "the next turn")
            after = mgr.add_message(case.session_id, "assistant", "a short-lived reply", ttl=_TTL)
            case.expiring += (after.id,)
            expires = after.expires_at
        mgr.flush()  # the following events embedded: the long ones' keyword context refreshed
        health = mgr.health()
        assert health.ok and health.backlog == 0, health
        for case in cases:
            assert case.following is not None
            assert mgr.delete_event(case.following.id).id == case.following.id, case.label
        assert expires is not None  # (the last of them to expire)
        _wait_past(expires)
        admin = backend.admin()
        try:
            swept = admin.prune_expired()
            assert swept.events == 2 * len(cases) and swept.sessions_touched == len(cases)
            stats = admin.stats()
            # per session: its goal and the long event
            assert stats.events == 2 * len(cases) and stats.pending_embeddings == 0, stats
        finally:
            admin.close()
        assert mgr.health().ok, mgr.health()
        for case in cases:
            stored = mgr.get_event(case.long.id)
            assert stored.content == case.long.content, case.label
            assert [e.id for e in mgr.events(case.session_id) if e.kind != "goal"] == [
                case.long.id
            ], case.label
        self._finds_each(mgr, cases)
        assert mgr.reindex() == 2 * len(cases)
        mgr.flush()
        assert mgr.health().ok, mgr.health()
        self._finds_each(mgr, cases)

    @staticmethod
    def _finds_each(mgr: SessionManager, cases: list[_Case]) -> None:
        """Each long event is the keyword hit for its word, and among hybrid search's first
        three (where semantic ranking of short events competes)."""
        for case in cases:
            found = [hit.event.id for hit in mgr.search(case.marker, k=3, mode="keyword")]
            assert found[:1] == [case.long.id], (case.label, found)
            found = [hit.event.id for hit in mgr.search(case.marker, k=3, mode="hybrid")]
            assert case.long.id in found, (case.label, found)

    def test_large_events_are_digested_off_the_callers_path(self, make: ManagerFactory) -> None:
        """A large event's exact token count, preview and keyword text are the worker's
        (``flush`` here); the caller's counter never sees its megabytes. A value deep in a
        3,000-row output is found by keyword and hybrid search, before and after; a message
        of a megabyte of distinct words (past PostgreSQL's 1 MB tsvector) records."""
        seen: list[int] = []

        def counter(text: str) -> int:
            seen.append(len(text))
            return len(text) // 4

        mgr = make(model=counter)
        session = mgr.start_session("nightly checks")
        rows = [{"id": i, "status": "ok", "host": f"db-{i % 7}"} for i in range(3_000)]
        rows[2_500]["status"] = "CRITICAL disk full on /var/lib/postgres"
        seen.clear()
        output = mgr.record_tool_output(session.id, {"rows": rows}, tool="df")
        words = " ".join(f"w{i:07d}" for i in range(120_000))  # ~1 MB, every word new
        message = mgr.add_message(session.id, "tool", words)
        assert max(seen, default=0) <= 32_768  # nothing large counted on the caller's path
        assert output.payload == {"rows": rows}
        # Before the worker: the in-memory keyword ranking reads the rows themselves.
        assert mgr.search("w0000042", 3, mode="keyword")[0].event.id == message.id
        wordy: tuple[SearchMode, ...] = ("keyword", "hybrid")
        for mode in wordy:
            assert mgr.search("disk full postgres", 3, mode=mode)[0].event.id == output.id
        mgr.flush()
        assert max(seen) > 100_000  # the worker counted the payload
        exact = len(output.content) // 4 + len(dumps({"rows": rows})) // 4
        assert mgr.get_event(output.id).token_count == exact
        assert mgr.get_event(message.id).token_count == len(words) // 4
        for mode in wordy:
            assert mgr.search("disk full postgres", 3, mode=mode)[0].event.id == output.id
        assert mgr.search("w0000042", 3, mode="keyword")[0].event.id == message.id
        assert "disk full" in mgr.restore(session.id, max_tokens=2_000, query="disk full").text
