"""OpenTelemetry spans, opt in: ``SessionManager(..., tracing=Tracing(tracer))`` (the ``[otel]``
extra: ``opentelemetry-api``), named after the GenAI memory semantic conventions (in
development upstream: open-telemetry/semantic-conventions, ``prototype/memory``). Every name
the library emits is in this module.

Spans are named ``{operation} memlane``: ``update_memory`` for ``record``,
``record_many``, ``remember`` and ``ingest``; ``search_memory`` for ``search`` and
``restore``; ``delete_memory`` for ``delete_event``, ``clear_session``, ``delete_session`` and
``erase_user``.

Attributes: ``gen_ai.provider.name``, ``gen_ai.memory.store.name``, ``db.system.name`` (sqlite,
postgresql), ``memlane.operation`` (the call), ``gen_ai.agent.id`` and, when the call names one,
``gen_ai.conversation.id`` (the session id), ``gen_ai.memory.scope``,
``gen_ai.memory.search.result.count`` for searches; on failure the span's status is ERROR with
``error.type``. A user id is never an attribute; the query (``gen_ai.memory.query``) only with
``capture_content=True``, as the conventions require of content. No span is made without
``tracing=``, and nothing is exported by the library: your tracer provider decides.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .errors import InvalidInput

__all__ = ["OPERATIONS", "Tracing"]

#: the provider this library names itself as, and the store name in span names
PROVIDER = "memlane"
#: each traced call, as the memory operation it is
OPERATIONS: Mapping[str, str] = {
    "record": "update_memory",
    "record_many": "update_memory",
    "remember": "update_memory",
    "ingest": "update_memory",
    "search": "search_memory",
    "restore": "search_memory",
    "delete_event": "delete_memory",
    "clear_session": "delete_memory",
    "delete_session": "delete_memory",
    "erase_user": "delete_memory",
}
#: the memory scope each call works in
_SCOPES = {"remember": "user", "erase_user": "user", "ingest": "agent", "search": "agent"}
_DB_SYSTEMS = {"sqlite": "sqlite", "postgres": "postgresql"}

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
STORE_NAME = "gen_ai.memory.store.name"
MEMORY_SCOPE = "gen_ai.memory.scope"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
QUERY = "gen_ai.memory.query"
RESULT_COUNT = "gen_ai.memory.search.result.count"
DB_SYSTEM = "db.system.name"
ERROR_TYPE = "error.type"
CALL = "memlane.operation"


class Tracing:
    """Spans for a manager's memory operations, made with ``tracer`` (an OpenTelemetry
    ``Tracer``; by default ``opentelemetry.trace.get_tracer("memlane")``, which is a
    no-op until your application installs a tracer provider)."""

    def __init__(self, tracer: Any = None, *, capture_content: bool = False) -> None:
        try:
            from opentelemetry import trace
        except ImportError:
            raise InvalidInput(
                "Tracing needs its extra (opentelemetry-api is missing): pip install "
                "'memlane[otel]'."
            ) from None
        self._trace = trace
        self.tracer = tracer if tracer is not None else trace.get_tracer("memlane")
        if not hasattr(self.tracer, "start_as_current_span"):
            raise InvalidInput(
                f"tracer must be an OpenTelemetry Tracer, got {type(tracer).__name__}."
            )
        self.capture_content = bool(capture_content)

    @contextmanager
    def span(
        self,
        call: str,
        *,
        backend: str,
        agent_id: str,
        session_id: str | None = None,
        query: str | None = None,
    ) -> Iterator[Any]:
        """A span around one call of the manager (see the module docstring)."""
        operation = OPERATIONS[call]
        attributes: dict[str, Any] = {
            OPERATION_NAME: operation,
            PROVIDER_NAME: PROVIDER,
            STORE_NAME: PROVIDER,
            DB_SYSTEM: _DB_SYSTEMS.get(backend.split("+", 1)[0], backend),
            CALL: call,
            AGENT_ID: agent_id,
            MEMORY_SCOPE: _SCOPES.get(call, "session"),
        }
        if session_id is not None:
            attributes[CONVERSATION_ID] = session_id
        if query is not None and self.capture_content:
            attributes[QUERY] = query
        kind = self._trace.SpanKind.CLIENT
        with self.tracer.start_as_current_span(
            f"{operation} {PROVIDER}",
            kind=kind,
            attributes=attributes,
            # (an exception's message may quote what was stored: only its type goes out)
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except Exception as exc:
                status = self._trace.Status(self._trace.StatusCode.ERROR, type(exc).__name__)
                span.set_status(status)
                span.set_attribute(ERROR_TYPE, type(exc).__name__)
                raise

    @staticmethod
    def results(span: Any, found: Any) -> None:
        """What a search or restore returned, as a count."""
        report = getattr(found, "report", None)
        if report is not None:
            span.set_attribute(RESULT_COUNT, len(report.included_ids()))
        elif isinstance(found, list):
            span.set_attribute(RESULT_COUNT, len(found))
