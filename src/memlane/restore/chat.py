"""The chat view of a restored context: the recent conversation as role messages.

:func:`chat_turns` picks the recent ``message`` blocks that chat APIs accept as turns, never
separating a tool call from its result; :func:`message_tokens` counts the messages the way
restore() promises to keep them within ``max_tokens``.
"""

from __future__ import annotations

from typing import Any

from ..events import Event
from ..text.shrink import dumps
from ..text.tokens import Tokenizer
from .packer import Block

__all__ = ["MESSAGE_OVERHEAD", "chat_turns", "message_tokens"]

#: Tokens of chat framing counted per turn (role and separators; OpenAI documents 3 per
#: message). The system message is counted as its content alone, like ``text``.
MESSAGE_OVERHEAD = 4
_CHAT_ROLES = ("user", "assistant")


def chat_turns(recent: list[Block]) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """The recent conversation as chat turns, tool calls never apart from their results.

    A ``user`` / ``assistant`` message is a turn; a ``tool`` message is one only when it
    carries ``metadata["tool_call_id"]`` answering an assistant turn's ``tool_calls`` that is
    shown before it, and an assistant turn with ``tool_calls`` only when every call's result
    is shown. Everything else stays in the system message.
    """
    eligible = [b for b in recent if b.event.kind == "message" and b.turn is not None]
    answered = {
        b.event.metadata.get("tool_call_id")
        for b in eligible
        if b.event.role == "tool" and isinstance(b.event.metadata.get("tool_call_id"), str)
    }
    kept: list[Block] = []
    calls_shown: set[str] = set()
    for block in eligible:
        role = block.event.role
        calls = _call_ids(block.event)
        if role in _CHAT_ROLES and (role != "assistant" or calls <= answered):
            kept.append(block)
            calls_shown |= calls
        elif role == "tool" and block.event.metadata.get("tool_call_id") in calls_shown:
            kept.append(block)
    turns = []
    for block in kept:
        message: dict[str, Any] = {"role": block.event.role, "content": block.turn}
        for key in ("tool_calls", "tool_call_id", "name"):
            if key in block.event.metadata:
                message[key] = block.event.metadata[key]
        turns.append(message)
    return turns, frozenset(b.event.id for b in kept)


def _call_ids(event: Event) -> set[str]:
    calls = event.metadata.get("tool_calls")
    if not isinstance(calls, list):
        return set()
    return {c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)}


def message_tokens(
    tok: Tokenizer, system: str, turns: list[dict[str, Any]], system_tokens: int | None = None
) -> int:
    # The system message is counted as its content, as ``text`` is; each turn adds its
    # framing, which stands in for the "- user: " the same line costs in ``text``.
    # (``system_tokens``: the system message's count, when the caller has it)
    total = tok.count(system) if system_tokens is None else system_tokens
    for turn in turns:
        total += tok.count(str(turn["content"])) + MESSAGE_OVERHEAD
        extra = {k: v for k, v in turn.items() if k not in ("role", "content")}
        if extra:
            total += tok.count(dumps(extra))
    return total
