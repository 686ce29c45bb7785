"""End-to-end property: restore() through a real store never exceeds its budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import BudgetTooSmall, SessionManager
from memlane.restore import json_fragments
from memlane.testing import HashEmbedder
from memlane.text.tokens import tokenizer_for

text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=300,
).filter(lambda s: s.strip())
json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: (
        st.lists(children, max_size=30)
        | st.dictionaries(
            st.text(
                st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                min_size=1,
                max_size=20,
            ),
            children,
            max_size=15,
        )
    ),
    max_leaves=200,
)
huge_json = st.builds(
    lambda n, word: {"rows": [{"id": i, "text": word * 20} for i in range(n)], "n": n},
    st.integers(100, 5_000),
    st.sampled_from(["αβγ ", "data ", "🙂 ", "数据 "]),
)
event = st.one_of(
    st.tuples(st.just("fact"), text, st.none()),
    st.tuples(st.just("step"), text, json_value),
    st.tuples(st.just("tool_output"), text, huge_json),
    st.tuples(st.just("decision"), text, st.none()),
    st.tuples(st.just("error"), text, st.none()),
    st.tuples(st.just("pending"), text, st.none()),
    st.tuples(st.just("message"), text, st.none()),
)


#: a real store per example: slow, large inputs, the tmp_path_factory fixture reused
_SLOW_STORE: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
}


@settings(max_examples=80, **_SLOW_STORE)
@given(
    goal=text,
    events=st.lists(event, max_size=40),
    budget=st.integers(20, 6_000),
    model=st.sampled_from(["gpt-4o", "gpt-4", "claude-3-5-sonnet"]),
)
def test_restore_fits_every_budget(
    tmp_path_factory: pytest.TempPathFactory,
    goal: str,
    events: list[tuple[str, str, object]],
    budget: int,
    model: str,
) -> None:
    db = Path(tmp_path_factory.mktemp("prop")) / "s.db"
    with SessionManager("prop", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session(goal)
        for kind, content, payload in events:
            if kind == "message":
                mgr.add_message(session.id, "user", content)
            else:
                mgr.record(session.id, kind, content, payload=payload)
        try:
            context = mgr.restore(session.id, max_tokens=budget, model=model)
        except BudgetTooSmall:
            # Allowed only when not even the summarised goal fits: check that claim.
            assert budget < 200, budget
            return
        count = tokenizer_for(model).count
        assert count(context.text) == context.token_count <= budget
        assert context.text.strip()
        for fragment in json_fragments(context.text):
            json.loads(fragment)
        reported = [item.event_id for item in context.report.items]
        assert len(reported) == len(set(reported))


@settings(max_examples=40, **_SLOW_STORE)
@given(
    goal=text,
    events=st.lists(event, max_size=15),
    facts=st.lists(st.tuples(text, st.sampled_from([None, "city", "diet", "team"])), max_size=6),
    documents=st.lists(st.lists(text, min_size=1, max_size=8), max_size=2),
    short_lived=st.lists(text, max_size=4),
    budget=st.integers(20, 4_000),
    query=st.none() | text,
)
def test_restore_with_every_section_fits_every_budget(
    tmp_path_factory: pytest.TempPathFactory,
    goal: str,
    events: list[tuple[str, str, object]],
    facts: list[tuple[str, str | None]],
    documents: list[list[str]],
    short_lived: list[str],
    budget: int,
    query: str | None,
) -> None:
    """The sections issue 13 added — About the user, Reference — and short-term memory
    share the same budget: it still holds, and every event is reported once."""
    db = Path(tmp_path_factory.mktemp("prop")) / "s.db"
    with SessionManager("prop", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session(goal, user_id="u1")
        for fact, key in facts:
            mgr.remember("u1", fact, key=key)
        for n, paragraphs in enumerate(documents):
            mgr.ingest(text="\n\n".join(paragraphs), name=f"doc-{n}.md")
        for kind, content, payload in events:
            if kind == "message":
                mgr.add_message(session.id, "user", content)
            else:
                mgr.record(session.id, kind, content, payload=payload)
        for content in short_lived:
            mgr.add_message(session.id, "assistant", content, ttl=3600)
        try:
            context = mgr.restore(session.id, max_tokens=budget, query=query)
        except BudgetTooSmall:
            assert budget < 200, budget
            return
        assert tokenizer_for("gpt-4o").count(context.text) == context.token_count <= budget
        reported = [item.event_id for item in context.report.items]
        assert len(reported) == len(set(reported))
