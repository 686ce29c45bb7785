"""The MCP server against the MCP SDK's own client: in memory (the tool list with its
schemas and annotations, a whole agent's flow, bad input as tool errors that write nothing,
bounded output) and over stdio with `memlane mcp` as a real subprocess."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from memlane import AsyncSessionManager, InvalidInput, SessionManager
from memlane.testing import HashEmbedder
from memlane.text.tokens import tokenizer_for

from ..conftest import PYTHON, child_env
from .conftest import framework

framework("mcp", "mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.types import CallToolResult  # noqa: E402

from memlane.integrations.mcp import (  # noqa: E402
    DEFAULT_MAX_CHARS,
    TOOL_NAMES,
    build_server,
)

READ_TOOLS = {"list_sessions", "search_memory", "restore_context", "get_events", "user_facts"}
#: Each tool's required parameters and every parameter's JSON type ("any": no type).
SCHEMAS: dict[str, tuple[set[str], dict[str, str]]] = {
    "start_session": (
        {"goal"},
        {"goal": "string", "key": "string?", "user_id": "string?", "metadata": "object?"},
    ),
    "end_session": ({"session_id"}, {"session_id": "string", "status": "string"}),
    "list_sessions": (set(), {"status": "string?", "limit": "integer"}),
    "record": (
        {"session_id", "kind", "content"},
        {
            "session_id": "string",
            "kind": "string",
            "content": "string",
            "importance": "number?",
            "tags": "array?",
            "metadata": "object?",
            "ttl_seconds": "number?",
        },
    ),
    "record_step": (
        {"session_id", "step"},
        {"session_id": "string", "step": "string", "result": "any", "tool": "string?"},
    ),
    "add_message": (
        {"session_id", "role", "content"},
        {"session_id": "string", "role": "string", "content": "string"},
    ),
    "add_pending": ({"session_id", "text"}, {"session_id": "string", "text": "string"}),
    "complete_pending": ({"pending_id"}, {"pending_id": "string", "result": "any"}),
    "search_memory": (
        {"query"},
        {
            "query": "string",
            "k": "integer",
            "mode": "string",
            "session_id": "string?",
            "kinds": "array?",
        },
    ),
    "restore_context": (
        {"session_id", "max_tokens"},
        {
            "session_id": "string",
            "max_tokens": "integer",
            "query": "string?",
            "other_sessions": "boolean",
        },
    ),
    "get_events": (
        {"session_id"},
        {"session_id": "string", "kinds": "array?", "limit": "integer"},
    ),
    "remember": (
        {"user_id", "text"},
        {
            "user_id": "string",
            "text": "string",
            "key": "string?",
            "kind": "string",
            "source": "string?",
        },
    ),
    "user_facts": (
        {"user_id"},
        {
            "user_id": "string",
            "key": "string?",
            "as_of": "string?",
            "include_superseded": "boolean",
        },
    ),
}


def _type(prop: dict[str, Any]) -> str:
    """A property's JSON type; ``T?`` when it may also be null, ``any`` when untyped."""
    if "type" in prop:
        return str(prop["type"])
    options = [option.get("type") for option in prop.get("anyOf", ())]
    if len(options) == 2 and "null" in options:
        return f"{next(t for t in options if t != 'null')}?"
    return "any"


def _manager(db: Path, agent: str = "agent") -> AsyncSessionManager:
    return AsyncSessionManager(agent, db, embedder=HashEmbedder())


@asynccontextmanager
async def _connected(mgr: AsyncSessionManager, **options: Any) -> AsyncIterator[Client]:
    async with Client(build_server(mgr, **options)) as client:
        yield client


def _run(test: Callable[[], Awaitable[None]]) -> None:
    anyio.run(test)


