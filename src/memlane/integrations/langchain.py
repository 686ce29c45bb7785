"""LangChain 1.x adapters: agent middleware, a retriever and a chat history over a session store.

Install the extra: ``pip install 'memlane[langchain]'``. Then::

    from langchain.agents import create_agent
    from memlane import AsyncSessionManager
    from memlane.integrations.langchain import SessionMemoryMiddleware, SessionRetriever

    manager = AsyncSessionManager("assistant", db_path="memory.db")
    agent = create_agent(model, tools=[...], middleware=[SessionMemoryMiddleware(manager)])
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "user-42"}})

* :class:`SessionMemoryMiddleware` (an ``AgentMiddleware``): before each model call it adds
  ``restore(key, max_tokens, query=<the latest user message>)`` to the system message, and it
  records the conversation as it happens — the user's input, each AI message with its tool
  calls, each tool result with its ``tool_call_id`` — one ``message`` event per message, once
  (the message id is kept in the event's metadata), with LangChain's own message dict,
  verbatim, as the payload. The session is the one of ``key`` (default: the run's
  ``thread_id``), created on first use.
* :class:`SessionRetriever` (a ``BaseRetriever``): this library's search, as ``Document`` s.
* :class:`SessionChatMessageHistory` (a ``BaseChatMessageHistory``) for code written against
  chat histories. LangChain deprecates chat histories (langchain-core 1.6.4) in favour of an
  agent's state and middleware: new code should use the middleware.

Every class takes a :class:`~memlane.SessionManager` or an
:class:`~memlane.AsyncSessionManager`. Sync entry points use the synchronous manager
(``AsyncSessionManager.sync`` when given the async twin); async ones await the async twin, or
run the synchronous manager in a worker thread: the event loop is never blocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union

from ..aio import AsyncSessionManager
from ..errors import InvalidInput, InvalidPayload, SessionNotFound
from ..events import Event, Hit, is_message_role
from ..manager import SessionManager
from ..restore.plan import RestoredContext
from . import require

require("langchain_core", "langchain")
require("langchain.agents.middleware", "langchain")

from langchain.agents.middleware import (  # noqa: E402  (after the check that names the extra)
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langgraph.config import get_config  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

if TYPE_CHECKING:  # newer than langchain 1.1, which this module needs: annotations only
    from langchain.agents.middleware.types import ExtendedModelResponse

__all__ = [
    "MESSAGE_ID",
    "SessionChatMessageHistory",
    "SessionMemoryMiddleware",
    "SessionRetriever",
    "message_role",
    "message_text",
]

#: metadata of a recorded message: the LangChain message's id (or a digest when it has none)
MESSAGE_ID = "lc_message_id"
_LOSSY = "lc_payload_lossy"  # metadata: the payload had values JSON cannot hold (repr'd)
_ID_CHUNK = 500  # ids per dedup query
_KEYS_REMEMBERED = 1024  # sessions whose recorded ids the middleware keeps in memory

Manager = Union[SessionManager, AsyncSessionManager]  # noqa: UP007  (a runtime alias)
KeyFunction = Callable[[Any, Runtime[Any]], str]
"""``key(state, runtime) -> session key``: e.g. ``lambda state, rt: rt.context.user_id``."""
T = TypeVar("T")


# -- messages <-> events ------------------------------------------------------------------------


def message_role(message: BaseMessage) -> str:
    """The role a LangChain message is recorded with.

    >>> message_role(HumanMessage("hi")), message_role(AIMessage("hello"))
    ('user', 'assistant')
    >>> [message_role(ChatMessage(role=r, content="x")) for r in ("developer", "critic", "!")]
    ['developer', 'langchain:critic', 'langchain:chat']
    """
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, FunctionMessage):
        return "function"
    if isinstance(message, ChatMessage):
        if is_message_role(message.role):
            return message.role
        namespaced = f"langchain:{message.role}"
        return namespaced if is_message_role(namespaced) else "langchain:chat"
    other = f"langchain:{message.type}"
    return other if is_message_role(other) else "langchain:message"


def message_text(message: BaseMessage) -> str:
    """The text that is indexed and restored: the message's text, then its tool calls; for
    a message without either, the kinds of its content blocks.

    >>> message_text(AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Lyon"},
    ...     "id": "c1"}]))
    'call weather({"city": "Lyon"})'
    """
    parts = [text] if (text := str(message.text)).strip() else []
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            parts.append(f"call {call['name']}({_dumps(call['args'])})")
    if not parts:
        content = message.content
        kinds = [
            str(block.get("type", "block")) if isinstance(block, dict) else "text"
            for block in (content if isinstance(content, list) else [])
        ]
        parts.append(f"[{', '.join(kinds)}]" if kinds else f"(empty {message.type} message)")
    return "\n".join(parts)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def _message_id(message: BaseMessage) -> str:
    """The message's id, or (rare: agent state gives every message one) a content digest."""
    if isinstance(message.id, str) and message.id:
        return message.id
    digest = hashlib.sha256(_dumps(message_to_dict(message)).encode("utf-8")).hexdigest()
    return f"sha256:{digest[:32]}"


