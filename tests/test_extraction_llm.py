"""LLMExtractor over a real HTTP round trip: a stub server speaking the OpenAI
chat-completions protocol on a free loopback port, answering what each test scripts (good,
malformed, slow), and the stage's handling of each."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memlane import InvalidInput, SessionManager
from memlane.extraction import LLMExtractor
from memlane.extraction.llm import ANSWER_SCHEMA, build_prompt

Make = Callable[..., SessionManager]

GOOD = {
    "facts": [{"text": "Lives in Porto", "key": "city", "kind": "fact", "turns": [1]}],
    "entities": [{"turn": 1, "type": "Place", "text": "Porto"}],
    "tags": [{"turn": 1, "tags": ["moving", "New City!"]}],
}


class Stub:
    """The scripted endpoint: ``answers`` are popped one per request (the last repeats); an
    answer is the assistant's content, or ``("sleep", seconds, content)``."""

    def __init__(self) -> None:
        self.answers: list[Any] = [json.dumps(GOOD)]
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                stub.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                answer = stub.answers.pop(0) if len(stub.answers) > 1 else stub.answers[0]
                if isinstance(answer, tuple):
                    _, seconds, answer = answer
                    time.sleep(seconds)
                reply = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": answer},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }
                data = json.dumps(reply).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # (the client gave up: the slow case)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    yield server
    server.close()


def _chat(mgr: SessionManager) -> str:
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I moved to Porto last month.")
    return session.id


def test_a_good_answer_round_trip(make_manager: Make, stub: Stub) -> None:
    extractor = LLMExtractor(stub.url, model="stub-model", api_key="k-123")
    mgr = make_manager(background=False, extractor=extractor)
    mgr.remember("u1", "Is vegetarian", key="diet", kind="preference")
    session_id = _chat(mgr)
    mgr.flush()
    assert [(f.key, f.text) for f in mgr.facts("u1")] == [
        ("diet", "Is vegetarian"),
        ("city", "Lives in Porto"),
    ]
    city = mgr.facts("u1", key="city")[0]
    assert city.metadata["extracted_by"] == "llm"
    assert city.metadata["extractor_version"] == "1:stub-model"
    (message,) = mgr.events(session_id, kinds=["message"])
    mark = message.metadata["memlane_extracted"]
    assert mark["entities"] == {"place": ["Porto"]}
    assert mark["tags"] == {"moving": True, "new-city": True}  # (made filter keys)
    (request,) = stub.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer k-123"
    body = request["body"]
    assert body["model"] == "stub-model" and body["max_tokens"] == 1000
    assert body["response_format"] == {"type": "json_object"}
    prompt = body["messages"][0]["content"]
    assert "[1]" in prompt and "I moved to Porto last month." in prompt
    assert "diet: Is vegetarian" in prompt  # the user's current facts as context
    assert mgr.health().extraction_tokens == 120  # the endpoint's usage


def test_a_malformed_answer_is_retried_once_with_the_error(make_manager: Make, stub: Stub) -> None:
    stub.answers = ["Sure! Here you go: {facts: nope", json.dumps(GOOD)]
    mgr = make_manager(background=False, extractor=LLMExtractor(stub.url, model="m"))
    _chat(mgr)
    mgr.flush()
    assert [f.text for f in mgr.facts("u1")] == ["Lives in Porto"]
    assert len(stub.requests) == 2
    retry = stub.requests[1]["body"]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert "not JSON" in retry[2]["content"]
    assert mgr.health().extraction_tokens == 240 and mgr.health().ok


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("not json at all", "not JSON"),
        (json.dumps({"facts": [{"text": "x", "turns": [9]}]}), "not a turn number"),
        (json.dumps({"facts": [{"text": "x", "turns": [1], "delete": True}]}), "unknown fields"),
        (json.dumps({"memories": []}), "unknown fields ['memories']"),
        (json.dumps({"facts": [{"text": "x", "turns": [1], "user_id": "u2"}]}), "user 'u2'"),
        (json.dumps({"facts": [{"text": "x", "turns": [1], "kind": "goal"}]}), "kind"),
        (json.dumps({"facts": [{"text": 5, "turns": [1]}]}), "text must be"),
    ],
)
def test_two_malformed_answers_fail_the_batch(
    make_manager: Make, stub: Stub, answer: str, says: str
) -> None:
    stub.answers = [answer]
    mgr = make_manager(background=False, extractor=LLMExtractor(stub.url, model="m"))
    mgr.remember("u1", "Lives in Berlin", key="city")
    session_id = _chat(mgr)
    before = ([e.metadata for e in mgr.events(session_id)], mgr.fact_history("u1"))
    mgr.flush()
    assert ([e.metadata for e in mgr.events(session_id)], mgr.fact_history("u1")) == before
    health = mgr.health()
    assert health.extraction_failing == 1
    assert health.extraction_error is not None and says in health.extraction_error
    assert len(stub.requests) in (1, 2)  # (a reply the stage rejects is not retried inside)