async def _ok(client: Client, tool: str, /, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {_text(result)}"
    assert result.structured_content is not None
    data = result.structured_content
    return data.get("result", data) if set(data) == {"result"} else data


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _counts(db: Path) -> tuple[int, int, list[str | None]]:
    """(sessions, events, statuses of the events) as another process would see them."""
    with SessionManager("agent", db, embedder=HashEmbedder(), background=False) as mgr:
        events = mgr.events(None)
        return len(mgr.list_sessions(limit=None)), len(events), [e.status for e in events]


# -- the tool list -------------------------------------------------------------------------


def test_every_tool_is_listed_with_its_schema_and_annotations(tmp_path: Path) -> None:
    async def test() -> None:
        async with _manager(tmp_path / "s.db") as mgr, _connected(mgr) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == set(TOOL_NAMES) == set(SCHEMAS)
        for name, (required, types) in SCHEMAS.items():
            tool = tools[name]
            schema = tool.input_schema
            assert schema["type"] == "object", name
            assert set(schema.get("required", ())) == required, name
            found = {key: _type(prop) for key, prop in schema["properties"].items()}
            assert found == types, name
            for key, prop in schema["properties"].items():
                assert prop.get("description"), f"{name}.{key} has no description"
            assert tool.description and len(tool.description) > 40, name
            assert tool.annotations is not None, name
            assert tool.annotations.open_world_hint is False, name
            if name in READ_TOOLS:
                assert tool.annotations.read_only_hint is True, name
            else:
                assert tool.annotations.read_only_hint is False, name
                assert tool.annotations.destructive_hint is False, name
        assert tools["end_session"].annotations.idempotent_hint is True  # type: ignore[union-attr]
        # bounds the client can see before calling
        props = {name: tool.input_schema["properties"] for name, tool in tools.items()}
        assert props["get_events"]["limit"]["maximum"] == 100
        assert props["list_sessions"]["limit"]["maximum"] == 100
        assert props["search_memory"]["k"]["maximum"] == 25
        assert props["search_memory"]["mode"]["enum"] == ["hybrid", "semantic", "keyword"]
        assert props["end_session"]["status"]["enum"] == ["completed", "failed", "abandoned"]
        assert props["record"]["importance"]["anyOf"][0] == {
            "type": "number",
            "minimum": 0.0,
            "maximum": 1.0,
        }
        for name in ("get_events", "search_memory", "record"):
            assert f"{DEFAULT_MAX_CHARS:,} characters" in (tools[name].description or "")

    _run(test)


def test_read_only_server_offers_the_read_tools_only(tmp_path: Path) -> None:
    SessionManager("agent", tmp_path / "s.db", embedder=HashEmbedder()).close()

    async def test() -> None:
        mgr = AsyncSessionManager(
            "agent", tmp_path / "s.db", embedder=HashEmbedder(), read_only=True
        )
        async with mgr, _connected(mgr, read_only=True) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert tools == READ_TOOLS
            assert (await _ok(client, "list_sessions"))["sessions"] == []

    _run(test)


# -- an agent's whole flow -----------------------------------------------------------------


def test_full_flow(tmp_path: Path) -> None:
    db = tmp_path / "s.db"

    async def test() -> None:
        async with _manager(db) as mgr, _connected(mgr) as client:
            goal = "Find why the nightly payment export fails"
            session = await _ok(client, "start_session", goal=goal, key="ticket-7")
            assert session["created"] is True and session["status"] == "active"
            sid = session["id"]
            again = await _ok(client, "start_session", goal="another goal", key="ticket-7")
            assert again["id"] == sid and again["created"] is False and again["goal"] == goal

            fact = await _ok(
                client,
                "record",
                session_id=sid,
                kind="fact",
                content="The export job runs at 02:00 UTC against the replica database",
                tags=["ops"],
                metadata={"source": "runbook"},
            )
            assert fact["kind"] == "fact" and fact["tags"] == ["ops"]
            assert fact["metadata"] == {"source": "runbook"} and fact["truncated"] is False
            assert fact["expires_at"] is None
            # the key works wherever a session id does
            await _ok(
                client,
                "record",
                session_id="ticket-7",
                kind="decision",
                content="Rerun the export against the primary database",
                importance=0.9,
            )
            step = await _ok(
                client,
                "record_step",
                session_id=sid,
                step="read the job log",
                result={"error": "timeout after 300s"},
                tool="logs",
            )
            assert step["payload"]["result"] == {"error": "timeout after 300s"}
            said = await _ok(
                client, "add_message", session_id=sid, role="user", content="Is it fixed?"
            )
            assert said["role"] == "user"
            pending = await _ok(
                client, "add_pending", session_id=sid, text="raise the replica statement timeout"
            )
            assert pending["kind"] == "pending" and pending["status"] == "open"

            found = await _ok(client, "search_memory", query="when does the export job run?")
            assert found["hits"] and found["waiting"] == 0, found
            assert found["hits"][0]["event"]["id"] == fact["id"]
            scoped = await _ok(
                client, "search_memory", query="database", session_id="ticket-7", kinds=["decision"]
            )
            assert [hit["event"]["kind"] for hit in scoped["hits"]] == ["decision"]

            budget = 120
            text = await _ok(client, "restore_context", session_id=sid, max_tokens=budget)
            assert isinstance(text, str)
            assert tokenizer_for("gpt-4o").count(text) <= budget
            assert goal in text
            pending_section = text.split("## Pending steps", 1)[1].split("## ", 1)[0]
            assert "- pending: raise the replica statement timeout" in pending_section

            events = await _ok(client, "get_events", session_id=sid)
            assert [e["kind"] for e in events["events"]] == [
                "goal",
                "fact",
                "decision",
                "step",
                "message",
                "pending",
            ]
            assert events["more"] is False
            newest = await _ok(client, "get_events", session_id=sid, limit=2)
            assert [e["kind"] for e in newest["events"]] == ["message", "pending"]
            assert newest["more"] is True

            done = await _ok(
                client, "complete_pending", pending_id=pending["id"], result={"timeout": "900s"}
            )
            assert done["kind"] == "step"
            assert done["payload"] == {"pending_id": pending["id"], "result": {"timeout": "900s"}}
            text = await _ok(client, "restore_context", session_id=sid, max_tokens=budget)
            assert "## Pending steps" not in text  # done: now a step

            brief = await _ok(
                client, "record", session_id=sid, kind="fact", content="otp 5521", ttl_seconds=60
            )
            assert brief["expires_at"] > brief["created_at"]  # (ISO-8601 UTC sorts by time)

            ended = await _ok(client, "end_session", session_id=sid, status="completed")
            assert ended["status"] == "completed"
            listed = await _ok(client, "list_sessions", status="completed")
            assert [s["id"] for s in listed["sessions"]] == [sid] and listed["more"] is False
            assert (await _ok(client, "list_sessions", status="active"))["sessions"] == []

        # durable: another manager (another process, say) sees what the client wrote
        with SessionManager("agent", db, embedder=HashEmbedder(), background=False) as sync:
            assert sync.get_session("ticket-7").status == "completed"
            assert [e.status for e in sync.events(sid, kinds="pending")] == ["done"]

    _run(test)


def test_a_factory_is_opened_by_the_server_and_closed_after(tmp_path: Path) -> None:
    opened: list[AsyncSessionManager] = []

    def factory() -> AsyncSessionManager:
        opened.append(_manager(tmp_path / "s.db"))
        return opened[-1]

    async def test() -> None:
        server = build_server(factory)
        async with Client(server) as client:
            await _ok(client, "start_session", goal="g")
        assert len(opened) == 1
        with pytest.raises(InvalidInput, match="closed"):
            await opened[0].list_sessions()
        async with Client(server) as client:  # a new connection opens it again
            assert len((await _ok(client, "list_sessions"))["sessions"]) == 1
        assert len(opened) == 2

    _run(test)


# -- bad input -----------------------------------------------------------------------------

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("record", {"session_id": "no-such-session", "kind": "fact", "content": "x"}, "does not exist"),
    ("record", {"session_id": "{sid}", "kind": "facts", "content": "x"}, "Unknown event kind"),
    ("record", {"session_id": "{sid}", "kind": "fact", "content": "   "}, "content is empty"),
    (
        "record",
        {"session_id": "{sid}", "kind": "fact", "content": "x", "ttl_seconds": -1},
        "more than zero",
    ),
    (
        "record",
        {"session_id": "{sid}", "kind": "pending", "content": "x", "ttl_seconds": 9},
        "expire",
    ),
    ("add_pending", {"session_id": "{sid}", "text": ""}, "empty"),
    ("add_message", {"session_id": "{sid}", "role": "usr", "content": "hi"}, "Unknown message"),
    ("restore_context", {"session_id": "{sid}", "max_tokens": 5}, "Raise max_tokens"),
    ("restore_context", {"session_id": "{sid}", "max_tokens": 0}, "max_tokens"),
    ("restore_context", {"session_id": "nope", "max_tokens": 500}, "does not exist"),
    ("get_events", {"session_id": "nope"}, "does not exist"),
    ("get_events", {"session_id": "{sid}", "kinds": ["nope"]}, "Unknown event kind"),
    ("search_memory", {"query": "x", "session_id": "nope"}, "does not exist"),
    ("search_memory", {"query": "x", "k": 1000}, "k"),
    ("complete_pending", {"pending_id": "nope"}, "does not exist"),
    ("complete_pending", {"pending_id": "{fact}"}, "not a pending step"),
    ("end_session", {"session_id": "{sid}", "status": "active"}, "status"),
    ("start_session", {"goal": ""}, "goal is empty"),
    ("record", {"session_id": "{sid}", "kind": "fact"}, "content"),  # missing argument
    ("no_such_tool", {}, "no_such_tool"),
    ("remember", {"user_id": "u1", "text": "  "}, "text is empty"),
    ("remember", {"user_id": "u1", "text": "x", "kind": "opinion"}, "kind"),
    ("user_facts", {"user_id": "u1", "as_of": "someday"}, "as_of"),
]


