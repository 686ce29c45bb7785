"""LangChain messages as memlane events and back, for the LangChain adapters
(:mod:`memlane.integrations.langchain`): a message's role and text, the metadata that keeps
its id, a payload that round-trips to the same message. Not part of the public API.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, Union

from ..aio import AsyncSessionManager
from ..errors import InvalidInput, InvalidPayload
from ..events import Event, is_message_role
from ..manager import SessionManager
from . import require

require("langchain_core", "langchain")

from langchain_core.messages import (  # noqa: E402  (after the check that names the extra)
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

__all__ = ["MESSAGE_ID", "Manager", "message_role", "message_text"]

#: metadata of a recorded message: the LangChain message's id (or a digest when it has none)
MESSAGE_ID = "lc_message_id"
_LOSSY = "lc_payload_lossy"  # metadata: the payload had values JSON cannot hold (repr'd)

Manager = Union[SessionManager, AsyncSessionManager]  # noqa: UP007  (a runtime alias)
T = TypeVar("T")


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
