"""AutoGen memory kept in a session store: ``SessionMemory(autogen_core.memory.Memory)``.

Install the extra: ``pip install 'memlane[autogen]'``. Then::

    from autogen_agentchat.agents import AssistantAgent
    from memlane import AsyncSessionManager
    from memlane.integrations.autogen import SessionMemory

    memory = SessionMemory(AsyncSessionManager("assistant", db_path="memory.db"), key="user-42")
    agent = AssistantAgent("assistant", model_client=client, memory=[memory])

* ``add(MemoryContent)`` records an event (kind ``fact`` unless ``kind=`` says otherwise) in
  the session of ``key`` (created on first use): text as its content, a JSON object as its
  payload (and its text rendering as content), the MIME type and metadata in its metadata.
  Images and bytes are refused: this store keeps text and JSON.
* ``query(text)`` is this library's hybrid search over that session; each result's
  ``metadata`` carries its ``score`` and ``event_id``.
* ``update_context(model_context)`` puts ``restore(key, max_tokens, query=<the latest user
  message>)`` into the model context as one system message: goal, pending work, important
  events, a summary and the relevant history within the budget — not every memory at once,
  as AutoGen's ``ListMemory`` does.
* ``clear()`` deletes the session's events (the session stays); ``close()`` leaves the
  manager open (it is the caller's).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from ..aio import AsyncSessionManager
from ..errors import InvalidInput
from ..events import Event
from ..extraction import RuleExtractor
from . import require

require("autogen_core.memory", "autogen")

from autogen_core import CancellationToken, Component  # noqa: E402  (after the check naming the extra)
from autogen_core.memory import (  # noqa: E402
    Memory,
    MemoryContent,
    MemoryMimeType,
    MemoryQueryResult,
    UpdateContextResult,
)
from autogen_core.model_context import ChatCompletionContext  # noqa: E402
from autogen_core.models import SystemMessage, UserMessage  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from typing_extensions import Self  # noqa: E402

__all__ = ["SessionMemory", "SessionMemoryConfig"]

_MIME = "autogen_mime_type"  # metadata: the MemoryContent's MIME type


class SessionMemoryConfig(BaseModel):
    """What ``dump_component`` writes and ``load_component`` reads back."""

    agent_id: str
    url: str
    key: str
    max_tokens: int = 2000
    k: int = 5
    kind: str = "fact"
    name: str | None = None
    #: the manager's extractor, when it is one a config can name ("rules"; docs/memory.md)
    extractor: Literal["rules"] | None = None


class SessionMemory(Memory, Component[SessionMemoryConfig]):
    """AutoGen's ``Memory`` over an :class:`~memlane.AsyncSessionManager` (see the
    module docstring). ``key`` names the session (a user, a conversation); ``max_tokens``
    is restore's budget in ``update_context``; ``k`` is how many results ``query`` returns."""

    component_type = "memory"
    component_config_schema = SessionMemoryConfig
    component_provider_override = "memlane.integrations.autogen.SessionMemory"

    def __init__(
        self,
        manager: AsyncSessionManager,
        key: str,
        *,
        max_tokens: int = 2000,
        k: int = 5,
        kind: str = "fact",
        goal: str | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(manager, AsyncSessionManager):
            raise InvalidInput(
                "SessionMemory takes an AsyncSessionManager (AutoGen calls memory from async "
                "code): AsyncSessionManager(agent_id, db_path=...)."
            )
        self.manager = manager
        self.key = key
        self.max_tokens = max_tokens
        self.k = k
        self.kind = kind
        self.goal = goal or f"AutoGen memory {key}"
        self._name = name or f"session_memory_{key}"
        self._session_ready = False

    @property
    def name(self) -> str:
        return self._name

    async def _session(self) -> str:
        """The key's session, created on first use (the key is usable as its id)."""
        if not self._session_ready:
            await self.manager.session_for(self.key, goal=self.goal)
            self._session_ready = True
        return self.key

    # -- the Memory interface ----------------------------------------------------------------

    async def add(
        self, content: MemoryContent, cancellation_token: CancellationToken | None = None
    ) -> None:
        text, payload = _stored_form(content)
        metadata = {**(content.metadata or {}), _MIME: _mime(content.mime_type)}
        await self.manager.record(
            await self._session(), self.kind, text, payload, metadata=metadata
        )

    async def query(
        self,
        query: str | MemoryContent,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        text = query if isinstance(query, str) else _stored_form(query)[0]
        if not text.strip():
            return MemoryQueryResult(results=[])
        hits = await self.manager.search(
            text, k=int(kwargs.get("k", self.k)), session_id=await self._session()
        )
        return MemoryQueryResult(results=[_memory_content(hit.event, hit.score) for hit in hits])

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        messages = await model_context.get_messages()
        latest = next((m.content for m in reversed(messages) if isinstance(m, UserMessage)), None)
        query = latest if isinstance(latest, str) and latest.strip() else None
        restored = await self.manager.restore(await self._session(), self.max_tokens, query=query)
        if not restored.text:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        await model_context.add_message(SystemMessage(content=restored.text))
        used = MemoryContent(
            content=restored.text,
            mime_type=MemoryMimeType.TEXT,
            metadata={"token_count": restored.token_count, "session": self.key},
        )
        return UpdateContextResult(memories=MemoryQueryResult(results=[used]))

    async def clear(self) -> None:
        await self.manager.clear_session(await self._session())

    async def close(self) -> None:
        """Nothing to release: the manager is the caller's to close."""

    # -- components (dump_component / load_component) --------------------------------------

    def _to_config(self) -> SessionMemoryConfig:
        return SessionMemoryConfig(
            agent_id=self.manager.agent_id,
            url=self.manager.url,
            key=self.key,
            max_tokens=self.max_tokens,
            k=self.k,
            kind=self.kind,
            name=self._name,
            # (an LLMExtractor or a callable is no config: a loaded component opens without)
            extractor="rules" if isinstance(self.manager.extractor, RuleExtractor) else None,
        )

    @classmethod
    def _from_config(cls, config: SessionMemoryConfig) -> Self:
        manager = AsyncSessionManager(config.agent_id, url=config.url, extractor=config.extractor)
        return cls(
            manager,
            config.key,
            max_tokens=config.max_tokens,
            k=config.k,
            kind=config.kind,
            name=config.name,
        )


def _mime(mime: MemoryMimeType | str) -> str:
    return mime.value if isinstance(mime, MemoryMimeType) else str(mime)


def _stored_form(content: MemoryContent) -> tuple[str, Any]:
    """``(text, payload)``: text as it is; a JSON object as payload with its text rendering."""
    value = content.content
    if isinstance(value, str):
        return value, None
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True), value
    raise InvalidInput(
        f"SessionMemory stores text and JSON objects, not {type(value).__name__}; describe "
        "the image or file in text (and keep the file elsewhere)."
    )


def _memory_content(event: Event, score: float) -> MemoryContent:
    metadata = dict(event.metadata)
    mime = str(metadata.pop(_MIME, MemoryMimeType.TEXT.value))
    content: Any = event.payload if isinstance(event.payload, dict) else event.content
    return MemoryContent(
        content=content,
        mime_type=mime,
        metadata={**metadata, "score": score, "event_id": event.id},
    )