def test_bad_input_is_a_tool_error_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("agent", db, embedder=HashEmbedder(), background=False) as sync:
        sid = sync.start_session("Fix the flaky login test").id
        fact = sync.record_fact(sid, "The test fails on CI only").id
    before = _counts(db)

    async def test() -> None:
        async with _manager(db) as mgr, _connected(mgr) as client:
            for tool, arguments, message in BAD_CALLS:
                filled = {
                    key: value.format(sid=sid, fact=fact) if isinstance(value, str) else value
                    for key, value in arguments.items()
                }
                result = await client.call_tool(tool, filled)
                assert result.is_error, (tool, filled, _text(result))
                assert message in _text(result), (tool, _text(result))
                assert result.structured_content is None
            # the server is still serving after all of that
            assert len((await _ok(client, "list_sessions"))["sessions"]) == 1

    _run(test)
    assert _counts(db) == before


def test_a_distant_time_in_the_query_is_no_unexpected_exception(tmp_path: Path) -> None:
    """Issue 28, D6: "3000 years ago" raised OverflowError, "unexpected exception" here."""

    async def test() -> None:
        async with _manager(tmp_path / "s.db") as mgr, _connected(mgr) as client:
            sid = (await _ok(client, "start_session", goal="Plan the release"))["id"]
            await _ok(client, "record", session_id=sid, kind="decision", content="ship Friday")
            for query in ("what did we decide 3000 years ago", "99999999999 days ago"):
                hits = await _ok(client, "search_memory", query=query)
                assert any("ship Friday" in str(hit) for hit in hits["hits"])
                text = await _ok(
                    client, "restore_context", session_id=sid, max_tokens=500, query=query
                )
                assert "ship Friday" in text

    _run(test)


