"""LlamaIndex memory kept in a session store: ``SessionMemoryBlock`` and ``SessionChatStore``.

Install the extra: ``pip install 'memlane[llamaindex]'``. Then::

    from llama_index.core.memory import Memory
    from memlane import AsyncSessionManager
    from memlane.integrations.llamaindex import SessionChatStore, SessionMemoryBlock

    manager = AsyncSessionManager("assistant", db_path="memory.db")
    memory = Memory.from_defaults(
        session_id="conversation-7",
        chat_store=SessionChatStore(manager),               # the short-term FIFO
        memory_blocks=[SessionMemoryBlock(manager, "user-42", max_tokens=1000)],  # long-term
        token_limit=4000,
    )

How LlamaIndex's model maps onto ours (docs/integrations/llamaindex.md says more):

* **A chat store key is a session key.** ``SessionChatStore`` keeps each ``ChatMessage`` as
  a ``message`` event of the key's session (created on the first write): role
  ``message.role.value``, its text rendering as content, ``message.model_dump(mode="json")``
  as payload (read back with ``ChatMessage.model_validate``: equal to what was added), and
  LlamaIndex's status (active / archived) in its metadata. Order, limits, offsets, counts,
  deletes and ``get_keys`` behave as in LlamaIndex's ``SQLAlchemyChatStore``, except that
  ``delete_message`` takes a position, not a table row id; the chat store sees only the
  messages it wrote.
* **A memory block is a session's restore.** ``SessionMemoryBlock._aget`` returns
  ``restore(key, max_tokens, query=<the latest user message>)``: goal, pending work,
  important events, the rolling summary and the history relevant to the question, within
  the budget. ``atruncate`` restores again with the smaller budget LlamaIndex asks for.
* **Flushed messages become long-term memory once.** ``_aput`` records the messages
  LlamaIndex's ``Memory`` flushes out of its short-term queue. A message that the key's
  session already holds as a chat-store message (the chat store and the block share a key)
  is not recorded again: the block keeps that event, so ``Memory.reset()`` then removes it
  from the chat store's view but not from the block's memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from ..aio import AsyncSessionManager
from ..errors import EventNotFound, SessionNotFound
from ..events import Event
from . import require

require("llama_index.core", "llamaindex")

from llama_index.core.base.llms.types import (  # noqa: E402  (after the check naming the extra)
    CachePoint,
    ChatMessage,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import (  # noqa: E402
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
)
from llama_index.core.memory.memory import BaseMemoryBlock  # noqa: E402
from llama_index.core.storage.chat_store.base_db import (  # noqa: E402
    AsyncDBChatStore,
    MessageStatus,
)

__all__ = ["SessionChatStore", "SessionMemoryBlock"]

# Metadata of the message events this module writes.
_STATUS = "li_status"  # the chat store's status: "active" / "archived" (absent: not its own)
_ID = "li_id"  # a chat-store message's id, the handle of its status changes (record replace=)
_DIGEST = "li_digest"  # a hash of the message's JSON: how the block knows a message it holds
_BLOCK = "li_block"  # the name of the memory block whose long-term memory the event is
_SESSION = "li_session"  # the Memory's session id a block was given the message by

_IN_CHAT_STORE = {_STATUS: {"$exists": True}}
# the budget under which atruncate gives the block up rather than restoring a stub
_MIN_BUDGET = 32
_RESTORES_KEPT = 16  # recent restores remembered for atruncate (text -> budget and query)

_NOT_ASYNC = (
    "{cls} takes an AsyncSessionManager (LlamaIndex calls memory from async code): "
    "AsyncSessionManager(agent_id, db_path=...)."
)


class SessionChatStore(AsyncDBChatStore):
    """LlamaIndex's ``AsyncDBChatStore`` over an
    :class:`~memlane.AsyncSessionManager`: each key is a session key of the manager's
    agent. Pass it as ``Memory.from_defaults(chat_store=...)``.

    ``goal``: the goal of the sessions it creates (``{key}`` stands for the key).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    manager: AsyncSessionManager = Field(exclude=True, description="Where messages are kept.")
    goal: str = Field(
        default="LlamaIndex conversation {key}",
        description="The goal of the sessions this store creates; {key} is the key.",
    )
    _last_us: dict[str, int] = PrivateAttr(default_factory=dict)

    def __init__(self, manager: AsyncSessionManager | None = None, **data: Any) -> None:
        if manager is not None:
            data["manager"] = manager
        super().__init__(**data)

    @field_validator("manager", mode="before")
    @classmethod
    def _check_manager(cls, value: Any) -> Any:
        if not isinstance(value, AsyncSessionManager):
            raise ValueError(_NOT_ASYNC.format(cls=cls.__name__))
        return value

    @classmethod
    def class_name(cls) -> str:
        return "SessionChatStore"

    # -- reads -------------------------------------------------------------------------------

    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """The key's messages of ``status`` (None: all) in the order they were added."""
        found = await self._events(key, status, limit=limit, offset=offset or 0)
        return [_message(event) for event in found]

    async def count_messages(
        self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE
    ) -> int:
        return len(await self._events(key, status))

    async def get_keys(self) -> list[str]:
        """The keys that hold messages (sorted), as LlamaIndex's stores list them."""
        keys = []
        for session in await self.manager.list_sessions(limit=None, include_shared=False):
            if session.key is not None and await self.manager.events(
                session.id, kinds="message", where=_IN_CHAT_STORE, limit=1
            ):
                keys.append(session.key)
        return sorted(keys)

    # -- writes ------------------------------------------------------------------------------

    async def add_message(
        self, key: str, message: ChatMessage, status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        await self.add_messages(key, [message], status)

    async def add_messages(
        self,
        key: str,
        messages: list[ChatMessage],
        status: MessageStatus = MessageStatus.ACTIVE,
    ) -> None:
        """Add the messages in order, in one transaction (all or none)."""
        if not messages:
            return
        session_id = await self._session(key)
        items = []
        for message in messages:
            payload = message.model_dump(mode="json")
            metadata = {
                _STATUS: MessageStatus(status).value,
                _ID: uuid.uuid4().hex,
                _DIGEST: _digest(payload),
            }
            items.append(_item(message, payload, metadata, created_at=self._stamp(session_id)))
        await self.manager.record_many(session_id, items)

    async def set_messages(
        self,
        key: str,
        messages: list[ChatMessage],
        status: MessageStatus = MessageStatus.ACTIVE,
    ) -> None:
        """Replace every message of the key (of any status) with ``messages``."""
        await self.delete_messages(key)
        await self.add_messages(key, messages, status)

    # -- deletes -----------------------------------------------------------------------------

    async def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete the message at position ``idx`` (0-based, in ``get_messages(key,
        status=None)``) and return it; None when there is none. LlamaIndex's SQL store takes
        its table's row id here, which its interface never shows: a position is what a
        caller can know."""
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            return None
        found = await self._events(key, None, limit=1, offset=idx)
        if not found:
            return None
        await self._remove(found[0])
        return _message(found[0])

    async def delete_messages(self, key: str, status: MessageStatus | None = None) -> None:
        """Delete the key's messages of ``status`` (None: all)."""
        for event in await self._events(key, status):
            await self._remove(event)

    async def delete_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Delete the ``n`` oldest active messages and return them."""
        if n <= 0:
            return []
        oldest = await self._events(key, MessageStatus.ACTIVE, limit=n)
        for event in oldest:
            await self._remove(event)
        return [_message(event) for event in oldest]

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Mark the ``n`` oldest active messages archived and return them."""
        if n <= 0:
            return []
        oldest = await self._events(key, MessageStatus.ACTIVE, limit=n)
        for event in oldest:
            await _rewrite(self.manager, event, {_STATUS: MessageStatus.ARCHIVED.value})
        return [_message(event) for event in oldest]

    # -- helpers -----------------------------------------------------------------------------

    async def _events(
        self, key: str, status: MessageStatus | None, *, limit: int | None = None, offset: int = 0
    ) -> list[Event]:
        where = _IN_CHAT_STORE if status is None else {_STATUS: MessageStatus(status).value}
        try:
            return await self.manager.events(
                key, kinds="message", where=where, limit=limit, offset=offset
            )
        except SessionNotFound:
            return []

    async def _session(self, key: str) -> str:
        session = await self.manager.session_for(key, goal=self.goal.replace("{key}", key))
        return session.id

    def _stamp(self, session_id: str) -> datetime:
        """Now, but always after this store's previous message in the session: the log
        orders by time, and an archived message is rewritten with its original time."""
        now = datetime.now(timezone.utc)
        now_us = (now - _EPOCH) // timedelta(microseconds=1)
        stamp = max(now_us, self._last_us.get(session_id, 0) + 1)
        self._last_us[session_id] = stamp
        return _EPOCH + timedelta(microseconds=stamp)

    async def _remove(self, event: Event) -> None:
        """Delete one chat-store message; one a memory block keeps only leaves the chat
        store's view (it stays the block's long-term memory)."""
        if event.metadata.get(_BLOCK) is not None:
            await _rewrite(self.manager, event, {_STATUS: None, _ID: None})
            return
        with contextlib.suppress(EventNotFound):  # deleted meanwhile: what was asked for
            await self.manager.delete_event(event.id)


class SessionMemoryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block over the session of ``key`` (see the module docstring):
    its content is ``restore(key, max_tokens, query=<the latest user message>)``, and the
    messages ``Memory`` flushes out of its short-term queue are recorded there.

    ``goal``: creates the session with this goal on first use (otherwise the first flush
    creates it, with goal "LlamaIndex memory <key>"). ``other_sessions``: restore also draws
    relevant history from the agent's other sessions. ``priority`` defaults to 1, so
    ``Memory`` may shrink the block (it restores again within the smaller budget); 0 makes
    it never truncated.
    """

    name: str = Field(default="SessionMemory", description="The name of the memory block.")
    priority: int = Field(
        default=1, description="Truncation priority (0 = never truncate; 1 = truncated last)."
    )
    manager: AsyncSessionManager = Field(exclude=True, description="Where the memory is kept.")
    key: str = Field(description="The session key of this memory (a user, a conversation).")
    max_tokens: int = Field(default=1000, gt=0, description="restore()'s token budget.")
    goal: str | None = Field(default=None, description="The goal of the session, if created.")
    other_sessions: bool = Field(
        default=False, description="Also draw relevant history from the agent's other sessions."
    )
    _restored: dict[str, tuple[int, str | None, tuple[str, ...]]] = PrivateAttr(
        default_factory=dict
    )

    def __init__(
        self, manager: AsyncSessionManager | None = None, key: str | None = None, **data: Any
    ) -> None:
        if manager is not None:
            data["manager"] = manager
        if key is not None:
            data["key"] = key
        super().__init__(**data)

    @field_validator("manager", mode="before")
    @classmethod
    def _check_manager(cls, value: Any) -> Any:
        if not isinstance(value, AsyncSessionManager):
            raise ValueError(_NOT_ASYNC.format(cls=cls.__name__))
        return value

    async def _session(self, *, create: bool) -> str | None:
        if create:
            goal = self.goal or f"LlamaIndex memory {self.key}"
            return (await self.manager.session_for(self.key, goal=goal)).id
        try:
            return (await self.manager.session_for(self.key)).id
        except SessionNotFound:
            return None

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The session restored within ``max_tokens``, for the latest user message."""
        session_id = await self._session(create=self.goal is not None)
        if session_id is None:
            return ""  # nothing remembered yet
        query = _latest_user_text(messages or [])
        carried = await self._carried(session_id, messages or [])
        return await self._restore(session_id, self.max_tokens, query, carried)

    async def _carried(self, session_id: str, messages: list[ChatMessage]) -> tuple[str, ...]:
        """The session's events that are among ``messages`` (the short-term memory the model
        gets anyway): restore leaves them out, so no turn is read twice."""
        if not messages:
            return ()
        digests = sorted({_digest(message.model_dump(mode="json")) for message in messages})
        found = await self.manager.events(
            session_id, kinds="message", where={_DIGEST: {"$in": digests}}
        )
        return tuple(event.id for event in found)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Restore again within ``tokens_to_truncate`` fewer tokens (None when what is left
        is too small to be useful)."""
        known = self._restored.get(content) if isinstance(content, str) else None
        if known is None:
            return None
        tokens, query, carried = known
        budget = tokens - max(0, int(tokens_to_truncate))
        session_id = await self._session(create=False)
        if budget < _MIN_BUDGET or session_id is None:
            return None
        return await self._restore(session_id, budget, query, carried) or None

    async def aput(
        self,
        messages: list[ChatMessage],
        from_short_term_memory: bool = False,
        session_id: str | None = None,
    ) -> None:
        """As LlamaIndex's, except that the Memory's session id goes in the events'
        metadata instead of being written into each message's ``additional_kwargs``: the
        messages are recorded as the chat store held them."""
        if from_short_term_memory and not self.accept_short_term_memory:
            return
        await self._record(messages, session_id)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Record ``messages`` in the session, each once."""
        await self._record(messages, None)

    async def _record(self, messages: list[ChatMessage], memory_session: str | None) -> None:
        if not messages:
            return
        session_id = await self._session(create=True)
        assert session_id is not None
        payloads = [message.model_dump(mode="json") for message in messages]
        digests = [_digest(payload) for payload in payloads]
        held = await self._held(session_id, set(digests))
        extra = {_BLOCK: self.name} | ({_SESSION: memory_session} if memory_session else {})
        new = []
        for message, payload, digest in zip(messages, payloads, digests, strict=True):
            candidates = held.get(digest)
            if candidates:  # the chat store holds it in this session: keep that event
                await _rewrite(self.manager, candidates.pop(0), extra)
            else:
                new.append(_item(message, payload, {_DIGEST: digest, **extra}))
        if new:
            await self.manager.record_many(session_id, new)

    async def _held(self, session_id: str, digests: set[str]) -> dict[str, list[Event]]:
        """The session's chat-store messages with these digests that no block keeps yet,
        archived ones (those Memory flushes) first, each oldest first."""
        where = {
            _DIGEST: {"$in": sorted(digests)},
            _STATUS: {"$exists": True},
            _BLOCK: {"$exists": False},
        }
        found = await self.manager.events(session_id, kinds="message", where=where)
        found.sort(key=lambda e: e.metadata.get(_STATUS) != MessageStatus.ARCHIVED.value)
        held: dict[str, list[Event]] = {}
        for event in found:
            held.setdefault(str(event.metadata[_DIGEST]), []).append(event)
        return held

    async def _restore(
        self, session_id: str, budget: int, query: str | None, carried: tuple[str, ...]
    ) -> str:
        restored = await self.manager.restore(
            session_id, budget, query=query, other_sessions=self.other_sessions, exclude=carried
        )
        if restored.text:
            if len(self._restored) >= _RESTORES_KEPT:
                self._restored.pop(next(iter(self._restored)))
            self._restored[restored.text] = (restored.token_count, query, carried)
        return restored.text


# -- mapping ---------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _render(message: ChatMessage) -> str:
    """The text of a ``ChatMessage`` that search and restore see: its text blocks, tool calls
    as ``[tool call name {...}]``, other media as ``[image: url]``; never empty.

    >>> _render(ChatMessage(role="user", content="hello"))
    'hello'
    >>> _render(ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_name="f")]))
    '[tool call f {}]'
    """
    parts: list[str] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            parts.append(f"[tool call {block.tool_name} {_arguments(block.tool_kwargs)}]")
        elif isinstance(block, ThinkingBlock | CachePoint):
            continue  # reasoning and cache hints are not the conversation
        else:
            where = getattr(block, "url", None) or getattr(block, "path", None)
            parts.append(f"[{block.block_type}: {where}]" if where else f"[{block.block_type}]")
    for call in _listed(message.additional_kwargs.get("tool_calls")):
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and function.get("name"):
            parts.append(f"[tool call {function['name']} {function.get('arguments') or '{}'}]")
    text = "\n".join(part for part in parts if part.strip())
    return text if text.strip() else f"[{message.role.value} message]"


def _arguments(kwargs: Any) -> str:
    return kwargs if isinstance(kwargs, str) else json.dumps(kwargs, ensure_ascii=False)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _chat_metadata(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What restore's chat view pairs tool calls and results by: an assistant message's
    ``tool_calls`` (OpenAI's form, from ``additional_kwargs`` or its tool-call blocks) and a
    tool message's ``tool_call_id`` and ``name``."""
    kwargs = payload.get("additional_kwargs") or {}
    metadata: dict[str, Any] = {}
    calls = [
        call
        for call in _listed(kwargs.get("tool_calls"))
        if isinstance(call, Mapping) and isinstance(call.get("id"), str)
    ]
    for block in _listed(payload.get("blocks")):
        if block.get("block_type") == "tool_call" and isinstance(block.get("tool_call_id"), str):
            arguments = _arguments(block.get("tool_kwargs") or {})
            calls.append(
                {
                    "id": block["tool_call_id"],
                    "type": "function",
                    "function": {"name": block.get("tool_name"), "arguments": arguments},
                }
            )
    if calls:
        metadata["tool_calls"] = calls
    for name in ("tool_call_id", "name"):
        if isinstance(kwargs.get(name), str):
            metadata[name] = kwargs[name]
    return metadata


def _item(
    message: ChatMessage,
    payload: dict[str, Any],
    metadata: dict[str, Any],
    created_at: datetime | None = None,
) -> dict[str, Any]:
    """A ``record_many`` item for one message: payload verbatim, text rendering as content."""
    item = {
        "kind": "message",
        "role": message.role.value,
        "content": _render(message),
        "payload": payload,
        "metadata": {**_chat_metadata(payload), **metadata},
    }
    return item if created_at is None else {**item, "created_at": created_at}


def _digest(payload: Mapping[str, Any]) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _message(event: Event) -> ChatMessage:
    return ChatMessage.model_validate(event.payload)


def _latest_user_text(messages: list[ChatMessage]) -> str | None:
    for message in reversed(messages):
        if message.role == MessageRole.USER:
            text = message.content
            return text if text and text.strip() else None
    return None


async def _rewrite(manager: AsyncSessionManager, event: Event, changes: dict[str, Any]) -> None:
    """Write a chat-store message again with its metadata changed (a None value removes a
    key), in its place: same time, content, payload, importance and tags; the old event goes
    in the same transaction (``record(replace=...)``)."""
    metadata = {k: v for k, v in event.metadata.items() if k != "role"}
    for name, value in changes.items():
        if value is None:
            metadata.pop(name, None)
        else:
            metadata[name] = value
    await manager.add_message(
        event.session_id,
        str(event.metadata.get("role") or MessageRole.USER.value),
        event.content,
        payload=event.payload,
        metadata=metadata,
        created_at=event.created_at,
        importance=event.importance,
        tags=list(event.tags),
        index=event.indexed,
        replace={_ID: event.metadata[_ID]},
    )
