"""OpenTelemetry spans (tracing.py) caught by the SDK's in-memory exporter: the memory
operation names and attributes of the GenAI conventions, errors, no user id, and the query
only when content capture is asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memlane import SessionManager
from memlane.errors import InvalidInput, SessionNotFound
from memlane.tracing import Tracing

sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

Factory = Callable[..., SessionManager]


def _tracer() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def test_memory_operations_become_spans(make_manager: Factory) -> None:
    tracer, exporter = _tracer()
    mgr = make_manager("support", tracing=Tracing(tracer), background=False)
    session = mgr.start_session("Chat", user_id="user-secret-9")
    mgr.add_message(session.id, "user", "where is my parcel")
    mgr.remember("user-secret-9", "Lives in Berlin", key="city")
    mgr.search("parcel", k=3)
    mgr.restore(session.id, max_tokens=400, query="parcel")
    mgr.clear_session(session.id, kinds="message")
    mgr.erase_user("user-secret-9")
    spans = exporter.get_finished_spans()
    calls = [span.attributes["memlane.operation"] for span in spans]
    assert calls == ["record", "remember", "search", "restore", "clear_session", "erase_user"]
    by_call = {span.attributes["memlane.operation"]: span for span in spans}
    record = by_call["record"]
    assert record.name == "update_memory memlane"
    assert record.attributes["gen_ai.operation.name"] == "update_memory"
    assert record.attributes["gen_ai.conversation.id"] == session.id
    assert record.attributes["gen_ai.agent.id"] == "support"
    assert record.attributes["db.system.name"] == "sqlite"
    search = by_call["search"]
    assert search.name == "search_memory memlane"
    assert search.attributes["gen_ai.memory.search.result.count"] >= 1
    assert "gen_ai.memory.query" not in search.attributes  # content is opt in
    assert by_call["restore"].attributes["gen_ai.memory.search.result.count"] >= 1
    assert by_call["erase_user"].attributes["gen_ai.operation.name"] == "delete_memory"
    assert by_call["erase_user"].attributes["gen_ai.memory.scope"] == "user"
    for span in spans:
        assert "user-secret-9" not in {str(value) for value in span.attributes.values()}


def test_a_failed_call_is_an_error_span_without_its_message(make_manager: Factory) -> None:
    tracer, exporter = _tracer()
    mgr = make_manager("support", tracing=Tracing(tracer, capture_content=True), background=False)
    mgr.search("what did we decide", k=2)
    with pytest.raises(SessionNotFound):
        mgr.record("no-such-session", "fact", "secret plan")
    search, failed = exporter.get_finished_spans()
    assert search.attributes["gen_ai.memory.query"] == "what did we decide"
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes["error.type"] == "SessionNotFound"
    assert failed.status.description == "SessionNotFound" and not failed.events


def test_no_tracing_no_spans_and_bad_tracers(make_manager: Factory) -> None:
    mgr = make_manager("a", background=False)
    assert mgr._observer.tracing is None
    with pytest.raises(InvalidInput, match="Tracer"):
        Tracing(object())
    with pytest.raises(InvalidInput, match="tracing must be"):
        make_manager("a", tracing="otel")