def test_what_the_agent_knows_about_a_user(tmp_path: Path) -> None:
    async def test() -> None:
        async with _manager(tmp_path / "s.db") as mgr, _connected(mgr) as client:
            first = await _ok(client, "remember", user_id="u1", text="Lives in Oslo", key="city")
            assert first["status"] == "added" and first["fact"]["status"] == "current"
            moved = await _ok(client, "remember", user_id="u1", text="Lives in Rome", key="city")
            assert moved["status"] == "superseded"
            assert [f["text"] for f in moved["superseded"]] == ["Lives in Oslo"]
            again = await _ok(client, "remember", user_id="u1", text="lives in  ROME", key="city")
            assert again["status"] == "unchanged" and again["fact"]["seen"] == 2
            await _ok(client, "remember", user_id="u1", text="Likes tea", kind="preference")
            now = await _ok(client, "user_facts", user_id="u1")
            assert [f["text"] for f in now["facts"]] == ["Lives in Rome", "Likes tea"]
            city = await _ok(
                client, "user_facts", user_id="u1", key="city", include_superseded=True
            )
            assert [f["status"] for f in city["facts"]] == ["superseded", "current"]
            session = await _ok(client, "start_session", goal="Plan dinner", user_id="u1")
            text = await _ok(client, "restore_context", session_id=session["id"], max_tokens=500)
            assert "## About the user" in text and "Lives in Rome" in text

    _run(test)


