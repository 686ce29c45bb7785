"""restore() shows a long event by its passages relevant to the query (issue 31, item 3): a
header naming the event, the chosen passages in their order with ``…`` between those apart,
never head and tail, never over budget, and a report that says which passages and why."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import Passage, SessionManager
from memlane.events import Event, Session
from memlane.restore import MESSAGE_OVERHEAD, RestoreCandidates, RestoredContext, pack
from memlane.testing import HashEmbedder
from memlane.text.passages import passage_spans
from memlane.text.tokens import Tokenizer, tokenizer_for

T0 = datetime(2024, 5, 2, 14, 0, tzinfo=timezone.utc)
GOAL = "Keep the billing database healthy"
SESSION = Session("01JSESSION", "dba", GOAL, "active", T0, T0)
TOK = tokenizer_for("gpt-4o")
TOPICS = [
    "connection pooling",
    "index maintenance",
    "query planning",
    "vacuum tuning",
    "replication lag",
    "backup rotation",
    "lock contention",
    "schema migrations",
    "monitoring dashboards",
]
ANSWER = "The weekly snapshots are copied to the cold bucket pg-archive-eu and kept a year."
QUESTION = "Where are the weekly snapshots copied to?"
HEADER = re.compile(
    r"^- \[(?P<what>[^,\]]+), (?P<when>\d{4}-\d\d-\d\d \d\d:\d\d), (?P<size>[\d,]+) tokens — "
    r"passages? (?P<numbers>\d+(?:-\d+)?(?:, \d+(?:-\d+)?)*(?: and \d+(?:-\d+)?)?) "
    r"of (?P<count>\d+|the first \d+)"
    r"(?:, cut)?\]$",
    re.MULTILINE,
)


def paragraph(n: int, topic: str) -> str:
    """~150 word pieces on ``topic``, none of the question's words."""
    return " ".join(
        [
            f"Part {n} covers {topic}.",
            f"For {topic} the team reviewed the current settings, the alerts of last month "
            "and the notes of the previous review, and agreed on a plan with owners.",
            "Each step of that plan has a measurement before it and after it, so that a "
            "change which does not help can be rolled back within the same afternoon.",
            f"The open questions on {topic} were listed in the tracker with their owners, "
            "and the next review is due at the end of the quarter, after the release.",
        ]
    )


def long_text(answer_at: int | None = 6, *, parts: int = 9, answer: str = ANSWER) -> str:
    paragraphs = [paragraph(n, TOPICS[(n - 1) % len(TOPICS)]) for n in range(1, parts + 1)]
    if answer_at is not None:
        paragraphs[answer_at - 1] += " " + answer
    return "\n\n".join(paragraphs)


def ev(n: int, kind: str, content: str, role: str | None = None, **kw: Any) -> Event:
    if role is not None:
        kw["metadata"] = {"role": role}
    return Event(f"01J{n:010d}", SESSION.id, "dba", kind, content, T0 + timedelta(minutes=n), **kw)


def chatter(count: int, start: int = 100) -> list[Event]:
    return [
        ev(start + i, "message", f"short turn {i}: lunch at noon and the weather", role="user")
        for i in range(count)
    ]


def candidates(
    relevant: list[Event],
    recent: list[Event] | None = None,
    *,
    query: str | None = QUESTION,
    passages: dict[str, Passage] | None = None,
) -> RestoreCandidates:
    goal = ev(0, "goal", GOAL)
    return RestoreCandidates(
        SESSION,
        [goal],
        [],
        recent or [],
        [(event, 0.5) for event in relevant],
        query=query,
        passages=passages or {},
    )


def check(ctx: RestoredContext, budget: int, tok: Tokenizer = TOK) -> None:
    """The budget promise, in both views, and each passages block as documented."""
    assert tok.count(ctx.text) == ctx.token_count <= budget
    total = tok.count(ctx.system) + sum(
        tok.count(turn["content"]) + MESSAGE_OVERHEAD for turn in ctx.turns
    )
    assert total == ctx.report.message_tokens <= budget
    json.dumps(ctx.report.to_dict())
    shown = [item for item in ctx.report.items if item.action == "passages"]
    headers = HEADER.findall(ctx.text)
    assert len(headers) == len(shown)
    for item in shown:
        assert item.passages == tuple(sorted(item.passages)) and item.passages[0] >= 1
        said = ", ".join(str(n) for n in item.passages)
        assert f"passage{'s' if len(item.passages) > 1 else ''} {said} of " in item.reason


