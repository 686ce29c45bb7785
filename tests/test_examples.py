"""examples/ run as written, each a real process, against a local fake model that speaks the
OpenAI chat-completions protocol over HTTP (the one service outside this machine an agent
needs); the fake records what it was sent, so the tests see what memory put in the prompt."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, child_env

EXAMPLES = REPO / "examples"


class FakeModel(ThreadingHTTPServer):
    """``POST /v1/chat/completions``: answers "Noted: <the user's words>." and keeps every
    request body in ``requests``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: FakeModel

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        question = body["messages"][-1]["content"]
        reply = {
            "id": f"chatcmpl-{len(self.server.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"Noted: {question}"},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def model() -> Iterator[FakeModel]:
    server = FakeModel()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def run(example: str, text: str, model: FakeModel, folder: Path) -> str:
    env = {**child_env(), "OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "test"}
    env.pop("MEMLANE_DB", None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example), text],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.mark.real_model
def test_the_agent_loop_continues_in_a_fresh_process(model: FakeModel, tmp_path: Path) -> None:
    first = run("agent_loop.py", "The budget is 4,000 EUR for 12 people.", model, tmp_path)
    assert first == "Noted: The budget is 4,000 EUR for 12 people."
    run("agent_loop.py", "What is our budget?", model, tmp_path)
    system = model.requests[-1]["messages"][0]["content"]
    assert "Plan the team offsite" in system and "4,000 EUR for 12 people" in system


@pytest.mark.real_model
@pytest.mark.integration
def test_the_langgraph_agent_remembers_the_user(model: FakeModel, tmp_path: Path) -> None:
    run("langgraph_agent.py", "I'm vegetarian and I live in Porto.", model, tmp_path)
    answer = run("langgraph_agent.py", "Suggest a restaurant for tonight.", model, tmp_path)
    assert answer == "Noted: Suggest a restaurant for tonight."
    system = model.requests[-1]["messages"][0]["content"]
    assert "vegetarian" in system and "Porto" in system


@pytest.mark.integration
def test_the_mcp_config_starts_a_working_server(tmp_path: Path) -> None:
    """The desktop config's command and arguments, with its --db pointed into tmp_path,
    start `memlane mcp`; the MCP SDK's own client lists its tools."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    config = json.loads((EXAMPLES / "mcp" / "claude_desktop_config.json").read_text())
    server = config["mcpServers"]["memory"]
    assert server["command"] == "memlane"
    args = list(server["args"])
    args[args.index("--db") + 1] = str(tmp_path / "memory.db")
    env = {**child_env(), "MEMLANE_EMBEDDER": "hash"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memlane", *args], env=env, cwd=str(tmp_path)
    )

    async def talk() -> set[str]:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                return {tool.name for tool in (await client.list_tools()).tools}

    assert {"search_memory", "restore_context", "start_session"} <= anyio.run(talk)
