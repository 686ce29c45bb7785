"""LangChain's chat message history over a memlane session (a part of
:mod:`memlane.integrations.langchain`, which exports it): ``SessionChatMessageHistory``.
Not part of the public API by this module's name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from ..aio import AsyncSessionManager
from ..errors import InvalidInput, SessionNotFound
from ..manager import SessionManager
from . import require
from ._langchain_messages import (
    Manager,
    _add_async,
    _add_sync,
    _check_manager,
    _from_event,
    _off_loop,
    _sync_of,
)

require("langchain_core", "langchain")

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402  (after the check)
from langchain_core.messages import BaseMessage  # noqa: E402

__all__ = ["SessionChatMessageHistory"]


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
