"""SessionMemoryBlock and SessionChatStore against LlamaIndex itself: its Memory flushes old
turns into the block (once) and shows the block's restore; a chat engine on MockLLM runs on
them offline; Hypothesis-generated operation sequences give SessionChatStore the same results
as LlamaIndex's own SQLAlchemyChatStore; the event loop stays free."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import AsyncSessionManager, InvalidInput, SessionManager
from memlane.testing import HashEmbedder

from ..event_loop import LoopReport, watch_loop
from .conftest import framework

framework("llama_index.core", "llamaindex")
framework("aiosqlite", "llamaindex")  # the reference SQLAlchemyChatStore's driver

from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.chat_engine import SimpleChatEngine  # noqa: E402
from llama_index.core.llms.mock import MockLLM, MockLLMWithChatMemoryOfLastCall  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from llama_index.core.storage.chat_store.base_db import MessageStatus  # noqa: E402
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore  # noqa: E402
from pydantic import ValidationError  # noqa: E402
from sqlalchemy import select  # noqa: E402

from memlane.integrations.llamaindex import (  # noqa: E402
    SessionChatStore,
    SessionMemoryBlock,
)

ACTIVE, ARCHIVED = MessageStatus.ACTIVE, MessageStatus.ARCHIVED
_dbs = itertools.count()


def _manager(tmp_path: Path, **options: Any) -> AsyncSessionManager:
    return AsyncSessionManager(
        "assistant", tmp_path / f"m{next(_dbs)}.db", embedder=HashEmbedder(), **options
    )


def _turns(n: int, start: int = 0) -> list[ChatMessage]:
    topics = ["museums", "trains", "hotels", "bakeries", "rivers", "markets"]
    return [
        ChatMessage(
            role=MessageRole.USER if i % 2 == 0 else MessageRole.ASSISTANT,
            content=f"turn {i}: let us talk about the {topics[i % len(topics)]} of Lyon",
        )
        for i in range(start, start + n)
    ]


def _dumps(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [message.model_dump(mode="json") for message in messages]


# -- LlamaIndex's Memory over both pieces ----------------------------------------------------


def test_memory_flushes_into_the_block_once_and_shows_its_restore(tmp_path: Path) -> None:
    """Chat store and block share the conversation's key: the messages Memory flushes are
    already in that session, so the block keeps them rather than recording them twice."""

    async def scenario() -> None:
        manager = _manager(tmp_path)
        await manager.session_for("conv-1", goal="Plan a trip to Lyon")
        await manager.record_fact("conv-1", "The user is allergic to peanuts")
        store = SessionChatStore(manager)
        block = SessionMemoryBlock(manager, "conv-1", max_tokens=400)
        memory = Memory.from_defaults(
            session_id="conv-1",
            chat_store=store,
            memory_blocks=[block],
            token_limit=200,
            token_flush_size=40,
        )
        sent = _turns(16)
        for message in sent:
            await memory.aput(message)

        archived = await store.get_messages("conv-1", status=ARCHIVED)
        active = await store.get_messages("conv-1")
        assert archived and active, "Memory flushed nothing: raise the number of turns"
        assert archived + active == sent  # rebuilt equal, in order
        # each message is in the session once: the flushed ones kept by the block
        events = await manager.events("conv-1", kinds="message")
        assert [event.payload for event in events] == _dumps(sent)
        kept = [event for event in events if event.metadata.get("li_block") == block.name]
        assert [event.payload for event in kept] == _dumps(archived)
        assert all(event.metadata["li_session"] == "conv-1" for event in kept)

        # the block's restore (the fact) is in what Memory hands the model
        seen = await memory.aget(input="Is there any food I must avoid?")
        assert seen[0].role == MessageRole.SYSTEM
        assert "allergic to peanuts" in (seen[0].content or "")
        assert seen[1:] == active

        # reset empties the chat store; the block's long-term memory stays
        await memory.areset()
        assert await store.get_messages("conv-1", status=None) == []
        assert await store.get_keys() == []
        left = await manager.events("conv-1", kinds="message")
        assert [event.payload for event in left] == _dumps(archived)
        seen = await memory.aget(input="Which museums did we talk about?")
        assert "turn 0: let us talk about the museums" in (seen[0].content or "")
        await manager.close()

    asyncio.run(scenario())


def test_a_chat_engine_on_mockllm_remembers_across_conversations(tmp_path: Path) -> None:
    """The block has a key of its own (the user): flushed turns of every conversation are
    recorded there once, and a new conversation starts with them."""
    manager = _manager(tmp_path)
    manager.sync.session_for("user-42", goal="Help user 42 plan trips")
    manager.sync.record_fact("user-42", "The user is allergic to peanuts")
    store = SessionChatStore(manager)

    def engine(conversation: str, llm: MockLLM) -> tuple[SimpleChatEngine, Memory]:
        memory = Memory.from_defaults(
            session_id=conversation,
            chat_store=store,
            memory_blocks=[SessionMemoryBlock(manager, "user-42", max_tokens=600)],
            token_limit=150,
        )
        return SimpleChatEngine.from_defaults(llm=llm, memory=memory), memory

    llm = MockLLMWithChatMemoryOfLastCall(max_tokens=6)
    chat, memory = engine("trip-1", llm)
    questions = [f"question {i}: what about the bouchons of Lyon?" for i in range(8)]
    for question in questions:
        assert chat.chat(question).response == "text text text text text text"
    # the model saw the block's memory in its system message
    system = [m for m in llm.last_chat_messages or [] if m.role == MessageRole.SYSTEM]
    assert system and "allergic to peanuts" in (system[0].content or "")

    archived = memory.get_all(status=ARCHIVED)
    assert archived
    recorded = manager.sync.events("user-42", kinds="message")
    assert [event.payload for event in recorded] == _dumps(archived)  # each once, in order
    assert len(memory.get_all()) == len(questions) * 2  # the chat store keeps them all

    # a new conversation: the short-term queue is empty, long-term memory is not
    _, later = engine("trip-2", MockLLM(max_tokens=4))
    seen = later.get(input="Remind me: what did I ask about bouchons?")
    assert "question 0: what about the bouchons of Lyon?" in (seen[0].content or "")
    assert asyncio.run(store.get_keys()) == ["trip-1"]
    asyncio.run(manager.close())


def test_the_block_on_its_own(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        block = SessionMemoryBlock(manager=manager, key="notes", max_tokens=300, name="Notes")
        assert await block.aget([ChatMessage(role="user", content="hi")]) == ""
        assert await manager.list_sessions() == []  # reading created nothing

        with_goal = SessionMemoryBlock(manager, "goal-first", goal="Answer about herons")
        assert "Answer about herons" in await with_goal.aget([])

        # a plain _aput records verbatim (its Memory session id in metadata, not the message)
        tool_call = ChatMessage(
            role="assistant",
            content=None,
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q": "herons"}'},
                    }
                ]
            },
        )
        result = ChatMessage(
            role="tool",
            content="herons nest in colonies",
            additional_kwargs={"tool_call_id": "call_1"},
        )
        question = ChatMessage(role="user", content="Where do herons nest?")
        await block.aput(
            [question, tool_call, result], from_short_term_memory=True, session_id="conv-9"
        )
        assert tool_call.additional_kwargs.keys() == {"tool_calls"}  # not written into
        events = await manager.events("notes", kinds="message")
        assert [ChatMessage.model_validate(e.payload) for e in events] == [
            question,
            tool_call,
            result,
        ]
        assert [e.content for e in events] == [
            "Where do herons nest?",
            '[tool call search {"q": "herons"}]',
            "herons nest in colonies",
        ]
        assert {e.metadata["li_session"] for e in events} == {"conv-9"}
        # restore's chat view pairs the tool call with its result
        restored = await manager.restore("notes", 500)
        roles = [(m["role"], m.get("tool_call_id")) for m in restored.messages[1:]]
        assert roles == [("user", None), ("assistant", None), ("tool", "call_1")]

        # not accepting short-term memory: a flush is ignored, a direct put is not
        closed = SessionMemoryBlock(manager, "closed", accept_short_term_memory=False)
        await closed.aput([question], from_short_term_memory=True)
        assert await closed.aget([]) == ""
        await manager.close()

    asyncio.run(scenario())


def test_atruncate_restores_within_the_smaller_budget(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        block = SessionMemoryBlock(manager, "long", max_tokens=800, goal="Read about birds")
        await manager.session_for("long", goal="Read about birds")
        for i in range(60):
            await manager.record_fact("long", f"bird fact {i}: the heron number {i} eats fish")
        question = [ChatMessage(role="user", content="what do herons eat?")]
        full = await block.aget(question)
        whole = (await manager.restore("long", 800, query="what do herons eat?")).token_count
        assert whole > 400
        shorter = await block.atruncate(full, 400)
        assert shorter is not None and len(shorter) < len(full)
        assert (await manager.restore("long", whole - 400, query="what do herons eat?")).text == (
            shorter
        )
        assert await block.atruncate(full, whole - 10) is None  # too little left to be useful
        assert await block.atruncate("not something this block returned", 10) is None
        await manager.close()

    asyncio.run(scenario())


def test_memory_truncates_the_block_by_priority(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        await manager.session_for("big", goal="Remember many things")
        for i in range(80):
            await manager.record_fact("big", f"fact {i}: the kingfisher dives for fish number {i}")
        block = SessionMemoryBlock(manager, "big", max_tokens=3000)
        memory = Memory.from_defaults(
            session_id="conv", chat_store=SessionChatStore(manager), memory_blocks=[block]
        )
        memory.token_limit = 600
        await memory.aput(ChatMessage(role="user", content="what do kingfishers do?"))
        seen = await memory.aget()
        shown = len(memory.tokenizer_fn(seen[0].content or ""))
        assert 100 < shown < 600  # truncated to fit, not dropped
        await manager.close()

    asyncio.run(scenario())


def test_constructors_say_what_they_need(tmp_path: Path) -> None:
    manager = SessionManager("a", tmp_path / "sync.db", embedder=HashEmbedder())
    with pytest.raises(ValidationError, match="AsyncSessionManager"):
        SessionChatStore(manager)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="AsyncSessionManager"):
        SessionMemoryBlock(manager, "k")  # type: ignore[arg-type]
    manager.close()


# -- SessionChatStore's own behaviours -------------------------------------------------------


def test_chat_store_keys_reads_and_deletes(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        store = SessionChatStore(manager, goal="Chat {key}")
        assert await store.get_messages("nobody") == []
        assert await store.count_messages("nobody", status=None) == 0
        assert await store.delete_message("nobody", 0) is None
        assert await store.delete_oldest_messages("nobody", 3) == []
        await store.delete_messages("nobody")
        await store.set_messages("nobody", [])
        assert await manager.list_sessions() == []  # no reads or empty writes create sessions

        await manager.session_for("facts-only", goal="Only facts here")
        await manager.record_fact("facts-only", "a fact, not a chat message")
        await manager.add_message("facts-only", "user", "a message of someone else's")
        turns = _turns(4)
        await store.add_messages("k1", turns)
        assert (await manager.get_session("k1")).goal == "Chat k1"
        assert await store.get_keys() == ["k1"]  # sessions without chat-store messages: no
        assert await store.get_messages("facts-only", status=None) == []

        assert await store.delete_message("k1", 1) == turns[1]
        assert await store.delete_message("k1", 9) is None
        assert await store.delete_message("k1", -1) is None
        assert await store.get_messages("k1") == [turns[0], turns[2], turns[3]]
        assert await store.archive_oldest_messages("k1", 1) == [turns[0]]
        assert await store.get_messages("k1", limit=1, offset=1) == [turns[3]]
        assert await store.get_messages("k1", status=None) == [turns[0], turns[2], turns[3]]
        await store.delete_messages("k1", status=ACTIVE)
        assert await store.get_messages("k1", status=None) == [turns[0]]
        await store.delete_messages("k1")
        assert await store.get_keys() == []
        # the chat store only ever deleted its own messages
        assert len(await manager.events("facts-only", kinds=["fact", "message"])) == 2
        await manager.close()

    asyncio.run(scenario())


def test_chat_store_messages_are_events_that_search_finds(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        store = SessionChatStore(manager)
        image = ChatMessage(
            role="user",
            blocks=[
                TextBlock(text="what bird is this?"),
                ImageBlock(url="https://example.com/heron.png"),
                ThinkingBlock(content="private reasoning"),
            ],
        )
        await store.add_message("k", image)
        await store.add_message("k", ChatMessage(role="assistant", content="a grey heron"))
        await store.add_message("k", ChatMessage(role="assistant", content="   "))
        events = await manager.events("k", kinds="message")
        assert [e.content for e in events] == [
            "what bird is this?\n[image: https://example.com/heron.png]",
            "a grey heron",
            "[assistant message]",
        ]
        assert [e.metadata["role"] for e in events] == ["user", "assistant", "assistant"]
        hits = await manager.search("grey heron", k=1, session_id="k", kinds="message")
        assert hits[0].event.payload == (await store.get_messages("k"))[1].model_dump(mode="json")
        await manager.close()

    asyncio.run(scenario())


def test_set_messages_keeps_what_a_block_keeps(tmp_path: Path) -> None:
    """Memory.set / reset replace the chat store's messages; the ones a block took into
    long-term memory leave the chat store but stay in the session."""

    async def scenario() -> None:
        manager = _manager(tmp_path)
        store = SessionChatStore(manager)
        block = SessionMemoryBlock(manager, "conv")
        turns = _turns(4)
        await store.add_messages("conv", turns)
        flushed = await store.archive_oldest_messages("conv", 2)
        await block.aput(flushed, from_short_term_memory=True, session_id="conv")
        await block.aput(flushed[:1])  # not in the chat store any more: recorded anew
        new = _turns(1, start=10)
        await store.set_messages("conv", new)
        assert await store.get_messages("conv", status=None) == new
        events = await manager.events("conv", kinds="message")
        assert [e.payload for e in events] == _dumps([*flushed, flushed[0], *new])
        await manager.close()

    asyncio.run(scenario())


def test_repeated_identical_messages_are_each_kept_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        store = SessionChatStore(manager)
        block = SessionMemoryBlock(manager, "conv")
        ok = ChatMessage(role="user", content="ok")
        await store.add_messages("conv", [ok, ok, ok])
        for _ in range(2):
            flushed = await store.archive_oldest_messages("conv", 1)
            await block.aput(flushed, from_short_term_memory=True, session_id="conv")
        events = await manager.events("conv", kinds="message")
        assert len(events) == 3
        assert [e.metadata.get("li_block") for e in events] == [block.name, block.name, None]
        await manager.close()

    asyncio.run(scenario())


def test_a_message_the_store_cannot_keep_is_refused_whole(tmp_path: Path) -> None:
    """NUL is refused by every backend (tests/test_messages.py), so a batch holding it is
    refused whole: not even the message before it is kept. (Before issue 29 this test also
    passed if the store kept NUL.)"""

    async def scenario() -> None:
        manager = _manager(tmp_path)
        store = SessionChatStore(manager)
        fine = ChatMessage(role="user", content="fine")
        nul = ChatMessage(role="user", content="before\x00after")
        with pytest.raises(InvalidInput, match="NUL"):
            await store.add_messages("k", [fine, nul])
        assert await store.get_messages("k", status=None) == []  # not even the first
        await store.add_messages("k", [fine])  # the store itself is fine
        assert await store.get_messages("k") == [fine]
        await manager.close()

    asyncio.run(scenario())


# -- differential: SessionChatStore against LlamaIndex's SQLAlchemyChatStore ----------------

ROLES = st.sampled_from(list(MessageRole))
# what a store keeps: no lone surrogates, no NUL (refused everywhere, tests/test_messages.py)
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-1000, 1000), TEXT, st.floats(allow_nan=False)
)
TOOL_CALL = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["call_1", "call_2"]),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["search", "add"]),
                "arguments": st.sampled_from(["{}", '{"q": "herons"}', '{"a": 1, "b": 2}']),
            }
        ),
    }
)
ADDITIONAL_KWARGS = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"tool_calls": st.lists(TOOL_CALL, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"tool_call_id": st.sampled_from(["call_1", "call_2"])}),
    st.dictionaries(st.sampled_from(["x", "y", "name"]), JSON_SCALARS, max_size=2),
)
BLOCKS = st.lists(
    st.one_of(
        TEXT.map(lambda text: TextBlock(text=text)),
        st.builds(
            ToolCallBlock,
            tool_name=st.sampled_from(["search", "add"]),
            tool_kwargs=st.dictionaries(st.sampled_from(["q", "n"]), JSON_SCALARS, max_size=2),
            tool_call_id=st.one_of(st.none(), st.sampled_from(["call_1", "call_2"])),
        ),
        st.just(ImageBlock(url="https://example.com/heron.png")),
        st.builds(ThinkingBlock, content=st.one_of(st.none(), TEXT)),
    ),
    max_size=3,
)
MESSAGES = st.one_of(
    st.builds(
        lambda role, text, kwargs: ChatMessage(role=role, content=text, additional_kwargs=kwargs),
        ROLES,
        st.one_of(st.none(), TEXT),
        ADDITIONAL_KWARGS,
    ),
    st.builds(
        lambda role, blocks, kwargs: ChatMessage(
            role=role, blocks=blocks, additional_kwargs=kwargs
        ),
        ROLES,
        BLOCKS,
        ADDITIONAL_KWARGS,
    ),
)
KEYS = st.sampled_from(["k1", "k2"])
STATUSES = st.sampled_from([ACTIVE, ARCHIVED])
SOME_STATUS = st.one_of(st.none(), STATUSES)
SMALL = st.one_of(st.none(), st.integers(0, 4))
OPERATIONS = st.one_of(
    st.tuples(st.just("add"), KEYS, MESSAGES, STATUSES),
    # (SQLAlchemyChatStore.add_messages([]) fails on its NOT NULL key: lists of one or more)
    st.tuples(st.just("add_many"), KEYS, st.lists(MESSAGES, min_size=1, max_size=3), STATUSES),
    st.tuples(st.just("set"), KEYS, st.lists(MESSAGES, max_size=3), STATUSES),
    st.tuples(st.just("get"), KEYS, SOME_STATUS, SMALL, SMALL),
    st.tuples(st.just("count"), KEYS, SOME_STATUS),
    st.tuples(st.just("delete_message"), KEYS, st.integers(-1, 5)),
    st.tuples(st.just("delete_messages"), KEYS, SOME_STATUS),
    st.tuples(st.just("delete_oldest"), KEYS, st.integers(0, 3)),
    st.tuples(st.just("archive_oldest"), KEYS, st.integers(0, 3)),
    st.tuples(st.just("keys")),
)


async def _row_id(reference: SQLAlchemyChatStore, key: str, position: int) -> int:
    """The reference's row id of the key's message at ``position`` (in get_messages(key,
    None) order): what its delete_message takes where ours takes the position."""
    factory, table = await reference._initialize()
    async with factory() as session:
        query = select(table.c.id).where(table.c.key == key)
        rows = (await session.execute(query.order_by(table.c.timestamp, table.c.id))).all()
    return int(rows[position][0]) if 0 <= position < len(rows) else -1


async def _apply(store: Any, op: tuple[Any, ...], reference: SQLAlchemyChatStore | None) -> Any:
    name, *args = op
    if name == "add":
        return await store.add_message(args[0], args[1], status=args[2])
    if name == "add_many":
        return await store.add_messages(args[0], args[1], status=args[2])
    if name == "set":
        return await store.set_messages(args[0], args[1], status=args[2])
    if name == "get":
        return await store.get_messages(args[0], status=args[1], limit=args[2], offset=args[3])
    if name == "count":
        return await store.count_messages(args[0], status=args[1])
    if name == "delete_message":
        key, position = args
        target = position if reference is None else await _row_id(reference, key, position)
        return await store.delete_message(key, target)
    if name == "delete_messages":
        return await store.delete_messages(args[0], status=args[1])
    if name == "delete_oldest":
        return await store.delete_oldest_messages(args[0], args[1])
    if name == "archive_oldest":
        return await store.archive_oldest_messages(args[0], args[1])
    assert name == "keys"
    return sorted(await store.get_keys())  # SQL's DISTINCT has no order


async def _differential(
    tmp_path: Path, manager: AsyncSessionManager, ops: list[tuple[Any, ...]]
) -> None:
    ours = SessionChatStore(manager)
    uri = f"sqlite+aiosqlite:///{tmp_path / f'ref{next(_dbs)}.db'}"
    reference = SQLAlchemyChatStore(table_name="messages", async_database_uri=uri)
    try:
        for step, op in enumerate(ops):
            expected = await _apply(reference, op, reference)
            got = await _apply(ours, op, None)
            assert got == expected, f"step {step}: {op[0]}"
        for key in ("k1", "k2"):
            for status in (None, ACTIVE, ARCHIVED):
                assert await ours.get_messages(key, status=status) == (
                    await reference.get_messages(key, status=status)
                )
    finally:
        if reference._async_engine is not None:
            await reference._async_engine.dispose()


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPERATIONS, max_size=14))
def test_same_results_as_llamaindex_sqlalchemy_chat_store(
    tmp_path: Path, ops: list[tuple[Any, ...]]
) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path, background=False)
        try:
            await _differential(tmp_path, manager, ops)
        finally:
            await manager.close()

    asyncio.run(scenario())


@pytest.mark.postgres
def test_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    ops: list[tuple[Any, ...]] = [
        ("add_many", "k1", _turns(3), ACTIVE),
        ("add", "k2", ChatMessage(role="tool", content="42", additional_kwargs={"x": 1}), ACTIVE),
        ("archive_oldest", "k1", 2),
        ("get", "k1", None, None, None),
        ("delete_message", "k1", 1),
        ("count", "k1", ARCHIVED),
        ("keys",),
        ("set", "k2", _turns(2, start=5), ARCHIVED),
        ("delete_oldest", "k1", 1),
        ("get", "k2", ARCHIVED, 1, 1),
        ("keys",),
    ]

    async def scenario(url: str) -> None:
        joiner = "&" if "?" in url else "?"
        manager = AsyncSessionManager(
            "assistant", url=f"{url}{joiner}schema=llamaindex_{next(_dbs)}", embedder=HashEmbedder()
        )
        try:
            await _differential(tmp_path, manager, ops)
            block = SessionMemoryBlock(manager, "k1", max_tokens=300)
            await block.aput(_turns(2, start=20))
            assert "turn 20" in await block.aget([ChatMessage(role="user", content="turn 20?")])
        finally:
            await manager.close()

    asyncio.run(scenario(postgres_url))


# -- the event loop stays free -----------------------------------------------------------------


def test_the_block_keeps_the_event_loop_free(tmp_path: Path) -> None:
    async def scenario() -> LoopReport:
        manager = _manager(tmp_path)
        store = SessionChatStore(manager)
        await store.add_messages("big", _turns(300))
        for i in range(100):
            await manager.record_fact("big", f"fact {i} about topic {i % 7}")
        block = SessionMemoryBlock(manager, "big", max_tokens=2000)

        async def work() -> None:
            for _ in range(3):
                flushed = await store.archive_oldest_messages("big", 10)
                await block.aput(flushed, from_short_term_memory=True, session_id="big")
                await block.aget([ChatMessage(role="user", content="topic 3 and the markets")])

        report = await watch_loop(work)
        kept = await manager.events("big", kinds="message", where={"li_block": block.name})
        assert len(kept) == 30
        await manager.close()
        return report

    asyncio.run(scenario()).assert_free()


def test_the_block_leaves_out_what_short_term_memory_carries(tmp_path: Path) -> None:
    """The messages Memory passes the block (its short-term queue) reach the model anyway:
    the block's restore leaves them out, and keeps what they do not carry."""

    async def scenario() -> None:
        manager = _manager(tmp_path)
        store = SessionChatStore(manager)
        block = SessionMemoryBlock(manager, key="chat")
        turns = _turns(4)
        await store.add_messages("chat", turns)
        await manager.record_fact("chat", "the user's dog is called Rex")
        everything = await block._aget(messages=[])
        assert all(turn.content in everything for turn in turns)
        carried = await block._aget(messages=turns[2:])
        assert turns[0].content in carried and "Rex" in carried
        assert turns[2].content not in carried and turns[3].content not in carried
        await manager.close()

    asyncio.run(scenario())


def test_a_conversation_through_the_chat_store_forms_a_fact(tmp_path: Path) -> None:
    """extractor= on the manager is all the chat store needs: the user's message it stored
    becomes a fact of the session's user, and the memory block's restore shows it."""

    async def scenario() -> None:
        manager = _manager(tmp_path, background=False, extractor="rules")
        await manager.session_for("trip", goal="Help the user", user_id="u7")
        block = SessionMemoryBlock(manager, "trip", max_tokens=500)
        memory = Memory.from_defaults(
            session_id="trip", chat_store=SessionChatStore(manager), memory_blocks=[block]
        )
        chat = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=4), memory=memory)
        await chat.achat("I moved to Porto last month.")
        await manager.flush()  # runs the extraction stage now
        assert [f.text for f in await manager.facts("u7")] == ["Lives in Porto"]
        shown = await block._aget()
        assert "Lives in Porto" in shown
        await manager.close()

    asyncio.run(scenario())
