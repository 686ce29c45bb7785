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

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..aio import AsyncSessionManager
from ..errors import InvalidInput, SessionNotFound
from ..events import Event
from ..manager import SessionManager
from ..restore.result import RestoredContext
from . import require

require("langchain_core", "langchain")
require("langchain.agents.middleware", "langchain")

from langchain.agents.middleware import (  # noqa: E402  (after the check that names the extra)
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.config import get_config  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402

from ._langchain_history import SessionChatMessageHistory  # noqa: E402
from ._langchain_messages import (  # noqa: E402
    MESSAGE_ID,
    Manager,
    _add_async,
    _add_sync,
    _check_manager,
    _latest_user_text,
    _message_id,
    _off_loop,
    _sync_of,
    message_role,
    message_text,
)
from ._langchain_retriever import SessionRetriever  # noqa: E402

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

_ID_CHUNK = 500  # ids per dedup query
_KEYS_REMEMBERED = 1024  # sessions whose recorded ids the middleware keeps in memory

KeyFunction = Callable[[Any, Runtime[Any]], str]
"""``key(state, runtime) -> session key``: e.g. ``lambda state, rt: rt.context.user_id``."""


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


def _in_request(newest: Sequence[Event], messages: Sequence[BaseMessage]) -> list[str]:
    """The session's events the model request already carries (by message id): restore
    leaves them out, so the model does not read them twice."""
    ids = {message.id for message in messages if message.id}
    return [event.id for event in newest if event.metadata.get(MESSAGE_ID) in ids]