def test_a_closed_session_takes_no_events(tmp_path: Path) -> None:
    db = tmp_path / "s.db"

    async def test() -> None:
        async with _manager(db) as mgr, _connected(mgr) as client:
            sid = (await _ok(client, "start_session", goal="g"))["id"]
            await _ok(client, "end_session", session_id=sid, status="failed")
            before = _counts(db)
            result = await client.call_tool(
                "record", {"session_id": sid, "kind": "fact", "content": "late"}
            )
            assert result.is_error and "takes no new events" in _text(result)
            result = await client.call_tool("end_session", {"session_id": sid})
            assert result.is_error and "already ended as failed" in _text(result)
            assert _counts(db) == before

    _run(test)


# -- bounded output ------------------------------------------------------------------------


def test_large_content_comes_back_truncated(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    big = "needle " + "x" * 100_000
    payload = {"rows": list(range(30_000))}

    async def test() -> None:
        async with _manager(db) as mgr, _connected(mgr) as client:
            sid = (await _ok(client, "start_session", goal="g" * 5_000))["id"]
            recorded = await _ok(client, "record", session_id=sid, kind="fact", content=big)
            step = await _ok(client, "record_step", session_id=sid, step="dump", result=payload)
            events = await _ok(client, "get_events", session_id=sid)
            hits = (await _ok(client, "search_memory", query="needle"))["hits"]
            essay = "\n\n".join(
                [f"Paragraph {i} is about lunch." for i in range(80)]
                + ["The vault code is 7741."]
                + [f"Closing {i}." for i in range(5)]
            )
            await _ok(client, "add_message", session_id=sid, role="assistant", content=essay)
            vault = (
                await _ok(client, "search_memory", query="The vault code is 7741.", mode="semantic")
            )["hits"][0]
            sessions = (await _ok(client, "list_sessions"))["sessions"]
            raw = await client.call_tool("get_events", {"session_id": sid})
        bounded = [recorded, events["events"][1], hits[0]["event"]]
        for event in bounded:
            assert event["id"] == recorded["id"]
            assert event["truncated"] is True
            assert event["content"].startswith("needle xxx")
            assert len(event["content"]) < DEFAULT_MAX_CHARS + 50
            assert event["content"].endswith(
                f"… [{len(big) - DEFAULT_MAX_CHARS:,} more characters]"
            )
        # a long event found by its passage: the passage that answers comes with the hit
        assert (
            vault["passage"] is not None and "The vault code is 7741." in vault["passage"]["text"]
        )
        assert vault["passage"]["start"] > 1_000
        assert hits[0]["passage"] is None or "needle" in hits[0]["passage"]["text"]
        assert step["truncated"] is True and isinstance(step["payload"], str)
        assert step["payload"].startswith('{"result":{"rows":[0,1,2')
        assert len(step["payload"]) < DEFAULT_MAX_CHARS + 50
        assert sessions[0]["truncated"] is True and len(sessions[0]["goal"]) < 2_100
        assert len(_text(raw)) < 20_000  # the whole answer, not just one field
        # the store keeps everything
        with SessionManager("agent", db, embedder=HashEmbedder(), background=False) as sync:
            assert sync.get_event(recorded["id"]).content == big

    _run(test)


def test_a_json_output_s_hit_names_its_records(tmp_path: Path) -> None:
    rows = [{"host": f"web-{i}", "state": "down" if i == 17 else "up"} for i in range(80)]

    async def test() -> None:
        async with _manager(tmp_path / "s.db") as mgr, _connected(mgr) as client:
            sid = (await _ok(client, "start_session", goal="g"))["id"]
            # a tool's response as it came, pretty-printed JSON text
            output = json.dumps({"hosts": rows}, indent=2)
            await _ok(client, "record", session_id=sid, kind="tool_output", content=output)
            await _ok(client, "record", session_id=sid, kind="fact", content="web-17 is ours")
            hits = (await _ok(client, "search_memory", query="which host is down"))["hits"]
        found = next(hit for hit in hits if hit["event"]["kind"] == "tool_output")
        assert found["records"][0] == 'hosts[17]: {"host":"web-17","state":"down"}'
        assert all(hit["records"] == [] for hit in hits if hit is not found)

    _run(test)


def test_max_chars_is_configurable(tmp_path: Path) -> None:
    async def test() -> None:
        async with _manager(tmp_path / "s.db") as mgr, _connected(mgr, max_chars=100) as client:
            sid = (await _ok(client, "start_session", goal="g"))["id"]
            event = await _ok(client, "record", session_id=sid, kind="fact", content="y" * 500)
            assert event["content"] == "y" * 100 + "… [400 more characters]"

    _run(test)


# -- over stdio: `memlane mcp` as an MCP client launches it --------------------------------------


def test_asm_mcp_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    errlog = tmp_path / "stderr.log"
    env = child_env()
    env["MEMLANE_EMBEDDER"] = "hash"  # the CLI's test embedder: no model is loaded
    for name in ("MEMLANE_DB", "MEMLANE_AGENT"):
        env.pop(name, None)
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "memlane", "mcp", "--db", str(db), "--agent", "a"],
        env=env,
        cwd=str(tmp_path),
    )
    stray: list[object] = []
    ids: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):  # a line on stdout that is not an MCP message
            stray.append(message)

    async def test() -> None:
        with errlog.open("w") as stderr:
            transport = stdio_client(params, errlog=stderr)
            async with Client(transport, message_handler=on_message) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert names == set(TOOL_NAMES)
                sid = (await _ok(client, "start_session", goal="Ship the MCP server"))["id"]
                ids.append(sid)
                await _ok(client, "add_pending", session_id=sid, text="write the docs")
                bad = await client.call_tool(
                    "record", {"session_id": sid, "kind": "nope", "content": "x"}
                )
                assert bad.is_error and "Unknown event kind" in _text(bad)
                text = await _ok(client, "restore_context", session_id=sid, max_tokens=200)
                assert "Ship the MCP server" in text and "write the docs" in text

    _run(test)
    assert stray == []
    logged = errlog.read_text()
    assert "serving the memory of agent 'a'" in logged, logged
    assert "Unknown event kind" in logged  # the failed call is logged, on stderr
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as sync:
        assert [e.kind for e in sync.events(ids[0])] == ["goal", "pending"]


