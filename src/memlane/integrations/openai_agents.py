"""OpenAI Agents SDK sessions kept in a session store: ``AgentSession`` and ``restore_filter``.

Install the extra: ``pip install 'memlane[openai-agents]'``. Then::

    from agents import Agent, RunConfig, Runner
    from memlane import AsyncSessionManager
    from memlane.integrations.openai_agents import AgentSession, restore_filter

    mgr = AsyncSessionManager(agent_id="assistant", db_path="memory.db")
    session = AgentSession(mgr, "thread-42")          # the SDK's session_id is our session key
    config = RunConfig(call_model_input_filter=restore_filter(mgr, "thread-42", max_tokens=2000))
    result = await Runner.run(agent, "Where were we?", session=session, run_config=config)

How the SDK's model maps onto ours (docs/integrations/openai_agents.md says more):

* **A session is a keyed session.** ``AgentSession(manager, session_id)`` uses ``session_id``
  as the session's key: the first write gets or creates it with ``session_for(key,
  goal=...)``; reads of a session that does not exist yet find no items.
* **Items are message events, verbatim.** Each item (a Responses API input dict) is recorded
  with ``add_message``: the item itself is the payload and comes back equal; the event's
  content is a readable rendering (a message's text, ``lookup({"city":"Paris"})`` for a
  function call, a tool's output), which is what search and restore read. The role is the
  item's own, ``tool`` for tool outputs and ``assistant`` for calls and reasoning; the item's
  type is in the metadata (``oa_type``), a call's name too (``tool``), and a function call and
  its output carry the ``tool_calls`` / ``tool_call_id`` pair that restore's chat messages
  keep together.
* **Other messages of the session are items too**: a message recorded by other code (without
  an SDK item in its payload) reads back as ``{"role": ..., "content": text}``; events of other
  kinds (facts, steps, ...) are not items, but restore shows them.
* **``get_items(limit)`` is the SDK's contract**: exactly the newest ``limit`` items, as the
  SDK's ``SQLiteSession`` gives (a test runs both side by side). The SDK reads exact tails
  (``limit=1`` for the newest item, tail checks when it rewinds or resumes a write) and, since
  0.20, drops the tool outputs a session limit cut from their calls itself. With
  ``whole_tool_calls=True`` a limit never splits a call from its output instead: the items
  reach back to every cut-off call (and the reasoning item right before it).
* ``pop_item`` and ``clear_session`` delete message events only; the session, its goal and
  its other events stay.
* :func:`restore_filter` gives ``RunConfig(call_model_input_filter=...)`` a filter that adds
  ``restore()``'s context to the instructions of every model call, within a token budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, cast

from ..aio import AsyncSessionManager
from ..core import canonical_json
from ..errors import InvalidInput, SessionNotFound
from ..events import Event, is_message_role
from ..manager import SessionManager
from ..records.validate import identifier
from . import require

require("agents", "openai-agents")

from agents.items import TResponseInputItem  # noqa: E402  (after the check that names the extra)
from agents.run import CallModelData, ModelInputData  # noqa: E402

__all__ = ["ITEM_TYPE", "AgentSession", "restore_filter"]

#: metadata key holding an item's SDK type; its presence marks an event as an SDK item
ITEM_TYPE = "oa_type"
_KIND = "message"
_EASY_ROLES = ("user", "assistant", "system", "developer")

Manager = AsyncSessionManager | SessionManager


class AgentSession:
    """An OpenAI Agents SDK ``Session`` whose items live in a session store.

    ``manager``: an :class:`~memlane.AsyncSessionManager` (or a
    :class:`~memlane.SessionManager`, whose calls then run on a worker thread).
    ``session_id``: the SDK's session id, used as this library's session key (≤ 200
    characters). ``goal``: the goal a new session starts with (default ``"OpenAI Agents session
    <id>"``). ``session_settings``: the SDK's ``SessionSettings``; its ``limit`` applies when
    ``get_items`` is given none. ``whole_tool_calls``: let a limit reach back so that no
    tool output is returned without its call (see the module docstring).

    It implements the SDK's ``Session`` protocol (which the SDK asks third-party sessions to
    implement, rather than subclass ``SessionABC``).
    """

    def __init__(
        self,
        manager: Manager,
        session_id: str,
        *,
        goal: str | None = None,
        session_settings: Any = None,
        whole_tool_calls: bool = False,
    ) -> None:
        if not isinstance(manager, AsyncSessionManager | SessionManager):
            raise InvalidInput(
                f"AgentSession needs an AsyncSessionManager (or a SessionManager), got "
                f"{type(manager).__name__}: AgentSession(AsyncSessionManager(...), session_id)."
            )
        self.manager = manager
        # checked now, not at the first write deep inside a run
        self.session_id = identifier(session_id, "session_id")
        self.goal = goal if goal is not None else _default_goal(self.session_id)
        if session_settings is not None and not hasattr(session_settings, "limit"):
            raise InvalidInput(
                f"session_settings must be the SDK's SessionSettings, got {session_settings!r}: "
                "session_settings=agents.memory.SessionSettings(limit=20)."
            )
        self.session_settings = session_settings
        self.whole_tool_calls = bool(whole_tool_calls)

    def __repr__(self) -> str:
        return f"AgentSession({self.manager!r}, {self.session_id!r})"

    # -- the Session protocol ----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the newest ``limit`` of them.

        As in the SDK's ``SQLiteSession``: no ``limit`` takes ``session_settings.limit``, ``0``
        gives no items and a negative limit all of them.
        """
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInput(f"limit must be an integer or None, got {limit!r}.")
        if limit == 0:
            return []
        if limit is None or limit < 0:
            return [_item(event) for event in await self._messages()]
        return await self._tail(limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items, in order, in one transaction (``record_many``): all are written or,
        if one is bad (not a JSON object), none."""
        if not items:
            return
        records = [_record_of(item, index) for index, item in enumerate(items)]
        await _run(self.manager, "session_for", self.session_id, goal=self.goal)
        stamps = await self._stamps(len(records))
        batch = [
            {
                "kind": "message",
                "role": role,
                "content": text,
                "payload": item,
                "metadata": metadata,
                "created_at": when,
                "index": index,
            }
            for (role, text, metadata, index), item, when in zip(
                records, items, stamps, strict=True
            )
        ]
        await _run(self.manager, "record_many", self.session_id, batch)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item, or None when there is none (atomic: two
        concurrent pops never return the same item)."""
        try:
            event = await _run(self.manager, "pop_event", self.session_id, kinds=_KIND)
        except SessionNotFound:
            return None
        return None if event is None else _item(event)

    async def clear_session(self) -> None:
        """Delete every item; the session, its goal and its other events are kept."""
        with contextlib.suppress(SessionNotFound):  # not created yet: nothing to clear
            await _run(self.manager, "clear_session", self.session_id, kinds=_KIND)

    # -- reads -------------------------------------------------------------------------------

    async def _messages(self, limit: int | None = None, newest_first: bool = False) -> list[Event]:
        try:
            found = await _run(
                self.manager,
                "events",
                self.session_id,
                kinds=_KIND,
                limit=limit,
                newest_first=newest_first,
            )
        except SessionNotFound:  # not created yet: no items, and a read creates nothing
            return []
        return cast(list[Event], found)

    async def _tail(self, limit: int) -> list[TResponseInputItem]:
        """The newest ``limit`` items; with ``whole_tool_calls``, reaching back to the calls of
        the outputs among them (reading twice as far each time a call lies further back)."""
        window = limit
        while True:
            newest = await self._messages(limit=window, newest_first=True)
            items = [_item(event) for event in reversed(newest)]
            start = max(0, len(items) - limit)
            if not self.whole_tool_calls:
                return items[start:]
            start, complete = _whole_calls_start(items, start)
            if complete or len(newest) < window:  # all read: a call not found was deleted
                return items[start:]
            window *= 2

    async def _stamps(self, count: int) -> list[datetime]:
        """Strictly increasing times for ``count`` new items, after the newest stored one.

        Items are ordered by time: a clock stepped back (or another host's clock, on
        PostgreSQL) must not put a new item before an old one.
        """
        newest = await self._messages(limit=1, newest_first=True)
        first = datetime.now(timezone.utc)
        if newest:
            first = max(first, newest[0].created_at + timedelta(microseconds=1))
        return [first + timedelta(microseconds=step) for step in range(count)]


def restore_filter(
    manager: Manager,
    session_id: str,
    max_tokens: int = 2000,
    *,
    query: str | None = None,
    goal: str | None = None,
    other_sessions: bool = False,
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """A ``RunConfig(call_model_input_filter=...)`` that adds the session's restored context
    to the instructions of every model call.

    Before each call the filter runs ``restore(session_id, max_tokens, query)`` and appends its
    text to the agent's instructions (which stay first: a stable prefix keeps the provider's
    prompt cache useful). ``query`` defaults to the newest user message of the model input, so
    restore brings the history relevant to what was just asked. ``goal`` is the goal the
    session starts with if it does not exist yet; ``other_sessions`` lets restore draw on the
    agent's other sessions too. The input items are passed on unchanged, and the session's
    newest items they already carry are left out of the restore (the model reads each turn
    once): pair it with ``AgentSession(..., session_settings=SessionSettings(limit=N))`` so
    the model sees the last N items verbatim and restore brings the rest within
    ``max_tokens``.
    """
    key = identifier(session_id, "session_id")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        # checked now: the filter itself first runs deep inside Runner.run
        raise InvalidInput(
            f"max_tokens must be a positive token count (e.g. 2000), not {max_tokens!r}."
        )
    start_goal = goal if goal is not None else _default_goal(key)

    async def call_model_input_filter(data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        await _run(manager, "session_for", key, goal=start_goal)
        newest = await _run(manager, "events", key, newest_first=True, limit=len(model_data.input))
        context = await _run(
            manager,
            "restore",
            key,
            max_tokens,
            query if query is not None else _newest_user_text(model_data.input),
            other_sessions=other_sessions,
            exclude=_in_input(newest, model_data.input),
        )
        instructions = model_data.instructions
        text = f"{instructions}\n\n{context.text}" if instructions else context.text
        return dataclasses.replace(model_data, instructions=text)

    return call_model_input_filter


# -- helpers ---------------------------------------------------------------------------------


async def _run(manager: Manager, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call a manager method without blocking the event loop: the async manager off-loads
    itself, a synchronous one is run on a worker thread."""
    method = getattr(manager, name)
    if isinstance(manager, AsyncSessionManager):
        return await method(*args, **kwargs)
    return await asyncio.to_thread(method, *args, **kwargs)


def _default_goal(key: str) -> str:
    return f"OpenAI Agents session {key}"


def _record_of(item: object, position: int) -> tuple[str, str, dict[str, Any], bool]:
    """``(role, text, metadata, index)`` for one item, checked to be storable verbatim."""
    if not isinstance(item, Mapping):
        raise InvalidInput(
            f"Item {position} is a {type(item).__name__}, not a Responses API item (a dict such "
            'as {"role": "user", "content": "hi"}); nothing was written.'
        )
    canonical_json.dumps(item, f"item {position}")  # not JSON: refused before anything is written
    kind = _type_of(item)
    text = _rendering(item, kind).strip()
    metadata: dict[str, Any] = {ITEM_TYPE: kind, **_call_metadata(item, kind)}
    # an item with no words of its own (an encrypted reasoning item) stays out of search
    return _role_of(item, kind), text or kind, metadata, bool(text)


def _type_of(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if isinstance(kind, str) and kind:
        return kind
    return "message" if "role" in item else "item"  # an EasyInputMessage has no type


def _role_of(item: Mapping[str, Any], kind: str) -> str:
    role = item.get("role")
    if is_message_role(role):
        return cast(str, role)
    if kind.endswith("_output"):
        return "tool"
    if kind == "message" or kind == "mcp_approval_response":  # the user's (or app's) answer
        return "user"
    return "assistant"  # calls, reasoning, hosted tool items: the model's


def _call_metadata(item: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The tool's name, and for a function call and its output the chat-style pair that
    restore() needs to keep them together in ``context.messages``."""
    metadata: dict[str, Any] = {}
    name, call_id = item.get("name"), item.get("call_id")
    if isinstance(name, str) and name:
        metadata["tool"] = name
    if kind == "function_call" and isinstance(call_id, str) and isinstance(name, str):
        function = {"name": name, "arguments": _text_of(item.get("arguments"))}
        metadata["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
    elif kind == "function_call_output" and isinstance(call_id, str):
        metadata["tool_call_id"] = call_id
    return metadata


def _rendering(item: Mapping[str, Any], kind: str) -> str:
    """The readable text of an item: what search indexes and restore shows."""
    if kind == "message":
        return _text_of(item.get("content"))
    if kind == "reasoning":
        return _text_of(item.get("summary")) or _text_of(item.get("content"))
    name = item.get("name")
    arguments = item.get("arguments", item.get("input"))
    if isinstance(name, str) and arguments is not None:
        return f"{name}({_text_of(arguments)})"
    if "output" in item:
        return _text_of(item["output"])
    return ""


def _text_of(value: Any) -> str:
    """Text of a content value: a string, a list of content parts, or any JSON value."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(part for part in map(_part_text, value) if part)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return ""
    for key in ("text", "refusal"):
        if isinstance(part.get(key), str):
            return cast(str, part[key])
    kind = part.get("type")
    if kind == "input_file":
        name = part.get("filename")
        return f"[file {name}]" if isinstance(name, str) and name else "[file]"
    if kind in ("input_image", "input_audio"):
        return f"[{kind.removeprefix('input_')}]"
    return ""


def _newest_user_text(items: Sequence[Any]) -> str | None:
    """The text of the newest user message among model input items (restore's query)."""
    for item in reversed(items):
        if isinstance(item, Mapping) and item.get("role") == "user":
            text = _rendering(item, "message").strip()
            if text:
                return text
    return None


def _item(event: Event) -> TResponseInputItem:
    """The item an event holds: its payload, or for a message recorded by other code an easy
    input message of its text."""
    if ITEM_TYPE in event.metadata and isinstance(event.payload, dict):
        return cast(TResponseInputItem, event.payload)
    role = event.role if event.role in _EASY_ROLES else "assistant"
    return cast(TResponseInputItem, {"role": role, "content": event.content})


def _whole_calls_start(items: Sequence[Mapping[str, Any]], start: int) -> tuple[int, bool]:
    """Move ``start`` back until every tool output in ``items[start:]`` has its call there;
    return it and whether every call was found. A call moved in brings the reasoning items
    right before it (the Responses API refuses a call without its reasoning item)."""
    calls = {
        item["call_id"]: position
        for position, item in enumerate(items)
        if _is_call(item) and isinstance(item.get("call_id"), str)
    }
    original, complete = start, True
    moved = True
    while moved:  # a call moved in may bring in outputs whose calls lie further back
        moved = False
        for item in items[start:]:
            call_id = item.get("call_id") if _is_output(item) else None
            if not isinstance(call_id, str):
                continue
            position = calls.get(call_id)
            if position is None:
                complete = False
            elif position < start:
                start, moved = position, True
                break
    while start < original and start > 0 and items[start - 1].get("type") == "reasoning":
        start -= 1
    return start, complete


def _is_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_output")


def _is_call(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and not kind.endswith("_output") and "call_id" in item


def _in_input(newest: Sequence[Event], items: Sequence[Any]) -> list[str]:
    """The session's events the model input already carries (the same item, verbatim):
    restore leaves them out, so the model does not read them twice."""
    carried = {json.dumps(item, sort_keys=True, default=str) for item in items}
    return [
        event.id
        for event in newest
        if event.kind == _KIND and json.dumps(event.payload, sort_keys=True) in carried
    ]