def item_of(ctx: RestoredContext, event: Event) -> Any:
    return next(item for item in ctx.report.items if item.event_id == event.id)


def test_the_fixture_cuts_where_the_tests_expect() -> None:
    text = long_text()
    spans = passage_spans(text)
    assert len(spans) == 9
    assert ANSWER in text[slice(*spans[5])]
    assert all(f"Part {n} covers" in text[slice(*spans[n - 1])] for n in range(1, 10))


def test_the_answer_in_the_sixth_passage_is_shown_by_it_within_a_tight_budget() -> None:
    event = ev(3, "message", long_text(), role="assistant")
    ctx = pack(candidates([event], chatter(20)), 500, TOK)
    check(ctx, 500)
    assert ANSWER in ctx.text
    assert "Part 1 covers" not in ctx.text  # not head and tail: the passage that answers
    assert "chars omitted" not in ctx.text
    item = item_of(ctx, event)
    assert item.action == "passages" and item.passages == (6,)
    assert "passage 6 of 9" in item.reason
    assert "matches query terms weekly, snapshots" in item.reason


def test_an_event_no_query_touches_keeps_its_head_and_tail() -> None:
    """Its first and last passages were measured to carry no more than head and tail
    (docs/restore.md): such an event is summarised as before."""
    event = ev(3, "message", long_text(), role="assistant")
    ctx = pack(candidates([event], chatter(20), query="lunch"), 1_000, TOK)
    check(ctx, 1_000)
    assert item_of(ctx, event).action == "summarised" and "chars omitted]…" in ctx.text


def test_the_search_best_passage_is_shown_first_without_a_shared_word() -> None:
    """Hit.passage (the semantic best passage) counts even when no query word is in it."""
    text = long_text()
    event = ev(3, "message", text, role="assistant")
    start, stop = passage_spans(text)[5]
    best = {event.id: Passage(text[start:stop], start, stop)}
    query = "the archive location for the older copies"
    assert not {"archive", "location", "older", "copies"} & set(text.lower().split())
    ctx = pack(candidates([event], chatter(20), query=query, passages=best), 500, TOK)
    check(ctx, 500)
    assert ANSWER in ctx.text
    item = item_of(ctx, event)
    assert item.passages == (6,) and "6: best passage of the search" in item.reason


def test_a_search_passage_cut_another_way_is_found_by_its_overlap() -> None:
    """The index cuts with the embedder's word pieces, restore with an estimate: a span that
    is none of restore's passages still names the ones that hold it."""
    text = long_text()
    event = ev(3, "message", text, role="assistant")
    start, stop = passage_spans(text)[5]
    best = {event.id: Passage(text[start + 40 : stop - 40], start + 40, stop - 40)}
    ctx = pack(candidates([event], chatter(20), query="nothing", passages=best), 500, TOK)
    assert item_of(ctx, event).passages == (6,) and ANSWER in ctx.text


def test_through_a_store_with_and_without_the_hit_passage(mgr: SessionManager) -> None:
    session = mgr.start_session(GOAL)
    mgr.add_message(session.id, "user", "Give me the whole maintenance rundown", created_at=T0)
    long = mgr.add_message(
        session.id, "assistant", long_text(), created_at=T0 + timedelta(minutes=3)
    )
    for n in range(40):
        mgr.add_message(
            session.id,
            ("user", "assistant")[n % 2],
            f"turn {n}: lunch plans, the weather and the train timetable",
            created_at=T0 + timedelta(minutes=10 + n),
        )
    mgr.flush()
    hit = next(h for h in mgr.search(QUESTION, k=5) if h.event.id == long.id)
    assert hit.passage is not None and ANSWER in hit.passage.text  # the index's passage
    ctx = mgr.restore(session.id, 600, query=QUESTION)
    check(ctx, 600)
    assert ANSWER in ctx.text and "Part 1 covers" not in ctx.text
    item = item_of(ctx, long)
    assert item.action == "passages" and 6 in item.passages
    assert "best passage of the search" in item.reason


