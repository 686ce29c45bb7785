"""Framework messages kept verbatim (issue 11): a framework's own message object goes in the
payload and comes back equal, through reads, export and import; its text rendering is what
search and restore see. Roles of every framework are accepted; a typo is not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import InvalidInput, SessionManager
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder

# Shapes as each framework serialises them (field names from their sources).
LANGCHAIN_AI = {  # langchain_core.messages.message_to_dict(AIMessage(...))
    "type": "ai",
    "data": {
        "content": [{"type": "text", "text": "Let me look that up."}],
        "additional_kwargs": {},
        "response_metadata": {"model_name": "fake", "finish_reason": "tool_calls"},
        "type": "ai",
        "name": None,
        "id": "run-1",
        "tool_calls": [
            {"name": "search", "args": {"q": "heron nests"}, "id": "call_1", "type": "tool_call"}
        ],
        "invalid_tool_calls": [],
        "usage_metadata": {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
    },
}
OPENAI_ITEMS = [  # Responses API items, as the Agents SDK's sessions store them
    {"role": "developer", "content": "Answer briefly."},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "The user wants nesting facts."}],
        "encrypted_content": None,
    },
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "search",
        "arguments": '{"q": "heron nests"}',
        "id": "fc_1",
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "Herons nest in colonies."},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "In colonies.", "annotations": []}],
    },
]
LLAMAINDEX_MESSAGE = {  # ChatMessage.model_dump()
    "role": "assistant",
    "additional_kwargs": {"tool_calls": [{"id": "t1", "function": {"name": "search"}}]},
    "blocks": [{"block_type": "text", "text": "Herons nest in colonies."}],
}


def _text(item: dict[str, Any]) -> str:
    return json.dumps(item, sort_keys=True)[:200]


def test_framework_messages_round_trip_equal(tmp_path: Path) -> None:
    native = [LANGCHAIN_AI, *OPENAI_ITEMS, LLAMAINDEX_MESSAGE]
    roles = ["assistant", "developer", "assistant", "assistant", "tool", "assistant", "assistant"]
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("a chat", key="thread-1")
        written = [
            mgr.add_message("thread-1", role, _text(item), payload=item)
            for role, item in zip(roles, native, strict=True)
        ]
        read = mgr.events("thread-1", kinds="message")
        assert [e.payload for e in read] == native
        assert [mgr.get_event(e.id).payload for e in written] == native
        assert [e.role for e in read] == roles
        # the rendering is what search finds
        assert mgr.search("heron nests", k=3, session_id=session.id)
    with StoreAdmin(tmp_path / "s.db") as admin:
        records = list(admin.export())
    with StoreAdmin(tmp_path / "copy.db") as admin:
        admin.import_records(records)
    with SessionManager("a", tmp_path / "copy.db", embedder=HashEmbedder()) as mgr:
        assert [e.payload for e in mgr.events("thread-1", kinds="message")] == native


def test_roles_of_every_framework_and_no_typos(tmp_path: Path) -> None:
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("roles")
        for role in ("developer", "function", "chatbot", "model", "autogen:critic"):
            assert mgr.add_message(session.id, role, f"said by {role}").role == role
        with pytest.raises(InvalidInput, match="namespaced role"):
            mgr.add_message(session.id, "usr", "a typo")
        assert len(mgr.events(session.id, kinds="message")) == 5  # the typo wrote nothing


# what a store keeps: no lone surrogates, no NUL (test_nul_is_refused_everywhere)
STORABLE = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(STORABLE),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(STORABLE, max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    item=st.dictionaries(st.text(STORABLE, min_size=1, max_size=8), JSON, min_size=1, max_size=5)
)
def test_any_json_object_round_trips(tmp_path: Path, item: dict[str, Any]) -> None:
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.session_for("t", goal="json")
        event = mgr.add_message(session.id, "user", "a native message", payload=item)
        assert mgr.get_event(event.id).payload == item
        assert json.dumps(mgr.get_event(event.id).payload, sort_keys=True) == json.dumps(
            item, sort_keys=True
        )


def test_restore_shows_a_messages_text_not_its_native_object(tmp_path: Path) -> None:
    """The native object is for the framework; a model reads the rendering (before: every
    stored item came back as a 'payload: {...}' line too, doubling a turn's tokens)."""
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("a chat")
        mgr.add_message(session.id, "assistant", "Let me look that up.", payload=LANGCHAIN_AI)
        text = mgr.restore(session.id, max_tokens=400).text
        assert "Let me look that up." in text
        assert "payload:" not in text and "usage_metadata" not in text


def test_nul_is_refused_everywhere(tmp_path: Path) -> None:
    """PostgreSQL cannot keep U+0000 in text or jsonb (psycopg raised a raw DataError): every
    backend refuses it at validation, naming where it is, and writes nothing."""
    nul = chr(0)
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("nul")
        for call in (
            lambda: mgr.add_message(session.id, "user", f"a{nul}b"),
            lambda: mgr.record_fact(session.id, "fine", metadata={"k": f"v{nul}"}),
            lambda: mgr.record_tool_output(session.id, {"out": [1, f"x{nul}"]}),
        ):
            with pytest.raises(InvalidInput, match="NUL"):
                call()
        assert len(mgr.events(session.id)) == 1


def test_restore_leaves_out_what_the_model_already_has(tmp_path: Path) -> None:
    """exclude_newest=N: a framework passing its latest N turns gets only the rest."""
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("plan a trip")
        mgr.record_fact(session.id, "the user is vegetarian")
        turns = [
            mgr.add_message(
                session.id, "user" if i % 2 == 0 else "assistant", f"turn {i} about Lisbon"
            )
            for i in range(6)
        ]
        full = mgr.restore(session.id, max_tokens=600)
        assert "turn 5 about Lisbon" in full.text
        trimmed = mgr.restore(session.id, max_tokens=600, exclude_newest=4, query="Lisbon")
        for i in (2, 3, 4, 5):
            assert f"turn {i} about" not in trimmed.text
        assert "turn 1 about Lisbon" in trimmed.text and "vegetarian" in trimmed.text
        assert "plan a trip" in trimmed.text  # the goal always stays
        by_id = mgr.restore(session.id, max_tokens=600, exclude=[turns[0].id], query="Lisbon")
        assert "turn 0 about" not in by_id.text and "turn 5 about Lisbon" in by_id.text
        with pytest.raises(InvalidInput, match="exclude_newest"):
            mgr.restore(session.id, max_tokens=600, exclude_newest=-1)
        with pytest.raises(InvalidInput, match="collection of event ids"):
            mgr.restore(session.id, max_tokens=600, exclude=turns[0].id)


def test_an_event_larger_than_the_limit_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """Issue 12: a 20 MB record cost the caller 15 s before the payload fast path and still
    costs ~1 s a 16 MB; past MAX_EVENT_CHARS the write path refuses, naming the fix."""
    from memlane.records.validate import MAX_EVENT_CHARS

    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("big outputs")
        with pytest.raises(InvalidInput, match=r"too large.*object store"):
            mgr.record_tool_output(session.id, "x" * (MAX_EVENT_CHARS + 1), tool="dump")
        with pytest.raises(InvalidInput, match="content and payload"):
            mgr.record_tool_output(session.id, {"rows": ["y" * 1024] * (MAX_EVENT_CHARS // 1024)})
        assert len(mgr.events(session.id)) == 1  # the goal only
        fits = mgr.record_tool_output(session.id, "z" * (MAX_EVENT_CHARS // 4), tool="dump")
        assert fits.content.startswith("zzz")
