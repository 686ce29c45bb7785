"""``memlane ui``: a local web inspector of a store — sessions, a session's timeline, search
with each hit's ranks, and a preview of what ``restore()`` returns for a budget.

Needs the ``[ui]`` extra (Starlette, Jinja2, uvicorn). Server-rendered HTML with htmx
(vendored in ``static/``, never loaded from a network) for partial updates. Bound to
127.0.0.1 with a token by default and read-only (:mod:`memlane.ui.security`); it reads
through :class:`~memlane.admin.StoreAdmin` and :class:`~memlane.SessionManager` only.
docs/ui.md describes it.
"""

from __future__ import annotations

from .app import create_app
from .security import new_token
from .server import Inspector, serve
from .source import Source

__all__ = ["Inspector", "Source", "create_app", "new_token", "serve"]