def test_the_header_names_the_event() -> None:
    event = ev(3, "message", long_text(), role="assistant", token_count=1_740)
    ctx = pack(candidates([event], chatter(20)), 500, TOK)
    line = next(line for line in ctx.text.splitlines() if "passage" in line)
    assert line == "- [assistant message, 2024-05-02 14:03, 1,740 tokens — passage 6 of 9]"
    fact = ev(4, "fact", long_text(answer_at=2))
    ctx = pack(candidates([fact], chatter(20)), 500, TOK)
    match = HEADER.search(ctx.text)
    assert match is not None and match["what"] == "fact" and match["numbers"] == "2"
    assert int(match["size"].replace(",", "")) == TOK.count(fact.content)


def test_passages_apart_have_an_ellipsis_between_them_and_adjacent_ones_none() -> None:
    text = long_text(answer_at=None)
    paragraphs = text.split("\n\n")
    paragraphs[2] += " The pager rota changed: Dana owns the weekly snapshots now."
    paragraphs[6] += " Snapshots of the weekly kind were moved off the primary."
    apart = ev(3, "message", "\n\n".join(paragraphs), role="assistant")
    ctx = pack(candidates([apart], chatter(20)), 1_200, TOK)
    check(ctx, 1_200)
    assert item_of(ctx, apart).passages == (3, 4, 7)  # 4: the one after the best match
    block = ctx.text[ctx.text.index("passages 3, 4 and 7 of 9") :]
    assert "…" not in block.split("Part 4 covers")[0]  # 3 and 4 adjacent: joined
    assert re.search(r"\n    …\n    Part 7 covers", block)
    paragraphs = text.split("\n\n")
    paragraphs[2] += " The pager rota changed: Dana owns the weekly snapshots now."
    paragraphs[3] += " Snapshots of the weekly kind were moved off the primary."
    adjacent = ev(3, "message", "\n\n".join(paragraphs), role="assistant")
    ctx = pack(candidates([adjacent], chatter(20)), 1_200, TOK)
    assert item_of(ctx, adjacent).passages == (3, 4, 5)
    block = ctx.text[ctx.text.index("passages 3-5 of 9") :]
    assert "…" not in block.split("Part 6 covers")[0]
    assert block.count("Part 4 covers") == 1  # the two passages joined: nothing said twice


def test_the_passage_after_a_matching_one_is_shown_with_it() -> None:
    """A question's answer is the next turn: the passage after the one that shares the
    query's words comes with it, though it shares none of them."""
    paragraphs = long_text(answer_at=None).split("\n\n")
    paragraphs[2] += " Who owns the weekly snapshots after the pager rota changed?"
    paragraphs[3] = "Dana does, since Monday. " + paragraphs[3]
    asked = ev(3, "message", "\n\n".join(paragraphs), role="assistant")
    ctx = pack(candidates([asked], chatter(20)), 1_200, TOK)
    check(ctx, 1_200)
    item = item_of(ctx, asked)
    assert item.action == "passages" and {3, 4} <= set(item.passages)
    assert "Dana does, since Monday." in ctx.text and "4: follows passage 3" in item.reason


def test_a_whole_event_that_fits_comfortably_is_shown_whole() -> None:
    """Every passage matches: the passages would cost what the whole does."""
    text = "\n\n".join(p + " " + ANSWER for p in long_text(answer_at=None, parts=3).split("\n\n"))
    event = ev(3, "message", text, role="assistant")
    ctx = pack(candidates([event], chatter(5)), 2_000, TOK)
    assert item_of(ctx, event).action == "included" and text.split("\n")[0] in ctx.text


def test_an_essay_that_fits_is_shown_by_its_relevant_passage_when_others_need_room() -> None:
    """The issue's first finding: a 1,000-token essay sharing the query's topic took room
    whole, and the message that answered was cut. Now the essay shows its relevant passage
    and the answer has room."""
    essay_text = long_text(answer_at=4, answer="Weekly snapshots: see the runbook.")
    essay = ev(2, "message", essay_text, role="assistant")
    answer = ev(3, "message", long_text(), role="assistant")
    budget = 1_300
    ctx = pack(candidates([essay, answer], chatter(30)), budget, TOK)
    check(ctx, budget)
    assert TOK.count(essay.content) < budget  # it would have fitted whole
    # its relevant passage and the one after it (a reply, a continuation)
    assert item_of(ctx, essay).action == "passages" and item_of(ctx, essay).passages == (4, 5)
    assert ANSWER in ctx.text


