"""The conveniences of :class:`~memlane.SessionManager`: one method per kind of event
(``record_step``, ``add_message``, ...) and the status changes of pending steps and errors,
each a thin layer over :meth:`~memlane.SessionManager.record`. Not part of the public
API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import canonical_json
from ..core.searchable import flatten_json
from ..errors import InvalidInput, shown
from ..events import MESSAGE_ROLES, Event, is_message_role
from ..records.validate import prepare_event
from ..records.validate import text as _text
from .path import Writer

__all__ = ["Conveniences"]


class Conveniences:
    """``record_step`` ... ``cancel_pending``, each over the writer's ``record``: see each
    method."""

    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    def record_step(
        self,
        /,
        session_id: str,
        step: str,
        result: Any = None,
        tool: str | None = None,
        input: Any = None,
        **options: Any,
    ) -> Event:
        """Record a completed step, with the tool it used, its input and its result."""
        payload = {
            key: value
            for key, value in (("tool", tool), ("input", input), ("result", result))
            if value is not None
        }
        metadata = {**_metadata(options), **({"tool": tool} if tool else {})}
        return self._writer.record(
            session_id, "step", step, payload or None, metadata=metadata, **options
        )

    def record_decision(self, /, session_id: str, text: str, **options: Any) -> Event:
        """Record a decision the agent took (important by default)."""
        return self._writer.record(session_id, "decision", text, **options)

    def record_fact(self, /, session_id: str, text: str, **options: Any) -> Event:
        """Record a fact the agent learned."""
        return self._writer.record(session_id, "fact", text, **options)

    def record_error(
        self, /, session_id: str, text: str, resolved: bool = False, **options: Any
    ) -> Event:
        """Record an error; unresolved errors are kept in view by restore until resolved."""
        event = self._writer.record(session_id, "error", text, **options)
        return self.resolve_error(event.id) if resolved else event

    def resolve_error(self, error_id: str) -> Event:
        """Mark an error event resolved."""
        return self._set_status(error_id, "error", ("unresolved",), "resolved")

    def record_tool_output(
        self, /, session_id: str, output: Any, tool: str | None = None, **options: Any
    ) -> Event:
        """Record a tool's output: text is stored as content, anything else as JSON payload.

        JSON output is also flattened into text ("key: value; ...") kept as the event's
        content, cut at 4,000 characters; keyword search reaches the whole output flattened,
        and semantic search its content.
        """
        if output is None:
            raise InvalidInput(
                "record_tool_output got output=None: pass what the tool returned (text or a "
                "JSON value); to note that a tool returned nothing, record_step(sid, "
                "'called the tool; it returned nothing', tool=...)."
            )
        metadata = {**_metadata(options), **({"tool": tool} if tool else {})}
        if isinstance(output, str):
            return self._writer.record(
                session_id, "tool_output", output, metadata=metadata, **options
            )
        # Serialised once, here: a clear error before flattening anything, and record() takes
        # the text as it is (a megabyte payload costs ~4 ms to serialise, not twice that).
        payload = canonical_json.serialize(output, "tool output")
        content = flatten_json(payload.value) or (f"{tool} output" if tool else "tool output")
        metadata["derived_content"] = True
        return self._writer.record(
            session_id, "tool_output", content, payload, metadata=metadata, **options
        )

    def add_message(self, /, session_id: str, role: str, content: str, **options: Any) -> Event:
        """Record a conversation turn. ``role``: user, assistant, system, developer, tool,
        function, chatbot, model, or a namespaced one ("autogen:critic").

        A framework's own message object goes in ``payload=`` and comes back equal (as JSON:
        tool calls with their ids, content lists, reasoning items); ``content`` is the text
        rendering that is indexed and restored.

        >>> mgr.add_message(sid, "assistant", "Searching", payload=native)  # doctest: +SKIP
        """
        if not is_message_role(role):
            raise InvalidInput(
                f"Unknown message role {shown(role)}; use one of {', '.join(MESSAGE_ROLES)}, or a "
                "namespaced role such as 'myframework:critic'."
            )
        metadata = {**_metadata(options), "role": role}
        return self._writer.record(session_id, "message", content, metadata=metadata, **options)

    def add_pending(self, /, session_id: str, text: str, **options: Any) -> Event:
        """Queue a step to do later; restore always shows open pending steps."""
        return self._writer.record(session_id, "pending", text, **options)

    def complete_pending(self, pending_id: str, result: Any = None) -> Event:
        """Mark a pending step done and record the step that did it; return that step."""
        pending = self._pending(pending_id)
        payload = {"pending_id": pending.id, **({"result": result} if result is not None else {})}
        prepared = prepare_event(
            "step", pending.content, payload, None, None, None, None, self._writer.count_tokens,
            redaction=self._writer.redaction(),
        )  # fmt: skip
        with self._writer.write() as tx:
            _, _, pool = self._writer.owned(tx, pending.session_id)
            if not self._claim_status(tx, pending, "done"):
                raise InvalidInput(f"Pending step {pending_id!r} is no longer open.")
            step = self._writer.insert(tx, pending.session_id, pool, prepared, None)
            self._merge_metadata(tx, pending, {"completed_by": step.record.id})
        self._writer.indexer.notify()
        return step.event()

    def cancel_pending(self, pending_id: str, reason: str | None = None) -> Event:
        """Cancel an open pending step."""
        pending = self._pending(pending_id)
        with self._writer.write() as tx:
            self._writer.owned(tx, pending.session_id)
            if not self._claim_status(tx, pending, "cancelled"):
                raise InvalidInput(f"Pending step {pending_id!r} is no longer open.")
            if reason:
                reason = _text(reason, "reason")
                redaction = self._writer.redaction()
                if redaction is not None:  # (the pending step's own counts stay as they were)
                    reason = redaction.text(reason)
                self._merge_metadata(tx, pending, {"cancel_reason": reason})
        return self._writer.get_event(pending_id)

    def _pending(self, pending_id: str) -> Event:
        pending = self._writer.get_event(pending_id)
        if pending.kind != "pending":
            raise InvalidInput(f"Event {pending_id!r} is a {pending.kind}, not a pending step.")
        if pending.status != "open":
            raise InvalidInput(f"Pending step {pending_id!r} is already {pending.status}.")
        return pending

    def _claim_status(self, tx: Any, event: Event, status: str) -> bool:
        return self._writer.log.claim_event_status(tx, event.id, event.status, status)

    def _merge_metadata(self, tx: Any, event: Event, extra: dict[str, Any]) -> None:
        self._writer.log.set_event_metadata(
            tx, event.id, canonical_json.dumps({**event.metadata, **extra})
        )

    def _set_status(self, event_id: str, kind: str, before: tuple[str, ...], after: str) -> Event:
        event = self._writer.get_event(event_id)
        if event.kind != kind or event.status not in before:
            raise InvalidInput(
                f"Event {event_id!r} is a {event.kind} ({event.status}); cannot mark it {after}."
            )
        with self._writer.write() as tx:
            self._writer.owned(tx, event.session_id, allow_closed=True)
            if not self._claim_status(tx, event, after):
                current = self._writer.get_event(event_id).status
                raise InvalidInput(
                    f"Event {event_id!r} changed meanwhile (now {current}); it was not marked "
                    f"{after}. Read it again and retry if that is still what you want."
                )
        return self._writer.get_event(event_id)


def _metadata(options: dict[str, Any]) -> Mapping[str, Any]:
    """A convenience's ``metadata=`` option (None means none), checked before merging."""
    metadata = options.pop("metadata", None)
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
    return metadata