def test_asm_mcp_needs_an_agent(tmp_path: Path) -> None:
    env = child_env()
    env.pop("MEMLANE_AGENT", None)
    result = subprocess.run(
        [PYTHON, "-m", "memlane", "mcp", "--db", str(tmp_path / "s.db")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--agent" in result.stderr and result.stdout == ""


@pytest.mark.postgres
def test_on_postgresql(postgres_url: str) -> None:
    url = postgres_url
    joiner = "&" if "?" in url else "?"

    async def test() -> None:
        mgr = AsyncSessionManager(
            "agent", url=f"{url}{joiner}schema=mcp_pg", embedder=HashEmbedder()
        )
        async with mgr, _connected(mgr) as client:
            session = await _ok(client, "start_session", goal="Tune the database", key="pg")
            await _ok(client, "record", session_id="pg", kind="fact", content="work_mem is 64MB")
            hits = await _ok(client, "search_memory", query="work_mem", session_id="pg")
            assert hits["hits"][0]["event"]["content"] == "work_mem is 64MB"
            restored = await _ok(
                client, "restore_context", session_id=session["id"], max_tokens=300
            )
            assert "work_mem" in str(restored)
            bad = await client.call_tool(
                "record", {"session_id": "nope", "kind": "fact", "content": "x"}
            )
            assert bad.is_error and "does not exist" in _text(bad)

    _run(test)


def test_a_conversation_over_mcp_forms_a_fact(tmp_path: Path) -> None:
    """`memlane mcp --extract rules` is build_server over a manager with extractor="rules":
    the user's message an agent adds over MCP becomes a fact user_facts and
    restore_context show."""

    async def test() -> None:
        mgr = AsyncSessionManager(
            "agent", tmp_path / "x.db", embedder=HashEmbedder(), extractor="rules"
        )
        async with mgr, _connected(mgr) as client:
            session = await _ok(client, "start_session", goal="Chat", user_id="u7")
            sid = session["id"]
            await _ok(
                client, "add_message", session_id=sid, role="user", content="I moved to Porto."
            )
            await mgr.flush()  # runs the extraction stage now (the worker does it within seconds)
            facts = await _ok(client, "user_facts", user_id="u7")
            assert [f["text"] for f in facts["facts"]] == ["Lives in Porto"]
            restored = await _ok(client, "restore_context", session_id=sid, max_tokens=500)
            assert "Lives in Porto" in restored

    _run(test)