def test_recent_long_events_are_shown_by_the_query_passages() -> None:
    newest = ev(300, "message", long_text(), role="assistant")
    ctx = pack(candidates([], [*chatter(5), newest]), 700, TOK)
    check(ctx, 700)
    item = item_of(ctx, newest)
    assert item.section == "recent" and item.action == "passages" and 6 in item.passages
    assert ctx.turns[-1]["content"].startswith("[assistant message, 2024-05-02 19:00")
    assert ANSWER in ctx.turns[-1]["content"] and "Part 1 covers" not in ctx.turns[-1]["content"]
    without = pack(candidates([], [*chatter(5), newest], query=None), 700, TOK)
    assert item_of(without, newest).action == "summarised"  # no query: head and tail


def test_recent_long_events_that_fit_stay_whole() -> None:
    newest = ev(300, "message", long_text(), role="assistant")
    ctx = pack(candidates([], [*chatter(5), newest]), 4_000, TOK)
    assert item_of(ctx, newest).action == "included" and ctx.turns[-1]["content"] == newest.content


def test_a_callers_summariser_still_shortens_what_no_query_touches() -> None:
    newest = ev(300, "message", long_text(), role="assistant")
    asked: list[int] = []

    def summarizer(text: str, max_tokens: int) -> str:
        asked.append(max_tokens)
        return "The rundown covered nine maintenance areas."

    ctx = pack(candidates([], [*chatter(5), newest], query=None), 400, TOK, summarizer)
    assert asked and item_of(ctx, newest).action == "summarised"
    assert "nine maintenance areas" in ctx.text


def test_spare_tokens_grow_a_passages_block() -> None:
    event = ev(3, "message", long_text(), role="assistant")
    tight = pack(candidates([event], chatter(2)), 700, TOK)
    roomy = pack(candidates([event], chatter(2)), 1_400, TOK)
    check(tight, 700)
    check(roomy, 1_400)
    small, large = item_of(tight, event), item_of(roomy, event)
    assert 6 in small.passages and ANSWER in tight.text
    assert large.action == "included" or set(large.passages) > set(small.passages)
    assert "grown into tokens no section used" in large.reason


def test_a_huge_event_is_summarised_unless_a_passage_is_relevant() -> None:
    """Past MAX_PASSAGES an event is cut (and indexed) from its beginning only: its last
    passage is not its end, so without a query it keeps head and tail."""
    text = long_text(answer_at=2, parts=80)
    event = ev(300, "message", text, role="assistant")
    ctx = pack(candidates([], [*chatter(3), event], query=None), 600, TOK)
    check(ctx, 600)
    assert item_of(ctx, event).action == "summarised" and "Part 80 covers" in ctx.text
    ctx = pack(candidates([event], chatter(3)), 600, TOK)
    check(ctx, 600)
    assert item_of(ctx, event).passages == (2,) and "of the first 48]" in ctx.text


def test_payloads_and_the_goal_are_never_cut_into_passages() -> None:
    output = ev(3, "tool_output", "rows", payload={"rows": [long_text()]})
    goal = ev(0, "goal", long_text())
    c = RestoreCandidates(SESSION, [goal], [], [output], [], query=QUESTION)
    ctx = pack(c, 600, TOK)
    check(ctx, 600)
    assert {item.action for item in ctx.report.items} <= {"included", "summarised", "dropped"}


# ----------------------------------------------------------------------------- property