def _metadata(message: BaseMessage, message_id: str | None) -> dict[str, Any]:
    """What restore's chat view needs (OpenAI-shaped ``tool_calls`` / ``tool_call_id``)."""
    metadata: dict[str, Any] = {} if message_id is None else {MESSAGE_ID: message_id}
    if isinstance(message, AIMessage):
        calls = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": _dumps(call["args"])},
            }
            for call in message.tool_calls
            if call.get("id")
        ]
        if calls:
            metadata["tool_calls"] = calls
    elif isinstance(message, ToolMessage):
        metadata["tool_call_id"] = message.tool_call_id
        if message.name:
            metadata["tool"] = message.name
    return metadata


def _lossy(payload: Any) -> Any:
    """``payload`` with what JSON cannot hold (objects, NaN) replaced by text."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return repr(value)
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        if value is None or isinstance(value, str | int | float | bool):
            return value
        return repr(value)

    return clean(payload)


def _record_args(
    message: BaseMessage, message_id: str | None, *, lossy: bool = False
) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """``(role, content, payload, metadata)`` for ``add_message``."""
    metadata = _metadata(message, message_id)
    payload = message_to_dict(message)
    if lossy:
        payload, metadata = _lossy(payload), {**metadata, _LOSSY: True}
    return message_role(message), message_text(message), payload, metadata


def _from_event(event: Event) -> BaseMessage:
    """The LangChain message an event holds: its payload, verbatim, when it is one;
    otherwise one built from its role and content (messages recorded by other code)."""
    payload = event.payload
    if isinstance(payload, dict) and isinstance(payload.get("data"), dict):
        try:
            return messages_from_dict([payload])[0]
        except (ValueError, TypeError, KeyError):
            pass  # not a LangChain message after all
    role, meta = event.role or "user", event.metadata
    if role == "user":
        return HumanMessage(event.content, id=event.id)
    if role in ("assistant", "model", "chatbot"):
        return AIMessage(event.content, id=event.id)
    if role in ("system", "developer"):
        return SystemMessage(event.content, id=event.id)
    if role == "tool" and isinstance(meta.get("tool_call_id"), str):
        return ToolMessage(event.content, tool_call_id=meta["tool_call_id"], id=event.id)
    if role == "function":
        return FunctionMessage(
            content=event.content, name=str(meta.get("tool", "function")), id=event.id
        )
    return ChatMessage(role=role, content=event.content, id=event.id)


def _latest_user_text(messages: Sequence[BaseMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            text = str(message.text)
            return text if text.strip() else None
    return None


def _sync_of(manager: Manager) -> SessionManager:
    return manager.sync if isinstance(manager, AsyncSessionManager) else manager


def _check_manager(manager: object, who: str) -> Manager:
    if not isinstance(manager, SessionManager | AsyncSessionManager):
        raise InvalidInput(
            f"{who} takes a SessionManager or an AsyncSessionManager, not "
            f"{type(manager).__name__}: SessionManager(agent_id, db_path=...)."
        )
    return manager


async def _off_loop(manager: Manager, call: Callable[[SessionManager], T]) -> T:
    """``call(sync manager)`` in a worker thread (only when no async twin was given)."""
    return await asyncio.to_thread(call, _sync_of(manager))


# -- the agent middleware -----------------------------------------------------------------------


class SessionMemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Durable memory for a ``create_agent`` agent (see the module docstring).

    Parameters:
        manager: a :class:`~memlane.SessionManager` or an
            :class:`~memlane.AsyncSessionManager` (``invoke`` uses its ``.sync``,
            ``ainvoke`` awaits it). With only a ``SessionManager``, ``ainvoke`` runs it in
            worker threads.
        key: the session: a key (str), ``key(state, runtime) -> str``, or ``None`` for the
            run's ``thread_id`` (``config={"configurable": {"thread_id": ...}}``).
        max_tokens: restore's budget, added to the system message before each model call.
        goal: the goal of a session created for a new key (default: ``"LangChain agent
            conversation <key>"``).
        other_sessions: restore also draws relevant history from the agent's other sessions.
        restore: ``False`` only records (no memory is added to the model's prompt).
    """

    def __init__(
        self,
        manager: Manager,
        *,
        key: str | KeyFunction | None = None,
        max_tokens: int = 2000,
        goal: str | None = None,
        other_sessions: bool = False,
        restore: bool = True,
    ) -> None:
        super().__init__()
        self.manager = _check_manager(manager, "SessionMemoryMiddleware")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidInput(f"max_tokens must be a positive integer, got {max_tokens!r}.")
        if key is not None and not (isinstance(key, str) or callable(key)):
            raise InvalidInput(
                f"key must be a session key, a callable (state, runtime) -> key, or None for "
                f"the run's thread_id; got {type(key).__name__}."
            )
        self.key = key
        self.max_tokens = max_tokens
        self.goal = goal
        self.other_sessions = other_sessions
        self.restore = restore
        self.tools = []
        # per session key: the ids of messages known to be recorded (bounded LRU)
        self._recorded: OrderedDict[str, set[str]] = OrderedDict()
        self._lock = threading.Lock()

    # -- sync hooks ---------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Restore into the system message, then record the new input (restore first: the
        query never finds itself), then call the model."""
        key = self._key(request.state, request.runtime)
        sync = _sync_of(self.manager)
        sync.session_for(key, goal=self._goal(key))
        restored = None
        if self.restore:
            newest = sync.events(key, newest_first=True, limit=len(request.messages))
            restored = sync.restore(
                key,
                self.max_tokens,
                query=_latest_user_text(request.messages),
                other_sessions=self.other_sessions,
                exclude=_in_request(newest, request.messages),
            )
        self._record_sync(key, request.state["messages"])
        return handler(_with_memory(request, restored))

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the model's answer (with its tool calls) as it entered the state."""
        self._record_sync(self._key(state, runtime), state["messages"])
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record what came after the last model call (a ``return_direct`` tool's result)."""
        self._record_sync(self._key(state, runtime), state["messages"])
        return None

    # -- async hooks --------------------------------------------------------------------------

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        key = self._key(request.state, request.runtime)
        query = _latest_user_text(request.messages)
        goal = self._goal(key)
        manager = self.manager
        restored: RestoredContext | None = None
        window = len(request.messages)
        if isinstance(manager, AsyncSessionManager):
            await manager.session_for(key, goal=goal)
            if self.restore:
                newest = await manager.events(key, newest_first=True, limit=window)
                restored = await manager.restore(
                    key,
                    self.max_tokens,
                    query=query,
                    other_sessions=self.other_sessions,
                    exclude=_in_request(newest, request.messages),
                )
        else:
            await _off_loop(manager, lambda m: m.session_for(key, goal=goal))
            if self.restore:
                newest = await _off_loop(
                    manager, lambda m: m.events(key, newest_first=True, limit=window)
                )
                restored = await _off_loop(
                    manager,
                    lambda m: m.restore(
                        key,
                        self.max_tokens,
                        query=query,
                        other_sessions=self.other_sessions,
                        exclude=_in_request(newest, request.messages),
                    ),
                )
        await self._record_async(key, request.state["messages"])
        return await handler(_with_memory(request, restored))

    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        await self._record_async(self._key(state, runtime), state["messages"])
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        await self._record_async(self._key(state, runtime), state["messages"])
        return None

    # -- keys -----------------------------------------------------------------------------------

    def _key(self, state: Any, runtime: Runtime[Any]) -> str:
        if isinstance(self.key, str):
            return self.key
        if self.key is not None:
            key = self.key(state, runtime)
            if not isinstance(key, str) or not key.strip():
                raise InvalidInput(f"The key function returned {key!r}; it must return a key.")
            return key
        thread = None
        with contextlib.suppress(RuntimeError):  # outside a runnable context
            thread = (get_config().get("configurable") or {}).get("thread_id")
        if thread is None:
            thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
        if thread is None or not str(thread).strip():
            raise InvalidInput(
                "SessionMemoryMiddleware(key=None) keys the session by the run's thread_id: "
                "invoke with config={'configurable': {'thread_id': '...'}}, or pass key='...' "
                "or key=callable(state, runtime)."
            )
        return str(thread)

    def _goal(self, key: str) -> str:
        return self.goal or f"LangChain agent conversation {key}"

    # -- recording, each message once -----------------------------------------------------

    def _candidates(self, key: str, messages: Iterable[BaseMessage]) -> dict[str, BaseMessage]:
        """Messages not known (in memory) to be recorded, by id, in state order."""
        with self._lock:
            known = self._recorded.get(key, set())
            fresh: dict[str, BaseMessage] = {}
            for message in messages:
                if isinstance(message, RemoveMessage):
                    continue
                message_id = _message_id(message)
                if message_id not in known:
                    fresh.setdefault(message_id, message)
            return fresh

    def _remember(self, key: str, ids: Iterable[str]) -> None:
        with self._lock:
            known = self._recorded.pop(key, set())
            known.update(ids)
            self._recorded[key] = known
            while len(self._recorded) > _KEYS_REMEMBERED:
                self._recorded.popitem(last=False)

    def _record_sync(self, key: str, messages: Sequence[BaseMessage]) -> None:
        fresh = self._candidates(key, messages)
        if not fresh:
            return
        sync = _sync_of(self.manager)
        try:
            stored = _stored_ids(sync, key, list(fresh))  # recorded by an earlier process
        except SessionNotFound:  # no model call made it yet (a jump to the end)
            sync.session_for(key, goal=self._goal(key))
            stored = set()
        self._remember(key, stored)
        for message_id, message in fresh.items():
            if message_id not in stored:
                _add_sync(sync, key, message, message_id, lossy_ok=True)
                self._remember(key, (message_id,))

    async def _record_async(self, key: str, messages: Sequence[BaseMessage]) -> None:
        fresh = self._candidates(key, messages)
        if not fresh:
            return
        manager, ids, goal = self.manager, list(fresh), self._goal(key)
        try:
            if isinstance(manager, AsyncSessionManager):
                stored = await _astored_ids(manager, key, ids)
            else:
                stored = await _off_loop(manager, lambda m: _stored_ids(m, key, ids))
        except SessionNotFound:  # no model call made it yet (a jump to the end)
            if isinstance(manager, AsyncSessionManager):
                await manager.session_for(key, goal=goal)
            else:
                await _off_loop(manager, lambda m: m.session_for(key, goal=goal))
            stored = set()
        self._remember(key, stored)
        for message_id, message in fresh.items():
            if message_id not in stored:
                await _add_async(manager, key, message, message_id, lossy_ok=True)
                self._remember(key, (message_id,))


def _with_memory(request: ModelRequest[Any], restored: RestoredContext | None) -> ModelRequest[Any]:
    """The request with the restored text appended to its system message."""
    if restored is None or not restored.text:
        return request
    current = request.system_message
    if current is None:
        return request.override(system_message=SystemMessage(restored.text))
    content = current.content
    combined: str | list[str | dict[Any, Any]]
    if isinstance(content, str):
        combined = f"{content}\n\n{restored.text}" if content.strip() else restored.text
    else:
        combined = [*content, {"type": "text", "text": restored.text}]
    return request.override(system_message=current.model_copy(update={"content": combined}))


def _where_ids(ids: Sequence[str]) -> Iterable[dict[str, Any]]:
    for start in range(0, len(ids), _ID_CHUNK):
        yield {MESSAGE_ID: {"$in": list(ids[start : start + _ID_CHUNK])}}


def _stored_ids(manager: SessionManager, key: str, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for where in _where_ids(ids):
        found.update(
            str(e.metadata[MESSAGE_ID]) for e in manager.events(key, "message", where=where)
        )
    return found


async def _astored_ids(manager: AsyncSessionManager, key: str, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for where in _where_ids(ids):
        events = await manager.events(key, "message", where=where)
        found.update(str(e.metadata[MESSAGE_ID]) for e in events)
    return found


def _add_sync(
    manager: SessionManager,
    key: str,
    message: BaseMessage,
    message_id: str | None,
    *,
    lossy_ok: bool,
) -> Event:
    role, text, payload, metadata = _record_args(message, message_id)
    try:
        return manager.add_message(key, role, text, payload=payload, metadata=metadata)
    except InvalidPayload:
        if not lossy_ok:
            raise
    role, text, payload, metadata = _record_args(message, message_id, lossy=True)
    return manager.add_message(key, role, text, payload=payload, metadata=metadata)


async def _add_async(
    manager: Manager,
    key: str,
    message: BaseMessage,
    message_id: str | None,
    *,
    lossy_ok: bool,
) -> Event:
    if not isinstance(manager, AsyncSessionManager):
        return await _off_loop(
            manager, lambda m: _add_sync(m, key, message, message_id, lossy_ok=lossy_ok)
        )
    role, text, payload, metadata = _record_args(message, message_id)
    try:
        return await manager.add_message(key, role, text, payload=payload, metadata=metadata)
    except InvalidPayload:
        if not lossy_ok:
            raise
    role, text, payload, metadata = _record_args(message, message_id, lossy=True)
    return await manager.add_message(key, role, text, payload=payload, metadata=metadata)


# -- the retriever ------------------------------------------------------------------------------

SearchMode = Literal["hybrid", "semantic", "keyword"]


class SessionRetriever(BaseRetriever):
    """This library's search as a LangChain retriever: each hit is a ``Document`` whose
    ``page_content`` is the event's content and whose metadata carries ``event_id``,
    ``session_id``, ``agent_id``, ``kind``, ``created_at`` (ISO 8601, UTC), ``score``,
    ``importance``, ``tags``, ``role`` (messages) and the event's own ``event_metadata``.

    ``key``: one session (a key or id), or ``None`` for every session the agent may read
    (its own and its subscribed pools'); a key with no session yet finds nothing. ``k``,
    ``mode``, ``kinds``, ``where`` are :meth:`~memlane.SessionManager.search`'s and
    may also be given per call: ``retriever.invoke("query", k=3)``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    manager: Union[SessionManager, AsyncSessionManager]  # noqa: UP007  (pydantic, 3.10)
    key: str | None = None
    k: int = Field(default=4, ge=1)
    mode: SearchMode = "hybrid"
    kinds: str | list[str] | None = None
    where: dict[str, Any] | None = None

    def _search_args(self, query: str, overrides: Mapping[str, Any]) -> dict[str, Any] | None:
        unknown = set(overrides) - {"k", "mode", "kinds", "where"}
        if unknown:
            raise InvalidInput(
                f"SessionRetriever takes k, mode, kinds and where per call, not "
                f"{', '.join(sorted(unknown))}."
            )
        if not query.strip():
            return None
        return {
            "query": query,
            "k": overrides.get("k", self.k),
            "mode": overrides.get("mode", self.mode),
            "kinds": overrides.get("kinds", self.kinds),
            "where": overrides.get("where", self.where),
            "session_id": self.key,
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        args = self._search_args(query, overrides)
        if args is None:
            return []
        return _documents(_search(_sync_of(self.manager), args))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        args = self._search_args(query, overrides)
        if args is None:
            return []
        manager = self.manager
        if not isinstance(manager, AsyncSessionManager):
            return _documents(await _off_loop(manager, lambda m: _search(m, args)))
        try:
            return _documents(await manager.search(args.pop("query"), args.pop("k"), **args))
        except SessionNotFound:
            return []


def _search(manager: SessionManager, args: dict[str, Any]) -> list[Hit]:
    args = dict(args)
    try:
        return manager.search(args.pop("query"), args.pop("k"), **args)
    except SessionNotFound:
        return []


def _documents(hits: Sequence[Hit]) -> list[Document]:
    documents = []
    for hit in hits:
        event = hit.event
        metadata: dict[str, Any] = {
            "event_id": event.id,
            "session_id": event.session_id,
            "agent_id": event.agent_id,
            "kind": event.kind,
            "created_at": event.created_at.isoformat(),
            "score": hit.score,
            "importance": event.importance,
            "tags": list(event.tags),
            "event_metadata": dict(event.metadata),
        }
        if event.role is not None:
            metadata["role"] = event.role
        documents.append(Document(page_content=event.content, metadata=metadata, id=event.id))
    return documents


# -- the chat message history -------------------------------------------------------------------


class SessionChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept in the session of ``key``, for code written
    against ``BaseChatMessageHistory`` (``RunnableWithMessageHistory`` and the like).

    LangChain deprecates chat histories (langchain-core 1.6.4, removal in 2.0) in favour of an
    agent's state and middleware: new code should use :class:`SessionMemoryMiddleware`.

    Each message is one ``message`` event whose payload is ``message_to_dict(message)``,
    verbatim: :attr:`messages` rebuilds them equal with ``messages_from_dict`` (message events
    recorded by other code are rebuilt from their role and content). The session is created
    (with ``goal``) at the first write; reading or clearing a key with no session gives
    nothing. :meth:`clear` deletes the session's messages and keeps its other events.
    Messages must be JSON (a ``ToolMessage.artifact`` that is not is refused with
    :class:`~memlane.InvalidPayload`).
    """

    def __init__(self, manager: Manager, key: str, *, goal: str | None = None) -> None:
        super().__init__()
        self.manager = _check_manager(manager, "SessionChatMessageHistory")
        if not isinstance(key, str) or not key.strip():
            raise InvalidInput(f"key must be a non-empty string, got {key!r}.")
        self.key = key
        self.goal = goal or f"LangChain chat history {key}"

    # -- sync ---------------------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:
        """The session's messages, oldest first."""
        return _read(_sync_of(self.manager), self.key)

    @messages.setter
    def messages(self, messages: Sequence[BaseMessage]) -> None:
        self.clear()
        self.add_messages(messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        messages = list(messages)
        if not messages:
            return
        _add_all(_sync_of(self.manager), self.key, self.goal, messages)

    def clear(self) -> None:
        _clear(_sync_of(self.manager), self.key)

    # -- async --------------------------------------------------------------------------------

    async def aget_messages(self) -> list[BaseMessage]:
        manager = self.manager
        if not isinstance(manager, AsyncSessionManager):
            return await _off_loop(manager, lambda m: _read(m, self.key))
        try:
            events = await manager.events(self.key, "message")
        except SessionNotFound:
            return []
        return [_from_event(event) for event in events]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        messages = list(messages)
        if not messages:
            return
        manager = self.manager
        if not isinstance(manager, AsyncSessionManager):
            await _off_loop(manager, lambda m: _add_all(m, self.key, self.goal, messages))
            return
        await manager.session_for(self.key, goal=self.goal)
        for message in messages:
            await _add_async(
                manager, self.key, message, _message_id_or_none(message), lossy_ok=False
            )

    async def aclear(self) -> None:
        manager = self.manager
        if not isinstance(manager, AsyncSessionManager):
            await _off_loop(manager, lambda m: _clear(m, self.key))
            return
        with contextlib.suppress(SessionNotFound):
            await manager.clear_session(self.key, kinds="message")


def _message_id_or_none(message: BaseMessage) -> str | None:
    return message.id if isinstance(message.id, str) and message.id else None


def _add_all(manager: SessionManager, key: str, goal: str, messages: Sequence[BaseMessage]) -> None:
    manager.session_for(key, goal=goal)
    for message in messages:
        _add_sync(manager, key, message, _message_id_or_none(message), lossy_ok=False)


def _read(manager: SessionManager, key: str) -> list[BaseMessage]:
    try:
        events = manager.events(key, "message")
    except SessionNotFound:
        return []
    return [_from_event(event) for event in events]


def _clear(manager: SessionManager, key: str) -> None:
    with contextlib.suppress(SessionNotFound):
        manager.clear_session(key, kinds="message")


def _in_request(newest: Sequence[Event], messages: Sequence[BaseMessage]) -> list[str]:
    """The session's events the model request already carries (by message id): restore
    leaves them out, so the model does not read them twice."""
    ids = {message.id for message in messages if message.id}
    return [event.id for event in newest if event.metadata.get(MESSAGE_ID) in ids]