def test_a_slow_endpoint_times_out_and_is_retried_later(make_manager: Make, stub: Stub) -> None:
    stub.answers = [("sleep", 2.0, json.dumps(GOOD)), json.dumps(GOOD)]
    extractor = LLMExtractor(stub.url, model="m", timeout=0.5)
    mgr = make_manager(background=False, extractor=extractor)
    session_id = _chat(mgr)
    started = time.monotonic()
    mgr.flush()
    assert time.monotonic() - started < 1.9
    assert mgr.facts("u1") == []
    error = mgr.health().extraction_error
    assert error is not None and "Timeout" in error  # httpx's, reported, never raised
    report = mgr.extract(session_id)  # the retry, now
    assert [o.status for o in report.facts] == ["added"]
    assert mgr.health().extraction_error is None


def test_the_prompt_keeps_within_max_tokens(make_manager: Make, stub: Stub) -> None:
    extractor = LLMExtractor(stub.url, model="m", max_tokens_per_batch=1200, answer_tokens=200)
    mgr = make_manager(background=False, extractor=extractor)
    for n in range(40):
        mgr.remember("u1", f"Knows fact number {n} about a long topic of conversation", key=f"k{n}")
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I moved to Porto. " + "Lorem ipsum dolor sit. " * 200)
    mgr.flush()
    prompt = stub.requests[0]["body"]["messages"][0]["content"]
    assert extractor._count(prompt) <= 1000
    assert "I moved to Porto." in prompt


def test_a_callable_and_an_openai_like_client() -> None:
    from datetime import datetime, timezone

    from memlane.extraction import ExtractionBatch, Turn

    turn = Turn("m1", "user", "I moved to Porto", datetime(2026, 5, 1, tzinfo=timezone.utc), 1)
    batch = ExtractionBatch("u1", "s1", (turn,))
    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return "```json\n" + json.dumps(GOOD) + "\n```"

    answer = LLMExtractor(model)(batch)
    assert answer["facts"][0]["sources"] == ["m1"] and prompts == [build_prompt(batch)]

    class Completions:
        def create(self, **body: Any) -> Any:
            message = type("M", (), {"content": json.dumps(GOOD)})()
            choice = type("C", (), {"message": message})()
            usage = type("U", (), {"total_tokens": 77})()
            return type("R", (), {"choices": [choice], "usage": usage})()

    client = type("Client", (), {"chat": type("Chat", (), {"completions": Completions()})()})()
    assert LLMExtractor(client, model="gpt-4o-mini")(batch)["tokens"] == 77


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        (("localhost:8000",), {"model": "m"}, "not a URL"),
        (("http://localhost:8000/v1",), {}, "needs model="),
        ((42,), {}, "got int"),
        ((lambda p: p,), {"max_tokens_per_batch": 500, "answer_tokens": 600}, "answer_tokens"),
    ],
)
def test_bad_llm_extractor_arguments(args: Any, kwargs: Any, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        LLMExtractor(*args, **kwargs)


def test_the_schema_is_strict() -> None:
    assert ANSWER_SCHEMA["additionalProperties"] is False
    for part in ("facts", "entities", "tags"):
        assert ANSWER_SCHEMA["properties"][part]["items"]["additionalProperties"] is False
