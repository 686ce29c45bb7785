"""SessionMemory against AutoGen itself: an AssistantAgent with AutoGen's replay chat client
(offline) gets restored memory in its model context; add / query / clear / components."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from memlane import AsyncSessionManager, EmbedderMismatch, InvalidInput
from memlane.testing import HashEmbedder

from ..event_loop import LoopReport, watch_loop
from .conftest import framework

framework("autogen_core.memory", "autogen")
framework("autogen_agentchat", "autogen")
framework("autogen_ext.models.replay", "autogen")

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_core import Image  # noqa: E402
from autogen_core.memory import MemoryContent, MemoryMimeType  # noqa: E402
from autogen_core.model_context import UnboundedChatCompletionContext  # noqa: E402
from autogen_core.models import SystemMessage, UserMessage  # noqa: E402
from autogen_ext.models.replay import ReplayChatCompletionClient  # noqa: E402

from memlane.extraction import RuleExtractor  # noqa: E402
from memlane.integrations.autogen import SessionMemory  # noqa: E402

_dbs = itertools.count()


def _manager(tmp_path: Path, **options: Any) -> AsyncSessionManager:
    db = tmp_path / f"m{next(_dbs)}.db"
    return AsyncSessionManager("assistant", db, embedder=HashEmbedder(), **options)


def test_an_assistant_agent_gets_restored_memory_offline(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        memory = SessionMemory(manager, key="user-42", max_tokens=500)
        await memory.add(
            MemoryContent(content="The user prefers metric units", mime_type="text/plain")
        )
        await memory.add(
            MemoryContent(
                content={"city": "Lyon", "note": "lives in Lyon"},
                mime_type=MemoryMimeType.JSON,
                metadata={"source": "onboarding"},
            )
        )
        client = ReplayChatCompletionClient(["It is 20 degrees Celsius in Lyon."])
        agent = AssistantAgent("assistant", model_client=client, memory=[memory])
        result = await agent.run(task="What is the weather where I live, in my units?")
        assert result.messages[-1].content == "It is 20 degrees Celsius in Lyon."
        sent = client.create_calls[0]["messages"]
        system = [m.content for m in sent if isinstance(m, SystemMessage)]
        assert any("metric units" in text and "Lyon" in text for text in system)
        # the memory event the agent used is in the run's memory-query event
        used = [m for m in result.messages if type(m).__name__ == "MemoryQueryEvent"]
        assert used and "metric units" in used[0].content[0].content
        await manager.close()

    asyncio.run(scenario())


def test_add_query_and_clear(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        memory = SessionMemory(manager, key="notes", k=2)
        await memory.add(MemoryContent(content="herons nest in colonies", mime_type="text/plain"))
        await memory.add(
            MemoryContent(content={"bird": "pelican", "seen": 3}, mime_type=MemoryMimeType.JSON)
        )
        found = (await memory.query("where do herons nest?")).results
        assert found[0].content == "herons nest in colonies"
        assert found[0].mime_type == "text/plain" and found[0].metadata["score"] > 0
        json_hit = [
            r for r in (await memory.query("pelican")).results if r.mime_type == "application/json"
        ]
        assert json_hit and json_hit[0].content == {"bird": "pelican", "seen": 3}  # verbatim
        assert (await memory.query("")).results == []
        events = await manager.events("notes", kinds="fact")
        assert [e.metadata["autogen_mime_type"] for e in events] == [
            "text/plain",
            "application/json",
        ]
        await memory.clear()
        assert (await memory.query("herons")).results == []
        assert (await manager.get_session("notes")).key == "notes"  # the session stays
        await manager.close()

    asyncio.run(scenario())


def test_bad_content_is_refused_and_nothing_written(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        memory = SessionMemory(manager, key="k")
        with pytest.raises(InvalidInput, match="text and JSON"):
            await memory.add(MemoryContent(content=b"\x00\x01", mime_type=MemoryMimeType.BINARY))
        with pytest.raises(InvalidInput, match="text and JSON"):
            image = Image.from_base64(
                "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
            )
            await memory.add(MemoryContent(content=image, mime_type=MemoryMimeType.IMAGE))
        assert await manager.list_sessions() == []  # refused before anything was written
        with pytest.raises(InvalidInput, match="AsyncSessionManager"):
            SessionMemory(manager._sync, key="k")  # type: ignore[arg-type]
        await manager.close()

    asyncio.run(scenario())


def test_update_context_and_components(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path)
        memory = SessionMemory(manager, key="u1", max_tokens=300)
        context = UnboundedChatCompletionContext()
        assert memory.dump_component().config.get("extractor") is None
        assert (await memory.update_context(context)).memories.results  # the goal at least
        await memory.add(
            MemoryContent(content="the user's dog is called Rex", mime_type="text/plain")
        )
        context = UnboundedChatCompletionContext([UserMessage(content="my dog?", source="user")])
        result = await memory.update_context(context)
        messages = await context.get_messages()
        assert isinstance(messages[-1], SystemMessage) and "Rex" in messages[-1].content
        assert result.memories.results[0].metadata["token_count"] <= 300
        dumped = memory.dump_component()
        assert dumped.provider == "memlane.integrations.autogen.SessionMemory"
        assert dumped.config["key"] == "u1" and dumped.config["max_tokens"] == 300
        # a loaded component opens the store with the default embedder: this store's
        # vectors are the hash embedder's, which it says rather than mixing them
        with pytest.raises(EmbedderMismatch, match="reindex"):
            loaded = SessionMemory.load_component(dumped)
            await loaded.query("dog name")
        await manager.close()

    asyncio.run(scenario())


def test_update_context_keeps_the_loop_free(tmp_path: Path) -> None:
    async def scenario() -> LoopReport:
        manager = _manager(tmp_path)
        memory = SessionMemory(manager, key="big", max_tokens=2000)
        for i in range(300):
            await memory.add(
                MemoryContent(content=f"note {i} about topic {i % 7}", mime_type="text/plain")
            )

        async def work() -> None:
            for _ in range(5):
                context = UnboundedChatCompletionContext(
                    [UserMessage(content="topic 3", source="user")]
                )
                await memory.update_context(context)

        report = await watch_loop(work)
        await manager.close()
        return report

    asyncio.run(scenario()).assert_free()


@pytest.mark.postgres
def test_on_postgresql(postgres_url: str) -> None:
    async def scenario(url: str) -> None:
        joiner = "&" if "?" in url else "?"
        manager = AsyncSessionManager(
            "assistant", url=f"{url}{joiner}schema=autogen_{next(_dbs)}", embedder=HashEmbedder()
        )
        memory = SessionMemory(manager, key="pg")
        await memory.add(MemoryContent(content="postgres keeps this", mime_type="text/plain"))
        assert (await memory.query("what does postgres keep?")).results[0].content == (
            "postgres keeps this"
        )
        await memory.clear()
        assert (await memory.query("postgres")).results == []
        await manager.close()

    asyncio.run(scenario(postgres_url))


def test_what_the_memory_is_given_as_messages_forms_a_fact(tmp_path: Path) -> None:
    """AutoGen's agents never hand the conversation to a Memory (they call update_context and
    query); what reaches extraction is what the app adds. With kind="message" the user's
    words added are read, and the agent's next restored context shows the fact."""

    async def scenario() -> None:
        manager = _manager(tmp_path, background=False, extractor="rules")
        await manager.session_for("user-42", goal="Help the user", user_id="u42")
        memory = SessionMemory(manager, key="user-42", kind="message")
        await memory.add(MemoryContent(content="I moved to Porto.", mime_type="text/plain"))
        await manager.flush()  # runs the extraction stage now
        assert [f.text for f in await manager.facts("u42")] == ["Lives in Porto"]
        client = ReplayChatCompletionClient(["Try the tascas."])
        agent = AssistantAgent("assistant", model_client=client, memory=[memory])
        await agent.run(task="Where should I eat tonight?")
        sent = client.create_calls[0]["messages"]
        assert any("Lives in Porto" in m.content for m in sent if isinstance(m, SystemMessage))
        await manager.close()

    asyncio.run(scenario())


def test_a_component_keeps_the_rule_extractor(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = _manager(tmp_path, background=False, extractor="rules")
        dumped = SessionMemory(manager, key="u1").dump_component()
        assert dumped.config["extractor"] == "rules"
        loaded = SessionMemory.load_component(dumped)
        assert isinstance(loaded.manager.extractor, RuleExtractor)
        await loaded.manager.close()
        await manager.close()

    asyncio.run(scenario())
