"""The write routes, served only when ``memlane ui --allow-write`` opened the store writable:
delete a session or an event, retract a fact, erase a user. Each is two steps: a GET page
that says what will happen and asks (nothing changes), then a POST of its form, which must
carry the server's CSRF token (and, when the browser sends one, an Origin of this server).
The result is shown, with the erasure's receipt."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidInput
from ..templates import templates
from .forms import source, text

__all__ = ["ACTIONS", "act", "confirm_page"]


@dataclass(frozen=True)
class Action:
    title: str
    fields: tuple[str, ...]  # what the form carries (besides the CSRF token)
    warning: str


ACTIONS = {
    "delete-session": Action(
        "Delete this session",
        ("session",),
        "The session and all its events are deleted from the log, the keyword index and the "
        "vectors. This cannot be undone.",
    ),
    "delete-event": Action(
        "Delete this event",
        ("session", "event"),
        "The event is deleted from the log, the keyword index and the vectors. This cannot "
        "be undone.",
    ),
    "retract-fact": Action(
        "Retract this fact",
        ("agent", "user", "fact", "reason"),
        "The fact stays for audit with your reason, but is never current or true again (the "
        "value it superseded does not come back).",
    ),
    "erase-user": Action(
        "Erase this user",
        ("agent", "user"),
        "Every session of this user (of the agent named, or of every agent) is erased "
        "physically, with the facts remembered about them. This cannot be undone.",
    ),
}


def _action(name: str | None) -> Action:
    found = ACTIONS.get(name or "")
    if found is None:
        raise InvalidInput(f"Unknown action {name!r}; one of {', '.join(ACTIONS)}.")
    return found


def confirm_page(request: Request) -> Response:
    """What the action will do, and a form that asks for it (nothing changes here)."""
    src = source(request)
    name = text(request, "action")
    action = _action(name)
    values = {field: text(request, field) or "" for field in action.fields}
    info = None
    event = None
    if "session" in values:
        info = src.session(values["session"])  # 404 if unknown (or not --agent's)
        values["session"] = info.session.id
        if "event" in values:
            event = src.event(info.session.id, values["event"])  # 404 if unknown
    elif not values.get("user"):
        raise InvalidInput("Which user? The form needs a user id.")
    return templates.TemplateResponse(
        request,
        "confirm.html",
        {
            "name": name,
            "action": action,
            "values": values,
            "info": info,
            "event": event,
            "csrf": request.app.state.csrf,
        },
    )


async def act(request: Request) -> Response:
    """Carry out a confirmed action (POST, with the CSRF token)."""
    body = (await request.body()).decode("utf-8", "replace")
    form = dict(parse_qsl(body, keep_blank_values=True))
    given = form.get("csrf", "")
    if not secrets.compare_digest(given.encode(), request.app.state.csrf.encode()):
        raise HTTPException(403, "This form is not one this page made (no valid CSRF token).")
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, f"A form posted from {origin!r} is refused.")
    name = form.get("action")
    action = _action(name)
    values = {field: form.get(field, "").strip() for field in action.fields}
    result: Any = await run_in_threadpool(_carry_out, request, name or "", values)
    return templates.TemplateResponse(
        request, "done.html", {"name": name, "action": action, "values": values, "result": result}
    )


def _carry_out(request: Request, name: str, values: dict[str, str]) -> Any:
    src = source(request)
    agent = values.get("agent") or None
    if name == "delete-session":
        return src.delete_session(values["session"])
    if name == "delete-event":
        return src.delete_event(values["session"], values["event"])
    if name == "retract-fact":
        return src.retract_fact(agent, values["fact"], values["reason"])
    return src.erase_user(values["user"], agent)
