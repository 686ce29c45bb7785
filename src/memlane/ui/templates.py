"""The pages' templates (``ui/templates/``) and the filters they format values with.

Autoescape is on for every template and never turned off: every string that comes from the
store — goals, contents, payloads, metadata, tags, roles, user and agent ids — is escaped
where it is written into the page. No filter here returns :class:`markupsafe.Markup` made
from store data (``|safe`` is never applied to it); the filters return plain strings, which
the template escapes.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, pass_context
from jinja2.runtime import Context
from starlette.templating import Jinja2Templates

from ..events import KINDS

__all__ = ["FOLD_CHARS", "FOLD_LINES", "templates"]

#: Content longer than this (characters or lines) is folded in a ``<details>``.
FOLD_CHARS = 600
FOLD_LINES = 12


def iso_utc(when: datetime) -> str:
    """``2026-11-27T04:41:35.123456Z``: the ``datetime`` attribute of a ``<time>``."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_text(when: datetime) -> str:
    """``2026-11-27 04:41:35 UTC``: what a ``<time>`` shows on hover (its title), and its text
    until the page's script writes the local time in."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def kind_class(kind: str) -> str:
    """The CSS class of an event kind: one per built-in kind, one for every custom kind."""
    return f"kind-{kind}" if kind in KINDS else "kind-custom"


def pretty_json(value: Any) -> str:
    """A JSON value indented for reading (the template escapes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def size(chars: int) -> str:
    """A size in characters, shortly: ``812 chars``, ``4.2k chars``, ``1.3M chars``."""
    if chars < 1_000:
        return f"{chars} chars"
    if chars < 1_000_000:
        return f"{chars / 1_000:.1f}k chars"
    return f"{chars / 1_000_000:.1f}M chars"


def size_bytes(count: int) -> str:
    """A size in bytes, shortly: ``812 B``, ``4.2 MB``, ``1.3 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def duration(seconds: float) -> str:
    """A wait, shortly: ``4 s``, ``12 min``, ``3.5 h``, ``2.0 days``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def is_long(text: str) -> bool:
    """Whether ``text`` is folded: more than :data:`FOLD_CHARS` characters or
    :data:`FOLD_LINES` lines."""
    return len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES


def head(text: str, chars: int = 240) -> str:
    """The start of a folded text: its first lines, at most ``chars`` characters."""
    first = "\n".join(text.splitlines()[:3])
    return first[:chars] + ("…" if len(first) > chars or len(text) > len(first) else "")


@pass_context
def path(context: Context, name: str, /, **params: Any) -> str:
    """The path of a route (``/sessions/01J...``): links never repeat the Host header."""
    return str(context["request"].app.url_path_for(name, **params))


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("memlane.ui", "templates"),
        autoescape=True,  # every template, whatever its file name
        undefined=StrictUndefined,  # a misspelt variable is an error, not an empty string
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        iso_utc=iso_utc,
        utc_text=utc_text,
        kind_class=kind_class,
        pretty_json=pretty_json,
        size=size,
        size_bytes=size_bytes,
        duration=duration,
        is_long=is_long,
        head=head,
    )
    env.globals["path"] = path
    return env


#: The pages' templates, shared by the views.
templates = Jinja2Templates(env=_environment())