VOCABULARY = """weekly snapshot bucket index vacuum replica lag pool lock schema alert owner plan
review measure rollback release quarter tracker setting 42 ünïcode 数据 🙂"""
words = st.sampled_from(VOCABULARY.split())
sentence = st.lists(words, min_size=3, max_size=30).map(lambda ws: " ".join(ws) + ".")
paragraph_text = st.lists(sentence, min_size=1, max_size=12).map(" ".join)
long_content = st.lists(paragraph_text, min_size=2, max_size=40).map("\n\n".join)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    contents=st.lists(long_content, min_size=1, max_size=6),
    where=st.lists(st.sampled_from(["relevant", "recent", "important"]), min_size=6, max_size=6),
    budget=st.integers(60, 3_000),
    query=st.none() | st.lists(words, min_size=1, max_size=5).map(" ".join),
    model=st.sampled_from(["gpt-4o", "gpt-4", "claude-3-5-sonnet"]),
    best=st.lists(st.none() | st.integers(0, 60), min_size=6, max_size=6),
    summarise=st.booleans(),
)
def test_long_events_never_break_the_budget(
    contents: list[str],
    where: list[str],
    budget: int,
    query: str | None,
    model: str,
    best: list[int | None],
    summarise: bool,
) -> None:
    tok = tokenizer_for(model)
    events = [
        ev(n + 1, "message", text, role=("user", "assistant")[n % 2], importance=0.9)
        for n, text in enumerate(contents)
    ]
    passages: dict[str, Passage] = {}
    for event, pick in zip(events, best, strict=False):
        spans = passage_spans(event.content)
        if pick is not None and spans:
            start, stop = spans[pick % len(spans)]
            passages[event.id] = Passage(event.content[start:stop], start, stop)
    placed = dict(zip((e.id for e in events), where, strict=False))
    c = RestoreCandidates(
        SESSION,
        [ev(0, "goal", GOAL)],
        [e for e in events if placed[e.id] == "important"],
        [e for e in events if placed[e.id] == "recent"],
        [(e, 0.5) for e in events if placed[e.id] == "relevant"],
        query=query,
        passages=passages,
    )
    summarizer = (lambda text, n: text[: n * 2]) if summarise else None
    ctx = pack(c, budget, tok, summarizer)
    check(ctx, budget, tok)
    for item in ctx.report.items:
        if item.action == "passages":
            spans = passage_spans(next(e for e in events if e.id == item.event_id).content)
            assert item.passages[-1] <= len(spans)


@pytest.mark.parametrize("budget", [300, 1_000, 4_000])
def test_no_passage_of_an_event_the_agent_may_not_read(make_manager: Any, budget: int) -> None:
    """Scope: long events of another agent, private or in a pool not granted, whose deep
    passage matches the query best, are never shown, whole or by a passage."""
    secret = "zqx-never-shown"
    alice = make_manager("alice")
    owned = []
    for pool in (None, "board"):
        own = alice.start_session("Keep the billing database healthy", shared_pool=pool)
        alice.add_message(own.id, "assistant", long_text(answer=f"{ANSWER} {secret}"))
        owned.append(own)
    team = alice.start_session("Keep the billing database healthy", shared_pool="team")
    alice.add_message(team.id, "assistant", long_text(answer="The team pool is shared."))
    alice.grant("team", "bob")
    alice.flush()
    bob = make_manager("bob", subscribe=["team"])
    mine = bob.start_session("Keep the billing database healthy")
    bob.add_message(mine.id, "assistant", long_text(answer="Bob keeps his own notes."))
    bob.flush()
    ctx = bob.restore(mine.id, budget, query=f"{QUESTION} {secret}", other_sessions=True)
    assert secret not in repr(ctx) and ANSWER not in ctx.text
    check(ctx, budget)
    # nor by a search, whose hits show the passage of the half that found them
    hits = bob.search(f"{QUESTION} {secret}", k=20)
    readable = {mine.id, team.id}
    assert hits and all(h.event.session_id in readable for h in hits)
    assert secret not in repr(list(hits))
    # positive control: its owner is shown the passage (the search's best one may differ
    # with the hash embedder: within 300 tokens only one passage, cut, fits)
    for own in owned:
        context = alice.restore(own.id, budget, query=f"{QUESTION} {secret}")
        assert budget < 1_000 or secret in context.text


class _FinePieces(HashEmbedder):
    """The hash embedder with a tokenizer of its own: a word piece every three characters
    (paths and identifiers are many pieces to a real one), a window of 128."""

    max_tokens = 128

    def count_tokens(self, text: str) -> int:
        return len(text) // 3 + 1


