"""AgentSession against the OpenAI Agents SDK itself: the same operations give the same results
as the SDK's own SQLiteSession, the SDK's Runner runs on it (with the SDK's scripted model,
offline) through a tool call, restore_filter reaches the model's instructions, and the event
loop never waits on the store."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import AsyncSessionManager, InvalidInput, SessionManager
from memlane.testing import HashEmbedder

from ..event_loop import LoopReport, watch_loop
from .conftest import framework

agents = framework("agents", "openai-agents")

from agents import Agent, RunConfig, Runner, function_tool  # noqa: E402
from agents.memory import Session, SessionSettings, SQLiteSession  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from memlane.integrations.openai_agents import (  # noqa: E402
    ITEM_TYPE,
    AgentSession,
    restore_filter,
)

_keys = itertools.count()
OFFLINE = RunConfig(tracing_disabled=True)  # the SDK would otherwise export traces to OpenAI


def _key() -> str:
    return f"thread-{next(_keys)}"


@pytest.fixture
def mgr(tmp_path: Path) -> Iterator[AsyncSessionManager]:
    manager = AsyncSessionManager(
        "assistant", tmp_path / "sessions.db", embedder=HashEmbedder(), background=False
    )
    yield manager
    asyncio.run(manager.close())


# -- realistic Responses API items ---------------------------------------------------------------

# what a store keeps: valid UTF-8 without NUL (refused on every backend, test_messages.py)
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
WORDS = st.sampled_from(["weather in Paris", "", "  ", "héron nests", "42", "a\nb"])
ANY_TEXT = st.one_of(WORDS, TEXT)
CALL_IDS = st.sampled_from(["call_1", "call_2", "call_3"])


def _user(text: str, as_parts: bool) -> dict[str, Any]:
    if as_parts:
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
    return {"role": "user", "content": text}


def _assistant(text: str, item_id: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }


def _output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _reasoning(summary: list[str], encrypted: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if encrypted:
        item["encrypted_content"] = "gAAAA..."
    return item


MESSAGES = st.one_of(
    st.builds(_user, ANY_TEXT, st.booleans()),
    st.builds(_assistant, ANY_TEXT, st.sampled_from(["msg_1", "msg_2"])),
    st.builds(
        lambda role, text: {"role": role, "content": text},
        st.sampled_from(["system", "developer"]),
        ANY_TEXT,
    ),
    st.builds(_reasoning, st.lists(ANY_TEXT, max_size=2), st.booleans()),
)
CALL_PAIRS = st.builds(
    lambda call_id, city, out: [_call(call_id, "lookup", {"city": city}), _output(call_id, out)],
    CALL_IDS,
    TEXT,
    ANY_TEXT,
)
BATCHES = st.lists(st.one_of(MESSAGES.map(lambda item: [item]), CALL_PAIRS), max_size=3).map(
    lambda groups: [item for group in groups for item in group]
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), BATCHES),
        st.tuples(st.just("get"), st.one_of(st.none(), st.integers(-1, 8))),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=20,
)


async def _apply(session: Any, op: str, arg: Any) -> Any:
    if op == "add":
        return await session.add_items(arg)
    if op == "get":
        return await session.get_items(arg)
    if op == "pop":
        return await session.pop_item()
    return await session.clear_session()


async def _both(ours: AgentSession, reference: SQLiteSession, ops: list[Any]) -> None:
    for op, arg in ops:
        assert await _apply(ours, op, arg) == await _apply(reference, op, arg), (op, arg)
    assert await ours.get_items() == await reference.get_items()


# -- differential: the same operations on AgentSession and the SDK's SQLiteSession ---------------


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_same_operations_same_results_as_sqlite_session(
    mgr: AsyncSessionManager, ops: list[Any]
) -> None:
    key = _key()
    reference = SQLiteSession(key)
    try:
        asyncio.run(_both(AgentSession(mgr, key), reference, ops))
    finally:
        reference.close()


def test_a_sync_session_manager_works_too(tmp_path: Path) -> None:
    with SessionManager("assistant", tmp_path / "s.db", embedder=HashEmbedder()) as sync:
        key = _key()
        reference = SQLiteSession(key)
        ops = [
            ("add", [_user("hi", False), *[_call("c", "f", {}), _output("c", "ok")]]),
            ("get", 2),
            ("pop", None),
            ("get", None),
        ]
        asyncio.run(_both(AgentSession(sync, key), reference, ops))
        reference.close()


def test_session_settings_limit_applies_when_no_limit_is_given(mgr: AsyncSessionManager) -> None:
    items = [_user(f"turn {i}", False) for i in range(5)]

    async def run() -> None:
        ours = AgentSession(mgr, _key(), session_settings=SessionSettings(limit=2))
        await ours.add_items(items)
        assert await ours.get_items() == items[-2:]
        assert await ours.get_items(limit=3) == items[-3:]  # an explicit limit wins

    asyncio.run(run())


def test_it_is_an_sdk_session_and_reads_create_nothing(mgr: AsyncSessionManager) -> None:
    async def run() -> None:
        session = AgentSession(mgr, "never-written")
        assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
        assert await session.get_items() == [] and await session.get_items(3) == []
        assert await session.pop_item() is None
        await session.clear_session()
        assert await mgr.list_sessions() == []

    asyncio.run(run())


# -- how items are stored ------------------------------------------------------------------------


def test_items_are_stored_verbatim_with_a_readable_text_and_role(mgr: AsyncSessionManager) -> None:
    key = _key()
    items = [
        _user("Weather in Paris?", True),
        _reasoning([], encrypted=True),
        _call("call_1", "lookup", {"city": "Paris"}),
        _output("call_1", "sunny, 21C"),
        _assistant("It is sunny.", "msg_1"),
    ]

    async def run() -> None:
        await AgentSession(mgr, key).add_items(items)
        events = await mgr.events(key, kinds="message")
        assert [e.payload for e in events] == items
        assert [(e.role, e.content) for e in events] == [
            ("user", "Weather in Paris?"),
            ("assistant", "reasoning"),  # no words of its own: its type
            ("assistant", 'lookup({"city": "Paris"})'),
            ("tool", "sunny, 21C"),
            ("assistant", "It is sunny."),
        ]
        assert [e.metadata[ITEM_TYPE] for e in events] == [
            "message", "reasoning", "function_call", "function_call_output", "message"
        ]  # fmt: skip
        assert not events[1].indexed  # nothing to search in an encrypted reasoning item
        assert events[2].metadata["tool"] == "lookup"
        assert events[3].metadata["tool_call_id"] == "call_1"
        # restore's chat view keeps the call and its output together, as chat messages
        turns = (await mgr.restore(key, max_tokens=2000)).turns
        assert [turn["role"] for turn in turns] == ["user", *["assistant"] * 2, "tool", "assistant"]
        assert turns[2]["tool_calls"][0]["id"] == "call_1" == turns[3]["tool_call_id"]

    asyncio.run(run())


def test_messages_recorded_by_other_code_read_back_as_easy_messages(
    mgr: AsyncSessionManager,
) -> None:
    key = _key()

    async def run() -> None:
        session = AgentSession(mgr, key)
        await session.add_items([_user("hello", False)])
        await mgr.add_message(key, "assistant", "recorded directly")
        await mgr.record_fact(key, "facts are not items")
        assert await session.get_items() == [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "recorded directly"},
        ]

    asyncio.run(run())


def test_a_bad_item_writes_nothing_and_bad_arguments_say_what_to_do(
    mgr: AsyncSessionManager,
) -> None:
    async def run() -> None:
        session = AgentSession(mgr, _key())
        with pytest.raises(InvalidInput, match="not a Responses API item"):
            await session.add_items([_user("fine", False), "not a dict"])  # type: ignore[list-item]
        with pytest.raises(InvalidInput, match="NaN"):
            await session.add_items([_user("fine", False), {"role": "user", "x": float("nan")}])
        assert await session.get_items() == []
        with pytest.raises(InvalidInput, match="limit"):
            await session.get_items("3")  # type: ignore[arg-type]

    asyncio.run(run())
    with pytest.raises(InvalidInput, match="AsyncSessionManager"):
        AgentSession("sessions.db", "t1")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="session_id"):
        AgentSession(mgr, " padded ")
    with pytest.raises(InvalidInput, match="SessionSettings"):
        AgentSession(mgr, "t1", session_settings={"limit": 2})
    with pytest.raises(InvalidInput, match="max_tokens"):
        restore_filter(mgr, "t1", max_tokens="2000")  # type: ignore[arg-type]


def test_order_survives_a_clock_stepped_back(
    mgr: AsyncSessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime as real

    from memlane.integrations import openai_agents

    class Past(real.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Past:  # type: ignore[override]
            return cls(2001, 1, 1, tzinfo=real.timezone.utc)

    async def run() -> None:
        session = AgentSession(mgr, _key())
        await session.add_items([_user("first", False)])
        monkeypatch.setattr(openai_agents, "datetime", Past)
        await session.add_items([_user("second", False), _user("third", False)])
        assert [item["content"] for item in await session.get_items()] == [
            "first", "second", "third"
        ]  # fmt: skip

    asyncio.run(run())


# -- whole_tool_calls: a limit that never splits a call from its output --------------------------


def test_whole_tool_calls_reaches_back_to_cut_off_calls(mgr: AsyncSessionManager) -> None:
    items = [
        _user("compare Paris and Rome", False),
        _reasoning(["two lookups"], encrypted=False),
        _call("call_1", "lookup", {"city": "Paris"}),
        _call("call_2", "lookup", {"city": "Rome"}),
        _output("call_1", "sunny"),
        _output("call_2", "rain"),
        _assistant("Paris is sunnier.", "msg_1"),
    ]

    async def run() -> None:
        key = _key()
        exact, whole = AgentSession(mgr, key), AgentSession(mgr, key, whole_tool_calls=True)
        await exact.add_items(items)
        assert await exact.get_items(2) == items[-2:]  # the SDK's contract: exactly 2
        # output 2 needs call 2, which brings output 1, which needs call 1 and its reasoning
        assert await whole.get_items(2) == items[1:]
        assert await whole.get_items(1) == items[-1:]  # nothing cut: exactly as asked
        assert await whole.get_items(4) == items[1:]
        assert await whole.get_items(20) == items

    asyncio.run(run())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(BATCHES, max_size=6), limit=st.integers(1, 10))
def test_whole_tool_calls_gives_the_shortest_unsplit_tail(
    mgr: AsyncSessionManager, batches: list[list[dict[str, Any]]], limit: int
) -> None:
    async def run() -> None:
        session = AgentSession(mgr, _key(), whole_tool_calls=True)
        for batch in batches:
            await session.add_items(batch)
        everything = await session.get_items()
        got = await session.get_items(limit)
        assert got == everything[len(everything) - len(got) :]  # a tail
        assert len(got) >= min(limit, len(everything))
        calls = {item["call_id"] for item in got if item.get("type") == "function_call"}
        everywhere = {item["call_id"] for item in everything if item.get("type") == "function_call"}
        for item in got:
            if item.get("type") == "function_call_output" and item["call_id"] in everywhere:
                assert item["call_id"] in calls
        exact = everything[-limit:]
        if all(_paired(item, exact, everything) for item in exact):
            assert got == exact  # where nothing is cut, exactly the SDK's answer

    asyncio.run(run())


def _paired(item: dict[str, Any], tail: list[Any], everything: list[Any]) -> bool:
    if item.get("type") != "function_call_output":
        return True
    call_id = item["call_id"]
    in_tail = any(i.get("type") == "function_call" and i["call_id"] == call_id for i in tail)
    anywhere = any(i.get("type") == "function_call" and i["call_id"] == call_id for i in everything)
    return in_tail or not anywhere


# -- the SDK's Runner, offline -------------------------------------------------------------------


@function_tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, 21C, light breeze"


def test_runner_runs_twice_through_a_tool_call(mgr: AsyncSessionManager) -> None:
    key = _key()
    model = ScriptedModel(
        [
            [function_call("lookup", {"city": "Paris"}, call_id="call_1")],
            [assistant_message("It is sunny in Paris.")],
            [assistant_message("Still sunny tomorrow.")],
        ]
    )
    agent = Agent(name="weather", instructions="Be brief.", model=model, tools=[lookup])

    async def run() -> None:
        session = AgentSession(mgr, key)
        first = await Runner.run(agent, "Weather in Paris?", session=session, run_config=OFFLINE)
        assert first.final_output == "It is sunny in Paris."
        second = await Runner.run(agent, "And tomorrow?", session=session, run_config=OFFLINE)
        assert second.final_output == "Still sunny tomorrow."
        seen = model.calls[2].input  # the second run's model call sees the first run's items
        assert [item.get("type", "message") for item in seen] == [
            "message", "function_call", "function_call_output", "message", "message"
        ]  # fmt: skip
        assert seen[2]["output"] == "sunny in Paris, 21C, light breeze"
        stored = await session.get_items()  # every item of both runs, verbatim
        assert stored[:5] == seen and stored[5]["content"][0]["text"] == "Still sunny tomorrow."
        assert len(stored) == 6
        hits = await mgr.search("light breeze", k=1, session_id=key)
        assert hits and hits[0].event.metadata[ITEM_TYPE] == "function_call_output"
        assert model.remaining_steps == 0

    asyncio.run(run())


def test_restore_filter_puts_restored_context_into_the_instructions(
    mgr: AsyncSessionManager,
) -> None:
    key = _key()
    model = ScriptedModel([[assistant_message("Miso, of course.")]])
    agent = Agent(name="pets", instructions="Be brief.", model=model)
    config = RunConfig(
        tracing_disabled=True, call_model_input_filter=restore_filter(mgr, key, max_tokens=400)
    )

    async def run() -> None:
        session = AgentSession(mgr, key, session_settings=SessionSettings(limit=2))
        await session.add_items([_user("My cat is called Miso.", False), _assistant("Noted.", "m")])
        await session.add_items([_user(f"filler turn {i}", False) for i in range(6)])
        await mgr.record_fact(key, "The user's cat is an orange tabby")
        await Runner.run(agent, "What is my cat called?", session=session, run_config=config)
        received = model.calls[0]
        assert received.system_instructions.startswith("Be brief.\n\n")
        assert "Miso" in received.system_instructions  # restored, though cut by the limit
        assert "orange tabby" in received.system_instructions  # other events too
        assert all("Miso" not in json.dumps(item) for item in received.input)
        # the last items the model input carries verbatim are not restored a second time
        assert "filler turn 5" in json.dumps(received.input)
        assert "filler turn 5" not in received.system_instructions
        assert "filler turn 1" in received.system_instructions  # older than the limit: restored

    asyncio.run(run())


def test_restore_filter_creates_the_session_it_restores(mgr: AsyncSessionManager) -> None:
    model = ScriptedModel([[assistant_message("Hello.")]])
    agent = Agent(name="a", model=model)  # no instructions of its own
    config = RunConfig(tracing_disabled=True, call_model_input_filter=restore_filter(mgr, "new"))

    async def run() -> None:
        await Runner.run(agent, "hi", run_config=config)
        assert "OpenAI Agents session new" in (model.calls[0].system_instructions or "")

    asyncio.run(run())


# -- the event loop never waits on the store -----------------------------------------------------


def test_async_methods_never_block_the_event_loop(mgr: AsyncSessionManager) -> None:
    key = _key()
    items = [item for i in range(100) for item in (
        _user(f"question {i}", False),
        _call(f"call_{i}", "lookup", {"city": f"city {i}"}),
        _output(f"call_{i}", f"answer {i}"),
    )]  # fmt: skip

    async def run() -> LoopReport:
        session = AgentSession(mgr, key, whole_tool_calls=True)
        await session.add_items(items)

        async def work() -> None:
            for i in range(5):
                assert len(await session.get_items()) == 300 + 20 * i
                assert len(await session.get_items(50)) >= 50
                await session.add_items([_user(f"more {i}.{j}", False) for j in range(20)])

        return await watch_loop(work)

    asyncio.run(run()).assert_free()


# -- PostgreSQL ----------------------------------------------------------------------------------


@pytest.mark.postgres
def test_same_results_as_sqlite_session_on_postgresql(postgres_url: str) -> None:
    ops: list[Any] = [
        ("add", [_user("Weather in Paris?", True), _reasoning(["look it up"], False)]),
        ("add", [_call("call_1", "lookup", {"city": "Paris"}), _output("call_1", "sunny")]),
        ("add", [_assistant("Sunny.", "msg_1")]),
        ("get", 2),
        ("get", None),
        ("pop", None),
        ("get", 3),
        ("add", [{"role": "developer", "content": "Answer in French."}]),
        ("get", -1),
        ("clear", None),
        ("get", None),
        ("add", [_user("encore", False)]),
    ]
    url = postgres_url
    joiner = "&" if "?" in url else "?"
    manager = AsyncSessionManager(
        "assistant", url=f"{url}{joiner}schema=openai_agents_{next(_keys)}",
        embedder=HashEmbedder(),
    )  # fmt: skip
    reference = SQLiteSession("thread-pg")
    try:
        asyncio.run(_both(AgentSession(manager, "thread-pg"), reference, ops))
    finally:
        reference.close()
        asyncio.run(manager.close())


def test_a_conversation_through_the_session_forms_a_fact(tmp_path: Path) -> None:
    """extractor= on the manager is all the session needs: the user's input the runner
    stored becomes a fact of the session's user, and restore_filter shows it next turn."""

    async def scenario() -> None:
        async with AsyncSessionManager(
            "assistant",
            tmp_path / "x.db",
            embedder=HashEmbedder(),
            background=False,
            extractor="rules",
        ) as manager:
            await manager.session_for("thread-7", goal="Help the user", user_id="u7")
            model = ScriptedModel(
                [[assistant_message("Welcome!")], [assistant_message("Try the tascas.")]]
            )
            agent = Agent(name="assistant", instructions="Be brief.", model=model)
            session = AgentSession(manager, "thread-7")
            config = RunConfig(
                call_model_input_filter=restore_filter(manager, "thread-7", max_tokens=800),
                tracing_disabled=True,
            )
            await Runner.run(
                agent, "I moved to Porto last month.", session=session, run_config=config
            )
            await manager.flush()  # runs the extraction stage now
            assert [f.text for f in await manager.facts("u7")] == ["Lives in Porto"]
            await Runner.run(agent, "Where to eat?", session=session, run_config=config)
            assert "Lives in Porto" in (model.calls[-1].system_instructions or "")

    asyncio.run(scenario())