def traceback_output(frames: int, planted: int) -> str:
    lines = ["Traceback (most recent call last):"]
    for i in range(frames):
        lines += [
            f'  File "/srv/app/module_{i}.py", line {100 + i}, in handler_{i}',
            f"    step_{i}(orders, ctx)",
        ]
        if i == planted:
            lines.append("KeyError: 'warehouse_id'")
    return "\n".join(lines)


@pytest.mark.parametrize("planted", [7, 13, 22, 31])
def test_restore_cuts_passages_as_the_index_did(tmp_path: Any, planted: int) -> None:
    """Restore cuts a long event with the index's own tokenizer and window, so the passage
    the search found it by is one passage of restore's: the frame just above the error (the
    answer) is shown with it. Cut by an estimate instead, restore's passages began elsewhere
    and left that line out (bench/long_events.py, tracebacks)."""
    with SessionManager("ops", tmp_path / "s.db", embedder=_FinePieces(), background=False) as mgr:
        sid = mgr.start_session("Keep the checkout service up").id
        output = traceback_output(40, planted)
        event = mgr.record_tool_output(sid, output, tool="kubectl logs")
        mgr.add_message(sid, "user", "Anything odd in the logs?")
        question = "KeyError warehouse_id raised where?"
        hit = next(h for h in mgr.search(question, k=3, session_id=sid) if h.event == event)
        assert hit.passage is not None
        frame = f'File "/srv/app/module_{planted}.py", line {100 + planted}, in handler_{planted}'
        assert frame in hit.passage.text  # (the index's passage holds the answer)
        ctx = mgr.restore(sid, 600, query=question)
        item = next(i for i in ctx.report.items if i.event_id == event.id)
        assert item.action == "passages"
        assert frame in ctx.text and "KeyError: 'warehouse_id'" in ctx.text


def test_restore_takes_the_index_passages_instead_of_cutting_again(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index keeps each passage's span; restore reads them (one query) instead of
    tokenizing long events again, and shows the passages the index holds even where
    today's cut would differ (a store indexed by an older version). Spans that cannot be
    passages of the content are not trusted: the event is cut again."""
    from memlane.search import passage_terms
    from memlane.text.passages import Cutter

    with SessionManager("dba", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session(GOAL)
        long = mgr.add_message(session.id, "assistant", long_text(), created_at=T0)
        for n in range(30):
            mgr.add_message(session.id, "user", f"turn {n}: lunch", created_at=T0 + timedelta(n))
        mgr.flush()
        store = mgr._engine.store
        indexed = mgr._engine.storage.passage_spans([long.seq])[long.seq]
        assert indexed == Cutter.of(HashEmbedder()).spans(long.content) and len(indexed) > 5

        cuts: list[str] = []
        real = passage_terms.Cutter.spans

        def counted(self: Cutter, text: str) -> list[tuple[int, int]]:
            cuts.append(text)
            return real(self, text)

        monkeypatch.setattr(passage_terms.Cutter, "spans", counted)
        passage_terms.forget_analyses()
        ctx = mgr.restore(session.id, 600, query=QUESTION)
        assert ANSWER in ctx.text and item_of(ctx, long).action == "passages"
        assert cuts == []  # nothing tokenized: the index's spans were taken
        # the next turn's restore finds the event analysed: it asks the index for nothing
        asked: list[list[int]] = []
        storage = mgr._engine.storage
        read = storage.passage_spans
        monkeypatch.setattr(storage, "passage_spans", lambda seqs: asked.append(seqs) or read(seqs))
        mgr.restore(session.id, 600, query=QUESTION)
        assert asked == [[]]

        # the index says otherwise (an older cut: the answer's paragraph in a passage with
        # the one before it): restore shows that passage
        answer_at = long.content.index(ANSWER)
        merged = [(a, b) for a, b in indexed if b <= answer_at or a > answer_at]
        at = next(i for i, (a, b) in enumerate(indexed) if a <= answer_at < b)
        merged.insert(at - 1, (indexed[at - 1][0], indexed[at][1]))
        merged = [s for s in merged if s not in (indexed[at - 1],)]
        conn = store.connection()
        with conn:
            conn.execute("DELETE FROM vectors WHERE seq = ? AND part > 0", (long.seq,))
            conn.executemany(
                "UPDATE vectors SET start = ?, stop = ? WHERE seq = ? AND part = ?",
                [(merged[0][0], merged[0][1], long.seq, 0)],
            )
            vector = conn.execute(
                "SELECT vector, partition FROM vectors WHERE seq = ?", (long.seq,)
            ).fetchone()
            conn.executemany(
                "INSERT INTO vectors (seq, partition, vector, part, start, stop) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(long.seq, vector[1], vector[0], i, a, b) for i, (a, b) in enumerate(merged) if i],
            )
        passage_terms.forget_analyses()
        ctx = mgr.restore(session.id, 2_000, query=QUESTION)
        assert cuts == []
        numbers = item_of(ctx, long).passages
        assert at in numbers  # passage number `at` (from 1) is the merged one, by the index
        counts = {m["count"] for m in HEADER.finditer(ctx.text)}
        assert counts == {str(len(merged))} and len(merged) == len(indexed) - 1
        assert long.content[indexed[at - 1][0] : indexed[at - 1][1]] in ctx.text

        # spans past the content's end: cut again
        with conn:
            conn.execute(
                "UPDATE vectors SET stop = ? WHERE seq = ? AND part = 1",
                (len(long.content) + 50, long.seq),
            )
        passage_terms.forget_analyses()
        ctx = mgr.restore(session.id, 600, query=QUESTION)
        assert cuts == [long.content] and ANSWER in ctx.text


def test_only_the_events_that_may_be_shown_by_passages_are_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cutting and stemming a long event is most of a first restore's time (cold restores of
    the long-events benchmark: ~85% of the events analysed were then dropped for a spent
    share). An event is analysed only when its share leaves room for a passages block; the
    context is the same."""
    from memlane.search import passage_terms

    relevant = [ev(10 + n, "message", long_text(n % 9 + 1), role="assistant") for n in range(24)]
    whole = pack(candidates(relevant, chatter(20)), 900, TOK)
    analysed: list[int] = []
    real = passage_terms._analyse

    def counted(content: str, *args: Any) -> Any:
        analysed.append(len(content))
        return real(content, *args)

    monkeypatch.setattr(passage_terms, "_analyse", counted)
    passage_terms.forget_analyses()
    ctx = pack(candidates(relevant, chatter(20)), 900, TOK)
    check(ctx, 900)
    assert ctx.text == whole.text
    shown = [item for item in ctx.report.items if item.action == "passages"]
    assert shown and len(analysed) <= len(shown) + 2, (len(analysed), len(shown))


def test_the_kept_analyses_stay_within_their_byte_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Search and restore keep each long event's passages and word counts (search reads up
    to 50 long candidates a search): within an estimated byte bound, least recently used
    dropped first; the estimate is within a factor of two of what they take."""
    import tracemalloc

    from memlane.search import passage_terms

    passage_terms.forget_analyses()
    events = [ev(n, "message", long_text(n % 9 + 1) + f" event {n} " * 40) for n in range(40)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = [passage_terms.analysed(event) for event in events]
        taken = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    estimated = passage_terms._ANALYSES.size
    assert all(made) and estimated == sum(passage_terms._bytes(a) for a in made)
    assert taken / 2 <= estimated <= taken * 2, (estimated, taken)

    bound = estimated // 4
    monkeypatch.setattr(passage_terms._ANALYSES, "limit", bound)
    passage_terms.analysed(events[0])  # (kept: now the most recently used)
    passage_terms.analysed(ev(99, "message", long_text(3)))  # a new one: the oldest go
    assert passage_terms._ANALYSES.size <= bound
    assert not passage_terms.needs_analysis(events[0], passage_terms.Cutter())
    assert passage_terms.needs_analysis(events[1], passage_terms.Cutter())
    passage_terms.forget_analyses()
    assert passage_terms._ANALYSES.size == 0


def inventory(answer_row: int = 250) -> tuple[str, str]:
    """A CSV table where one row holds the product and the warehouse a question names, and
    other passages hold each of them more often, in separate rows."""
    products = ["folding laundry basket", "bamboo yoga mat", "steel garden hose"]
    places = ["Zaragoza", "Lodz", "Milan", "Dublin"]
    rows = ["sku,product,warehouse,on_hand,reorder_point"]
    for n in range(400):
        product = products[0] if n % 3 == 0 and n < 200 else products[n % 2 + 1]
        place = places[0] if n % 3 == 1 and n < 200 else places[n % 3 + 1]
        rows.append(f"SK-{n:05d},{product},{place},{(n * 37) % 4000},{n % 500}")
    answer = "OK-33722,folding laundry basket,Zaragoza,1868,165"
    rows.insert(answer_row, answer)
    return "\n".join(rows), answer


def test_a_table_row_holding_the_questions_words_together_is_shown() -> None:
    """Rows are lines: the passage whose one line holds the product and the warehouse wins
    over passages that hold each of them more often, in different rows (tool outputs of the
    long-events benchmark: the right row's passage was shown for a third of CSV questions)."""
    text, answer = inventory()
    spans = passage_spans(text)
    at = next(i for i, (start, stop) in enumerate(spans) if answer in text[start:stop])
    assert at >= 5  # the first passages hold the two words most often, apart
    event = ev(3, "tool_output", text)
    query = "How many folding laundry basket units are on hand in Zaragoza?"
    ctx = pack(candidates([event], chatter(20), query=query), 800, TOK)
    check(ctx, 800)
    assert answer in ctx.text
    assert item_of(ctx, event).passages[0] == at + 1


def settings_message() -> tuple[str, str]:
    """An answer with settings blocks of several services: the one a question names is under
    its heading, far from the paragraphs that name it most."""
    talk = "The email dispatcher sends the receipts; the email dispatcher team owns it."
    blocks = []
    for n, service in enumerate(["pricing-engine", "search-indexer", "email-dispatcher"]):
        lines = [f"# {service}/settings.py", f"RETRY_LIMIT = {n + 3}", f"BATCH_SIZE = {200 + n}"]
        blocks.append("```python\n" + "\n".join(lines) + "\n```")
    parts = [talk, blocks[0], paragraph(1, TOPICS[0]), paragraph(2, TOPICS[1]), blocks[1]]
    parts += [paragraph(n, TOPICS[n]) for n in range(3, 7)]
    parts += [blocks[2], paragraph(7, TOPICS[7])]
    return "\n\n".join(parts), "BATCH_SIZE = 202"


def test_a_setting_under_the_heading_the_question_names_is_shown() -> None:
    """``# email-dispatcher/settings.py`` names what the lines under it set: a question about
    that service's BATCH_SIZE gets that block, not the first one under prose naming the
    service."""
    text, answer = settings_message()
    event = ev(3, "message", text, role="assistant")
    query = "In the email-dispatcher configuration, what is BATCH_SIZE?"
    ctx = pack(candidates([event], chatter(20), query=query), 700, TOK)
    check(ctx, 700)
    assert answer in ctx.text
    assert "BATCH_SIZE = 200" not in ctx.text  # the first block, under the prose, is not shown


def test_a_passage_cut_to_fit_fits_any_allowance_a_smaller_one_fit() -> None:
    """A cut passage's lines are indented after it is summarised to the room left: the first
    try can overflow the allowance by the indents, and a larger allowance then showed
    nothing where a smaller one showed the cut passage (a listing at 600 tokens)."""
    from memlane.restore.passages import Pricing, _cut
    from memlane.search.passage_terms import analysed

    lines = [
        f"-rw-r--r-- 1 pg pg {1_000_000 + n * 7_919:>10} Feb {n % 28 + 1:2d} 02:00 "
        f"billing-2026-02-{n % 28 + 1:02d}.sql.gz"
        for n in range(120)
    ]
    event = ev(3, "tool_output", "\n".join(lines))
    analysis = analysed(event)
    assert analysis is not None
    count = Pricing.plain(event, analysis, TOK.count).count
    fitted = False
    for allowance in range(80, 320, 3):
        cut = _cut(event, analysis, (2, "matches"), 3_000, allowance, count)
        if cut is not None:
            assert cut.tokens <= allowance
            fitted = True
        else:
            assert not fitted, f"allowance {allowance} showed nothing; a smaller one fit"
